"""Checks a TypeScript or Go program's use of the component package against its schema,
without the languages' compilers: the resource tokens it creates and, in each argument
literal, the property names, nested types and literal values.

Reads only the subset of either language the examples write: ``new platform.X("name", {...})``
and ``platform.NewX(ctx, "name", &platform.XArgs{...})``, object, array, struct and map
literals, ``pulumi.String/Int/Bool(...)`` and enum constants. Any other expression (a
config read, an output) is taken as a value from elsewhere, whose type the compiler would
check; the SDK's import path is not checked.
"""

from __future__ import annotations

import re
from typing import Any

from yaml_program import SchemaMismatch

_TOKEN = re.compile(
    r'\s+|//[^\n]*|"(?:\\.|[^"\\])*"|-?\d+(?:\.\d+)?|[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*|\.\.\.|[{}\[\](),:&;=]'
)
GO_LITERALS = {"pulumi.String": "string", "pulumi.Int": "integer", "pulumi.Bool": "boolean", "pulumi.Float64": "number"}


def _tokens(source: str) -> list[str]:
    tokens, at = [], 0
    while at < len(source):
        match = _TOKEN.match(source, at)
        if match is None:
            at += 1  # an operator the subset does not read (+, ?, ...)
            continue
        if not match.group().isspace() and not match.group().startswith("//"):
            tokens.append(match.group())
        at = match.end()
    return tokens


class _Parser:
    def __init__(self, tokens: list[str], at: int) -> None:
        self.tokens, self.at = tokens, at

    def take(self, expected: str | None = None) -> str:
        token = self.tokens[self.at]
        if expected is not None and token != expected:
            raise SchemaMismatch(f"expected {expected!r}, found {token!r}")
        self.at += 1
        return token

    def peek(self) -> str:
        return self.tokens[self.at]

    def entries(self, close: str) -> list[tuple[str, Any]]:
        found = []
        while self.peek() != close:
            key = self.take()
            self.take(":")
            found.append((key.strip('"'), self.value()))
            if self.peek() == ",":
                self.take()
        self.take(close)
        return found

    def items(self, close: str) -> list[Any]:
        found = []
        while self.peek() != close:
            found.append(self.value())
            if self.peek() == ",":
                self.take()
        self.take(close)
        return found

    def value(self) -> Any:
        token = self.take()
        if token == "&":
            return self.value()
        if token == "{":
            return ("object", None, dict(self.entries("}")))
        if token == "[":
            return ("array", None, self.items("]"))
        if token.startswith('"'):
            return ("literal", "string", token[1:-1])
        if re.fullmatch(r"-?\d+", token):
            return ("literal", "integer", int(token))
        if re.fullmatch(r"-?\d+\.\d+", token):
            return ("literal", "number", float(token))
        if token in ("true", "false"):
            return ("literal", "boolean", token == "true")
        if self.peek() == "{":
            self.take()
            if token.endswith("Array") or token == "pulumi.StringArray":
                return ("array", token, self.items("}"))
            return ("object", token, dict(self.entries("}")))
        if self.peek() == "(":
            self.take()
            args = self.items(")")
            if token in GO_LITERALS and args and args[0][0] == "literal":
                return ("literal", GO_LITERALS[token], args[0][2])
            return ("elsewhere", token, None)
        return ("elsewhere", token, None)


def uses(source: str, language: str) -> list[tuple[str, Any]]:
    """Each package component the program creates, as (component name, argument literal)."""
    tokens = _tokens(source)
    found = []
    for at, token in enumerate(tokens):
        if language == "typescript" and token.startswith("platform.") and at and tokens[at - 1] == "new":
            parser = _Parser(tokens, at + 2)
            parser.take()  # the resource name
            parser.take(",")
            found.append((token.removeprefix("platform."), parser.value()))
        elif language == "go" and re.fullmatch(r"platform\.New\w+", token):
            parser = _Parser(tokens, at + 2)
            parser.take("ctx")
            parser.take(",")
            parser.take()
            parser.take(",")
            found.append((token.removeprefix("platform.New"), parser.value()))
    return found


def go_enum_constant(type_name: str, member: dict[str, Any]) -> str:
    """An enum member's constant in the Go SDK, as pulumi/pulumi's Go generator names it
    (``pkg/codegen/go/utilities.go`` ``makeSafeEnumName`` and ``enumTitle``, v3.259.0): from
    the member's ``name`` (its value when it has none), first letter upper-cased, a letter after
    ``-`` too; every other character that is no letter, digit or ``_`` becomes ``_``, a leading
    digit gets ``_`` before it, runs of ``_`` become one, and a name holding ``_`` is set off from
    the type's name by ``_``: ``NO_SPOT`` of ``GpuPoolSpotStrategy`` is
    ``GpuPoolSpotStrategy_NO_SPOT``, ``FSDP`` of ``TrainerArgsParallel`` ``TrainerArgsParallelFSDP``."""
    name = str(member.get("name") or member["value"])
    name = re.sub(r"-(.)", lambda m: "_" + m.group(1).upper(), name[:1].upper() + name[1:])
    name = re.sub(r"\W", "_", name)
    name = re.sub(r"_+", "_", "_" + name if name[:1].isdigit() else name)
    return type_name + ("_" + name if "_" in name and not name.startswith("_") else name)


def _go_name(name: str) -> str:
    return name[:1].upper() + name[1:]


def _check(value: Any, prop: dict[str, Any], package: dict[str, Any], path: str, language: str) -> None:
    shape, typed, inner = value
    ref = prop.get("$ref", "")
    kind = package["types"].get(ref.removeprefix("#/types/")) if ref.startswith("#/types/") else None
    is_enum = kind is not None and "enum" in kind
    # A value from elsewhere goes unchecked, except a name of the package itself: an enum constant.
    if shape == "elsewhere" and not (is_enum and typed.startswith("platform.")):
        if typed.startswith("platform."):
            raise SchemaMismatch(f"{path}: {typed} is no value of {ref or prop.get('type')}")
        return
    if is_enum:
        values = [member["value"] for member in kind["enum"]]
        name = ref.rsplit(":", 1)[-1]
        if shape == "literal" and inner in values:
            return
        if typed and typed.removeprefix("platform.") in {go_enum_constant(name, m) for m in kind["enum"]}:
            return
        raise SchemaMismatch(f"{path}: {inner if shape == 'literal' else typed!r} is not one of {values}")
    if kind is not None:
        if shape != "object":
            raise SchemaMismatch(f"{path}: an object of {ref} is expected")
        name = ref.rsplit(":", 1)[-1]
        if language == "go" and typed != f"platform.{name}Args":
            raise SchemaMismatch(f"{path}: platform.{name}Args is expected, not {typed}")
        check_properties(inner, kind.get("properties", {}), kind.get("required", []), package, path, language)
        return
    if prop.get("type") == "array":
        if shape != "array":
            raise SchemaMismatch(f"{path}: an array is expected")
        for i, item in enumerate(inner):
            _check(item, prop["items"], package, f"{path}[{i}]", language)
        return
    if prop.get("type") == "object":
        if shape != "object":
            raise SchemaMismatch(f"{path}: a map is expected")
        return
    expected = prop.get("type")
    if shape == "literal" and expected not in (typed, None) and (expected, typed) != ("number", "integer"):
        raise SchemaMismatch(f"{path}: {inner!r} is not of type {expected}")


def check_properties(
    given: dict[str, Any], properties: dict, required: list, package: dict, path: str, language: str
) -> None:
    names = {(_go_name(p) if language == "go" else p): p for p in properties}
    for key, value in given.items():
        if key not in names:
            raise SchemaMismatch(f"{path}.{key}: no such property; valid: {sorted(names)}")
        _check(value, properties[names[key]], package, f"{path}.{key}", language)
    for name in required:
        if (_go_name(name) if language == "go" else name) not in given:
            raise SchemaMismatch(f"{path}.{name}: required property is missing")


def check_source(source: str, language: str, package: dict[str, Any]) -> list[str]:
    """Check every package component ``source`` creates; return their names.

    Raises:
        SchemaMismatch: a component, property, type or literal the schema does not have.
    """
    created = []
    for component, (_shape, typed, given) in uses(source, language):
        token = f"ack-training-platform:index:{component}"
        if token not in package["resources"]:
            raise SchemaMismatch(f"{component}: the package has no resource {token}")
        resource = package["resources"][token]
        if language == "go" and typed != f"platform.{component}Args":
            raise SchemaMismatch(f"{component}: platform.{component}Args is expected, not {typed}")
        check_properties(
            given, resource["inputProperties"], resource.get("requiredInputs", []), package, component, language
        )
        created.append(component)
    return created

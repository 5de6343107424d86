"""Generates ``components/package/input_types.py``, the component package's input types, from the
specs: ``python -m components.package.codegen --write``.

Pulumi's analyzer reads a type's field docstrings from its source, so the types are written
out as source, each field documented with its spec field's docstring.
"""

from __future__ import annotations

import datetime
import inspect
import ipaddress
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel

from ..config import (
    DatasetImportSpec,
    GpuPoolSpec,
    PlatformSpec,
    StorageSpec,
    TrainingJobSpec,
    TrainingNamespaceSpec,
)
from ..config.base import model_of

SPECS = (GpuPoolSpec, TrainingNamespaceSpec, StorageSpec, TrainingJobSpec, DatasetImportSpec, PlatformSpec)
"""The specs whose input types the package's components take."""
TYPES_MODULE = Path(__file__).with_name("input_types.py")


class _InputTypes:
    """Writes the source of ``input_types``: one TypedDict per spec model reachable from
    :data:`SPECS`, one enum per ``Literal`` field, each field's docstring its spec field's."""

    def __init__(self) -> None:
        self.blocks: dict[str, str] = {}

    def render(self) -> str:
        for spec in SPECS:
            self.model(spec)
        head = (
            '"""The package\'s input types, generated from the specs by ``python -m components.package.codegen --write``:\n'
            'edit the specs, not this file (a test fails while it is stale)."""\n\n'
            "import enum\nfrom typing import Any, NotRequired, TypedDict\n\nimport pulumi\n"
        )
        return head + "".join(f"\n\n{block}" for block in self.blocks.values())

    def model(self, model: type[BaseModel]) -> str:
        name = model.__name__
        if name in self.blocks:
            return name
        self.blocks[name] = ""  # reserve the name; nested models are written before it
        doc = _docstring(model.__doc__, "    ")
        lines = [f"class {name}(TypedDict):", *doc, *([""] if doc else [])]
        for field_name, field in model.model_fields.items():
            # Every field an input: a TypeScript, Go or YAML program may pass another resource's output
            # (the package takes one where the platform can apply it, see components.package.outputs).
            annotation = f"pulumi.Input[{self.annotation(field.annotation, model, field_name)}]"
            if not field.is_required() or _optional(field.annotation):
                annotation = f"NotRequired[{annotation}]"
            lines.append(f"    {field_name}: {annotation}")
            lines += _docstring(field.description, "    ")
        del self.blocks[name]
        self.blocks[name] = "\n".join(lines) + "\n"
        return name

    def annotation(self, annotation: Any, owner: type[BaseModel], field: str) -> str:
        """The analyzer's type for a spec field: builtins as they are, a nested spec as its
        input type, a ``Literal`` as an enum, text-like values (CIDRs, dates) as ``str``."""
        if typing.get_origin(annotation) is Annotated:
            return self.annotation(typing.get_args(annotation)[0], owner, field)
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if origin in (typing.Union, types.UnionType):
            present = [a for a in args if a is not type(None)]
            # The analyzer has no unions: a value of several shapes (an env entry: text or
            # {secretKeyRef}) is any JSON value, checked by the spec when the component is built.
            return self.annotation(present[0], owner, field) if len(present) == 1 else "Any"
        if origin is Literal:
            return self.enum(owner, field, args)
        if origin is list:
            return f"list[pulumi.Input[{self.annotation(args[0], owner, field)}]]"
        if origin is dict:
            return f"dict[str, pulumi.Input[{self.annotation(args[1], owner, field)}]]"
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return self.model(annotation)
        # A date travels as its ISO text (YYYY-MM-DD), which the spec parses.
        if annotation in (ipaddress.IPv4Network, ipaddress.IPv4Address, datetime.date):
            return "str"
        if annotation in (str, int, float, bool):
            return annotation.__name__
        raise TypeError(f"{owner.__name__}.{field}: no package input type for {annotation!r}")

    def enum(self, owner: type[BaseModel], field: str, values: tuple[Any, ...]) -> str:
        name = owner.__name__.removesuffix("Spec") + "".join(part.title() for part in field.split("_"))
        members = [f"    {_member(field, v)} = {json.dumps(v)}" for v in values]
        header = [f"class {name}(enum.StrEnum):", f'    """The values of {owner.__name__}.{field}."""', ""]
        self.blocks[name] = "\n".join([*header, *members]) + "\n"
        return name


def _member(field: str, value: Any) -> str:
    """An enum member's name for ``value``, what is not a letter or digit (``ack.pro.small``) as ``_``; one that would start with a digit (``1b``) is prefixed
    with the field's last word (``SIZE_1B``), as a Python name cannot."""
    name = re.sub(r"\W", "_", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", str(value))).upper()
    return name if name[:1].isalpha() else f"{field.rsplit('_', 1)[-1].upper()}_{name}"


def _optional(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


_REPOSITORY_PATH = r"(?:``)?(?:docs|trainer|stacks|components|tests)/[\w./<>-]*(?:``)?"
_FOR_OTHER_LANGUAGES = (
    # A path inside a parenthesis after other words: the words stay (``(1b, 8b; docs/trainer.md)``).
    (re.compile(rf"\s*[;,]\s*{_REPOSITORY_PATH}(?=\))"), ""),
    (re.compile(r"``trainer/`` "), "the platform's trainer "),
    (re.compile(rf"\s*See {_REPOSITORY_PATH}[^.]*\."), ""),
    # A parenthesis naming a repository file (ours or a cited upstream one) says nothing to a
    # program in another language, which has no checkout.
    (re.compile(r"\s*\([^()]*(?:``|\b)[\w.-]*/[\w./<>-]*\.(?:md|py|json|yaml)\b[^()]*\)"), ""),
    (re.compile(rf"\s*\([^()]*{_REPOSITORY_PATH}[^()]*\)"), ""),
    # reStructuredText to Markdown, which the SDKs' doc comments and the registry render.
    (re.compile(r":\w+:`([^`]+)`"), r"`\1`"),
    (re.compile(r"``([^`]+)``"), r"`\1`"),
)


def described(text: str) -> str:
    """A spec's docstring as a package description: Markdown instead of reStructuredText, and
    no path of this repository (a program in another language has no checkout)."""
    for pattern, replacement in _FOR_OTHER_LANGUAGES:
        text = pattern.sub(replacement, text)
    return text


def _docstring(text: str | None, indent: str) -> list[str]:
    if not text:
        return []
    body = described(inspect.cleandoc(text)).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return [f'{indent}"""' + "\n".join((indent + line).rstrip() for line in body.split("\n")).lstrip() + '"""']


def _models(model: type[BaseModel], seen: dict[str, type[BaseModel]]) -> dict[str, type[BaseModel]]:
    """``model`` and every spec model its fields hold, by name (the package's type names)."""
    seen[model.__name__] = model
    for field in model.model_fields.values():
        nested = model_of(field.annotation)
        if nested is not None and nested.__name__ not in seen:
            _models(nested, seen)
    return seen


def with_defaults(package: dict[str, Any]) -> dict[str, Any]:
    """``package`` with each spec field's default written on its property, where the default is a
    text, number or boolean and the property one of those: what the analyzer cannot read from a
    TypedDict, and what the SDKs show (and YAML and TypeScript apply) for an input left out."""
    models: dict[str, type[BaseModel]] = {}
    for spec in SPECS:
        _models(spec, models)
    for token, kind in package["types"].items():
        model = models.get(token.rsplit(":", 1)[-1])
        if model is None or "properties" not in kind:
            continue
        for name, field in model.model_fields.items():
            prop = kind["properties"].get(field.alias or name)
            default = field.default
            if prop is None or isinstance(default, bool | int | float | str) is False or default is None:
                continue
            if prop.get("type") in {"string", "integer", "number", "boolean"}:
                prop["default"] = default
    return package


def input_types_source() -> str:
    """The source ``input_types.py`` must hold."""
    return _InputTypes().render()


def main() -> int:
    if sys.argv[1:] != ["--write"]:
        print(
            "usage: python -m components.package.codegen --write   (regenerates components/package/input_types.py)",
            file=sys.stderr,
        )
        return 2
    TYPES_MODULE.write_text(input_types_source())
    return 0


if __name__ == "__main__":
    sys.exit(main())

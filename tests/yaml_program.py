"""Runs a Pulumi YAML program's resources of this platform's package the way the engine
does: each through the package provider's ``construct``, after checking its properties
against the package schema. Only what the examples use: config, variables, and ``${name}``
standing for a whole value."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.package.provider import PACKAGE, PackageProvider, schema

PROGRAM_ENV = "YAML_PROGRAM"


class SchemaMismatch(AssertionError):
    pass


def check(value: Any, prop: dict[str, Any], package: dict[str, Any], path: str) -> None:
    """Raise :class:`SchemaMismatch` where ``value`` is not what ``prop`` of ``package`` admits."""
    ref = prop.get("$ref")
    if ref == "pulumi.json#/Any":
        return
    if ref is not None and ref.startswith("/"):
        # A resource of another package (``/kubernetes/v4.34.2/schema.json#/resources/<token>``).
        token = ref.rsplit("/", 1)[-1]
        if not isinstance(value, Reference) or value.type != token:
            raise SchemaMismatch(f"{path}: {value!r} is not a {token} resource")
        return
    if ref is not None:
        kind = package["types"][ref.removeprefix("#/types/")]
        if "enum" in kind:
            allowed = [member["value"] for member in kind["enum"]]
            if value not in allowed:
                raise SchemaMismatch(f"{path}: {value!r} is not one of {allowed}")
            return
        check_object(value, kind.get("properties", {}), kind.get("required", []), package, path)
        return
    expected = {
        "string": (str,),
        "integer": (int,),
        "number": (int, float),
        "boolean": (bool,),
        "array": (list,),
        "object": (dict,),
    }[prop["type"]]
    if not isinstance(value, expected) or (prop["type"] in ("integer", "number") and isinstance(value, bool)):
        raise SchemaMismatch(f"{path}: {value!r} is not of type {prop['type']}")
    if prop["type"] == "array":
        for i, item in enumerate(value):
            check(item, prop["items"], package, f"{path}[{i}]")
    elif prop["type"] == "object" and "additionalProperties" in prop:
        for key, item in value.items():
            check(item, prop["additionalProperties"], package, f"{path}.{key}")


def check_object(
    value: Any, properties: dict[str, Any], required: list[str], package: dict[str, Any], path: str
) -> None:
    if not isinstance(value, dict):
        raise SchemaMismatch(f"{path}: {value!r} is not an object")
    for key in value:
        if key not in properties:
            raise SchemaMismatch(f"{path}.{key}: no such property; valid: {sorted(properties)}")
    for key in required:
        if key not in value:
            raise SchemaMismatch(f"{path}.{key}: required property is missing")
    for key, item in value.items():
        check(item, properties[key], package, f"{path}.{key}")


def resolve(value: Any, names: dict[str, Any]) -> Any:
    if isinstance(value, str) and value.startswith("${") and value.endswith("}"):
        return names[value[2:-1]]
    if isinstance(value, dict):
        return {k: resolve(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, names) for v in value]
    return value


class Reference:
    """A resource of another package the program declares, where the schema check meets it."""

    def __init__(self, type_: str) -> None:
        self.type = type_

    def __repr__(self) -> str:
        return f"<{self.type}>"


OTHER_RESOURCES = {"pulumi:providers:kubernetes": k8s.Provider}
"""The other packages' resources a program may declare, by type: what the examples use."""


def package_resources(
    program: dict[str, Any], config: dict[str, Any], *, create: bool = False
) -> list[tuple[str, str, dict[str, Any]]]:
    """The program's resources of this package as (name, type, properties), with config,
    variables and other resources substituted (created when ``create``, else as a
    :class:`Reference`); secret config stays out of the schema check (it is an output)."""
    names = dict(config)
    names.update({k: resolve(v, names) for k, v in (program.get("variables") or {}).items()})
    ours = []
    for name, resource in (program.get("resources") or {}).items():
        properties = resolve(resource.get("properties") or {}, names)
        if resource["type"].startswith(f"{PACKAGE}:"):
            ours.append((name, resource["type"], properties))
        elif create:
            names[name] = OTHER_RESOURCES[resource["type"]](name, **properties)
        else:
            names[name] = Reference(resource["type"])
    return ours


def check_program(program: dict[str, Any], config: dict[str, Any]) -> None:
    package = schema()
    for name, type_, properties in package_resources(program, config):
        if type_ not in package["resources"]:
            raise SchemaMismatch(f"{name}: the package has no resource {type_}")
        resource = package["resources"][type_]
        check_object(properties, resource["inputProperties"], resource.get("requiredInputs", []), package, name)


def run() -> None:
    """The body of a Python program that runs the YAML program named by ``$YAML_PROGRAM``
    through the package provider, with its config read from the stack."""
    program = yaml.safe_load(Path(os.environ[PROGRAM_ENV]).read_text())
    stack_config = pulumi.Config()
    read = {"string": stack_config.require}
    config = {
        key: stack_config.require_secret(key)
        if spec.get("secret")
        else read.get(spec["type"], stack_config.require_object)(key)
        for key, spec in (program.get("config") or {}).items()
    }
    provider = PackageProvider()
    for name, type_, properties in package_resources(program, config, create=True):
        provider.construct(name, type_, properties, pulumi.ResourceOptions())

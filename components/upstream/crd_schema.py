"""A manifest checked against its CustomResourceDefinition's ``openAPIV3Schema``, the way the
API server treats what the platform emits. Pure: no Pulumi.

What is checked, after Kubernetes' "Specifying a structural schema" and "Field pruning"
(kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/):

- unknown fields: a field the schema does not declare is pruned by the API server, or refused
  with strict field validation; only ``x-kubernetes-preserve-unknown-fields: true`` keeps them;
- ``type`` (``object``, ``array``, ``string``, ``integer``, ``number``, ``boolean``) and
  ``x-kubernetes-int-or-string`` (an integer or a string);
- ``enum``, ``required``, ``pattern``, ``minimum``/``maximum``;
- ``x-kubernetes-list-type: map`` (items unique by ``x-kubernetes-list-map-keys``) and ``set``;
- ``null`` where the schema is not ``nullable``: the API server drops the field;
- an ``apiVersion`` the CRD lists with ``served: false``: the API server refuses the object.

Not checked: ``x-kubernetes-validations`` (CEL rules), ``format``, and the root ``metadata``
(the API server validates it as ObjectMeta itself).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


class CrdMismatch(ValueError):
    """A manifest does not fit its kind's CRD schema; the message names the JSON path."""


Schemas = dict[tuple[str, str], dict[str, Any] | None]
"""Schemas by ``(apiVersion, kind)``; ``None`` for a version the CRD declares but does not serve."""


def crd_schemas(objects: Iterable[dict[str, Any]]) -> Schemas:
    """The ``openAPIV3Schema`` of every served version of every CRD among ``objects``, and
    ``None`` for each version it lists with ``served: false``: the API server has no endpoint
    for that version (``/apis/<group>/<version>/...`` exists only while ``served`` is true,
    apiextensions.k8s.io/v1 ``CustomResourceDefinitionVersion``), so it refuses its objects.

    Returns:
        Schemas by ``(apiVersion, kind)``, e.g. ``("kubeflow.org/v1", "PyTorchJob")``.
    """
    schemas: Schemas = {}
    for obj in objects:
        if obj.get("kind") != "CustomResourceDefinition":
            continue
        spec = obj["spec"]
        for version in spec.get("versions", []):
            key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if not version.get("served", True):
                schemas[key] = None
            elif schema is not None:
                schemas[key] = schema
    return schemas


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _type_problem(value: Any, schema: dict[str, Any]) -> str | None:
    if schema.get("x-kubernetes-int-or-string"):
        ok = isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
        return None if ok else f"{value!r} is not an integer or a string"
    kind = schema.get("type")
    if kind is None:
        return None
    ok = isinstance(value, _TYPES[kind]) and not (kind in ("integer", "number") and isinstance(value, bool))
    return None if ok else f"{value!r} is not of type {kind}"


def schema_problems(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Every way ``value`` breaks ``schema``, each as ``<JSON path>: <what>``.

    Args:
        value: a manifest, or a part of one (plain JSON data).
        schema: a structural schema (a CRD's ``openAPIV3Schema`` or a part of it).
        path: where ``value`` is, e.g. ``spec.pytorchReplicaSpecs.Worker``.
    """
    where = path or "(the object)"
    if value is None:
        return [] if schema.get("nullable") else [f"{where}: null, which the API server drops (not nullable)"]
    problem = _type_problem(value, schema)
    if problem is not None:
        return [f"{where}: {problem}"]
    problems = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        problems.append(f"{where}: {value!r} does not match {schema['pattern']!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: {value} is above the maximum {schema['maximum']}")
    if isinstance(value, dict):
        problems += _object_problems(value, schema, path)
    elif isinstance(value, list):
        problems += _array_problems(value, schema, path)
    return problems


def _object_problems(value: dict[str, Any], schema: dict[str, Any], path: str) -> list[str]:
    problems = [f"{_join(path, key)}: required, and missing" for key in schema.get("required", []) if key not in value]
    properties = schema.get("properties")
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        if properties is not None and key in properties:
            problems += schema_problems(item, properties[key], _join(path, key))
        elif isinstance(extra, dict):
            problems += schema_problems(item, extra, _join(path, key))
        elif not (schema.get("x-kubernetes-preserve-unknown-fields") or extra is True):
            problems.append(
                f"{_join(path, key)}: unknown field, which the API server drops (or refuses with strict field "
                "validation)"
            )
    return problems


def _array_problems(value: list[Any], schema: dict[str, Any], path: str) -> list[str]:
    problems = []
    items = schema.get("items")
    for i, item in enumerate(value):
        if items is not None:
            problems += schema_problems(item, items, f"{path}[{i}]")
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen = [tuple(item.get(k) for k in keys) for item in value if isinstance(item, dict)]
        if len(set(seen)) != len(seen):
            problems.append(f"{path}: two items have the same {', '.join(keys)} (a list map)")
    elif list_type == "set":
        seen = [json.dumps(item, sort_keys=True) for item in value]
        if len(set(seen)) != len(seen):
            problems.append(f"{path}: an item is there twice (a set)")
    return problems


def check_against_crd(manifest: dict[str, Any], schemas: Schemas) -> None:
    """Refuse ``manifest`` when it breaks its kind's schema, or when its version is not served;
    nothing to check for a kind without a CRD.

    Args:
        manifest: a custom object (``apiVersion``, ``kind``, ``metadata``, ``spec``).
        schemas: from :func:`crd_schemas`.

    Raises:
        CrdMismatch: naming the kind, the object and each JSON path that breaks the schema, or
            the versions the CRD serves.
    """
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    if (api_version, kind) not in schemas:
        return
    schema = schemas[(api_version, kind)]
    if schema is None:
        served = sorted(v for (v, k), s in schemas.items() if k == kind and s is not None)
        raise CrdMismatch(
            f"{kind} {manifest['metadata']['name']!r} does not fit the operator's CRD ({api_version}): "
            f"that version is not served (served: false), so the API server refuses it; served: {served or 'none'}"
        )
    # The API server validates the root's metadata as ObjectMeta itself, whatever the schema
    # says of it (``type: object``, no properties, in the operator's CRDs).
    problems = schema_problems({k: v for k, v in manifest.items() if k != "metadata"}, schema)
    if problems:
        name = manifest["metadata"]["name"]
        raise CrdMismatch(f"{kind} {name!r} does not fit the operator's CRD ({api_version}): " + "; ".join(problems))

"""Resource URNs and aliases as the Pulumi engine computes them, for the offline run.

Under the mock engine nothing computes URNs the way a deployment does, and an alias the SDK
sends as a specification (the engine's ``aliasSpecs`` feature) is never resolved to a URN.
These functions follow the engine's rules so that the offline plan records the URNs a
deployed stack holds, and the aliases each resource carries, as data a test can resolve.
"""

from __future__ import annotations

from typing import Any

ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


def qualified_type(urn: str) -> str:
    """The type chain of ``urn``: its parents' types and its own, joined by ``$``."""
    return urn.split("::")[2]


def urn_name(urn: str) -> str:
    return urn.split("::", 3)[3]


def urn_type(urn: str) -> str:
    return qualified_type(urn).rsplit("$", 1)[-1]


def engine_urn(stack: str, project: str, parent: str, type_: str, name: str) -> str:
    """The URN the engine gives a resource (pulumi/pulumi ``pkg/resource/deploy/deployment.go``,
    ``generateURN``, v3.259.0): the parent's whole type chain before the resource's type, except for
    the stack's own children, whose URNs name no parent."""
    chain = qualified_type(parent) if parent and qualified_type(parent) != ROOT_STACK_TYPE else ""
    return f"urn:pulumi:{stack}::{project}::{chain + '$' if chain else ''}{type_}::{name}"


def alias_spec(alias: Any) -> dict[str, Any]:
    """One alias of a ``RegisterResourceRequest`` as plain data: ``{"urn": ...}`` for a URN, or
    the specification's fields that were set (``name``, ``type``, ``stack``, ``project``,
    ``parentUrn``, ``noParent``)."""
    if alias.WhichOneof("alias") == "urn":
        return {"urn": alias.urn}
    spec = alias.spec
    fields = {"name": spec.name, "type": spec.type, "stack": spec.stack, "project": spec.project}
    found = {key: value for key, value in fields.items() if value}
    if spec.WhichOneof("parent") == "parentUrn":
        found["parentUrn"] = spec.parentUrn
    elif spec.WhichOneof("parent") == "noParent" and spec.noParent:
        found["noParent"] = True
    return found

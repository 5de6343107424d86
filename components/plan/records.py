"""What one offline run of the program registered: each resource with its inputs and options
(:class:`Recorded`), the whole run (:class:`Plan`), secrets redacted to ``[secret]`` and
values known only after deployment shown as ``(known after deploy)``. :mod:`.runner` runs the
program and fills these; the offline plan (:mod:`.command`) and the tests read them.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

SECRET = "[secret]"
UNKNOWN = "(known after deploy)"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
OPERATOR = "ack-training-platform:components:TrainingOperator"


@dataclass
class Recorded:
    """One registered resource: what the engine would be asked to create."""

    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    protect: bool
    retain_on_delete: bool
    dependencies: list[str]
    provider: str
    replace_on_changes: list[str] = field(default_factory=list)
    delete_before_replace: bool = False
    ignore_changes: list[str] = field(default_factory=list)
    aliases: list[dict[str, Any]] = field(default_factory=list)
    """The aliases the program gave, as :func:`components.plan.urns.alias_spec` writes them."""
    sent: Any = field(default=None, repr=False, compare=False)
    """The inputs as the program sent them (a protobuf ``Struct``)."""
    answer: Any = field(default=None, repr=False, compare=False)
    """What the engine answered, as it was sent (a protobuf ``Struct``)."""

    # Both are read only when asked for: the plan's tree reads neither, and reading the
    # operator's CRDs (3.7 MB) costs as much as the SDK's own serialising of them.
    @cached_property
    def inputs(self) -> dict[str, Any]:
        """What the engine would be asked to create, as the program gave it."""
        return _read(self.sent)

    @cached_property
    def state(self) -> dict[str, Any]:
        """What the engine answered: the inputs, or the read-back state ``run_program`` was given."""
        return _read(self.answer)

    def as_json(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "parent": self.parent or None,
            "custom": self.custom,
            "inputs": self.inputs,
            "options": {
                "protect": self.protect,
                "retainOnDelete": self.retain_on_delete,
                "dependencies": self.dependencies,
                "provider": self.provider or None,
                "replaceOnChanges": self.replace_on_changes,
                "deleteBeforeReplace": self.delete_before_replace,
                "ignoreChanges": self.ignore_changes,
                "aliases": self.aliases,
            },
        }


@dataclass
class Plan:
    """Everything one run of the program registered, in registration order."""

    stack: str
    resources: list[Recorded]
    outputs: dict[str, Any] = field(default_factory=dict)
    secret_outputs: set[str] = field(default_factory=set)
    lookups: list[str] = field(default_factory=list)
    """The provider functions the program called, by token, first call first."""

    def of_type(self, type_: str) -> list[Recorded]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: str | None = None) -> Recorded:
        found = [r for r in self.of_type(type_) if name is None or r.name == name]
        if len(found) != 1:
            raise LookupError(f"expected one {type_} {name or ''}, found {len(found)}")
        return found[0]

    def kubernetes_objects(self) -> list[dict[str, Any]]:
        """Every Kubernetes object the stack would apply, as complete manifests, in the
        order ``kubectl apply`` needs them (namespaces first, jobs last)."""
        objects = [
            _manifest_order(r.inputs)
            for r in self.resources
            if r.custom and r.type.startswith("kubernetes:") and r.type != HELM_RELEASE
        ]
        return sorted(
            objects,
            key=lambda o: (
                apply_rank(o["kind"]),
                o["kind"],
                o["metadata"].get("name", ""),
                o["metadata"].get("namespace", ""),
            ),
        )

    def not_shown(self) -> list[str]:
        """What the stack applies that this plan cannot show, each with the reason."""
        lines = []
        for r in self.resources:
            if r.type == OPERATOR:
                if r.inputs.get("prepared") is False:
                    lines.append(
                        f"{r.name}: the objects of {r.inputs['overlay']}; its rendering is not prepared here "
                        "(python -m components.upstream prepare)"
                    )
                if r.inputs.get("volcanoPrepared") is False:
                    lines.append(
                        f"{r.name}: Volcano's objects, {r.inputs['volcano']}; its copy is not prepared here "
                        "(python -m components.upstream prepare)"
                    )
            elif r.type == HELM_RELEASE:
                lines.append(
                    f"{r.name}: the objects of Helm chart {r.inputs.get('chart')} {r.inputs.get('version')}; "
                    "Helm renders them, hooks included, only when the release is installed"
                )
        return lines

    def deploy_policy(self) -> dict[str, Any]:
        """The RAM policy ``pulumi up``, ``refresh`` and ``destroy`` of this plan need (see
        :func:`components.manifests.platform.deploy_policy.deploy_policy`).

        Raises:
            MissingApis: a planned cloud resource type or look-up has no known actions.
        """
        from ..manifests.platform.deploy_policy import deploy_policy

        return deploy_policy(
            [r.type for r in self.resources],
            self.lookups,
            roles=[r.inputs["roleName"] for r in self.of_type("alicloud:ram/role:Role")],
            policies=[r.inputs["policyName"] for r in self.of_type("alicloud:ram/policy:Policy")],
        )

    def counts(self) -> Counter[str]:
        return Counter(r.type for r in self.resources)

    def tree(self) -> str:
        children: dict[str, list[Recorded]] = {}
        for r in self.resources:
            children.setdefault(r.parent, []).append(r)
        roots = [r for r in self.resources if r.parent not in {x.urn for x in self.resources}]
        lines: list[str] = []

        def walk(node: Recorded, depth: int) -> None:
            flags = [f for f, on in (("protect", node.protect), ("retain-on-delete", node.retain_on_delete)) if on]
            lines.append(f"{'  ' * depth}{node.type}  {node.name}" + (f"  [{', '.join(flags)}]" if flags else ""))
            for child in children.get(node.urn, []):
                walk(child, depth + 1)

        for siblings in children.values():
            siblings.sort(key=lambda r: (r.type, r.name))
        for root in sorted(roots, key=lambda r: (r.type, r.name)):
            walk(root, 0)
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {"stack": self.stack, "resources": [r.as_json() for r in self.resources], "outputs": self.outputs}


def redacted(value: Any) -> Any:
    """``value`` with each leaf replaced by ``[secret]``: maps keep their keys, lists their
    length, and a string holding a JSON document (a ``.dockerconfigjson``) stays one, so
    that an object carrying secrets stays a valid object."""
    from pulumi.runtime import rpc

    value = rpc.unwrap_rpc_secret(value)
    if isinstance(value, dict):
        return {k: redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redacted(v) for v in value]
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.dumps(redacted(json.loads(value)))
        except ValueError:
            pass
    return SECRET


def _read(sent: Any) -> dict[str, Any]:
    from pulumi.runtime import rpc

    return clean(rpc.deserialize_properties(sent, keep_unknowns=True)) if sent is not None else {}


def clean(value: Any) -> Any:
    """Recorded inputs with secrets redacted and unknowns made explicit."""
    from pulumi.output import Unknown
    from pulumi.runtime import rpc

    if rpc.is_rpc_secret(value):
        return redacted(value)
    if isinstance(value, Unknown):
        return UNKNOWN
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        # The engine carries every number as a float.
        return int(value)
    return value


_APPLY_ORDER = ("Namespace", "StorageClass", "ServiceAccount", "ResourceQuota", "Secret", "PersistentVolumeClaim")


def apply_rank(kind: str) -> int:
    return _APPLY_ORDER.index(kind) if kind in _APPLY_ORDER else len(_APPLY_ORDER)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _manifest_order(obj: dict[str, Any]) -> dict[str, Any]:
    """Stable key order (the engine returns maps unordered), apiVersion/kind/metadata first."""
    head = {k: _sorted(obj[k]) for k in ("apiVersion", "kind", "metadata") if k in obj}
    return {**head, **{k: _sorted(v) for k, v in sorted(obj.items()) if k not in head}}

"""What the GPU node health controller may change in a node: a ValidatingAdmissionPolicy and its
binding that hold its ServiceAccount to a cordon.

RBAC grants ``patch`` on nodes whole (:data:`.node_health.NODE_RULES`): a token taken from the
controller's pod could otherwise remove a pool's GPU taint, relabel a node into another pool or give
it an owner the garbage collector deletes it for. The policy admits the controller's update of a node
only when, between the node before (``oldObject``) and after the patch (``object``; the API server
applies the patch before admission and passes both whole nodes, kubernetes ``admission/v1``
``AdmissionRequest``: "OldObject is the existing object. Only populated for DELETE and UPDATE
requests", and "a patch can result in either a CREATE or UPDATE Operation", never a CREATE for a
node, which the API server does not create on update), the node is one of the GPU pool's and
nothing changed but:

- ``spec.unschedulable``, and only from false (or absent) to true: the controller never uncordons;
- the label :data:`~trainer.health.signals.HEALTH_LABEL`, only set to ``failed``, never removed;
- the annotations :data:`~trainer.health.signals.REASON_ANNOTATION` and
  :data:`~trainer.health.signals.SINCE_ANNOTATION`.

A node's status is not compared: an update of the node itself keeps the stored status (kubernetes
``pkg/registry/core/node/strategy.go``, ``nodeStrategy.PrepareForUpdate`` sets the new node's status
to the old one's), and only the ``status`` subresource, which the policy does not match, writes it.

The policy matches only the main ``nodes`` resource (admissionregistration ``v1``
``NamedRuleWithOperations.resources``, the same for ``matchConstraints.resourceRules``: "'pods' means pods. 'pods/log' means the log subresource of
pods"), so kubelets' status updates (``PATCH`` on ``nodes/status``, kubernetes
``pkg/util/node/node.go`` ``PatchNodeStatus``) never reach it, and only requests whose
``request.userInfo.username`` is the controller's ServiceAccount
(``system:serviceaccount:<namespace>:<name>``; Kubernetes docs, "Service Accounts") are evaluated:
kubelets, the node controllers, ACK's own components and people are not. It fails closed
(``failurePolicy: Fail``): an expression the API server cannot evaluate refuses the cordon, which the
controller logs and retries, and the alert still fires. ValidatingAdmissionPolicy is
``admissionregistration.k8s.io/v1`` from Kubernetes 1.30 (Kubernetes docs, "Validating Admission
Policy").

The API types are quoted from the ``kubernetes`` Python client 35.0.0's models (Kubernetes 1.35);
the kubernetes sources named were read from copies found by search, not at a tag.
"""

from __future__ import annotations

from trainer.health import signals as dcgm

from ..base import MANAGED_BY, POOL_LABEL, Manifest

NODE_SPEC_FIELDS = ("taints", "podCIDR", "podCIDRs", "providerID", "configSource", "externalID")
"""Every field of a Node's spec but ``unschedulable`` (kubernetes ``core/v1`` ``NodeSpec`` as the
``kubernetes`` client 35.0.0, Kubernetes 1.35, lists them in ``V1NodeSpec``): named one by one,
since the API server types a Node's spec as a struct, whose fields CEL cannot iterate."""
NODE_META_FIELDS = ("ownerReferences", "finalizers")
"""What a client can change in a Node's metadata besides labels and annotations: an owner reference
gets the node deleted by the garbage collector when its owner is gone, a finalizer holds its deletion.
The rest is immutable once created or the API server's own (``managedFields``, which it rewrites on
every write, ``resourceVersion``)."""
GUARD_ANNOTATIONS = (dcgm.REASON_ANNOTATION, dcgm.SINCE_ANNOTATION)


def _same(field: str) -> str:
    new, old = f"object.{field}", f"oldObject.{field}"
    return f"has({new}) == has({old}) && (!has({new}) || {new} == {old})"


def _map_kept(field: str, changeable: str, removable: str | None = None) -> str:
    """CEL: the metadata map ``field`` (labels, annotations) holds the same entries before and after,
    but for the keys ``k`` the expressions ``changeable`` (may be set as the new map, ``new``, says)
    and ``removable`` (may go; ``None``: none) allow."""
    new, old = f"object.metadata.{field}", f"oldObject.metadata.{field}"
    same = f"(has({old}) && k in {old} && {old}[k] == {new}[k])"
    stays = f"(has({new}) && k in {new})"
    return (
        f"(!has({new}) || {new}.all(k, {changeable.format(new=new)} || {same}))"
        f" && (!has({old}) || {old}.all(k, {f'{removable} || ' if removable else ''}{stays}))"
    )


def _quoted(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def service_account_user(namespace: str, name: str) -> str:
    """The user name a ServiceAccount's token authenticates as."""
    return f"system:serviceaccount:{namespace}:{name}"


def node_patch_policy(
    name: str, namespace: str, service_account: str, pool: str, labels: dict[str, str]
) -> list[Manifest]:
    """The ValidatingAdmissionPolicy ``name`` and its binding, cluster-wide, that refuse the
    ServiceAccount ``service_account`` of ``namespace`` every change to a node but a cordon with the
    health label and annotations (see the module's docstring), and any change to a node outside the
    GPU pool ``pool`` (its nodes carry ``POOL_LABEL=<pool>``, a label the policy keeps as it is).

    Returns:
        ``[ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding]``.
    """
    annotations = _quoted(GUARD_ANNOTATIONS)
    health = f'(k == "{dcgm.HEALTH_LABEL}" && {{new}}[k] == "{dcgm.FAILED}")'
    cordoned = "(has({0}.spec.unschedulable) && {0}.spec.unschedulable)"
    validations = [
        (
            f'has(oldObject.metadata.labels) && "{POOL_LABEL}" in oldObject.metadata.labels'
            f' && oldObject.metadata.labels["{POOL_LABEL}"] == "{pool}"',
            f"the GPU node health controller may only cordon nodes of the GPU pool ({POOL_LABEL}={pool})",
        ),
        (
            _map_kept("labels", health),
            f"the GPU node health controller may only set the label {dcgm.HEALTH_LABEL}={dcgm.FAILED}: "
            "no other label of a node may change, and none may be removed",
        ),
        (
            _map_kept("annotations", f"k in {annotations}", f"k in {annotations}"),
            f"the GPU node health controller may only change the annotations {', '.join(GUARD_ANNOTATIONS)}",
        ),
        (
            " && ".join(_same(f"spec.{field}") for field in NODE_SPEC_FIELDS),
            "the GPU node health controller may change no field of a node's spec but unschedulable "
            f"({', '.join(NODE_SPEC_FIELDS)} stay as they are)",
        ),
        (
            f"!{cordoned.format('oldObject')} || {cordoned.format('object')}",
            "the GPU node health controller never uncordons a node: spec.unschedulable may only go from false to true",
        ),
        (
            " && ".join(_same(f"metadata.{field}") for field in NODE_META_FIELDS),
            f"the GPU node health controller may not change a node's {' or '.join(NODE_META_FIELDS)}",
        ),
    ]
    user = service_account_user(namespace, service_account)
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": {**MANAGED_BY, **labels}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                # "nodes" alone: the main resource, never nodes/status, which kubelets write.
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
                ]
            },
            "matchConditions": [
                {"name": "node-health-controller", "expression": f'request.userInfo.username == "{user}"'}
            ],
            "validations": [{"expression": e, "message": m} for e, m in validations],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": {**MANAGED_BY, **labels}},
        # No matchResources: every request the policy matches; nodes are in no namespace.
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
    return [policy, binding]

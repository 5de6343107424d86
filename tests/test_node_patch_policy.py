"""The admission policy that holds the GPU node health controller's node patches to a cordon,
evaluated with cel-python (:mod:`admission_cel`) on the patch the controller itself sends and on
the patches a stolen token could send instead; and planned wherever the controller is."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from admission_cel import admitted_by_policies, matches, request_of, rule_covers
from conftest import cfg, stack_config
from fixtures.dcgm_series import EXPORTER_NAMESPACE
from kubernetes.client.models import V1NodeSpec
from loopback_health import Backends, merge_patch, node, serving
from test_node_health import health_config

from components.config import DEFAULT_GPU_TAINT_KEY, NodeHealthSpec, load_spec
from components.config.loading import ConfigError
from components.manifests.monitoring.node_health import NODE_GUARD, node_guard_objects
from components.manifests.monitoring.node_patch_policy import NODE_SPEC_FIELDS
from trainer.health.guard import KubeApi, step
from trainer.health.signals import FAILED, HEALTH_LABEL, REASON_ANNOTATION, XID

NAMESPACE = "training"
CONTROLLER = f"system:serviceaccount:{NAMESPACE}:{NODE_GUARD}"
CONTROLLER_GROUPS = ("system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated")
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
GUARD_NAME = f"{NAMESPACE}-{NODE_GUARD}"


def objects() -> list[dict[str, Any]]:
    spec = NodeHealthSpec(
        enabled=True, prometheus_url="http://prometheus-operated.monitoring:9090", exporter_namespace=EXPORTER_NAMESPACE
    )
    return node_guard_objects(spec, namespace=NAMESPACE, pool="gpu", image="trainer:v1", node_selector=None)


def gpu_node(name: str) -> dict[str, Any]:
    """A node of the GPU pool as a cluster holds it: the pool's taint and labels, the kubelet's and
    the cloud's fields, a status."""
    obj = node(name)
    obj["metadata"]["labels"].update(
        {"kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": "ecs.gn8is.4xlarge"}
    )
    obj["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"] = "0"
    obj["spec"].update(
        {
            "taints": [{"key": DEFAULT_GPU_TAINT_KEY, "value": "present", "effect": "NoSchedule"}],
            "podCIDR": "172.20.1.0/24",
            "podCIDRs": ["172.20.1.0/24"],
            "providerID": f"cn-hangzhou.i-{name}",
        }
    )
    obj["status"] = {"capacity": {"nvidia.com/gpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]}
    obj["metadata"].update({"uid": f"uid-{name}", "resourceVersion": "4711", "managedFields": [managed("kubelet")]})
    return obj


def managed(manager: str) -> dict[str, Any]:
    """A ``metadata.managedFields`` entry of an ``Update`` by ``manager``."""
    return {"manager": manager, "operation": "Update", "apiVersion": "v1", "time": "2026-01-05T10:00:00Z"}


def review(new: dict[str, Any], old: dict[str, Any], **request: Any) -> list[str]:
    """The refusals of the controller's policy for an update of ``old`` to ``new``."""
    asked = {"username": CONTROLLER, "groups": CONTROLLER_GROUPS, **request}
    return admitted_by_policies(objects(), "", new, resource="nodes", old=old, request=request_of("UPDATE", **asked))


def guards_patch() -> tuple[dict[str, Any], dict[str, Any]]:
    """The node before and after the patch the controller sends for an XID 79, through its own code
    path (:func:`trainer.health.guard.step` over HTTP to the node API stand-in)."""
    before = {"gpu-a": gpu_node("gpu-a"), "gpu-b": gpu_node("gpu-b")}
    labels = {"gpu": "3", "UUID": "GPU-gpu-a-3", "Hostname": "gpu-a", "namespace": EXPORTER_NAMESPACE}
    backends = Backends(ranges={f"{XID}[10m]": [(labels, [79.0] * 10)]}, nodes=copy.deepcopy(before))
    with serving(backends) as base:
        done = step(base, KubeApi(base), "ack-training-platform/pool=gpu", exporter_namespace=EXPORTER_NAMESPACE)
    assert done.cordoned == ("gpu-a",)
    ((name, _, patch),) = backends.patches
    after = copy.deepcopy(merge_patch(before[name], patch))
    # The API server records the patch's manager in managedFields before admission sees the node
    # (kubernetes staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go, jsonPatcher
    # applyPatchToCurrentObject: fieldManager.UpdateNoErrors), so metadata beyond what the policy
    # compares differs on every patch.
    after["metadata"]["managedFields"].append(managed("Python-urllib"))
    return before[name], after


def test_the_controllers_own_cordon_is_admitted() -> None:
    old, new = guards_patch()
    assert new["spec"]["unschedulable"] is True
    assert new["metadata"]["labels"][HEALTH_LABEL] == FAILED
    assert review(new, old) == []
    # A node it cordoned before, cordoned again with a new reason: still a cordon.
    again = copy.deepcopy(new)
    again["metadata"]["annotations"][REASON_ANNOTATION] = "gpu 1 (GPU-gpu-a-1): XID 48"
    assert review(again, new) == []


def _changed(change) -> tuple[dict[str, Any], dict[str, Any]]:
    old, new = guards_patch()
    change(new)
    return new, old


def _refused(change, message: str) -> None:
    new, old = _changed(change)
    found = review(new, old)
    assert any(message in f for f in found), found


def test_a_cordon_that_also_adds_a_taint_is_refused() -> None:
    def taint(n):
        n["spec"]["taints"].append({"key": "example.com/drain", "effect": "NoExecute"})

    _refused(taint, "may change no field of a node's spec but unschedulable")


def test_removing_the_gpu_taint_is_refused() -> None:
    _refused(lambda n: n["spec"].pop("taints"), "may change no field of a node's spec but unschedulable")


def test_changing_or_removing_another_label_is_refused() -> None:
    message = f"may only set the label {HEALTH_LABEL}={FAILED}"
    _refused(lambda n: n["metadata"]["labels"].update({"ack-training-platform/pool": "other"}), message)
    _refused(lambda n: n["metadata"]["labels"].pop("node.kubernetes.io/instance-type"), message)
    _refused(lambda n: n["metadata"]["labels"].update({"example.com/new": "x"}), message)
    _refused(lambda n: n["metadata"]["labels"].update({HEALTH_LABEL: "ok"}), message)


def test_removing_the_health_label_is_refused() -> None:
    _, cordoned = guards_patch()
    unlabelled = copy.deepcopy(cordoned)
    del unlabelled["metadata"]["labels"][HEALTH_LABEL]
    assert any(f"may only set the label {HEALTH_LABEL}" in f for f in review(unlabelled, cordoned))


def test_another_annotation_is_refused() -> None:
    _refused(
        lambda n: n["metadata"]["annotations"].update({"node.alpha.kubernetes.io/ttl": "30"}),
        "may only change the annotations",
    )


def test_uncordoning_is_refused() -> None:
    _, cordoned = guards_patch()
    for patch in ({"spec": {"unschedulable": False}}, {"spec": {"unschedulable": None}}):
        found = review(copy.deepcopy(merge_patch(cordoned, patch)), cordoned)
        assert any("never uncordons a node" in f for f in found), found


def test_a_node_outside_the_gpu_pool_is_refused() -> None:
    system = gpu_node("sys-1")
    system["metadata"]["labels"]["ack-training-platform/pool"] = "system"
    cordon = copy.deepcopy(system)
    cordon["spec"]["unschedulable"] = True
    found = review(cordon, system)
    assert found == [
        "the GPU node health controller may only cordon nodes of the GPU pool (ack-training-platform/pool=gpu)"
    ]
    # A node without any label is in no pool either.
    unlabelled = copy.deepcopy(system)
    del unlabelled["metadata"]["labels"]
    cordon = copy.deepcopy(unlabelled)
    cordon["spec"]["unschedulable"] = True
    assert review(cordon, unlabelled) == [
        "the GPU node health controller may only cordon nodes of the GPU pool (ack-training-platform/pool=gpu)"
    ]


def test_an_owner_reference_or_finalizer_is_refused() -> None:
    owner = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "0c1d"}]
    message = "may not change a node's ownerReferences or finalizers"
    _refused(lambda n: n["metadata"].update({"ownerReferences": owner}), message)
    _refused(lambda n: n["metadata"].update({"finalizers": ["example.com/hold"]}), message)


def test_the_kubelet_and_other_users_are_not_matched() -> None:
    old, _ = guards_patch()
    tainted = copy.deepcopy(old)
    tainted["spec"]["taints"].append({"key": "example.com/repair", "effect": "NoSchedule"})
    tainted["spec"]["unschedulable"] = True
    uncordoned = copy.deepcopy(tainted)
    del uncordoned["spec"]["unschedulable"]
    # A person, ACK's repair, another ServiceAccount: whatever they change, the policy does not apply.
    for user, groups in (
        ("kubernetes-admin", ("system:masters",)),
        ("system:serviceaccount:kube-system:node-controller", ("system:serviceaccounts",)),
        (f"system:serviceaccount:team-a:{NODE_GUARD}", ("system:serviceaccounts",)),
    ):
        assert review(tainted, old, username=user, groups=groups) == []
        assert review(uncordoned, tainted, username=user, groups=groups) == []
    # The kubelet writes the node's status through its status subresource.
    status = copy.deepcopy(old)
    status["status"]["conditions"][0]["status"] = "False"
    kubelet = {"username": "system:node:gpu-a", "groups": ("system:nodes", "system:authenticated")}
    assert review(status, old, sub_resource="status", **kubelet) == []
    # Even the controller's own request on the status subresource (its role does not grant it) is not matched.
    (policy,) = [o for o in objects() if o["kind"] == "ValidatingAdmissionPolicy"]
    assert matches(policy, "nodes", "UPDATE") and not matches(policy, "nodes", "UPDATE", "status")


def test_the_policy_names_every_field_of_a_nodes_spec_but_unschedulable() -> None:
    assert set(NODE_SPEC_FIELDS) == set(V1NodeSpec.attribute_map.values()) - {"unschedulable"}


# "'pods' means pods. 'pods/log' means the log subresource of pods. '*' means all resources, but not
# subresources. 'pods/*' means all subresources of pods. '*/scale' means all scale subresources.
# '*/*' means all resources and their subresources." (admissionregistration v1, NamedRuleWithOperations.resources)
@pytest.mark.parametrize(
    ("rule", "resource", "sub_resource", "covered"),
    [
        ("pods", "pods", "", True),
        ("pods", "pods", "log", False),
        ("pods/log", "pods", "log", True),
        ("pods/log", "pods", "", False),
        ("*", "nodes", "", True),
        ("*", "nodes", "status", False),
        ("pods/*", "pods", "log", True),
        ("pods/*", "nodes", "status", False),
        ("*/scale", "deployments", "scale", True),
        ("*/scale", "deployments", "status", False),
        ("*/*", "nodes", "status", True),
    ],
)
def test_the_rule_stand_in_matches_subresources_as_the_api_documents(
    rule: str, resource: str, sub_resource: str, covered: bool
) -> None:
    assert rule_covers([rule], resource, sub_resource) is covered


# --- planned with the controller -----------------------------------------------------------


def _named(plan, type_: str) -> list:
    return [r for r in plan.of_type(type_) if NODE_GUARD in r.inputs["metadata"]["name"]]


@pytest.mark.parametrize(
    ("config", "stack", "controller"),
    [
        (health_config(), "test", True),
        (health_config(image="registry.example.com/platform/trainer:v0.2.0"), "test", True),
        (health_config(enabled=False), "test", False),
        (stack_config("dev"), "dev", False),
    ],
    ids=["enabled", "own-image", "disabled", "dev"],
)
def test_the_policy_and_binding_are_planned_wherever_the_controller_is(
    run_stack, config: dict, stack: str, controller: bool
) -> None:
    plan = run_stack(config, stack)
    deployments, policies, bindings = (_named(plan, t) for t in (DEPLOYMENT, VAP, BINDING))
    assert len(deployments) == len(policies) == len(bindings) == (1 if controller else 0)
    if not controller:
        return
    (deployment,), (policy,), (binding,) = deployments, policies, bindings
    assert binding.inputs["spec"] == {"policyName": GUARD_NAME, "validationActions": ["Deny"]}
    assert policy.inputs["spec"]["failurePolicy"] == "Fail"
    (condition,) = policy.inputs["spec"]["matchConditions"]
    account = deployment.inputs["spec"]["template"]["spec"]["serviceAccountName"]
    assert condition["expression"] == f'request.userInfo.username == "system:serviceaccount:{NAMESPACE}:{account}"'
    # The controller starts only once its patches are bounded.
    assert {policy.urn, binding.urn} <= set(deployment.dependencies)


def test_node_health_on_a_cluster_without_admission_policies_names_the_version() -> None:
    config = health_config()
    config.pop(cfg("trainerV2"))
    config[cfg("cluster")]["version"] = "1.29.3-aliyun.1"
    with pytest.raises(ConfigError) as err:
        load_spec(config, credentials=False)
    assert (
        "cluster.version: Kubernetes 1.29.3-aliyun.1 is too old for monitoring.nodeHealth, whose node patches an "
        "admission policy (ValidatingAdmissionPolicy v1) holds to a cordon: it needs 1.30 or later" in str(err.value)
    )

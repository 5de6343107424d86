"""GPU node health: the ``GPUNodeUnhealthy`` and ``GPUNodeCheckFailed`` alerts' queries and the objects of the controller that
cordons failing GPU nodes (``python -m trainer.health.guard``), from ``monitoring.nodeHealth``.

The alert and the controller classify alike: both are built from one
:class:`trainer.health.signals.HealthRules`, made here from the stack key.
"""

from __future__ import annotations

from trainer.exit_codes import NODE_BELOW_BASELINE
from trainer.health import signals as dcgm

from ...config import POOL_LABEL, NodeHealthSpec
from ..base import MANAGED_BY, TRAINER_UID, Manifest
from .node_patch_policy import node_patch_policy

NODE_GUARD = "gpu-node-guard"
LABELS = {**MANAGED_BY, "app.kubernetes.io/name": NODE_GUARD, "app.kubernetes.io/component": NODE_GUARD}
SIGNAL_LABEL = "signal"
"""Which DCGM signal made a series of the alert: ``xid``, ``row-remap-failure``, ``ecc-dbe``,
``retired-pages-pending`` or ``nvlink-errors``."""
RESOURCES = {"cpu": "100m", "memory": "128Mi"}
"""A few HTTP requests a minute and the verdicts of one pool's nodes."""


def health_rules(spec: NodeHealthSpec) -> dcgm.HealthRules:
    """The thresholds ``monitoring.nodeHealth`` sets, for the alert and the controller alike."""
    xids = {x: dcgm.XID_MEANINGS.get(x, "listed in monitoring.nodeHealth.cordonXids") for x in spec.cordon_xids}
    return dcgm.HealthRules(cordon_xids=xids, max_nvlink_errors=spec.max_nvlink_errors)


def _signal(expr: str, signal: str) -> str:
    return f'label_replace({expr}, "{SIGNAL_LABEL}", "{signal}", "", "")'


def unhealthy_gpus(rules: dcgm.HealthRules, namespace: str, window: str = dcgm.DEFAULT_WINDOW) -> str:
    """PromQL: the GPUs whose series, as the DCGM exporter running in ``namespace`` serves them, take
    their node out under ``rules``, by ``Hostname``, ``gpu``, ``UUID`` and :data:`SIGNAL_LABEL`; the
    value is the XID, or the count that crossed its threshold. The same decision as
    :func:`trainer.health.signals.node_verdicts`; a team pod's series of the same names are not read."""
    keep = f"{dcgm.NODE_LABEL}, {dcgm.GPU_LABEL}, UUID, {SIGNAL_LABEL}"

    def series(metric: str) -> str:
        return dcgm.exporter_series(metric, namespace)

    terms = []
    if rules.cordon_xids:
        xids = " or ".join(f"{series(dcgm.XID)} == {x}" for x in sorted(rules.cordon_xids))
        # Over the window, as the controller reads it: the gauge holds the last XID only, and an
        # application's XID after a node's would hide the node's from an instant reading.
        terms.append(_signal(f"max_over_time(({xids})[{window}:])", "xid"))
    if rules.row_remap_failure:
        terms.append(_signal(f"{series(dcgm.ROW_REMAP_FAILURE)} >= 1", "row-remap-failure"))

    def grew(metric: str) -> str:
        return f"increase({series(metric)}[{window}])"

    terms.append(_signal(f"{grew(dcgm.ECC_DBE_VOLATILE)} > {rules.max_dbe_errors:g}", "ecc-dbe"))
    terms.append(_signal(f"{grew(dcgm.RETIRED_PENDING)} > {rules.max_retired_pending:g}", "retired-pages-pending"))
    if rules.max_nvlink_errors is not None:
        for metric in dcgm.NVLINK_ERRORS:
            terms.append(_signal(f"{grew(metric)} > {rules.max_nvlink_errors:g}", "nvlink-errors"))
    return f"max by ({keep}) ({' or '.join(terms)})"


FAILED_NODE_CHECKS = (
    f"max by (node, namespace, pod) ("
    f'(kube_pod_init_container_status_last_terminated_exitcode{{container="{dcgm.NODE_CHECK}"}} == '
    f"{NODE_BELOW_BASELINE}) * on (namespace, pod, uid) group_left (node) kube_pod_info)"
)
"""PromQL: pods whose pre-job node check last exited below the baseline, with their node, from
kube-state-metrics (v2.20.0 ``docs/metrics/workload/pod-metrics.md``: the init container's last exit
code by ``namespace``, ``pod``, ``uid`` and ``container``; ``kube_pod_info`` carries the pod's
``node``). Only alerted on: the pod's template is its team's, so the status is the team's to report."""


def guard_args(spec: NodeHealthSpec, prometheus_url: str, exporter_namespace: str, pool: str) -> list[str]:
    """The controller's command line for ``spec``, watching the nodes of GPU pool ``pool``."""
    args = [
        f"--prometheus={prometheus_url}",
        f"--pool-selector={POOL_LABEL}={pool}",
        f"--exporter-namespace={exporter_namespace}",
        f"--max-cordoned-share={spec.max_cordoned_share:g}",
        f"--interval={spec.interval_seconds}",
        f"--window={dcgm.DEFAULT_WINDOW}",
        f"--xids={','.join(str(x) for x in spec.cordon_xids)}",
    ]
    if spec.max_nvlink_errors is not None:
        args.append(f"--max-nvlink-errors={spec.max_nvlink_errors:g}")
    return args


NODE_RULES = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}]
"""All the controller may do: read nodes and patch them (cordon, label, annotate). It cannot
delete a node, evict a pod or read a secret. RBAC cannot narrow a patch to fields: an admission
policy does (:mod:`.node_patch_policy`)."""


def node_guard_objects(
    spec: NodeHealthSpec,
    *,
    namespace: str,
    pool: str,
    image: str,
    node_selector: dict[str, str] | None,
    image_pull_secret: str | None = None,
) -> list[Manifest]:
    """The controller's ServiceAccount, ClusterRole, ClusterRoleBinding, the admission policy and
    binding that hold its node patches to a cordon (:func:`.node_patch_policy.node_patch_policy`), and
    its Deployment.

    Args:
        spec: ``monitoring.nodeHealth`` (enabled, with ``prometheusUrl`` and ``exporterNamespace``).
        namespace: where it runs (the training namespace).
        pool: the GPU pool's name; it watches the nodes labelled with it.
        image: the training image, pinned: it carries ``trainer.health.guard``.
        node_selector: the system pool's labels, or ``None``: it never runs on the nodes it may cordon.
        image_pull_secret: pull secret for the image, or ``None``.

    Returns:
        ``[ServiceAccount, ClusterRole, ClusterRoleBinding, ValidatingAdmissionPolicy,
        ValidatingAdmissionPolicyBinding, Deployment]``.

    Raises:
        ValueError: ``spec`` has no ``prometheusUrl`` or no ``exporterNamespace``.
    """
    if spec.prometheus_url is None:
        raise ValueError("monitoring.nodeHealth.prometheusUrl is required for the node health controller")
    if spec.exporter_namespace is None:
        raise ValueError("monitoring.nodeHealth.exporterNamespace is required for the node health controller")
    metadata = {"name": NODE_GUARD, "namespace": namespace, "labels": dict(LABELS)}
    cluster_metadata = {"name": f"{namespace}-{NODE_GUARD}", "labels": dict(LABELS)}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(metadata)}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": dict(cluster_metadata),
        "rules": [dict(rule) for rule in NODE_RULES],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": dict(cluster_metadata),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_metadata["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": NODE_GUARD, "namespace": namespace}],
    }
    pod: Manifest = {
        "serviceAccountName": NODE_GUARD,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": TRAINER_UID,
            "runAsGroup": TRAINER_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": NODE_GUARD,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                # The image's entrypoint is the trainer's launcher.
                "command": ["python", "-m", "trainer.health.guard"],
                "args": guard_args(spec, spec.prometheus_url, spec.exporter_namespace, pool),
                "resources": {"requests": dict(RESOURCES), "limits": dict(RESOURCES)},
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
    }
    if node_selector:
        pod["nodeSelector"] = dict(node_selector)
    if image_pull_secret:
        pod["imagePullSecrets"] = [{"name": image_pull_secret}]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": dict(metadata),
        "spec": {
            # One writer: two would race for the cordon budget.
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(LABELS)},
            "template": {"metadata": {"labels": dict(LABELS)}, "spec": pod},
        },
    }
    bounds = node_patch_policy(cluster_metadata["name"], namespace, NODE_GUARD, pool, LABELS)
    return [account, role, binding, *bounds, deployment]

"""What GPU time costs, as Prometheus series: recording rules that price each running pod's GPUs from
the stack's price table (``costs``), sum them with the GPUs, CPU cores and memory the pods requested per
job, per team (a team's namespace) and per pool, count the GPUs that sit idle, and the per-team budget
alerts over them.

Series they read, from kubernetes/kube-state-metrics v2.20.0:

- ``kube_pod_container_resource_requests`` (``internal/store/pod.go``): one series per container and
  requested resource, labelled ``namespace``, ``pod``, ``uid``, ``container``, ``node``, ``resource``,
  ``unit``, for every pod whatever its phase (so the rules keep the running ones); CPU in cores, memory
  in bytes. An extended resource
  is named by ``SanitizeLabelName`` (``internal/store/utils.go``: every character outside
  ``[a-zA-Z0-9_]`` becomes ``_``), so ``nvidia.com/gpu`` is ``resource="nvidia_com_gpu"``.
- ``kube_node_labels`` (``internal/store/node.go``): ``node`` and a ``label_<key>`` per node label that
  ``--metric-labels-allowlist`` lets through, none by default; the key is sanitized the same way, so
  ``node.kubernetes.io/instance-type`` is ``label_node_kubernetes_io_instance_type``.
  kube-state-metrics must run with :data:`NODE_LABELS_ALLOWLIST`.
- ``kube_pod_owner`` and ``kube_job_owner`` (:mod:`.kube_metrics`): a v1 job owns its pods; a TrainJob's
  pods belong to the Jobs of its JobSet, named after it.

and ``DCGM_FI_DEV_GPU_UTIL`` (:mod:`.gpu_metrics`) for idle GPUs.

Only the exporters' own series are read (:class:`Exporters`): Prometheus also scrapes the teams' training
pods, and a team's metrics port can serve series of these names, say a ``kube_node_labels`` that moves a
shared node to another pool or instance type, or requests of minus its GPUs. The platform's PodMonitor
keeps ``honorLabels`` false, so prometheus-operator sets the target's ``job``
(``<PodMonitor's namespace>/<its name>``) and ``namespace`` (the pod's) over any the pod serves, which
Prometheus keeps as ``exported_job`` and ``exported_namespace`` (prometheus-operator v0.79.0
``pkg/prometheus/promcfg.go`` ``generatePodMonitorConfig``; Prometheus ``honor_labels``). kube-state-metrics'
series are told by ``job`` (:func:`.alert_queries.kube_state_metrics_only`), which they never carry themselves: their ``namespace`` label is the subject's,
which under ``honorLabels: true`` (kube-state-metrics' chart offers it, ``prometheus.monitor.honorLabels``)
replaces the target's; the chart's ServiceMonitor sets ``job`` from its Service's ``app.kubernetes.io/name``
(prometheus-community/helm-charts ``charts/kube-state-metrics/templates/servicemonitor.yaml``, ``jobLabel``,
read from a copy found by search, not at a tag). The DCGM exporter's are told by ``namespace``, the exporter
pods', as NVIDIA's chart scrapes it with ``honorLabels: false``, naming the GPU's pod as
``exported_namespace`` and ``exported_pod`` (:mod:`.gpu_metrics`).

A node is priced at its instance type's spot price when its pool (``ack-training-platform/pool``) runs
spot instances, else on demand; a pod pays its GPUs' share of the node. Pods without GPUs are not
priced here (``ack-jobs cost`` prices them by CPU share).
"""

from __future__ import annotations

from typing import NamedTuple

from ...config import POOL_LABEL, MonitoringScope
from ...config.costs import IDLE_BELOW, INSTANCE_TYPE_LABEL, PERIOD_WINDOWS, CostsSpec
from ..base import MANAGED_BY, Manifest
from . import alert_queries as q
from . import gpu_metrics as gpu
from . import kube_metrics as kube
from .cost_series import (
    JOB_COST,
    JOB_CPU,
    JOB_GPUS,
    JOB_IDLE_GPUS,
    JOB_MEMORY,
    JOB_ON_DEMAND_COST,
    NODE_GPU_ON_DEMAND_PRICE,
    NODE_GPU_PRICE,
    NODE_POOL,
    POD_COST,
    POD_CPU,
    POD_GPUS,
    POD_IDLE_GPUS,
    POD_JOB,
    POD_MEMORY,
    POD_ON_DEMAND_COST,
    POOL_COST,
    POOL_CPU,
    POOL_GPUS,
    POOL_LABEL_NAME,
    POOL_MEMORY,
    TEAM_COST,
    TEAM_CPU,
    TEAM_GPUS,
    TEAM_MEMORY,
    over,
    recorded,
)
from .rules import Alert, rule_group
from .scraping import JOB_LABEL, MONITORING_API

COST_RULE_NAME = "ack-training-platform-cost"
COST_GROUP = "ack-training-platform.cost"
BUDGET_GROUP = "ack-training-platform.budget"

POD_REQUESTS = "kube_pod_container_resource_requests"
NODE_LABELS = "kube_node_labels"
GPU_RESOURCE = "nvidia_com_gpu"
INSTANCE_TYPE_SERIES = "label_node_kubernetes_io_instance_type"
POOL_SERIES = "label_ack_training_platform_pool"
NODE_LABELS_ALLOWLIST = f"nodes=[{INSTANCE_TYPE_LABEL},{POOL_LABEL}]"
"""kube-state-metrics' ``--metric-labels-allowlist`` value that serves the node labels the prices join on."""


class Exporters(NamedTuple):
    """How the exporters' own series are told from a team pod's of the same names
    (``monitoring.exporters``).

    Args:
        kube_state_metrics_job: the ``job`` label of kube-state-metrics' series.
        dcgm_namespace: the namespace of the DCGM exporter's pods.
    """

    kube_state_metrics_job: str
    dcgm_namespace: str


def _record(name: str, expr: str) -> dict[str, str]:
    return {"record": name, "expr": expr}


def _node_prices(costs: CostsSpec, spot_pools: tuple[str, ...]) -> list[dict[str, str]]:
    """One rule per GPU instance type and billing: the price of one of its GPUs on each node of that type."""
    spot = "|".join(spot_pools)
    rules = []
    for kind, price in sorted(costs.instances.items()):
        if not price.gpus:
            continue
        nodes = f'{NODE_LABELS}{{{INSTANCE_TYPE_SERIES}="{kind}"'
        on_demand = price.on_demand / price.gpus
        if spot:
            rules.append(_record(NODE_GPU_PRICE, f'max by (node) ({nodes},{POOL_SERIES}!~"{spot}"}}) * {on_demand!r}'))
            # Only a type the spot pool does not run may lack a spot price (check_costs): on demand, then.
            spot_price = (price.spot if price.spot is not None else price.on_demand) / price.gpus
            rules.append(_record(NODE_GPU_PRICE, f'max by (node) ({nodes},{POOL_SERIES}=~"{spot}"}}) * {spot_price!r}'))
        else:
            rules.append(_record(NODE_GPU_PRICE, f"max by (node) ({nodes}}}) * {on_demand!r}"))
        rules.append(_record(NODE_GPU_ON_DEMAND_PRICE, f"max by (node) ({nodes}}}) * {on_demand!r}"))
    return rules


def _pod_jobs(namespaces: tuple[str, ...]) -> str:
    """Each training pod's job (``JOB_LABEL``): a v1 job owns its pods (kubeflow/trainer v1.9.4
    ``pkg/controller.v1/common/pod.go``); a TrainJob's pods are owned by a Job of the JobSet named after
    the TrainJob, which ``kube_job_owner`` names."""
    v1 = f"max by (namespace, pod, owner_name) ({q.select(kube.POD_OWNER, namespaces, q.V1_OWNER_KINDS)})"
    pods = q.select(kube.POD_OWNER, namespaces, 'owner_kind="Job"')
    by_job = f'label_replace({pods}, "job_name", "$1", "owner_name", "(.+)")'
    jobsets = q.select(kube.JOB_OWNER, namespaces, 'owner_kind="JobSet"')
    v2 = f"max by (namespace, pod, owner_name) ({by_job} * on (namespace, job_name) group_left (owner_name) {jobsets})"
    return f'label_replace({v1} or {v2}, "{JOB_LABEL}", "$1", "owner_name", "(.+)")'


def _idle_gpus(namespaces: tuple[str, ...], exporters: Exporters) -> str:
    """GPUs per pod under :data:`IDLE_BELOW` percent, from the DCGM exporter's series, which name the GPU's pod
    as ``exported_namespace`` and ``exported_pod``. Series that name it as ``namespace`` and ``pod`` (ACK's GPU
    exporter's labels, kept as served) are not read: a team's pod's series carry its own namespace there too."""
    exported = gpu.from_exporter(
        gpu.GPU_UTIL, exporters.dcgm_namespace, q.in_namespaces(namespaces, gpu.EXPORTED_PREFIX + "namespace")
    )
    for label in ("namespace", "pod"):
        exported = f'label_replace({exported}, "{label}", "$1", "{gpu.EXPORTED_PREFIX}{label}", "(.+)")'
    return f"count by (namespace, pod) ({exported} < {IDLE_BELOW})"


def cost_rules(
    costs: CostsSpec, spot_pools: tuple[str, ...], namespaces: tuple[str, ...], exporters: Exporters
) -> list[dict[str, str]]:
    """The recording rules that price the GPU time of the jobs in ``namespaces``.

    Args:
        costs: the stack's prices.
        spot_pools: the pools whose nodes are spot instances.
        namespaces: where jobs run (the training namespace and each team's).
        exporters: how the exporters' series are told from a team pod's.

    Returns:
        Prometheus recording rules, in the order they depend on each other.
    """
    running = f"{q.select(kube.POD_PHASE, namespaces, q.RUNNING_PHASE)} == 1"

    def requested(resource: str) -> str:
        asked = q.select(POD_REQUESTS, namespaces, f'resource="{resource}"')
        return f"sum by (namespace, pod, node) ({asked} * on (namespace, pod, uid) group_left () ({running}))"

    by_job = f"on (namespace, pod) group_left ({JOB_LABEL}) {recorded(POD_JOB)}"
    by_pool = f"on (node) group_left ({POOL_LABEL_NAME}) {recorded(NODE_POOL)}"
    pool_of = f'label_replace({NODE_LABELS}{{{POOL_SERIES}!=""}}, "{POOL_LABEL_NAME}", "$1", "{POOL_SERIES}", "(.+)")'
    rules = [
        _record(POD_GPUS, requested(GPU_RESOURCE)),
        # CPU and memory are not priced (a pod pays its GPUs' share of the node), only counted.
        _record(POD_CPU, requested("cpu")),
        _record(POD_MEMORY, requested("memory")),
        _record(POD_JOB, _pod_jobs(namespaces)),
        _record(NODE_POOL, f"max by (node, {POOL_LABEL_NAME}) ({pool_of})"),
        *_node_prices(costs, spot_pools),
        _record(POD_COST, f"{recorded(POD_GPUS)} * on (node) group_left () {recorded(NODE_GPU_PRICE)}"),
        _record(
            POD_ON_DEMAND_COST, f"{recorded(POD_GPUS)} * on (node) group_left () {recorded(NODE_GPU_ON_DEMAND_PRICE)}"
        ),
        _record(POD_IDLE_GPUS, f"({_idle_gpus(namespaces, exporters)}) and on (namespace, pod) {recorded(POD_GPUS)}"),
        _record(JOB_GPUS, f"sum by (namespace, {JOB_LABEL}) ({recorded(POD_GPUS)} * {by_job})"),
        _record(JOB_COST, f"sum by (namespace, {JOB_LABEL}) ({recorded(POD_COST)} * {by_job})"),
        _record(JOB_ON_DEMAND_COST, f"sum by (namespace, {JOB_LABEL}) ({recorded(POD_ON_DEMAND_COST)} * {by_job})"),
        _record(JOB_IDLE_GPUS, f"sum by (namespace, {JOB_LABEL}) ({recorded(POD_IDLE_GPUS)} * {by_job})"),
        _record(JOB_CPU, f"sum by (namespace, {JOB_LABEL}) ({recorded(POD_CPU)} * {by_job})"),
        _record(JOB_MEMORY, f"sum by (namespace, {JOB_LABEL}) ({recorded(POD_MEMORY)} * {by_job})"),
        _record(TEAM_GPUS, f"sum by (namespace) ({recorded(POD_GPUS)})"),
        _record(TEAM_COST, f"sum by (namespace) ({recorded(POD_COST)})"),
        _record(TEAM_CPU, f"sum by (namespace) ({recorded(POD_CPU)})"),
        _record(TEAM_MEMORY, f"sum by (namespace) ({recorded(POD_MEMORY)})"),
        # A pool's totals over the jobs' namespaces; a node without the pool label is in no pool.
        _record(POOL_GPUS, f"sum by ({POOL_LABEL_NAME}) ({recorded(POD_GPUS)} * {by_pool})"),
        _record(POOL_COST, f"sum by ({POOL_LABEL_NAME}) ({recorded(POD_COST)} * {by_pool})"),
        _record(POOL_CPU, f"sum by ({POOL_LABEL_NAME}) ({recorded(POD_CPU)} * {by_pool})"),
        _record(POOL_MEMORY, f"sum by ({POOL_LABEL_NAME}) ({recorded(POD_MEMORY)} * {by_pool})"),
    ]
    # kube-state-metrics' series by their job; the GPU exporter's are told in _idle_gpus.
    return [
        {**rule, "expr": q.kube_state_metrics_only(rule["expr"], exporters.kube_state_metrics_job)} for rule in rules
    ]


def node_labels_alert(kube_state_metrics_job: str) -> Alert:
    """``CostRulesMissingNodeLabels``: GPU pods run, yet no node's instance type is served, so no node has a
    price and every cost series is empty (kube-state-metrics, whose series carry ``kube_state_metrics_job``,
    without :data:`NODE_LABELS_ALLOWLIST`)."""
    typed = q.kube_state_metrics_only(f'{NODE_LABELS}{{{INSTANCE_TYPE_SERIES}!=""}}', kube_state_metrics_job)
    return Alert(
        "CostRulesMissingNodeLabels",
        # Read after the rules that record POD_GPUS, in the same group: the pods running now.
        f"count({recorded(POD_GPUS)}) unless on () count({typed})",
        15,
        "warning",
        "GPU pods are running, but no node's instance type is served: the cost series are empty.",
        f"The cost rules price a node by its {INSTANCE_TYPE_LABEL} and {POOL_LABEL} labels, which "
        "kube-state-metrics serves in kube_node_labels only when allowed to, and no kube_node_labels series "
        f"carries them. Start kube-state-metrics with --metric-labels-allowlist={NODE_LABELS_ALLOWLIST} (the "
        "offline plan writes it to kube-state-metrics/training-jobs.yaml, args); until then no job, team or "
        "pool is priced and the budget alerts cannot fire.",
    )


def budget_alerts(scope: MonitoringScope) -> list[Alert]:
    """``TeamBudgetExceeded`` for the teams whose spend over their period passed their budget, and
    ``TeamBudgetNearlySpent`` at its ``warnAt`` share; none without budgets."""
    if scope.costs is None or not scope.budgets:
        return []
    currency = scope.costs.currency

    def spent(team: str, period: str) -> str:
        return over(recorded(TEAM_COST, f'namespace="{team}"'), PERIOD_WINDOWS[period])

    exceeded = " or ".join(f"({spent(team, b.period)} > {b.amount!r})" for team, b in scope.budgets)
    rules = [
        Alert(
            "TeamBudgetExceeded",
            exceeded,
            0,
            "critical",
            f'Team {{{{ $labels.namespace }}}} spent {{{{ $value | printf "%.2f" }}}} {currency}, over its budget.',
            "The team's jobs' GPU time over its budget period (teams[].budget) costs more than its budget, at the "
            "stack's prices (costs). See who spends it with `ack-jobs cost --team {{ $labels.namespace }}` or the "
            "Cost row of the training dashboard; suspend jobs (`ack-jobs suspend`) or raise the budget.",
            "teams[].budget.amount",
        )
    ]
    warned = [(team, b) for team, b in scope.budgets if b.warn_at is not None]
    if warned:
        # Between the warning share and the budget: past it, TeamBudgetExceeded says more.
        nearly = " or ".join(
            f"({spent(team, b.period)} > {b.amount * b.warn_at!r} and {spent(team, b.period)} <= {b.amount!r})"
            for team, b in warned
        )
        rules.append(
            Alert(
                "TeamBudgetNearlySpent",
                nearly,
                0,
                "warning",
                f'Team {{{{ $labels.namespace }}}} spent {{{{ $value | printf "%.2f" }}}} {currency} of its budget.',
                "The team's jobs have used most of the budget of their period (teams[].budget.warnAt): at this "
                "rate it runs out. `ack-jobs cost --team {{ $labels.namespace }}` shows which jobs cost most.",
                "teams[].budget.warnAt",
            )
        )
    return rules


def cost_rule(scope: MonitoringScope) -> Manifest | None:
    """The PrometheusRule with the cost recording rules, the alert on their missing node labels and the budget
    alerts, or ``None`` without ``costs``.

    Raises:
        ValueError: ``monitoring.exporters`` does not say how the exporters' series are labelled.
    """
    if scope.costs is None:
        return None
    exporters = scope.monitoring.exporters
    if exporters.kube_state_metrics_job is None or exporters.dcgm_namespace is None:
        raise ValueError("the cost rules need monitoring.exporters.kubeStateMetricsJob and dcgmNamespace")
    told = Exporters(exporters.kube_state_metrics_job, exporters.dcgm_namespace)
    rules = [
        *cost_rules(scope.costs, scope.spot_pools, scope.namespaces, told),
        *rule_group([node_labels_alert(told.kube_state_metrics_job)])["rules"],
    ]
    groups = [{"name": COST_GROUP, "rules": rules}]
    budgets = budget_alerts(scope)
    if budgets:
        groups.append({**rule_group(budgets), "name": BUDGET_GROUP})
    return {
        "apiVersion": MONITORING_API,
        "kind": "PrometheusRule",
        "metadata": {"name": COST_RULE_NAME, "namespace": scope.home, "labels": dict(MANAGED_BY)},
        "spec": {"groups": groups},
    }

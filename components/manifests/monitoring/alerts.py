"""The platform's alerts: one table, rendered as a PrometheusRule (prometheus-operator), as
the arguments of ARMS alert rules, and as a plain rules file for ``promtool`` (:mod:`.rules`).

Each alert says what broke and what to look at first, in the style of the kube-prometheus
mixins: ``expr``, ``for``, ``labels.severity``, ``annotations.summary`` and ``description``.
Metric names come from ``trainer/telemetry/metric_names.py`` and :mod:`.kube_metrics`.
"""

from __future__ import annotations

from dataclasses import replace

from trainer.health.signals import HEALTH_LABEL
from trainer.telemetry import metric_names as trainer

from ...config import MonitoringScope
from ..jobs.names import KINDS
from . import alert_queries as q
from . import kube_metrics as kube
from .node_health import FAILED_NODE_CHECKS, SIGNAL_LABEL, health_rules, unhealthy_gpus
from .rules import Alert
from .scraping import JOB_LABEL, NETWORK_SERIES_LABEL, NODES_SERIES_LABEL, POOL_SERIES_LABEL

FAILED_WINDOW = "10m"
"""How long a failed job keeps its alert: long enough to be delivered, not for as long as the failed
job is kept."""
BENCHMARK_WINDOW = "10m"
"""How long a finished netbench job's bandwidth stays under watch."""
BASELINE_WINDOW = "7d"
"""How far back a baseline reaches: the netbench jobs of the past week (within the 15 days that
ARMS and prometheus-operator keep by default)."""
BASELINE_SHAPE = (POOL_SERIES_LABEL, NODES_SERIES_LABEL, NETWORK_SERIES_LABEL)
"""What a netbench job is compared on: the pool, the node count and the network. A single-node run
measures NVLink and a TCP run the pod network; neither is a baseline for a multi-node RDMA run."""
MFU_WINDOW = "30m"
"""MFU swings with evaluation and checkpoint steps; half an hour's mean does not."""
V1_PLURALS = ",".join(kind.plural for kind in KINDS.values())


def _bandwidth_alert(namespace: tuple[str, ...], ratio: float, floor_gbps: float | None) -> Alert:
    """A netbench job whose best all-reduce bus bandwidth is under ``ratio`` of its baseline, or,
    while it has none, under the fixed ``floor_gbps`` (if set).

    The baseline is the best any netbench job of the same shape (:data:`BASELINE_SHAPE`, labels the
    PodMonitor copies from the pod) served in the ``BASELINE_WINDOW`` before the job's own
    ``BENCHMARK_WINDOW``: the offset keeps a job from being its own baseline.
    """
    shape = ", ".join(BASELINE_SHAPE)
    bandwidth = q.select(trainer.ALLREDUCE_BUS_BANDWIDTH.name, namespace)
    best = f"max by (namespace, {JOB_LABEL}, {shape}) (max_over_time({bandwidth}[{BENCHMARK_WINDOW}]))"
    baseline = f"max by ({shape}) (max_over_time({bandwidth}[{BASELINE_WINDOW}] offset {BENCHMARK_WINDOW}))"
    expr = f"{best} < on ({shape}) group_left () ({ratio} * {baseline})"
    against = (
        f"{ratio:.0%} of the best of the {BASELINE_WINDOW} before it on pool {{{{ $labels.{POOL_SERIES_LABEL} }}}} "
        f"with {{{{ $labels.{NODES_SERIES_LABEL} }}}} nodes over {{{{ $labels.{NETWORK_SERIES_LABEL} }}}}"
    )
    if floor_gbps is not None:
        expr = f"({expr}) or ({best} < {round(floor_gbps * 1e9)} unless on ({shape}) {baseline})"
        against += f" (or, before it has a baseline, {floor_gbps} GB/s)"
    return Alert(
        "AllReduceBandwidthLow",
        # The benchmark's pod serves its result for about a minute and exits; the window keeps the
        # result in view long enough for ``for`` and for delivery.
        expr,
        1,
        "warning",
        f"All-reduce bus bandwidth of {{{{ $labels.{JOB_LABEL} }}}} is {{{{ $value | humanize }}}}B/s.",
        f"The netbench job's best all-reduce bus bandwidth is below {against}: multi-node jobs will be "
        "network-bound. Check that its pods got the RDMA devices (NCCL_DEBUG=INFO shows the transport), that "
        "the nodes share a fabric, and its netbench.json on the output volume for the intra- and inter-node "
        "figures.",
        "monitoring.alerts.minBusBandwidthOfBaseline",
    )


def alerts(scope: MonitoringScope) -> list[Alert]:
    """The alerts for the jobs of every namespace in ``scope``, with its thresholds
    (``monitoring.alerts``).

    Args:
        scope: what the monitoring watches.

    Returns:
        The alerts, in a fixed order; those whose threshold is unset, or whose backend the
        stack does not run, are left out.
    """
    ns = scope.namespaces
    limits = scope.monitoring.alerts
    job = f"{{{{ $labels.{JOB_LABEL} }}}}"
    rules: list[Alert] = []
    if scope.v1_operator:
        failed_v1 = f"{kube.OPERATOR_JOBS_FAILED}{{{q.in_namespaces(ns, 'job_namespace')}}}"
        rules.append(
            Alert(
                "TrainingJobFailed",
                # The job's Failed condition (kube-state-metrics, job_state_metrics_config) is set on
                # every path, a backoff limit and a deadline included. The operator's counter is
                # created at a namespace's first failure, already at 1, which increase() cannot see:
                # a series that was not there a window ago counts too; it counts only failures under
                # restartPolicy Never. A pod that a non-retryable exit code (ExitCode) or the pod's
                # own policy leaves Failed is the last sign.
                f"{q.newly_failed(ns, FAILED_WINDOW, q.V1_GROUP)}"
                f" or increase({failed_v1}[{FAILED_WINDOW}]) > 0 or ({failed_v1} unless {failed_v1} offset {FAILED_WINDOW})"
                f" or max by (namespace, pod) ({q.select(kube.POD_PHASE, ns, q.FAILED_PHASE)} == 1"
                f" and on (namespace, pod, uid) {q.select(kube.POD_CONTAINER_INFO, ns, q.V1_CONTAINER_MATCH)})",
                3,
                "critical",
                "Training job {{ $labels.training_job }}{{ $labels.pod }} failed in namespace "
                "{{ $labels.namespace }}{{ $labels.job_namespace }}.",
                "The Training Operator marked a job as failed (its backoff limit, its deadline, or a replica "
                "that may not be retried), or one of its pods ({{ $labels.pod }}) ended with a non-retryable "
                "exit code. Find it with "
                f"`kubectl -n {{{{ $labels.namespace }}}}{{{{ $labels.job_namespace }}}} get {V1_PLURALS}`, then read its "
                "pods' logs (kept under cleanPodPolicy None) and the NCCL traces in its output directory.",
            )
        )
        rules.append(
            Alert(
                "TrainingJobStarved",
                q.v1_jobs_without_pods(ns),
                limits.pending_minutes,
                "warning",
                f"Training job {job} has had no pod for {limits.pending_minutes} minutes.",
                "The operator has created none of its pods: a pod over the namespace's ResourceQuota is refused, "
                "so none waits as Pending; under Volcano the operator creates none until the job's PodGroup leaves "
                "Pending in its queue. Read `kubectl -n {{ $labels.namespace }} get events` (exceeded quota), "
                "`kubectl -n {{ $labels.namespace }} describe resourcequota` and `kubectl -n {{ $labels.namespace }} "
                "get podgroups`; the job starts once other jobs give their share back, or with a smaller size.",
                "monitoring.alerts.pendingMinutes",
            )
        )
    if scope.trainer_v2:
        failed_now, failed_before = q.trainjob_failed(ns), q.trainjob_failed(ns, f" offset {FAILED_WINDOW}")
        rules.append(
            Alert(
                "TrainJobFailed",
                # Held for a window after the failure, not for as long as the failed Job is kept; the
                # TrainJob's own Failed condition covers a deadline, which fails no Job.
                f"{failed_now} unless on (namespace, {JOB_LABEL}) {failed_before}"
                f" or {q.newly_failed(ns, FAILED_WINDOW, q.TRAINJOB_KIND)}",
                5,
                "critical",
                f"TrainJob {job} failed in namespace {{{{ $labels.namespace }}}}.",
                "A node Job of the TrainJob stayed failed after the JobSet's restarts were used up, or its "
                f"deadline passed. Read `kubectl -n {{{{ $labels.namespace }}}} describe trainjob {job}` and its pods' "
                "logs; fix the cause, then remove and add the job again (it resumes from its last checkpoint).",
            )
        )
        rules.append(
            Alert(
                "TrainJobStopped",
                q.trainjob_stopped(ns),
                5,
                "warning",
                f"TrainJob {job} stopped before it completed, in namespace {{{{ $labels.namespace }}}}.",
                "The Jobs of the TrainJob's JobSet are gone although none completed or failed: Trainer v2 deletes "
                "the JobSet when spec.activeDeadlineSeconds passes, and so does deleting the TrainJob. Read "
                f"`kubectl -n {{{{ $labels.namespace }}}} describe trainjob {job}` (reason DeadlineExceeded); the job resumes from its last "
                "checkpoint when it is added again with a longer deadline.",
            )
        )
        rules.append(
            Alert(
                "TrainJobNotAdmitted",
                q.trainjobs_waiting_for_admission(ns),
                limits.pending_minutes,
                "warning",
                f"TrainJob {job} has waited {limits.pending_minutes} minutes in queue {{{{ $labels.queue }}}}.",
                "Kueue has not admitted it: its queue's quota is in use by other jobs, or the job asks for more "
                "than the quota or a topology domain holds. Read `kubectl -n {{ $labels.namespace }} get "
                "workloads` (the Workload's QuotaReserved and Admitted conditions say why) and "
                "`ack-jobs queue`.",
                "monitoring.alerts.pendingMinutes",
            )
        )
    rules.append(
        Alert(
            "TrainingPodRestarting",
            q.restarts(ns, limits.restarts_per_hour),
            5,
            "warning",
            "Training job {{ $labels.training_job }}{{ $labels.pod }} restarted {{ $value | humanize }} times in an "
            "hour.",
            "Each restart resumes from the last checkpoint and loses the steps since. Look at "
            "`kubectl -n {{ $labels.namespace }} get events` and the pods' exit codes (OOMKilled, evicted, preempted) and the previous "
            "container's log (`kubectl logs --previous`).",
            "monitoring.alerts.restartsPerHour",
        )
    )
    pending = (
        f"{q.select(kube.POD_PHASE, ns, q.PENDING_PHASE)} == 1 and on (namespace, pod, uid) "
        f"{q.select(kube.POD_CONTAINER_INFO, ns, q.TRAINING_CONTAINERS)}"
    )
    rules.append(
        Alert(
            "TrainingPodPending",
            f"max by (namespace, pod) ({pending})",
            limits.pending_minutes,
            "warning",
            f"Training pod {{{{ $labels.pod }}}} has waited {limits.pending_minutes} minutes for a node.",
            "Its job cannot start (a gang waits for all of its pods). Read the pod's events "
            "(`kubectl -n {{ $labels.namespace }} describe pod {{ $labels.pod }}`): FailedScheduling says which resource no node "
            "has, and the autoscaler's events whether it can add one (no stock of the instance type in the "
            "vSwitches' zones, the pool's max size, an account quota).",
            "monitoring.alerts.pendingMinutes",
        )
    )
    window = f"{limits.no_progress_minutes}m"
    step = q.select(trainer.STEP.name, ns)
    rules.append(
        Alert(
            "TrainingNoProgress",
            # The offset term keeps a job that started less than a window ago (loading data, compiling)
            # quiet; the loop term, a run that is saving its final checkpoint or has ended (the gauge
            # goes to 0 after the last step, and its series ends with the pod). A process wedged
            # holding the GIL stops answering scrapes too: its running pod's target is down instead.
            f"changes({step}[{window}]) == 0 and {step} offset {window} "
            f"and on (namespace, pod) {q.select(trainer.TRAINING_LOOP.name, ns)} == 1"
            f" or {q.silent_in_step_loop(ns, window)}",
            1,
            "critical",
            f"Training job {job} made no optimizer step in {window}.",
            f"{job} is stuck: a hung collective, a stalled data read, a dead peer, or a process that no longer "
            "answers at all (its metrics target is down while its pod runs). Its "
            "GPUs are paid for meanwhile. Check the rank 0 log, the GPU utilisation panel, and the NCCL "
            "flight-recorder dumps (nccl_trace_rank_*) in its output directory; deleting the pods restarts the job "
            "from its last checkpoint.",
            "monitoring.alerts.noProgressMinutes",
        )
    )
    every = q.select(trainer.CHECKPOINT_EVERY.name, ns)
    rules.append(
        Alert(
            "TrainingCheckpointStale",
            f"({step} - {q.select(trainer.CHECKPOINT_STEP.name, ns)}) > {limits.checkpoint_intervals} * {every} "
            f"and {every} > 0",
            10,
            "warning",
            f"Training job {job} has not committed a checkpoint in {limits.checkpoint_intervals} intervals.",
            f"{job} is {{{{ $value }}}} steps past its last committed checkpoint: a preemption now loses them. "
            "Check the rank 0 log for checkpoint errors and the free space of the output volume.",
            "monitoring.alerts.checkpointIntervals",
        )
    )
    rules.append(_bandwidth_alert(ns, limits.min_bus_bandwidth_of_baseline, limits.min_bus_bandwidth_gbps))
    if limits.min_mfu is not None:
        mfu = q.select(trainer.MFU.name, ns)
        rules.append(
            Alert(
                "TrainingMfuLow",
                f"avg_over_time({mfu}[{MFU_WINDOW}]) < {limits.min_mfu} and {mfu} > 0",
                15,
                "warning",
                f"Training job {job} uses {{{{ $value | humanizePercentage }}}} of its GPUs' FLOPs.",
                f"Model FLOPs utilisation has stayed below {limits.min_mfu:.0%} for {MFU_WINDOW}: the GPUs wait on "
                "data loading, communication or small batches. Compare the per-rank step times for a straggler "
                "and the GPU utilisation panel.",
                "monitoring.alerts.minMfu",
            )
        )
    if scope.monitoring.node_health.enabled:
        rules.append(_gpu_node_alert(scope))
        rules.append(_node_check_alert())
    if (ksm := scope.monitoring.exporters.kube_state_metrics_job) is not None:
        rules = [replace(rule, expr=q.kube_state_metrics_only(rule.expr, ksm)) for rule in rules]
    return rules


def _gpu_node_alert(scope: MonitoringScope) -> Alert:
    """A GPU whose DCGM series take its node out, as the node health controller decides
    (:mod:`.node_health`): the controller cordons the node, the alert calls a person to repair it."""
    node, gpu = "{{ $labels.Hostname }}", "{{ $labels.gpu }}"
    health = scope.monitoring.node_health
    if health.exporter_namespace is None:
        raise ValueError("monitoring.nodeHealth.exporterNamespace is required for the GPUNodeUnhealthy alert")
    return Alert(
        "GPUNodeUnhealthy",
        unhealthy_gpus(health_rules(health), health.exporter_namespace),
        # The XID gauge holds the last XID until the next one or a reboot: two scrapes are enough.
        1,
        "critical",
        f"GPU {gpu} of node {node} is failing ({{{{ $labels.{SIGNAL_LABEL} }}}} {{{{ $value }}}}).",
        f"DCGM reports a fault after which the GPU needs a reset, the node a reboot or the board service (for an XID, "
        f"the value is the XID: NVIDIA's Xid catalogue says which). The node health controller cordons {node} and "
        f"labels it gpu-health=failed unless its share of the pool is spent. Drain it (`kubectl drain {node} "
        "--ignore-daemonsets`), reboot or repair it (ACK's node auto-repair, or a ticket for the instance), then "
        f"`kubectl uncordon {node}` and `kubectl label node {node} {HEALTH_LABEL}-`.",
        "monitoring.nodeHealth.cordonXids",
    )


def _node_check_alert() -> Alert:
    """A pod whose pre-job node check failed. Never a cordon by itself: any team's job can name an init
    container ``nodecheck`` and exit 69, so a person (or a DCGM signal) decides whether the node is bad."""
    node, pod = "{{ $labels.node }}", "{{ $labels.namespace }}/{{ $labels.pod }}"
    return Alert(
        "GPUNodeCheckFailed",
        FAILED_NODE_CHECKS,
        1,
        "warning",
        f"Pod {pod} failed its pre-job node check on node {node}.",
        f"The pod's nodecheck init container measured its GPUs' all-reduce below its job's baseline (exit 69); "
        f"`ack-jobs why` gives the figures. The report is the pod's own, so the node is not cordoned for it: "
        f"if other jobs' checks fail on {node} too, or its DCGM series show a fault, `kubectl cordon {node}` "
        f"and delete the pod so that it is placed on another node; if only this job's fail, check its "
        "`jobs[].nodeCheck.baselineGbps`.",
    )


def job_state_metrics(scope: MonitoringScope) -> dict[str, object]:
    """What kube-state-metrics must be given for the alerts on a job's conditions
    (``TrainingJobFailed``, ``TrainingJobStarved``, ``TrainJobFailed``, ``TrainJobNotAdmitted``): its
    custom resource state configuration for the kinds the stack runs, and the RBAC rules it needs."""
    v1_kinds = {kind.kind: kind.plural for kind in KINDS.values()} if scope.v1_operator else {}
    config = kube.job_state_metrics_config(v1_kinds, scope.trainer_v2)
    return {"customResourceState": config, "rbacRules": kube.job_state_metrics_rules(config)}

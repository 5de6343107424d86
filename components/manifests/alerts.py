"""The platform's alerts: one table, rendered as a PrometheusRule (prometheus-operator), as
the arguments of ARMS alert rules, and as a plain rules file for ``promtool``.

Each alert says what broke and what to look at first, in the style of the kube-prometheus
mixins: ``expr``, ``for``, ``labels.severity``, ``annotations.summary`` and ``description``.
Metric names come from ``trainer/metric_names.py`` and :mod:`.kube_metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from trainer import metric_names as trainer

from ..config import MonitoringScope
from . import kube_metrics as kube
from .base import MANAGED_BY, Manifest
from .scraping import JOB_LABEL, MONITORING_API, POOL_SERIES_LABEL
from .trainjob import TRAINER_NODE

RULE_GROUP = "ack-training-platform.training"
RULE_NAME = "ack-training-platform-training"
V1_CONTAINER = "pytorch"
"""The trainer container of a PyTorchJob (the v1 operator's webhook requires the name)."""
V1_CONTAINER_MATCH = f'container="{V1_CONTAINER}"'
FAILED_PHASE = 'phase="Failed"'
PENDING_PHASE = 'phase="Pending"'
CONDITION_TRUE = 'condition="true"'
TRAINING_CONTAINERS = f'container=~"{V1_CONTAINER}|{TRAINER_NODE}"'
FAILED_WINDOW = "10m"
"""How long a failed v1 job keeps its alert: the operator counts failures, and an increase over
this window holds the alert long enough to be delivered."""
BENCHMARK_WINDOW = "10m"
"""How long a finished netbench job's bandwidth stays under watch."""
BASELINE_WINDOW = "7d"
"""How far back a pool's baseline reaches: the netbench jobs of the past week (within the 15 days that
ARMS and prometheus-operator keep by default)."""
STOPPED_WINDOW = "15m"
"""How long a TrainJob that stopped early keeps its alert."""
MFU_WINDOW = "30m"
"""MFU swings with evaluation and checkpoint steps; half an hour's mean does not."""


@dataclass(frozen=True)
class Alert:
    """One alerting rule.

    Args:
        name: the alert name.
        expr: PromQL; a series in its result is a firing alert.
        for_minutes: how long the condition must hold.
        severity: ``critical`` (act now) or ``warning`` (act today).
        summary: one line, with label templates.
        description: what happened and what to do first.
        threshold_key: the stack key that sets its threshold, if one does.
    """

    name: str
    expr: str
    for_minutes: int
    severity: Literal["critical", "warning"]
    summary: str
    description: str
    threshold_key: str | None = None


def _in(namespaces: tuple[str, ...], label: str = "namespace") -> str:
    """A matcher of ``label`` for any of ``namespaces``."""
    if len(namespaces) == 1:
        return f'{label}="{namespaces[0]}"'
    return f'{label}=~"{"|".join(namespaces)}"'


def _sel(metric: str, namespaces: tuple[str, ...], *matchers: str) -> str:
    """``metric`` in any of ``namespaces``, with more label ``matchers`` such as ``'condition="true"'``."""
    joined = ",".join([_in(namespaces), *matchers])
    return f"{metric}{{{joined}}}"


def _trainjob_failed(namespace: tuple[str, ...], offset: str = "") -> str:
    """TrainJobs (by ``JOB_LABEL``) with a failed node Job, as of ``offset`` ago."""
    failed = (
        _sel(kube.JOB_FAILED, namespace, CONDITION_TRUE) + f"{offset} * on (namespace, job_name) group_left "
        f'(owner_name) {kube.JOB_OWNER}{{owner_kind="JobSet"}}{offset}'
    )
    return f'max by (namespace, {JOB_LABEL}) (label_replace({failed}, "{JOB_LABEL}", "$1", "owner_name", "(.+)")) > 0'


def _trainjob_stopped(namespace: tuple[str, ...]) -> str:
    """TrainJobs whose node Jobs were there within ``STOPPED_WINDOW`` and are gone now, none of
    them having completed or failed: what Trainer v2.3.0 leaves when ``activeDeadlineSeconds``
    passes (``pkg/controller/trainjob_controller.go`` ``reconcileDeadline`` marks the TrainJob
    failed and deletes its JobSet), which no Job condition shows."""
    owners = _sel(kube.JOB_OWNER, namespace, 'owner_kind="JobSet"')

    def by_trainjob(expr: str) -> str:
        return f"max by (namespace, owner_name) ({expr})"

    def ended(condition: str) -> str:
        return by_trainjob(
            f"(last_over_time({_sel(condition, namespace, CONDITION_TRUE)}[{STOPPED_WINDOW}]) == 1) * on "
            f"(namespace, job_name) group_left (owner_name) last_over_time({owners}[{STOPPED_WINDOW}])"
        )

    # A JobSet restart deletes and recreates its Jobs in about a minute: ``for`` outlasts that gap.
    gone = (
        f"{by_trainjob(f'last_over_time({owners}[{STOPPED_WINDOW}])')} unless on (namespace, owner_name) "
        f"{by_trainjob(owners)} unless on (namespace, owner_name) {ended(kube.JOB_COMPLETE)} "
        f"unless on (namespace, owner_name) {ended(kube.JOB_FAILED)}"
    )
    return f'max by (namespace, {JOB_LABEL}) (label_replace({gone}, "{JOB_LABEL}", "$1", "owner_name", "(.+)"))'


def _bandwidth_alert(namespace: tuple[str, ...], ratio: float, floor_gbps: float | None) -> Alert:
    """A netbench job whose best all-reduce bus bandwidth is under ``ratio`` of its pool's baseline, or,
    while the pool has none, under the fixed ``floor_gbps`` (if set).

    The baseline is the best any netbench job on the same pool (the ``pool`` label the PodMonitor copies
    from the pod) served in the ``BASELINE_WINDOW`` before the job's own ``BENCHMARK_WINDOW``: the offset
    keeps a job from being its own baseline.
    """
    bandwidth = _sel(trainer.ALLREDUCE_BUS_BANDWIDTH.name, namespace)
    best = f"max by (namespace, {JOB_LABEL}, {POOL_SERIES_LABEL}) (max_over_time({bandwidth}[{BENCHMARK_WINDOW}]))"
    baseline = f"max by ({POOL_SERIES_LABEL}) (max_over_time({bandwidth}[{BASELINE_WINDOW}] offset {BENCHMARK_WINDOW}))"
    expr = f"{best} < on ({POOL_SERIES_LABEL}) group_left () ({ratio} * {baseline})"
    against = f"{ratio:.0%} of the best its pool {{{{ $labels.{POOL_SERIES_LABEL} }}}} measured in {BASELINE_WINDOW}"
    if floor_gbps is not None:
        expr = f"({expr}) or ({best} < {round(floor_gbps * 1e9)} unless on ({POOL_SERIES_LABEL}) {baseline})"
        against += f" (or, before the pool has a baseline, {floor_gbps} GB/s)"
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


def _restarts(namespace: tuple[str, ...], threshold: int) -> str:
    """Training pods or TrainJobs restarted ``threshold`` times or more in an hour, counting each
    way a backend restarts them:

    - v1 ``OnFailure``/``Always``: the kubelet restarts the container in place
      (``kube_pod_container_status_restarts_total``);
    - v1 ``ExitCode``/``Never``: the operator deletes the failed pod and creates it again under the
      same name (kubeflow/trainer v1.9.4 ``pkg/controller.v1/common/pod.go``), a new uid each time,
      so the incarnations of a name seen in the hour, less one, are its restarts;
    - v2: the JobSet deletes and recreates every node Job under the same name
      (``failurePolicy.maxRestarts``; its pods run with ``restartPolicy: Never`` and
      ``backoffLimit: 0``), which changes ``kube_job_created``.

    The v1 operator's ``training_operator_jobs_restarted_total`` counts these too, but only per
    namespace.
    """
    in_place = f"sum by (namespace, pod) (increase({_sel(kube.POD_RESTARTS, namespace, TRAINING_CONTAINERS)}[1h]))"
    incarnations = (
        f"count by (namespace, pod) (last_over_time({_sel(kube.POD_CREATED, namespace)}[1h]) and on (namespace, pod) "
        f"{_sel(kube.POD_CONTAINER_INFO, namespace, V1_CONTAINER_MATCH)})"
    )
    recreated_jobs = (
        f"changes({_sel(kube.JOB_CREATED, namespace)}[1h]) * on (namespace, job_name) group_left (owner_name) "
        f'{kube.JOB_OWNER}{{owner_kind="JobSet"}}'
    )
    trainjobs = (
        f'max by (namespace, {JOB_LABEL}) (label_replace({recreated_jobs}, "{JOB_LABEL}", "$1", "owner_name", "(.+)"))'
    )
    return f"({in_place} + on (namespace, pod) ({incarnations} - 1)) >= {threshold} or {trainjobs} >= {threshold}"


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
        failed_v1 = f"{kube.OPERATOR_JOBS_FAILED}{{{_in(ns, 'job_namespace')}}}"
        rules.append(
            Alert(
                "TrainingJobFailed",
                # The operator creates a namespace's counter at its first failure, already at 1,
                # which increase() cannot see: a series that was not there a window ago counts too.
                # It counts only failures under restartPolicy Never; a pod that a non-retryable exit
                # code (ExitCode) or the pod's own policy leaves Failed is the other sign.
                f"increase({failed_v1}[{FAILED_WINDOW}]) > 0 or ({failed_v1} unless {failed_v1} offset {FAILED_WINDOW})"
                f" or max by (namespace, pod) ({_sel(kube.POD_PHASE, ns, FAILED_PHASE)} == 1"
                f" and on (namespace, pod, uid) {_sel(kube.POD_CONTAINER_INFO, ns, V1_CONTAINER_MATCH)})",
                3,
                "critical",
                "A PyTorchJob failed in namespace {{ $labels.namespace }}{{ $labels.job_namespace }}.",
                "The Training Operator marked a job as failed, or one of its pods ({{ $labels.pod }}) ended with a "
                "non-retryable exit code. Find it with "
                "`kubectl -n {{ $labels.namespace }}{{ $labels.job_namespace }} get pytorchjobs`, then read its pods' logs (finished pods are kept) and the NCCL "
                "traces in its output directory.",
            )
        )
    if scope.trainer_v2:
        failed_now, failed_before = _trainjob_failed(ns), _trainjob_failed(ns, f" offset {FAILED_WINDOW}")
        rules.append(
            Alert(
                "TrainJobFailed",
                # Held for a window after the failure, not for as long as the failed Job is kept.
                f"{failed_now} unless on (namespace, {JOB_LABEL}) {failed_before}",
                5,
                "critical",
                f"TrainJob {job} failed in namespace {{{{ $labels.namespace }}}}.",
                "A node Job of the TrainJob stayed failed after the JobSet's restarts were used up. Read "
                f"`kubectl -n {{{{ $labels.namespace }}}} describe trainjob {job}` and its pods' logs; fix the cause, then remove and "
                "add the job again (it resumes from its last checkpoint).",
            )
        )
        rules.append(
            Alert(
                "TrainJobStopped",
                _trainjob_stopped(ns),
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
            "TrainingPodRestarting",
            _restarts(ns, limits.restarts_per_hour),
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
        f"{_sel(kube.POD_PHASE, ns, PENDING_PHASE)} == 1 and on (namespace, pod, uid) "
        f"{_sel(kube.POD_CONTAINER_INFO, ns, TRAINING_CONTAINERS)}"
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
    step = _sel(trainer.STEP.name, ns)
    rules.append(
        Alert(
            "TrainingNoProgress",
            # The offset term keeps a job that started less than a window ago (loading data, compiling)
            # quiet; the last term, a run that is saving its final checkpoint or has ended (the gauge
            # goes to 0 after the last step, and its series ends with the pod).
            f"changes({step}[{window}]) == 0 and {step} offset {window} "
            f"and on (namespace, pod) {_sel(trainer.TRAINING_LOOP.name, ns)} == 1",
            1,
            "critical",
            f"Training job {job} made no optimizer step in {window}.",
            f"{job} is stuck: a hung collective, a stalled data read or a dead peer. Its "
            "GPUs are paid for meanwhile. Check the rank 0 log, the GPU utilisation panel, and the NCCL "
            "flight-recorder dumps (nccl_trace_rank_*) in its output directory; deleting the pods restarts the job "
            "from its last checkpoint.",
            "monitoring.alerts.noProgressMinutes",
        )
    )
    every = _sel(trainer.CHECKPOINT_EVERY.name, ns)
    rules.append(
        Alert(
            "TrainingCheckpointStale",
            f"({step} - {_sel(trainer.CHECKPOINT_STEP.name, ns)}) > {limits.checkpoint_intervals} * {every} "
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
        mfu = _sel(trainer.MFU.name, ns)
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
    return rules


def rule_group(rules: list[Alert]) -> Manifest:
    """``rules`` as one Prometheus rule group, as both a rules file and a PrometheusRule hold it."""
    return {
        "name": RULE_GROUP,
        "rules": [
            {
                "alert": rule.name,
                "expr": rule.expr,
                "for": f"{rule.for_minutes}m",
                "labels": {"severity": rule.severity},
                "annotations": {"summary": rule.summary, "description": rule.description},
            }
            for rule in rules
        ],
    }


def prometheus_rule(rules: list[Alert], namespace: str) -> Manifest:
    """The PrometheusRule (``monitoring.coreos.com/v1``) holding ``rules``.

    Args:
        rules: the alerts (:func:`alerts`).
        namespace: where the object lives (the training namespace).

    Returns:
        A complete PrometheusRule object.
    """
    return {
        "apiVersion": MONITORING_API,
        "kind": "PrometheusRule",
        "metadata": {"name": RULE_NAME, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "spec": {"groups": [rule_group(rules)]},
    }


def arms_alert_rule(rule: Alert) -> dict[str, object]:
    """Keyword arguments of ``alicloud.arms.PrometheusAlertRule`` (pulumi-alicloud 4.0.0) for
    ``rule``, less the cluster id: ARMS evaluates alert rules it stores itself (API
    ``CreatePrometheusAlertRule``), with the duration in minutes and the summary as the
    notification's message."""
    return {
        "prometheus_alert_rule_name": rule.name,
        "expression": rule.expr,
        "duration": str(rule.for_minutes),
        "message": rule.summary,
        "labels": [{"name": "severity", "value": rule.severity}],
        "annotations": [
            {"name": "summary", "value": rule.summary},
            {"name": "description", "value": rule.description},
        ],
        "notify_type": "ALERT_MANAGER",
    }

"""What a job's status means, from the objects the API server returns: pure functions.

Phases follow the conditions each controller writes:

- v1 PyTorchJob (Training Operator v1.9.4): condition types ``Created``, ``Running``,
  ``Restarting``, ``Succeeded``, ``Failed`` and ``Suspended``
  (``pkg/apis/kubeflow.org/v1/common_types.go``), with reasons ``PyTorchJob`` + ``Created``,
  ``Running``, ``Restarting``, ``Succeeded``, ``Failed``, ``Suspended`` or ``Resumed``
  (``pkg/util/status.go`` ``NewReason``; ``pkg/controller.v1/pytorch/pytorchjob_controller.go``,
  ``pkg/controller.v1/common/job.go``). ``Running`` and ``Restarting`` replace each other, a
  finished job's ``Running`` turns ``False``, and nothing changes once ``Failed`` is set
  (``setCondition``, ``filterOutCondition``).
- v2 TrainJob (Trainer v2.3.0): ``Suspended``, ``Complete`` and ``Failed``
  (``pkg/apis/trainer/v1alpha1/trainjob_types.go``); ``Complete`` and ``Failed`` are the
  JobSet's conditions renamed (``pkg/runtime/framework/plugins/jobset/jobset.go`` ``Status``),
  ``Failed`` with reason ``DeadlineExceeded`` is Trainer's own. There is no ``Running``
  condition: a TrainJob runs while its child Jobs report ready pods (``jobsStatus``).
  ``jobsStatus`` counts child Jobs per replicated job, not pods: Trainer v2.3.0 runs one Job per
  replicated job (``pkg/runtime/framework/plugins/jobset/builder.go`` sets ``replicas: 1``) with
  ``numNodes`` pods (``jobset.go`` ``SyncParallelCount``), and a Job counts as ready once all its
  pods are (``trainjob_types.go`` ``JobStatus``). So pods are counted from the pods themselves,
  which JobSet v0.12.0 labels with their replicated job and its restart attempt
  (``pkg/controllers/jobset_controller.go`` ``labelAndAnnotateObject``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from trainer.telemetry.metric_names import LOSS, MFU, SAMPLES_PER_SECOND, STEP

from ..manifests.jobs.names import KINDS

PYTORCHJOB = "PyTorchJob"
V1_KINDS = {kind.kind: kind for kind in KINDS.values()}
"""The Training Operator's kinds, by kind name: where each keeps its replica specs, its container."""
TRAINJOB = "TrainJob"
V1_PRECEDENCE = ("Failed", "Succeeded", "Suspended", "Restarting", "Running", "Created")
"""The v1 condition that names the phase when several are ``True``: a finished job may
still carry ``Created``, and a suspended one its last ``Running``."""
V2_PHASES = (("Failed", "Failed"), ("Complete", "Succeeded"), ("Suspended", "Suspended"))
"""TrainJob condition type → phase, first ``True`` one wins."""
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
V1_LABEL = "training.kubeflow.org/"
V1_JOB_LABEL = f"{V1_LABEL}job-name"
V1_TYPE_LABEL = f"{V1_LABEL}replica-type"
V1_INDEX_LABEL = f"{V1_LABEL}replica-index"
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
"""JobSet's count of whole-JobSet restarts when the pod was created."""
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
"""The labels naming a job's LocalQueue and WorkloadPriorityClass (kueue v0.19.2
``pkg/controller/constants/constants.go`` ``QueueLabel``, ``WorkloadPriorityClassLabel``)."""
POD_PHASES = ("Running", "Pending", "Succeeded", "Failed")
SHOWN_METRICS = {STEP.name: "step", LOSS.name: "loss", SAMPLES_PER_SECOND.name: "samples/s", MFU.name: "MFU"}


@dataclass(frozen=True)
class JobSummary:
    """One job as ``list`` and ``get`` show it.

    Args:
        name: the job's name.
        kind: ``PyTorchJob`` or ``TrainJob``.
        phase: the phase its conditions give (``Pending`` before the controller wrote any).
        reason: the deciding condition's reason ('' when none).
        message: the deciding condition's message.
        replicas: per replica type (v1) or replicated job (v2), e.g. ``1/2 active``.
        restarts: restarts of the job: containers restarted in place, and for v2 the JobSet's
            restarts of every node.
        age_s: seconds since the job was created.
        conditions: every condition as ``(type, status, reason, message)``.
    """

    name: str
    kind: str
    phase: str
    reason: str
    message: str
    replicas: dict[str, str]
    restarts: int
    age_s: float
    conditions: tuple[tuple[str, str, str, str], ...] = field(default=())

    @property
    def replicas_text(self) -> str:
        """The replicas on one line, as ``list`` and ``get`` print them."""
        return "; ".join(f"{kind} {state}" for kind, state in self.replicas.items()) or "-"


def true_condition(conditions: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    """The condition of type ``kind`` whose status is ``True``, else ``None``."""
    return next((c for c in conditions if c.get("type") == kind and c.get("status") == "True"), None)


def job_phase(job: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """The phase of a PyTorchJob or TrainJob and the condition that decided it.

    Args:
        job: the job object as the API server returns it (camelCase keys).

    Returns:
        ``(phase, condition)``; the phase is one of ``Pending``, ``Created``, ``Running``,
        ``Restarting``, ``Succeeded``, ``Failed``, ``Suspended``; the condition is ``None``
        when no condition decided it.
    """
    status = job.get("status") or {}
    conditions = status.get("conditions") or []
    if job.get("kind") == TRAINJOB:
        for kind, phase in V2_PHASES:
            if (condition := true_condition(conditions, kind)) is not None:
                return phase, condition
        ready = sum(child.get("ready") or 0 for child in status.get("jobsStatus") or [])
        return ("Running" if ready else "Created"), None
    for kind in V1_PRECEDENCE:
        if (condition := true_condition(conditions, kind)) is not None:
            return kind, condition
    return "Pending", None


def replica_counts(job: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, str]:
    """Pods per replica type (v1) or replicated job (v2) and their states.

    Args:
        job: the job object.
        pods: the job's pods; a v2 job's are counted from them, its status counting Jobs.

    Returns:
        ``{"Master": "1/1 active", "Worker": "2/3 active, 1 failed"}``-style strings (v1), or
        ``{"node": "4/4 running"}`` (v2); with no pods, a v2 job's child Jobs
        (``{"node": "1/1 Jobs ready"}``).
    """
    status = job.get("status") or {}
    counts: dict[str, str] = {}
    if job.get("kind") == TRAINJOB:
        if not pods:
            for child in status.get("jobsStatus") or []:
                counts[child["name"]] = _states(
                    child, 1, ("ready", "active", "succeeded", "failed", "suspended"), "Jobs "
                )
            return counts
        wanted = (job.get("spec") or {}).get("trainer", {}).get("numNodes", 1)
        by_replicated_job: dict[str, dict[str, int]] = {}
        for pod in pods:
            name = ((pod.get("metadata") or {}).get("labels") or {}).get(REPLICATED_JOB_LABEL, "node")
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            phases = by_replicated_job.setdefault(name, {})
            phases[phase] = phases.get(phase, 0) + 1
        for name, phases in by_replicated_job.items():
            counts[name] = _states(
                {p.lower(): n for p, n in phases.items()}, wanted, tuple(p.lower() for p in POD_PHASES)
            )
        return counts
    replica_status = status.get("replicaStatuses") or {}
    for kind, spec in v1_replica_specs(job).items():
        counts[kind] = _states(
            replica_status.get(kind) or {}, spec.get("replicas", 1), ("active", "succeeded", "failed")
        )
    return counts


def _states(counts: dict[str, Any], wanted: int, keys: tuple[str, ...], unit: str = "") -> str:
    first, *rest = keys
    parts = [f"{counts.get(first) or 0}/{wanted} {unit}{first}"]
    parts += [f"{counts[key]} {key}" for key in rest if counts.get(key)]
    return ", ".join(parts)


def restarts(pods: list[dict[str, Any]]) -> int:
    """Container restarts in the job's pods (``restartCount``), plus the JobSet's restarts of a
    v2 job (the highest ``restart-attempt`` label of its pods: each restart recreates every
    node's pod, so none of them has restarted in place).

    Pods the v1 operator replaced are not counted: it rebuilds ``replicaStatuses`` on every
    reconcile from the pods that exist then (v1.9.4 ``pkg/controller.v1/common/pod.go``
    ``ReconcilePods``: ``initializeReplicaStatuses``, then ``UpdateJobReplicaStatuses`` of
    ``pkg/core/status.go`` per pod), so its ``failed`` counts pods in phase ``Failed`` now,
    which ``replicas`` shows, not pods replaced so far.

    Args:
        pods: the job's pods.

    Returns:
        The count, 0 for a job whose containers never restarted.
    """
    in_place = sum(
        status.get("restartCount") or 0
        for pod in pods
        for status in (pod.get("status") or {}).get("containerStatuses") or []
    )
    attempts = [
        int(attempt)
        for pod in pods
        if (attempt := ((pod.get("metadata") or {}).get("labels") or {}).get(RESTART_ATTEMPT_LABEL, "")).isdigit()
    ]
    return in_place + max(attempts, default=0)


def parse_time(value: str) -> datetime:
    """An RFC 3339 timestamp as the API server writes it (``2026-11-22T06:00:00Z``)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def summarize(job: dict[str, Any], pods: list[dict[str, Any]], now: datetime) -> JobSummary:
    """Everything ``list`` and ``get`` show about one job.

    Args:
        job: the job object (camelCase keys, ``kind`` set).
        pods: the job's pods (may be empty).
        now: the current time, timezone-aware.

    Returns:
        The job's summary.
    """
    phase, condition = job_phase(job)
    metadata = job.get("metadata") or {}
    created = metadata.get("creationTimestamp")
    conditions = tuple(
        (c.get("type", ""), c.get("status", ""), c.get("reason") or "", c.get("message") or "")
        for c in (job.get("status") or {}).get("conditions") or []
    )
    return JobSummary(
        name=metadata.get("name", ""),
        kind=job.get("kind", ""),
        phase=phase,
        reason=(condition or {}).get("reason") or "",
        message=(condition or {}).get("message") or "",
        replicas=replica_counts(job, pods),
        restarts=restarts(pods),
        age_s=(now - parse_time(created)).total_seconds() if created else 0.0,
        conditions=conditions,
    )


def format_age(seconds: float) -> str:
    """An age as ``kubectl`` shows one: ``42s``, ``5m``, ``3h12m``, ``2d4h``."""
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60}m" if s % 3600 // 60 else f"{s // 3600}h"
    return f"{s // 86400}d{s % 86400 // 3600}h" if s % 86400 // 3600 else f"{s // 86400}d"


def last_metrics(text: str) -> dict[str, float]:
    """The training progress rank 0 serves on ``/metrics``.

    Args:
        text: a Prometheus text exposition.

    Returns:
        Display name → value for the step, loss, samples/s and MFU present in ``text``.
    """
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in SHOWN_METRICS:
                found[SHOWN_METRICS[sample.name]] = sample.value
    return found


def job_queue(job: dict[str, Any]) -> str:
    """The queue a job waits in: a PyTorchJob's Volcano queue, a TrainJob's Kueue LocalQueue."""
    if is_v1(job):
        return _scheduling_policy(job).get("queue") or ""
    return ((job.get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL, "")


def job_priority(job: dict[str, Any]) -> str:
    """A PyTorchJob's PriorityClass, a TrainJob's Kueue WorkloadPriorityClass."""
    if is_v1(job):
        return _scheduling_policy(job).get("priorityClass") or ""
    return ((job.get("metadata") or {}).get("labels") or {}).get(KUEUE_PRIORITY_LABEL, "")


def is_v1(job: dict[str, Any]) -> bool:
    """A Training Operator job (any framework), not a TrainJob."""
    return job.get("kind") in V1_KINDS


def v1_replica_specs(job: dict[str, Any]) -> dict[str, Any]:
    """A v1 job's replica type → spec, whichever kind's field holds them."""
    return (job.get("spec") or {}).get(V1_KINDS[job["kind"]].specs_key) or {}


def _scheduling_policy(job: dict[str, Any]) -> dict[str, Any]:
    return ((job.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy") or {}


def pod_nodes(pods: list[dict[str, Any]]) -> list[str]:
    """The nodes the pods were scheduled to, each once."""
    return sorted({node for pod in pods if (node := (pod.get("spec") or {}).get("nodeName"))})

"""What the queues say, from the objects Volcano and Kueue write: pure functions.

- Volcano v1.12.1 (``volcano.sh/apis`` v1.12.1 ``pkg/apis/scheduling/v1beta1/types.go``): a
  Queue (cluster-scoped) has ``status.state`` (``Open``, ``Closed``, ``Closing``,
  ``Unknown``) and counts of its PodGroups by phase: ``pending``, ``inqueue``, ``running``,
  ``unknown``, ``completed``. A PodGroup has ``spec.queue``, ``status.phase`` (``Pending``,
  ``Inqueue``, ``Running``, ``Unknown``, ``Completed``) and conditions whose type
  ``Unschedulable`` carries the scheduler's message. The v1 operator names a job's PodGroup
  after the job (Training Operator v1.9.4 ``pkg/controller.v1/common/scheduling.go``
  ``SyncPodGroup``).
- Kueue v0.19.2 (``apis/kueue/v1beta2``): a LocalQueue has ``spec.clusterQueue`` and
  ``status.pendingWorkloads``/``admittedWorkloads``; a ClusterQueue the same counts,
  ``status.flavorsUsage[].resources[].total`` against ``spec.resourceGroups[].flavors[]
  .resources[].nominalQuota``; a Workload ``spec.queueName``, ``spec.active`` and the
  conditions ``QuotaReserved`` and ``Admitted``, whose message says why it waits
  (``workload_types.go``).
"""

from __future__ import annotations

from typing import Any

VOLCANO_COUNTS = ("pending", "inqueue", "running")
WAITING_PODGROUP_PHASES = ("Pending", "Inqueue", "Unknown")
"""PodGroup phases before all of a job's pods run."""


def _status(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("status") or {}


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in _status(obj).get("conditions") or [] if c.get("type") == kind), None)


def volcano_queue_row(queue: dict[str, Any]) -> tuple[str, ...]:
    """NAME, STATE and the pending, inqueue and running PodGroup counts of a Volcano Queue."""
    status = _status(queue)
    counts = tuple(str(status.get(key) or 0) for key in VOLCANO_COUNTS)
    return (queue["metadata"]["name"], status.get("state") or "Unknown", *counts)


def podgroup_wait(podgroup: dict[str, Any]) -> tuple[str, str, str] | None:
    """``(job, phase, why)`` for a PodGroup whose pods do not all run yet, else ``None``."""
    phase = _status(podgroup).get("phase") or "Pending"
    if phase not in WAITING_PODGROUP_PHASES:
        return None
    unschedulable = _condition(podgroup, "Unschedulable")
    if unschedulable is not None and unschedulable.get("status") == "True":
        why = unschedulable.get("message") or unschedulable.get("reason") or "unschedulable"
    else:
        why = "admitted, its pods are being created" if phase == "Inqueue" else "waiting for the scheduler"
    return podgroup["metadata"]["name"], phase, why


def local_queue_row(queue: dict[str, Any]) -> tuple[str, ...]:
    """NAME, CLUSTERQUEUE, PENDING and ADMITTED of a Kueue LocalQueue."""
    status = _status(queue)
    return (
        queue["metadata"]["name"],
        (queue.get("spec") or {}).get("clusterQueue") or "-",
        str(status.get("pendingWorkloads") or 0),
        str(status.get("admittedWorkloads") or 0),
    )


def cluster_queue_row(queue: dict[str, Any]) -> tuple[str, ...]:
    """NAME, PENDING, ADMITTED and USAGE (``flavor resource used/nominal`` each) of a ClusterQueue."""
    status = _status(queue)
    used = {
        (flavor.get("name"), resource.get("name")): resource.get("total") or "0"
        for flavor in status.get("flavorsUsage") or []
        for resource in flavor.get("resources") or []
    }
    usage = [
        f"{flavor['name']} {resource['name']} {used.get((flavor['name'], resource['name']), '0')}/"
        f"{resource.get('nominalQuota', '0')}"
        for group in (queue.get("spec") or {}).get("resourceGroups") or []
        for flavor in group.get("flavors") or []
        for resource in flavor.get("resources") or []
    ]
    return (
        queue["metadata"]["name"],
        str(status.get("pendingWorkloads") or 0),
        str(status.get("admittedWorkloads") or 0),
        ", ".join(usage) or "-",
    )


def workload_job(workload: dict[str, Any]) -> str:
    """The job a Workload stands for: its owner (``Kind/name``), else the Workload's name."""
    owners = (workload.get("metadata") or {}).get("ownerReferences") or []
    if owners:
        return f"{owners[0].get('kind')}/{owners[0].get('name')}"
    return workload["metadata"]["name"]


def workload_wait(workload: dict[str, Any]) -> str | None:
    """Why a Workload is not admitted, else ``None`` (it is)."""
    admitted = _condition(workload, "Admitted")
    if admitted is not None and admitted.get("status") == "True":
        return None
    if (workload.get("spec") or {}).get("active") is False:
        return "deactivated (spec.active: false): ack-jobs resume lets it queue again"
    for kind in ("QuotaReserved", "Admitted"):
        condition = _condition(workload, kind)
        if condition is not None and condition.get("status") != "True" and condition.get("message"):
            return f"{condition.get('reason') or kind}: {condition['message']}"
    return "not evaluated by Kueue yet"

"""Why a job waits, in one sentence: one pure function from what the cluster shows.

:func:`why` looks at the causes in the order a job meets them: Kueue admits it (a queued
TrainJob stays suspended until then), its pods are created (a namespace ResourceQuota can refuse
them), Volcano places its gang, the scheduler finds nodes or the autoscaler adds them, the
kubelet pulls the image and starts the containers. The causes of pods without a node are in
:mod:`.placement`, what they read and say in :mod:`.observed`, the message formats read in
:mod:`.messages`, with their upstream sources.
"""

from __future__ import annotations

from typing import Any

from ..queues import workload_job
from ..status import KUEUE_QUEUE_LABEL, job_phase
from . import messages as msg
from . import placement
from .node_health import NODE_CHECK_FAILED, node_check_failed
from .observed import (
    FINISHED,
    IMAGE_PULL,
    KUEUE,
    PULL_FAILURES,
    RUNNING,
    STARTING,
    SUSPENDED,
    TERMINAL,
    Observed,
    Why,
    live,
    true_condition,
)
from .resources import expected_pods


def why(seen: Observed) -> Why:
    """Why the job is where it is, as one sentence.

    Args:
        seen: the job and what surrounds it.

    Returns:
        The cause and its sentence.
    """
    phase, _ = job_phase(seen.job)
    if phase in TERMINAL:
        return Why(FINISHED, f"It has finished: {phase.lower()}.")
    for check in (
        _kueue,
        _suspended,
        _image_pull,
        _node_check,
        _running,
        placement.namespace_quota,
        placement.volcano_enqueue,
        placement.gang,
        placement.unplaced,
    ):
        found = check(seen, phase)
        if found is not None:
            return found
    return _starting(seen)


def _false(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind and c.get("status") == "False"), None)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _kueue(seen: Observed, _: str) -> Why | None:
    workload = seen.workload
    if workload is None or true_condition(workload, "Admitted") is not None:
        return None
    if (workload.get("spec") or {}).get("active") is False:
        return None
    queue = (workload.get("spec") or {}).get("queueName") or "?"
    cluster_queue = ((seen.local_queue or {}).get("spec") or {}).get("clusterQueue")
    parts: list[str] = []
    evicted = true_condition(workload, "Evicted")
    if evicted is not None:
        parts.append(
            f"Kueue evicted it ({evicted.get('reason')}: {evicted.get('message')}) and has not admitted it again"
        )
    reserved = true_condition(workload, "QuotaReserved")
    pending = _false(workload, "QuotaReserved")
    if reserved is not None:
        admitted = _false(workload, "Admitted")
        detail = f": {admitted.get('message')}" if admitted and admitted.get("message") else ""
        parts.append(f"Kueue reserved quota for it but its admission checks have not passed{detail}")
    elif pending is not None:
        message = pending.get("message") or ""
        shortfalls = msg.kueue_shortfalls(message)
        where = f"ClusterQueue {cluster_queue}" if cluster_queue else f"the ClusterQueue of LocalQueue {queue}"
        if shortfalls:
            short = ", ".join(
                f"{s.resource} in flavor {s.flavor} ({s.more} more needed)"
                if s.more
                else f"{s.resource} in flavor {s.flavor} (it asks for more than the quota's maximum, {s.maximum})"
                for s in shortfalls
            )
            parts.append(f"Kueue has not admitted it: {where} has no room for {short}")
        else:
            parts.append(f"Kueue has not admitted it ({pending.get('reason')}): {message.rstrip('.')}")
    elif evicted is None:
        parts.append("Kueue has not evaluated it yet")
    if seen.position is not None:
        local = int(seen.position.get("positionInLocalQueue", 0)) + 1
        cluster = int(seen.position.get("positionInClusterQueue", 0)) + 1
        parts.append(
            f"it is {_ordinal(local)} in LocalQueue {queue}"
            + (f" ({_ordinal(cluster)} in ClusterQueue {cluster_queue})" if cluster_queue else "")
        )
    uid = (workload.get("metadata") or {}).get("uid")
    victims = [
        workload_job(w)
        for w in seen.workloads
        if uid
        and any(
            msg.preemptor_uid(c.get("message") or "") == uid
            for c in (w.get("status") or {}).get("conditions") or []
            if c.get("type") in ("Evicted", "Preempted") and c.get("status") == "True"
        )
    ]
    preempting = msg.kueue_preempting((pending or {}).get("message") or "")
    if victims or preempting:
        named = f": {', '.join(victims)}" if victims else ""
        parts.append(f"to make room it is preempting {max(preempting, len(victims))} workload(s){named}")
    return Why(KUEUE, "; ".join(parts) + ".")


def _suspended(seen: Observed, phase: str) -> Why | None:
    inactive = ((seen.workload or {}).get("spec") or {}).get("active") is False
    queue = ((seen.job.get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL)
    if phase == "Suspended" and queue and seen.workload is None:
        # Kueue suspends every job of a LocalQueue until it admits its Workload; with no Workload
        # to read, that is all that can be said (resume patches the Workload, so it cannot help).
        return Why(
            KUEUE,
            f"Kueue has not admitted it: it waits in LocalQueue {queue}, and its Workload is not made yet "
            "or could not be read.",
        )
    if phase == "Suspended" or inactive:
        return Why(SUSPENDED, "It is suspended: ack-jobs resume lets it run again.")
    return None


def _image_pull(seen: Observed, _: str) -> Why | None:
    for pod in seen.pods:
        status = pod.get("status") or {}
        for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in PULL_FAILURES:
                detail = f": {waiting['message']}" if waiting.get("message") else ""
                return Why(
                    IMAGE_PULL,
                    f"Pod {pod['metadata']['name']} cannot pull image {container.get('image')} "
                    f"({waiting['reason']}){detail}.",
                )
    return None


def _running(seen: Observed, _: str) -> Why | None:
    running = [p for p in seen.pods if (p.get("status") or {}).get("phase") == "Running"]
    wanted = expected_pods(seen.job)
    if not running or len(running) < wanted:
        return None
    nodes = sorted({n for p in running if (n := (p.get("spec") or {}).get("nodeName"))})
    return Why(RUNNING, f"It is running: {len(running)}/{wanted} pods running on {', '.join(nodes) or 'its nodes'}.")


def _node_check(seen: Observed, _: str) -> Why | None:
    sentence = node_check_failed(live(seen.pods))
    return Why(NODE_CHECK_FAILED, sentence) if sentence else None


def _starting(seen: Observed) -> Why:
    wanted = expected_pods(seen.job)
    running = [p for p in seen.pods if (p.get("status") or {}).get("phase") == "Running"]
    for pod in seen.pods:
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason"):
                node = (pod.get("spec") or {}).get("nodeName") or "no node yet"
                return Why(
                    STARTING,
                    f"It is starting: {len(running)}/{wanted} pods running; {pod['metadata']['name']} is "
                    f"{waiting['reason']} on {node}.",
                )
    if not seen.pods:
        return Why(STARTING, f"It is starting: its {wanted} pods are not created yet.")
    return Why(STARTING, f"It is starting: {len(running)}/{wanted} pods running.")

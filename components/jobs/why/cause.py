"""Why a job waits, in one sentence: one pure function from what the cluster shows.

:func:`why` looks at the causes in the order a job meets them: Kueue admits it (a queued
TrainJob stays suspended until then), its pods are created (a namespace ResourceQuota can refuse
them), Volcano places its gang, the scheduler finds nodes or the autoscaler adds them, the
kubelet pulls the image and starts the containers. The message formats it reads are in
:mod:`.messages`, with their upstream sources.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..queues import workload_job
from ..status import KUEUE_QUEUE_LABEL, job_phase
from . import messages as msg
from .node_health import NODE_CHECK_FAILED, NODE_CORDONED, cordoned_for_health, node_check_failed
from .resources import (
    TERMINAL,
    expected_pods,
    job_pods,
    node_offer,
    pod_job,
    pod_requests,
    pool_nodes,
    quantity,
    quota_charge,
    show,
    unschedulable_message,
    usage_by_job,
)

RUNNING = "running"
STARTING = "starting"
IMAGE_PULL = "image-pull-failing"
QUOTA = "namespace-quota-exhausted"
KUEUE = "kueue-not-admitted"
GANG = "gang-not-satisfiable"
VOLCANO_QUEUE = "volcano-queue-full"
NO_FIT = "no-node-fits"
POOL_MAX = "pool-at-maximum"
NO_SCALE_UP = "autoscaler-cannot-scale-up"
FINISHED = "finished"
SUSPENDED = "suspended"
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName")
"""Waiting reasons of a container whose image cannot be pulled (kubelet ``pkg/kubelet/images/types.go``)."""


@dataclass(frozen=True)
class Observed:
    """What the cluster shows about one job; everything but ``job`` may be missing.

    Args:
        job: the PyTorchJob (or other v1 kind) or TrainJob, ``kind`` set.
        pods: the job's pods.
        events: events of the namespace (and the autoscaler's); those about other objects are ignored.
        podgroup: the job's Volcano PodGroup.
        workload: the job's Kueue Workload.
        workloads: every Workload of the namespace (to find those preempted for this one).
        local_queue: the Workload's LocalQueue.
        position: the Workload's entry in Kueue's visibility API (``positionInLocalQueue``...).
        quotas: the namespace's ResourceQuotas.
        namespace_pods: every pod of the namespace (to say which jobs use a quota).
        nodes: the cluster's nodes.
        placement: the stack's ``jobDefaults.placement`` (pool selector, GPUs, node share, maximum).
    """

    job: dict[str, Any]
    pods: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    podgroup: dict[str, Any] | None = None
    workload: dict[str, Any] | None = None
    workloads: list[dict[str, Any]] = field(default_factory=list)
    local_queue: dict[str, Any] | None = None
    position: dict[str, Any] | None = None
    quotas: list[dict[str, Any]] = field(default_factory=list)
    namespace_pods: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    placement: dict[str, Any] | None = None


@dataclass(frozen=True)
class Why:
    """A cause (one of the constants above) and the sentence that says it with its specifics."""

    cause: str
    sentence: str


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
    for check in (_kueue, _suspended, _image_pull, _node_check, _running, _quota, _volcano_enqueue, _gang, _unplaced):
        found = check(seen, phase)
        if found is not None:
            return found
    return _starting(seen)


def _condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind and c.get("status") == "True"), None)


def _false(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind and c.get("status") == "False"), None)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _kueue(seen: Observed, _: str) -> Why | None:
    workload = seen.workload
    if workload is None or _condition(workload, "Admitted") is not None:
        return None
    if (workload.get("spec") or {}).get("active") is False:
        return None
    queue = (workload.get("spec") or {}).get("queueName") or "?"
    cluster_queue = ((seen.local_queue or {}).get("spec") or {}).get("clusterQueue")
    parts: list[str] = []
    evicted = _condition(workload, "Evicted")
    if evicted is not None:
        parts.append(
            f"Kueue evicted it ({evicted.get('reason')}: {evicted.get('message')}) and has not admitted it again"
        )
    reserved = _condition(workload, "QuotaReserved")
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


def _live(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if (p.get("status") or {}).get("phase") not in TERMINAL]


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


def _quota(seen: Observed, _: str) -> Why | None:
    name = seen.job["metadata"]["name"]
    mine = [p for p in _live(seen.namespace_pods or seen.pods) if pod_job(p) == name]
    if len(_live(seen.pods)) >= expected_pods(seen.job):
        return None
    for quota in seen.quotas:
        status = quota.get("status") or {}
        used_total = {k: quantity(v) for k, v in (status.get("used") or {}).items()}
        for key, hard in (status.get("hard") or {}).items():
            wanted = sum(count * quota_charge(spec, key) for count, spec in job_pods(seen.job))
            need = wanted - sum(quota_charge(p.get("spec") or {}, key) for p in mine)
            used = used_total.get(key, 0.0)
            if need <= 0 or used + need <= quantity(hard):
                continue
            users = usage_by_job(seen.namespace_pods, key)
            by = ", ".join(f"{job} {show(key, n)}" for job, n in sorted(users.items(), key=lambda kv: -kv[1]))
            return Why(
                QUOTA,
                f"Namespace quota {quota['metadata']['name']} has no room for {key}: {show(key, used)} of "
                f"{show(key, quantity(hard))} in use" + (f" (by {by})" if by else "") + f", and the job needs "
                f"{show(key, need)} more.",
            )
    return None


def _volcano_enqueue(seen: Observed, _: str) -> Why | None:
    """Volcano's enqueue plugins said no (their PodGroup event), unless the PodGroup got past them."""
    if seen.podgroup is None or ((seen.podgroup.get("status") or {}).get("phase") or "Pending") != "Pending":
        return None
    group = seen.podgroup["metadata"]["name"]
    # A v1 job's PodGroup has the job's name: the job's own events (pods created...) are not its.
    said = [
        e
        for e in _events(seen)
        if (e.get("involvedObject") or {}).get("name") == group
        and (e.get("involvedObject") or {}).get("kind") in (None, "PodGroup")
    ]
    last = (said[-1].get("message") or "") if said else ""
    queue = (seen.podgroup.get("spec") or {}).get("queue") or "default"
    if last == msg.VOLCANO_QUEUE_FULL:
        return Why(VOLCANO_QUEUE, f"Volcano queue {queue} has no room for its minimum resources ({last}).")
    if last.startswith(msg.VOLCANO_NAMESPACE_QUOTA):
        # Its requested/used/limited are ResourceLists formatted with Go's %v, not for reading: name the cause only.
        return Why(QUOTA, "A namespace ResourceQuota has no room for it (Volcano's resourcequota plugin says so).")
    return None


def _gang(seen: Observed, _: str) -> Why | None:
    condition = _condition(seen.podgroup, "Unschedulable")
    if condition is None:
        return None
    facts = msg.gang(condition.get("message") or "")
    minimum = facts.min_available or (seen.podgroup.get("spec") or {}).get("minMember")
    pool = pool_nodes(seen.nodes, seen.placement)
    origin = _fit_summary(msg.fit_reasons(facts.origin)) if facts.origin else ""
    # No node read (a team member may not list nodes) says nothing about the pool's size.
    nodes = f"the pool's {len(pool)} nodes" if pool else "the pool's nodes"
    return Why(
        GANG,
        f"Volcano cannot start the gang: it needs {minimum} pods placed at once and only {facts.schedulable} "
        f"fit on {nodes} now" + (f"; {origin}" if origin else "") + ".",
    )


def _node_check(seen: Observed, _: str) -> Why | None:
    sentence = node_check_failed(_live(seen.pods))
    return Why(NODE_CHECK_FAILED, sentence) if sentence else None


def _unplaced(seen: Observed, phase: str) -> Why | None:
    """Why pods have no node; nodes cordoned for GPU health come first when the pool has any."""
    found = _unschedulable(seen, phase)
    waiting = any(not (p.get("spec") or {}).get("nodeName") for p in _live(seen.pods))
    cordoned = cordoned_for_health(seen.nodes, seen.placement) if waiting else None
    if cordoned is None:
        return found
    return Why(NODE_CORDONED, cordoned + (f" {found.sentence}" if found else ""))


def _events(seen: Observed) -> list[dict[str, Any]]:
    """Events about the job, its pods, its PodGroup or Workload, oldest first."""
    names = {seen.job["metadata"]["name"], *(p["metadata"]["name"] for p in seen.pods)}
    names |= {o["metadata"]["name"] for o in (seen.podgroup, seen.workload) if o}
    mine = [e for e in seen.events if (e.get("involvedObject") or {}).get("name") in names]
    return sorted(mine, key=_when)


def _when(event: dict[str, Any]) -> str:
    return event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or ""


def _fit_summary(reasons: msg.FitReasons | None) -> str:
    if reasons is None:
        return ""
    parts = [f"{n} of {reasons.nodes} nodes lack {r}" for r, n in reasons.insufficient().items()]
    parts += [f"{n} have the taint {t} it does not tolerate" for t, n in reasons.taints().items()]
    if reasons.selector():
        parts.append(f"{reasons.selector()} do not match its node selector")
    parts += [f"{n} do not satisfy its {r.split('match ', 1)[-1]}" for r, n in reasons.topology().items()]
    return ", ".join(parts)


def _unschedulable(seen: Observed, _: str) -> Why | None:
    pending = [p for p in _live(seen.pods) if not (p.get("spec") or {}).get("nodeName")]
    if not pending and len(_live(seen.pods)) >= expected_pods(seen.job):
        return None
    offer = node_offer(seen.placement)
    for _count, spec in job_pods(seen.job):
        asks = {k: v for k, v in pod_requests(spec).items() if k in offer and v > offer[k]}
        if asks:
            too_big = ", ".join(f"{show(k, v)} {k}" for k, v in asks.items())
            has = ", ".join(f"{show(k, offer[k])} {k}" for k in asks)
            return Why(
                NO_FIT,
                f"No node of the pool can ever hold one of its pods: a pod asks for {too_big}, a node has {has}.",
            )
    if not pending:
        # Pods not created yet: the scheduler and the autoscaler have not seen them.
        return None
    events = _events(seen)
    fit = next((e for e in reversed(events) if e.get("reason") == "FailedScheduling"), None)
    scale = [e for e in events if e.get("reason") in ("NotTriggerScaleUp", "TriggeredScaleUp")]
    failed_scale_up = _failed_scale_ups(seen.events, scale)
    said_fit = (fit or {}).get("message") or unschedulable_message(pending)
    reasons = msg.fit_reasons(said_fit)
    summary = _fit_summary(reasons)
    pool = pool_nodes(seen.nodes, seen.placement)
    maximum = (seen.placement or {}).get("maxNodes")
    last_scale = scale[-1] if scale else None
    said = msg.not_triggered((last_scale or {}).get("message") or "")
    limit = msg.at_maximum(said)
    if limit == msg.MAX_GROUP and maximum and pool and len(pool) < maximum:
        # The autoscaler counts every node group it skipped, each at its maximum or not, in one
        # message; a pool below the stack's maximum is not the group it means.
        limit = None
    short = bool(reasons and reasons.insufficient())
    if limit or (short and maximum and len(pool) >= maximum):
        size = f"{len(pool)} of at most {maximum} nodes" if maximum else f"{len(pool)} nodes"
        because = f" (the autoscaler: {limit})" if limit else ""
        return Why(POOL_MAX, f"The pool is at its maximum size, {size}{because}, and {summary or 'no node has room'}.")
    stock = next((c for e in failed_scale_up + scale if (c := msg.no_stock(e.get("message") or ""))), None)
    if stock:
        return Why(
            NO_SCALE_UP,
            f"The autoscaler cannot add a node: ECS has no stock of the pool's instance types in its zones ({stock}).",
        )
    if failed_scale_up and (failure := msg.scale_up_failure(failed_scale_up[-1].get("message") or "")):
        return Why(NO_SCALE_UP, f"The autoscaler failed to add nodes to group {failure[0]}: {failure[1]}.")
    if said:
        return Why(NO_SCALE_UP, f"The autoscaler will not add a node for it: {', '.join(said)}.")
    if last_scale is not None and last_scale.get("reason") == "TriggeredScaleUp":
        return Why(STARTING, f"It is waiting for new nodes: {last_scale.get('message')}.")
    if said_fit:
        return Why(NO_FIT, f"No node fits its pods: {summary or said_fit.rstrip('.')}.")
    return None


def _failed_scale_ups(events: list[dict[str, Any]], scale: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The autoscaler's ``ScaleUpFailed`` events (cluster-wide) about a node group it grew for
    these pods, since it last did: it records one only for a group it is scaling up
    (``clusterstate/clusterstate.go`` ``IsNodeGroupScalingUp``), which may be another pool's."""
    triggered = [e for e in scale if e.get("reason") == "TriggeredScaleUp"]
    if not triggered:
        return []
    groups = {g for e in triggered for g in msg.triggered_groups(e.get("message") or "")}
    since = _when(triggered[-1])
    return [
        e
        for e in sorted(events, key=_when)
        if e.get("reason") == "ScaleUpFailed"
        and (failure := msg.scale_up_failure(e.get("message") or "")) is not None
        and failure[0] in groups
        and _when(e) >= since
    ]


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

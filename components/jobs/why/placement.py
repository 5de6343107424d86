"""Why a job's pods are not placed: a namespace quota, Volcano's enqueue and gang, the scheduler's
fit, the autoscaler and the pool's maximum, and nodes cordoned for GPU health. The message formats
read are in :mod:`.messages`, with their upstream sources."""

from __future__ import annotations

from typing import Any

from . import messages as msg
from .node_health import NODE_CORDONED, cordoned_for_health
from .observed import (
    GANG,
    NO_FIT,
    NO_SCALE_UP,
    POOL_MAX,
    QUOTA,
    STARTING,
    VOLCANO_QUEUE,
    Observed,
    Why,
    live,
    pool_nodes,
    true_condition,
)
from .resources import (
    expected_pods,
    job_pods,
    node_offer,
    pod_job,
    pod_requests,
    quantity,
    quota_charge,
    show,
    unschedulable_message,
    usage_by_job,
)


def namespace_quota(seen: Observed, _: str) -> Why | None:
    name = seen.job["metadata"]["name"]
    mine = [p for p in live(seen.namespace_pods or seen.pods) if pod_job(p) == name]
    if len(live(seen.pods)) >= expected_pods(seen.job):
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


def volcano_enqueue(seen: Observed, _: str) -> Why | None:
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


def gang(seen: Observed, _: str) -> Why | None:
    condition = true_condition(seen.podgroup, "Unschedulable")
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


def unplaced(seen: Observed, phase: str) -> Why | None:
    """Why pods have no node; nodes cordoned for GPU health come first when the pool has any."""
    found = _unschedulable(seen, phase)
    waiting = any(not (p.get("spec") or {}).get("nodeName") for p in live(seen.pods))
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
    pending = [p for p in live(seen.pods) if not (p.get("spec") or {}).get("nodeName")]
    if not pending and len(live(seen.pods)) >= expected_pods(seen.job):
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

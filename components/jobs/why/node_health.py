"""Why a job waits, when a GPU node's health is the reason: a pod whose pre-job node check failed
on its node (``jobs[].nodeCheck``), or pods that wait while the pool's nodes are cordoned by the
GPU node health controller (``monitoring.nodeHealth``; docs/node-health.md).

The node check's one line reaches the pod's status as its init container's termination message
(``terminationMessagePolicy: FallbackToLogsOnError``: the end of its log when it fails); the
controller's reason is the node's annotation.
"""

from __future__ import annotations

from typing import Any

from trainer.exit_codes import NODE_BELOW_BASELINE
from trainer.health.signals import FAILED, HEALTH_LABEL, NODE_CHECK, REASON_ANNOTATION, SINCE_ANNOTATION

from .observed import pool_nodes

NODE_CHECK_FAILED = "node-check-failed"
NODE_CORDONED = "gpu-node-cordoned"


def _check_failure(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The node check's terminated state with the below-baseline status, now or last time; not once
    a later run passed (``OnFailure`` restarts the check, and the pod then trains)."""
    for status in (pod.get("status") or {}).get("initContainerStatuses") or []:
        if status.get("name") != NODE_CHECK:
            continue
        now = status.get("state") or {}
        if (now.get("terminated") or {}).get("exitCode") == 0:
            continue
        for state in (now, status.get("lastState") or {}):
            ended = state.get("terminated") or {}
            if ended.get("exitCode") == NODE_BELOW_BASELINE:
                return ended
    return None


def node_check_failed(pods: list[dict[str, Any]]) -> str | None:
    """The sentence for the first pod whose node check failed, or ``None``."""
    for pod in pods:
        ended = _check_failure(pod)
        if ended is None:
            continue
        node = (pod.get("spec") or {}).get("nodeName") or "its node"
        said = [line for line in (ended.get("message") or "").splitlines() if line.startswith(f"{NODE_CHECK}:")]
        detail = f" ({said[-1].removeprefix(f'{NODE_CHECK}: ')})" if said else ""
        return (
            f"Pod {pod['metadata']['name']} failed its pre-job node check on {node}{detail}: the report is the "
            f"pod's own, so the node stays schedulable; if other jobs' checks fail there too or its DCGM series "
            f"show a fault, cordon it (kubectl cordon {node}), then delete the pod so that it is placed on another."
        )
    return None


def cordoned_for_health(nodes: list[dict[str, Any]], placement: dict[str, Any] | None) -> str | None:
    """The sentence naming the pool's nodes the health controller cordoned, or ``None`` when there are none."""
    out = [
        n
        for n in pool_nodes(nodes, placement)
        if ((n.get("metadata") or {}).get("labels") or {}).get(HEALTH_LABEL) == FAILED
        and (n.get("spec") or {}).get("unschedulable")
    ]
    if not out:
        return None

    def said(node: dict[str, Any]) -> str:
        notes = (node.get("metadata") or {}).get("annotations") or {}
        since = f", since {notes[SINCE_ANNOTATION]}" if notes.get(SINCE_ANNOTATION) else ""
        return f"{node['metadata']['name']} ({notes.get(REASON_ANNOTATION) or 'no reason recorded'}{since})"

    names = "; ".join(said(n) for n in out)
    return f"GPU node health cordoned {len(out)} node(s) of the pool, which its pods cannot use: {names}."

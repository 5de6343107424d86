"""``ack-jobs why`` when GPU node health is the reason: a pod whose pre-job node check failed on
its node, and pods waiting while nodes of the pool are cordoned by the node health controller.

Pod statuses are shaped as the kubelet reports an init container that failed under
``restartPolicy: OnFailure`` (restarted in place: waiting in CrashLoopBackOff, the failed run in
``lastState.terminated``) and under ``Never`` (the pod failed, the init container terminated);
nodes as :mod:`trainer.health.guard` patches them (tested in ``tests/test_node_health.py``).
"""

from __future__ import annotations

from typing import Any

from fixtures import waiting as w
from test_why import NODES, node, seen, v1, v1_pods

from components.jobs.why import node_health as h
from components.jobs.why import observed as c
from components.jobs.why import why
from trainer.health.guard import FAILED, HEALTH_LABEL, REASON_ANNOTATION, SINCE_ANNOTATION

LINE = (
    "nodecheck: node gpu-node-2 FAILED: all-reduce bus bandwidth 61.30 GB/s across 8 processes, below 80% of the "
    "pool's baseline 360 GB/s (288.00 GB/s)"
)


def failed_check(pod: dict[str, Any], *, in_place: bool) -> dict[str, Any]:
    ended = {"exitCode": 69, "reason": "Error", "message": f"[rank0]: starting\n{LINE}\n"}
    status: dict[str, Any] = {"name": "nodecheck", "ready": False, "restartCount": 3}
    if in_place:
        status["state"] = {
            "waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container"}
        }
        status["lastState"] = {"terminated": ended}
    else:
        status["state"] = {"terminated": ended}
    pod["status"]["initContainerStatuses"] = [status]
    return pod


def test_a_pod_whose_node_check_failed_names_the_node_and_the_figures() -> None:
    for in_place in (True, False):
        pods = v1_pods("bert", node="gpu-node-2", waiting=("PodInitializing", ""))
        failed_check(pods[1], in_place=in_place)
        found = why(seen(v1("bert"), pods=pods))
        assert found == c.Why(
            h.NODE_CHECK_FAILED,
            "Pod bert-worker-0 failed its pre-job node check on gpu-node-2 (node gpu-node-2 FAILED: all-reduce bus "
            "bandwidth 61.30 GB/s across 8 processes, below 80% of the pool's baseline 360 GB/s (288.00 GB/s)): "
            "the report is the pod's own, so the node stays schedulable; if other jobs' checks fail there too or its "
            "DCGM series show a fault, cordon it (kubectl cordon gpu-node-2), then delete the pod so that it is "
            "placed on another.",
        )


def test_a_check_that_passed_is_not_the_cause() -> None:
    pods = v1_pods("bert", node="gpu-node-2", waiting=("PodInitializing", ""))
    pods[1]["status"]["initContainerStatuses"] = [
        {"name": "nodecheck", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
    ]
    assert why(seen(v1("bert"), pods=pods)).cause == c.STARTING


def test_a_check_that_passed_on_its_retry_is_not_the_cause() -> None:
    # Under OnFailure the kubelet ran the check again; it passed, and the pods train.
    pods = v1_pods("bert", phase="Running", node="gpu-node-2")
    failed_check(pods[1], in_place=True)
    pods[1]["status"]["initContainerStatuses"][0]["state"] = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    assert why(seen(v1("bert"), pods=pods)).cause == c.RUNNING


def cordoned(name: str) -> dict[str, Any]:
    obj = node(name)
    obj["metadata"]["labels"] = {**obj["metadata"]["labels"], HEALTH_LABEL: FAILED}
    obj["metadata"]["annotations"] = {
        REASON_ANNOTATION: "gpu 3 (GPU-abc): XID 79 (GPU has fallen off the bus)",
        SINCE_ANNOTATION: "2026-11-28T09:12:00Z",
    }
    obj["spec"] = {"unschedulable": True}
    return obj


def test_pending_pods_name_the_node_cordoned_for_gpu_health() -> None:
    reasons = {"node(s) were unschedulable": 1, "Insufficient nvidia.com/gpu": 2}
    events = [w.event("Pod", "bert-master-0", "FailedScheduling", w.scheduler_fit_error(3, reasons))]
    nodes = [*NODES[:2], cordoned("gpu-node-2")]
    found = why(seen(v1("bert"), pods=v1_pods("bert"), events=events, nodes=nodes))
    assert found.cause == h.NODE_CORDONED
    assert found.sentence.startswith(
        "GPU node health cordoned 1 node(s) of the pool, which its pods cannot use: gpu-node-2 (gpu 3 (GPU-abc): "
        "XID 79 (GPU has fallen off the bus), since 2026-11-28T09:12:00Z). No node fits its pods: 2 of 3 nodes lack "
        "nvidia.com/gpu"
    )


def test_a_node_cordoned_by_hand_is_not_called_a_health_cordon() -> None:
    by_hand = node("gpu-node-2")
    by_hand["spec"] = {"unschedulable": True}
    events = [
        w.event(
            "Pod", "bert-master-0", "FailedScheduling", w.scheduler_fit_error(3, {"Insufficient nvidia.com/gpu": 3})
        )
    ]
    found = why(seen(v1("bert"), pods=v1_pods("bert"), events=events, nodes=[*NODES[:2], by_hand]))
    assert found.cause == c.NO_FIT

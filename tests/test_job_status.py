"""What ``ack-jobs`` makes of a job's status: tables of status objects, written in the shapes
the v1.9.4 Training Operator and Trainer v2.3.0 write (sources in ``components/jobs/status.py``),
and the summaries expected of them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from components.jobs.queues import cluster_queue_row, podgroup_wait, volcano_queue_row, workload_job, workload_wait
from components.jobs.replicas import ReplicaError, rank_replica
from components.jobs.status import format_age, last_metrics, summarize
from components.jobs.usage import NodeGpus, node_gpus, pod_gpus
from trainer.telemetry.metric_names import LOSS, MFU, NONFINITE_STEPS, SAMPLES_PER_SECOND, STEP, STEP_TIME

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


def c(kind: str, status: str = "True", reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def pytorchjob(conditions: list[dict[str, str]], replicas: dict[str, dict[str, int]] | None = None) -> dict:
    return {
        "kind": "PyTorchJob",
        "metadata": {"name": "mnist", "creationTimestamp": "2026-11-22T09:30:00Z"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}},
        "status": {"conditions": conditions, "replicaStatuses": replicas or {}},
    }


def trainjob(conditions: list[dict[str, str]], **child_jobs: int) -> dict:
    """A TrainJob of 4 nodes. Its ``jobsStatus`` counts the child Jobs of the replicated job
    ``node``: Trainer v2.3.0 runs one Job of ``numNodes`` pods, so each count is 0 or 1."""
    counts = {"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0, **child_jobs}
    return {
        "kind": "TrainJob",
        "metadata": {"name": "gpt", "creationTimestamp": "2026-11-22T11:59:18Z"},
        "spec": {"trainer": {"numNodes": 4}},
        "status": {"conditions": conditions, "jobsStatus": [{"name": "node", **counts}]},
    }


def pod(restarts: int) -> dict:
    return {"metadata": {"name": "p"}, "status": {"containerStatuses": [{"name": "pytorch", "restartCount": restarts}]}}


def node_pod(index: int, phase: str = "Running", attempt: int = 0, restarts: int = 0) -> dict:
    """A pod of a TrainJob's ``node`` Job as JobSet v0.12.0 labels it (a random suffix: the Job
    controller names it)."""
    return {
        "metadata": {
            "name": f"gpt-node-0-{index}-x7k2p",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "gpt",
                "jobset.sigs.k8s.io/replicatedjob-name": "node",
                "jobset.sigs.k8s.io/restart-attempt": str(attempt),
                "batch.kubernetes.io/job-completion-index": str(index),
            },
        },
        "status": {"phase": phase, "containerStatuses": [{"name": "node", "restartCount": restarts}]},
    }


CREATED = c("Created", reason="PyTorchJobCreated", message="PyTorchJob mnist is created.")
RUNNING = c("Running", reason="PyTorchJobRunning", message="PyTorchJob training/mnist is running.")

CASES = [
    # (job, pods, phase, reason, restarts, replicas)
    pytest.param(
        {"kind": "PyTorchJob", "metadata": {"name": "mnist"}, "spec": {}}, [], "Pending", "", 0, {}, id="v1-no-status"
    ),
    pytest.param(pytorchjob([CREATED]), [], "Created", "PyTorchJobCreated", 0, None, id="v1-created"),
    pytest.param(
        pytorchjob([CREATED, RUNNING], {"Master": {"active": 1}, "Worker": {"active": 3}}),
        [pod(0), pod(1)],
        "Running",
        "PyTorchJobRunning",
        1,
        {"Master": "1/1 active", "Worker": "3/3 active"},
        id="v1-running-one-container-restart",
    ),
    pytest.param(
        # Restarting replaces Running; the failed Worker pod is recreated (ExitCode policy).
        # `failed` counts the pods in phase Failed at the last reconcile, not restarts.
        pytorchjob(
            [CREATED, c("Restarting", reason="PyTorchJobRestarting", message="1 Worker replica(s) failed.")],
            {"Master": {"active": 1}, "Worker": {"active": 2, "failed": 1}},
        ),
        [pod(0)],
        "Restarting",
        "PyTorchJobRestarting",
        0,
        {"Master": "1/1 active", "Worker": "2/3 active, 1 failed"},
        id="v1-restarting",
    ),
    pytest.param(
        pytorchjob([CREATED, c("Running", "False", "PyTorchJobRunning"), c("Succeeded", reason="PyTorchJobSucceeded")]),
        [],
        "Succeeded",
        "PyTorchJobSucceeded",
        0,
        None,
        id="v1-succeeded-running-turned-false",
    ),
    pytest.param(
        pytorchjob(
            [CREATED, c("Running", "False", "PyTorchJobRunning"), c("Failed", reason="PyTorchJobFailed", message="x")],
            {"Worker": {"failed": 2}},
        ),
        [pod(3)],
        "Failed",
        "PyTorchJobFailed",
        3,
        None,
        id="v1-failed-counts-container-restarts-not-failed-pods",
    ),
    pytest.param(
        pytorchjob(
            [CREATED, c("Running", "False", "PyTorchJobSuspended"), c("Suspended", reason="PyTorchJobSuspended")]
        ),
        [],
        "Suspended",
        "PyTorchJobSuspended",
        0,
        None,
        id="v1-suspended",
    ),
    pytest.param(
        pytorchjob([CREATED, RUNNING, c("Suspended", "False", "PyTorchJobResumed")]),
        [],
        "Running",
        "PyTorchJobRunning",
        0,
        None,
        id="v1-resumed",
    ),
    pytest.param(
        trainjob([], active=1),
        [node_pod(0), node_pod(1), node_pod(2, "Pending"), node_pod(3, "Pending")],
        "Created",
        "",
        0,
        {"node": "2/4 running, 2 pending"},
        id="v2-pods-starting",
    ),
    pytest.param(
        trainjob([], ready=1, active=1),
        [node_pod(i) for i in range(4)],
        "Running",
        "",
        0,
        {"node": "4/4 running"},
        id="v2-running-a-healthy-4-node-job",
    ),
    pytest.param(
        # The JobSet restarted twice: every node's pod was created again, none restarted in place.
        trainjob([], ready=1, active=1),
        [node_pod(i, attempt=2) for i in range(4)],
        "Running",
        "",
        2,
        {"node": "4/4 running"},
        id="v2-after-two-jobset-restarts",
    ),
    pytest.param(
        trainjob([c("Complete", reason="AllJobsCompleted")], succeeded=1),
        [node_pod(i, "Succeeded") for i in range(4)],
        "Succeeded",
        "AllJobsCompleted",
        0,
        {"node": "0/4 running, 4 succeeded"},
        id="v2-complete",
    ),
    pytest.param(
        # Trainer deletes the JobSet at the deadline: no pods are left, the status keeps its last counts.
        trainjob(
            [c("Failed", reason="DeadlineExceeded", message="TrainJob exceeded its active deadline")],
            ready=1,
            active=1,
        ),
        [],
        "Failed",
        "DeadlineExceeded",
        0,
        {"node": "1/1 Jobs ready, 1 active"},
        id="v2-deadline",
    ),
    pytest.param(
        trainjob([c("Suspended", reason="Suspended", message="TrainJob is suspended")]),
        [],
        "Suspended",
        "Suspended",
        0,
        None,
        id="v2-suspended",
    ),
    pytest.param(
        trainjob([c("Suspended", "False", "Resumed", "TrainJob is resumed")], ready=1, active=1),
        [],
        "Running",
        "",
        0,
        None,
        id="v2-resumed",
    ),
]


@pytest.mark.parametrize(("job", "pods", "phase", "reason", "restarts", "replicas"), CASES)
def test_summary(job, pods, phase, reason, restarts, replicas) -> None:
    summary = summarize(job, pods, NOW)
    assert (summary.phase, summary.reason, summary.restarts) == (phase, reason, restarts)
    if replicas is not None:
        assert summary.replicas == replicas


def test_summary_keeps_the_deciding_message_and_every_condition() -> None:
    summary = summarize(pytorchjob([CREATED, RUNNING]), [], NOW)
    assert summary.message == "PyTorchJob training/mnist is running."
    assert [cond[0] for cond in summary.conditions] == ["Created", "Running"]
    assert summary.age_s == 2.5 * 3600
    assert summarize(trainjob([]), [], NOW).age_s == 42


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0s"),
        (42, "42s"),
        (119, "119s"),
        (120, "2m"),
        (3599, "59m"),
        (3600, "1h"),
        (11130, "3h5m"),
        (86400, "1d"),
        (187200, "2d4h"),
    ],
)
def test_age(seconds: float, shown: str) -> None:
    assert format_age(seconds) == shown


def test_last_metrics_reads_the_trainers_exposition() -> None:
    registry = CollectorRegistry()
    for metric, value in ((STEP, 300), (LOSS, 1.5), (SAMPLES_PER_SECOND, 2048), (MFU, 0.38)):
        Gauge(metric.name, metric.help, registry=registry).set(value)
    Gauge(STEP_TIME.name, STEP_TIME.help, STEP_TIME.labels, registry=registry).labels("0").set(0.2)
    Counter(NONFINITE_STEPS.name.removesuffix("_total"), NONFINITE_STEPS.help, registry=registry).inc()
    assert last_metrics(generate_latest(registry).decode()) == {
        "step": 300,
        "loss": 1.5,
        "samples/s": 2048,
        "MFU": 0.38,
    }


def test_last_metrics_before_the_first_log_step() -> None:
    assert last_metrics("") == {}


# --- queues, node GPUs and replicas ----------------------------------------------------------


def workload(conditions: list[dict[str, str]], active: bool | None = None) -> dict:
    """A Kueue v0.19.2 Workload of TrainJob gpt (``apis/kueue/v1beta2/workload_types.go``)."""
    spec = {"queueName": "training", "podSets": [{"name": "node", "count": 4}]}
    if active is not None:
        spec["active"] = active
    return {
        "metadata": {"name": "trainjob-gpt-3f2a1", "ownerReferences": [{"kind": "TrainJob", "name": "gpt"}]},
        "spec": spec,
        "status": {"conditions": conditions},
    }


QUOTA = "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in flavor gpu"


@pytest.mark.parametrize(
    ("conditions", "active", "why"),
    [
        ([], None, "not evaluated by Kueue yet"),
        ([c("QuotaReserved", "False", "WaitingForQuota", QUOTA)], None, f"WaitingForQuota: {QUOTA}"),
        # Quota reserved, an admission check still pending: Admitted False says why.
        (
            [c("QuotaReserved", "True", "QuotaReserved", "Quota reserved"), c("Admitted", "False", "", "waiting")],
            None,
            "Admitted: waiting",
        ),
        ([c("QuotaReserved", "False", "Inadmissible", "x")], False, "deactivated (spec.active: false)"),
        ([c("QuotaReserved"), c("Admitted", "True", "Admitted", "The workload is admitted")], None, None),
    ],
)
def test_why_a_workload_waits(conditions, active, why) -> None:
    found = workload_wait(workload(conditions, active))
    assert found == why or (why is not None and found.startswith(why))
    assert workload_job(workload(conditions)) == "TrainJob/gpt"


def test_a_volcano_queue_leaves_zero_counts_out() -> None:
    # QueueStatus counts are omitempty in volcano.sh/apis v1.12.1.
    assert volcano_queue_row({"metadata": {"name": "q"}, "status": {"state": "Closed", "running": 3}}) == (
        "q",
        "Closed",
        "0",
        "0",
        "3",
    )
    inqueue = {"metadata": {"name": "mnist"}, "status": {"phase": "Inqueue"}}
    assert podgroup_wait(inqueue) == ("mnist", "Inqueue", "admitted, its pods are being created")
    assert podgroup_wait({"metadata": {"name": "mnist"}, "status": {"phase": "Running", "running": 2}}) is None


def test_a_cluster_queue_shows_usage_against_nominal_quota_per_flavor() -> None:
    queue = {
        "metadata": {"name": "platform"},
        "spec": {
            "resourceGroups": [
                {"flavors": [{"name": "a10", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "16"}]}]},
                {"flavors": [{"name": "spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]},
            ]
        },
        # A flavor nothing uses is absent from flavorsUsage.
        "status": {"flavorsUsage": [{"name": "a10", "resources": [{"name": "nvidia.com/gpu", "total": "12"}]}]},
    }
    assert cluster_queue_row(queue) == ("platform", "0", "0", "a10 nvidia.com/gpu 12/16, spot nvidia.com/gpu 0/8")


def _pod(node: str, containers: list[int], init: list[int] = (), limits_only: bool = False) -> dict:
    def container(gpus: int) -> dict:
        amount = {"nvidia.com/gpu": str(gpus)} if gpus else {}
        return {"resources": {"limits": amount} if limits_only else {"limits": amount, "requests": amount}}

    return {
        "metadata": {"namespace": "training", "labels": {"jobset.sigs.k8s.io/jobset-name": "gpt"}},
        "spec": {
            "nodeName": node,
            "containers": [container(g) for g in containers],
            "initContainers": [container(g) for g in init],
        },
    }


def test_node_gpus_count_requests_as_kubernetes_does() -> None:
    assert pod_gpus(_pod("n", [2, 1])) == 3
    assert pod_gpus(_pod("n", [1], init=[4])) == 4  # the largest init container, when larger
    assert pod_gpus(_pod("n", [8], limits_only=True)) == 8
    nodes = [
        {
            "metadata": {"name": "n", "labels": {"ack-training-platform/pool": "gpu"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}},
        },
        {"metadata": {"name": "cpu"}, "status": {"allocatable": {"cpu": "8"}}},
    ]
    assert node_gpus(nodes, [_pod("n", [4]), _pod("n", [2])]) == [NodeGpus("n", "gpu", 8, 6, ("training/gpt",))]


def test_node_ranks_map_to_replicas() -> None:
    v1 = pytorchjob([])
    assert [rank_replica(v1, rank) for rank in range(4)] == ["master", "worker-0", "worker-1", "worker-2"]
    with pytest.raises(ReplicaError, match="has node ranks 0 to 3"):
        rank_replica(v1, 4)
    assert rank_replica(trainjob([]), 3) == "node-3"
    elastic = {**v1, "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4}}}}
    with pytest.raises(ReplicaError, match="assigns node ranks at rendezvous"):
        rank_replica(elastic, 0)

"""``ack-jobs delete``, ``suspend``/``resume``, ``top nodes`` and ``queue`` against the
stand-in API server of ``tests/loopback_api.py``, with Volcano and Kueue objects in the
shapes those controllers write (``components/jobs/queues.py`` names the sources)."""

from __future__ import annotations

import pytest
import yaml
from loopback_api import (
    KUEUE,
    NS,
    V1,
    V2,
    VOLCANO,
    cluster_queue,
    cond,
    gpu_node,
    jobs,
    local_queue,
    podgroup,
    serve_gpt,
    serve_mnist,
    v1_pod,
    v2_pod,
    volcano_queue,
    workload,
)

from components.jobs.cli import run

OK = {"kind": "Status", "apiVersion": "v1", "status": "Success"}
WORKLOADS = f"{KUEUE}/namespaces/{NS}/workloads"


def test_delete_several_reports_each_and_exits_1_after_trying_all(cluster, capsys) -> None:
    api, kubeconfig = cluster
    serve_mnist(api), serve_gpt(api)
    api.routes[("DELETE", f"{V1}/mnist")] = OK
    api.routes[("DELETE", f"{V2}/gpt")] = OK
    code, lines = jobs(kubeconfig, "delete", "mnist", "nope", "gpt")
    assert (code, lines) == (1, ["PyTorchJob mnist deleted", "TrainJob gpt deleted"])
    assert capsys.readouterr().err == (f"ack-jobs delete: no PyTorchJob or TrainJob named 'nope' in namespace {NS}\n")
    assert [p for m, p, _, _ in api.requests if m == "DELETE"] == [f"{V1}/mnist", f"{V2}/gpt"]


def _patches(api) -> list[tuple[str, object]]:
    return [(p, b) for m, p, _, b in api.requests if m == "PATCH"]


@pytest.mark.parametrize(("command", "value"), [("suspend", True), ("resume", False)])
def test_suspend_and_resume_a_pytorchjob_through_its_run_policy(cluster, command: str, value: bool) -> None:
    api, kubeconfig = cluster
    job = serve_mnist(api)
    api.routes[("PATCH", f"{V1}/mnist")] = job
    assert jobs(kubeconfig, command, "mnist") == (0, [f"PyTorchJob mnist {command}ed".replace("eed", "ed")])
    assert _patches(api) == [(f"{V1}/mnist", {"spec": {"runPolicy": {"suspend": value}}})]
    assert [t for m, t in api.content_types if m == "PATCH"] == ["application/merge-patch+json"]


def test_suspend_a_trainjob_without_kueue_through_its_spec(cluster) -> None:
    api, kubeconfig = cluster
    job = serve_gpt(api)
    api.routes[("PATCH", f"{V2}/gpt")] = job
    assert jobs(kubeconfig, "suspend", "gpt") == (0, ["TrainJob gpt suspended"])
    assert _patches(api) == [(f"{V2}/gpt", {"spec": {"suspend": True}})]


@pytest.mark.parametrize(("command", "active"), [("suspend", False), ("resume", True)])
def test_a_trainjob_queued_by_kueue_is_stopped_through_its_workload(cluster, command: str, active: bool) -> None:
    # Kueue owns spec.suspend of a queued job: the Workload's spec.active is what stops it.
    api, kubeconfig = cluster
    job = serve_gpt(api)
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "training"
    owned = workload(job, "training", [cond("Admitted", "Admitted", "The workload is admitted")])
    api.routes[("GET", WORKLOADS)] = lambda query, _: (
        200,
        {"kind": "WorkloadList", "apiVersion": "kueue.x-k8s.io/v1beta2", "items": [owned]}
        if query.get("labelSelector") == [f"kueue.x-k8s.io/job-uid={job['metadata']['uid']}"]
        else {"kind": "WorkloadList", "items": []},
    )
    name = owned["metadata"]["name"]
    api.routes[("PATCH", f"{WORKLOADS}/{name}")] = owned
    done = "deactivated" if command == "suspend" else "activated"
    assert jobs(kubeconfig, command, "gpt") == (
        0,
        [f"TrainJob gpt {command}{'ed' if command == 'suspend' else 'd'} (Kueue Workload {name} {done})"],
    )
    assert _patches(api) == [(f"{WORKLOADS}/{name}", {"spec": {"active": active}})]


def test_a_queued_trainjob_without_a_workload_yet(cluster, capsys) -> None:
    api, kubeconfig = cluster
    job = serve_gpt(api)
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "training"
    api.routes[("GET", WORKLOADS)] = {"kind": "WorkloadList", "items": []}
    assert jobs(kubeconfig, "suspend", "gpt") == (1, [])
    assert "TrainJob gpt is queued by Kueue but has no Workload yet" in capsys.readouterr().err
    assert _patches(api) == []


def _gpu_cluster(api) -> None:
    mnist_pods = [v1_pod("mnist", "master", 0, gpus=8), v1_pod("mnist", "worker", 0, gpus=8)]
    gpt_pods = [v2_pod("gpt", 0, gpus=4), v2_pod("gpt", 1, gpus=4)]
    pending = v1_pod("mnist", "worker", 1, phase="Pending", gpus=8)
    api.pods += [*mnist_pods, *gpt_pods, pending]
    api.nodes += [
        gpu_node("gpu-node-0", "gpu", 8),
        gpu_node("gpu-node-1", "gpu", 8),
        gpu_node("gpu-node-2", "gpu", 8),
        gpu_node("gpu-node-3", "spot", 8),
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "system-0", "labels": {}}, "status": {}},
    ]


def test_top_nodes_shows_gpus_allocatable_requested_and_the_jobs_there(cluster) -> None:
    api, kubeconfig = cluster
    _gpu_cluster(api)
    code, lines = jobs(kubeconfig, "top", "nodes")
    assert code == 0
    assert [line.split() for line in lines] == [
        ["NODE", "POOL", "GPUS", "REQUESTED", "JOBS"],
        ["gpu-node-0", "gpu", "8", "8", f"{NS}/mnist"],
        ["gpu-node-1", "gpu", "8", "8", f"{NS}/mnist"],
        ["gpu-node-2", "gpu", "8", "4", f"{NS}/gpt"],
        ["gpu-node-3", "spot", "8", "4", f"{NS}/gpt"],
    ]
    (query,) = [q for m, p, q, _ in api.requests if p == "/api/v1/pods"]
    assert query == {"fieldSelector": ["status.phase=Running"]}


def test_top_watch_refreshes_until_interrupted(cluster) -> None:
    api, kubeconfig = cluster
    _gpu_cluster(api)
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 1:
            api.pods.pop(0)  # the master's pod ends between two refreshes
        else:
            raise KeyboardInterrupt

    lines: list[str] = []
    argv = ["top", "nodes", "-w", "2.5", "--kubeconfig", str(kubeconfig), "-n", NS]
    assert run(argv, out=lines.append, sleep=sleep) == 0
    assert naps == [2.5, 2.5]
    first, second = "\n".join(lines).split("\n\n")
    assert "gpu-node-0  gpu   8     8" in first and "gpu-node-0  gpu   8     0          -" in second


def test_queue_shows_volcano_queues_and_why_a_job_waits(cluster) -> None:
    api, kubeconfig = cluster
    api.serve(
        f"{VOLCANO}/queues",
        "Queue",
        [volcano_queue("default", "Open"), volcano_queue("research", "Open", pending=1, running=2)],
    )
    why = "pod group is not ready, 2 Pending, 2 minAvailable; Pending: 2 Unschedulable"
    api.serve(
        f"{VOLCANO}/namespaces/{NS}/podgroups",
        "PodGroup",
        [podgroup("mnist", "research", "Pending", why), podgroup("bert", "research", "Running")],
    )
    code, lines = jobs(kubeconfig, "queue")
    assert code == 0
    assert [line.split() for line in lines[:4]] == [
        ["Volcano", "queues:"],
        ["NAME", "STATE", "PENDING", "INQUEUE", "RUNNING"],
        ["default", "Open", "0", "0", "0"],
        ["research", "Open", "1", "0", "2"],
    ]
    assert lines[4] == f"Waiting jobs in {NS}:"
    assert [line.split(None, 3) for line in lines[5:]] == [
        ["JOB", "QUEUE", "PHASE", "WHY"],
        ["mnist", "research", "Pending", why],
    ]


def test_queue_shows_kueue_queues_usage_and_why_a_workload_waits(cluster) -> None:
    api, kubeconfig = cluster
    job = serve_gpt(api)
    api.serve(f"{KUEUE}/namespaces/{NS}/localqueues", "LocalQueue", [local_queue("training", "platform", 1, 1)])
    api.serve(f"{KUEUE}/clusterqueues", "ClusterQueue", [cluster_queue("platform", 16, 8, 1, 1)])
    message = "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in flavor gpu"
    waiting = workload(job, "training", [cond("QuotaReserved", "WaitingForQuota", message, status="False")])
    running = workload(
        {**job, "metadata": {**job["metadata"], "name": "bert", "uid": "u2"}},
        "training",
        [
            cond("QuotaReserved", "QuotaReserved", "Quota reserved in ClusterQueue platform"),
            cond("Admitted", "Admitted", "The workload is admitted"),
        ],
    )
    api.serve(WORKLOADS, "Workload", [running, waiting])
    code, lines = jobs(kubeconfig, "queue")
    assert code == 0
    assert lines[0] == f"Kueue LocalQueues in {NS}:"
    assert lines[2].split() == ["training", "platform", "1", "1"]
    assert lines[3] == "Kueue ClusterQueues:"
    assert lines[5].split(None, 3) == ["platform", "1", "1", "gpu cpu 16/192, gpu nvidia.com/gpu 8/16"]
    assert lines[6] == f"Pending workloads in {NS}:"
    assert lines[8].split(None, 2) == ["TrainJob/gpt", "training", f"WaitingForQuota: {message}"]
    assert len(lines) == 9
    assert ("GET", f"{VOLCANO}/queues") in [(m, p) for m, p, _, _ in api.requests]


def test_queue_by_name_that_nothing_has(cluster, capsys) -> None:
    api, kubeconfig = cluster
    api.serve(f"{VOLCANO}/queues", "Queue", [volcano_queue("default", "Open")])
    assert jobs(kubeconfig, "queue", "nope") == (1, [])
    assert (
        capsys.readouterr().err == "ack-jobs queue: no Volcano queue or Kueue LocalQueue or ClusterQueue named 'nope'\n"
    )


def test_top_jobs_of_every_namespace_asks_prometheus_per_namespace(cluster) -> None:
    api, kubeconfig = cluster
    mnist = serve_mnist(api)
    other = {**mnist, "metadata": {**mnist["metadata"], "namespace": "research"}}
    api.serve("/apis/kubeflow.org/v1/pytorchjobs", "PyTorchJob", [other, mnist])
    research_pods = [{**pod, "metadata": {**pod["metadata"], "namespace": "research"}} for pod in api.pods]
    api.routes[("GET", "/api/v1/namespaces/research/pods")] = {"kind": "PodList", "items": research_pods}
    asked: list[str] = []

    def query(params: dict[str, list[str]], _: object) -> tuple[int, object]:
        expr = params["query"][0]
        namespace = "research" if 'namespace="research"' in expr else NS
        asked.append(namespace)
        value = "50" if namespace == "research" else "90"
        result = [{"metric": {"pod": "mnist-master-0"}, "value": [0, value]}]
        return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}

    api.routes[("GET", "/api/v1/query")] = query
    url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    code, lines = jobs(kubeconfig, "top", "-A", "--prometheus-url", url)
    assert code == 0
    assert [line.split()[:4] for line in lines] == [
        ["NAMESPACE", "JOB", "POD", "GPU-UTIL"],
        ["research", "mnist", "mnist-master-0", "50%"],
        [NS, "mnist", "mnist-master-0", "90%"],
    ]
    assert sorted(asked) == ["research", "research", NS, NS]

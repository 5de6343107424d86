"""``ack-jobs logs``: the replica's pod resolved from its labels, then its log read with the
API server's own options (``tail_lines``, ``since_seconds``, ``timestamps``, ``previous``),
against the stand-in API server of ``tests/loopback_api.py``."""

from __future__ import annotations

from typing import Any

import pytest
from loopback_api import CTX, IMAGE, PODS, RUNNING_V1, V1, jobs, serve_gpt, serve_mnist, serve_mpi, v1_pod

from components.config import TrainingJobSpec
from components.manifests import pytorch_job


def _log_requests(api) -> list[tuple[str, dict[str, list[str]]]]:
    return [(p.removeprefix(f"{PODS}/"), q) for m, p, q, _ in api.requests if p.endswith("/log")]


def test_log_options_go_to_the_api_server(cluster) -> None:
    api, kubeconfig = cluster
    serve_mnist(api)
    api.routes[("GET", f"{PODS}/mnist-master-0/log")] = "2026-11-24T06:00:00Z step 120\n"
    argv = ["logs", "mnist", "--tail", "20", "--since", "1h30m", "--timestamps", "--previous"]
    assert jobs(kubeconfig, *argv) == (0, ["2026-11-24T06:00:00Z step 120"])
    assert _log_requests(api) == [
        (
            "mnist-master-0/log",
            {
                "container": ["pytorch"],
                "tailLines": ["20"],
                "sinceSeconds": ["5400"],
                "timestamps": ["True"],
                "previous": ["True"],
            },
        )
    ]


@pytest.mark.parametrize(("rank", "pod"), [("0", "mnist-master-0"), ("1", "mnist-worker-0")])
def test_rank_of_a_pytorchjob_is_the_master_then_the_workers(cluster, rank: str, pod: str) -> None:
    api, kubeconfig = cluster
    serve_mnist(api)
    api.routes[("GET", f"{PODS}/{pod}/log")] = f"hello from {pod}\n"
    assert jobs(kubeconfig, "logs", "mnist", "--rank", rank) == (0, [f"hello from {pod}"])


def test_an_mpijobs_log_is_its_launchers_whose_pod_has_no_replica_index(cluster) -> None:
    api, kubeconfig = cluster
    serve_mpi(api)
    api.routes[("GET", f"{PODS}/hvd-launcher/log")] = "rank 0 and rank 1: step 10\n"
    assert jobs(kubeconfig, "logs", "hvd") == (0, ["rank 0 and rank 1: step 10"])
    selectors = [q["labelSelector"][0] for m, p, q, _ in api.requests if p == PODS]
    assert selectors == ["training.kubeflow.org/job-name=hvd,training.kubeflow.org/replica-type=launcher"]
    assert _log_requests(api)[0][1] == {"container": ["mpi"]}


@pytest.mark.parametrize("rank", ["0", "1", "2"])
def test_rank_of_an_mpijob_is_refused_for_the_launchers_log(cluster, capsys, rank: str) -> None:
    """mpirun starts the ranks in the Workers through ``kubectl exec``, so their output reaches the
    Launcher's log; a Worker's own log is the operator's ``sleep 365d`` (v1.9.4 ``newWorker``)."""
    api, kubeconfig = cluster
    job = serve_mpi(api)
    assert "command" not in job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert jobs(kubeconfig, "logs", "hvd", "--rank", rank) == (2, [])
    err = capsys.readouterr().err
    assert err.startswith(f"ack-jobs logs: --rank {rank}: MPIJob hvd's ranks run under mpirun")
    assert "`ack-jobs logs hvd` without --rank" in err
    assert not [p for m, p, q, _ in api.requests if p.startswith(PODS)]


def test_rank_of_a_trainjob_is_its_node_index(cluster) -> None:
    api, kubeconfig = cluster
    serve_gpt(api)
    api.routes[("GET", f"{PODS}/gpt-node-0-1-x7k2q/log")] = "rank 1\n"
    assert jobs(kubeconfig, "logs", "gpt", "--rank", "1") == (0, ["rank 1"])
    selectors = [q["labelSelector"][0] for m, p, q, _ in api.requests if p == PODS]
    assert selectors == [
        "jobset.sigs.k8s.io/jobset-name=gpt,jobset.sigs.k8s.io/replicatedjob-name=node,"
        "batch.kubernetes.io/job-completion-index=1"
    ]
    assert _log_requests(api)[0][1] == {"container": ["node"]}


@pytest.mark.parametrize("serve", [serve_mnist, serve_gpt])
def test_a_rank_the_job_does_not_have(cluster, capsys, serve) -> None:
    api, kubeconfig = cluster
    job = serve(api)
    assert jobs(kubeconfig, "logs", job["metadata"]["name"], "--rank", "2") == (2, [])
    assert (
        capsys.readouterr().err
        == f"ack-jobs logs: --rank 2: {job['kind']} {job['metadata']['name']} has node ranks 0 to 1\n"
    )


def test_rank_of_an_elastic_job_is_refused_because_rendezvous_assigns_it(cluster, capsys) -> None:
    api, kubeconfig = cluster
    job = pytorch_job(TrainingJobSpec(name="elastic", image=IMAGE, elastic={"minNodes": 1, "maxNodes": 2}), CTX)
    job["status"] = {"conditions": RUNNING_V1, "replicaStatuses": {"Worker": {"active": 2}}}
    api.routes[("GET", f"{V1}/elastic")] = job
    api.pods += [v1_pod("elastic", "worker", 0), v1_pod("elastic", "worker", 1)]
    assert jobs(kubeconfig, "logs", "elastic", "--rank", "0") == (2, [])
    assert "ranks at rendezvous" in capsys.readouterr().err
    # Without --replica or --rank, an elastic job's log is worker-0's.
    api.routes[("GET", f"{PODS}/elastic-worker-0/log")] = "worker 0\n"
    assert jobs(kubeconfig, "logs", "elastic") == (0, ["worker 0"])


def test_all_replicas_prefix_each_line_with_its_pod(cluster) -> None:
    api, kubeconfig = cluster
    serve_mnist(api)
    api.routes[("GET", f"{PODS}/mnist-master-0/log")] = "a\nb\n"
    api.routes[("GET", f"{PODS}/mnist-worker-0/log")] = "c\n"
    assert jobs(kubeconfig, "logs", "mnist", "--all-replicas", "--tail", "5") == (
        0,
        ["[pod/mnist-master-0/pytorch] a", "[pod/mnist-master-0/pytorch] b", "[pod/mnist-worker-0/pytorch] c"],
    )
    assert {q["tailLines"][0] for _, q in _log_requests(api)} == {"5"}


def test_all_replicas_followed_together(cluster) -> None:
    api, kubeconfig = cluster
    serve_gpt(api)

    def stream(pod: str):
        def follow(query: dict[str, list[str]], _: Any) -> tuple[int, Any]:
            assert query["follow"] == ["True"]
            return 200, iter([f"{pod} up", f"{pod} done"])

        return follow

    for pod in ("gpt-node-0-0-x7k2q", "gpt-node-0-1-x7k2q"):
        api.routes[("GET", f"{PODS}/{pod}/log")] = stream(pod)
    code, lines = jobs(kubeconfig, "logs", "gpt", "-f", "--all-replicas")
    assert code == 0
    assert sorted(lines) == sorted(
        f"[pod/{pod}/node] {pod} {word}"
        for pod in ("gpt-node-0-0-x7k2q", "gpt-node-0-1-x7k2q")
        for word in ("up", "done")
    )
    # Each pod's own lines keep their order.
    assert lines.index("[pod/gpt-node-0-0-x7k2q/node] gpt-node-0-0-x7k2q up") < lines.index(
        "[pod/gpt-node-0-0-x7k2q/node] gpt-node-0-0-x7k2q done"
    )

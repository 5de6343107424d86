"""An emitted ``restartPolicy: ExitCode`` PyTorchJob's pods count their own retries, end to
end: the builder's container, with its ``POD_NAME`` from the downward API, runs as a local
process on the stand-in cluster of ``fixtures.local_cluster``, with what the v1.9.4 operator
adds (``fixtures.pytorch_pods``). On the eRDMA pool the pods use the node's network, so the
host name is the node's and only ``POD_NAME`` names the pod across its re-creations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fixtures.local_cluster import Cluster, MissingReference, wait_all
from fixtures.operator_pods import OperatorPod
from fixtures.pytorch_pods import pytorch_pods
from test_jobs import IMAGE, POOL_8_ERDMA, context

from components.config import TrainingJobSpec
from components.manifests import pytorch_job
from trainer.exit_codes import TRANSIENT_STATUS
from trainer.restarts import EXHAUSTED_STATUS


def erdma_job() -> dict[str, Any]:
    """A two-node eRDMA job whose pods may fail retryably once in a row (``backoffLimit: 1``)."""
    spec = TrainingJobSpec(
        name="gpt",
        image=IMAGE,
        nodes=2,
        network="rdma",
        restart_policy="ExitCode",
        run_policy={"backoff_limit": 1},
        trainer={"model": "gpt", "max_steps": 10},
    )
    return pytorch_job(spec, context(POOL_8_ERDMA, 8))


def test_the_operator_stand_in_gives_rank_world_and_master() -> None:
    # v1.9.4 pkg/controller.v1/pytorch/envvar.go setPodEnv: with a Master, the Master's
    # address and pytorchjob-port (master.go, plain and PET_), WORLD_SIZE = replicas times a
    # numeric nprocPerNode, RANK and PET_NODE_RANK one past the index for a Worker;
    # PET_NPROC_PER_NODE as the job gives it; PET_NNODES = replicas without an elastic policy.
    pods = pytorch_pods(erdma_job())
    assert {key: pod.name for key, pod in pods.items()} == {
        ("Master", 0): "gpt-master-0",
        ("Worker", 0): "gpt-worker-0",
    }
    assert pods[("Worker", 0)].env == {
        "PYTHONUNBUFFERED": "1",
        "MASTER_PORT": "23456",
        "PET_MASTER_PORT": "23456",
        "MASTER_ADDR": "gpt-master-0",
        "PET_MASTER_ADDR": "gpt-master-0",
        "WORLD_SIZE": "16",
        "RANK": "1",
        "PET_NODE_RANK": "1",
        "PET_NPROC_PER_NODE": "8",
        "PET_NNODES": "2",
    }
    # Without nprocPerNode the operator's defaulting sets "auto" (pytorch_defaults.go
    # setDefaultNprocPerNode), which counts as 1 in WORLD_SIZE (getNprocPerNodeInt).
    job = erdma_job()
    del job["spec"]["nprocPerNode"]
    env = pytorch_pods(job)[("Master", 0)].env
    assert (env["PET_NPROC_PER_NODE"], env["WORLD_SIZE"], env["RANK"]) == ("auto", "2", "0")


def test_a_worker_recreated_on_other_nodes_stops_after_its_restarts(tmp_path: Path) -> None:
    job = erdma_job()
    specs = job["spec"]["pytorchReplicaSpecs"]
    # The Master's pod is gone with its node: its name resolves to nothing, and each attempt
    # of the Worker fails its rendezvous (203, retryable). PET_RDZV_CONF is torchrun's
    # --rdzv-conf, shortening the wait for a Master that never comes.
    worker = pytorch_pods(job)[("Worker", 0)]
    worker = OperatorPod(worker.name, worker.env | {"PET_RDZV_CONF": "timeout=2"})
    cluster = Cluster(
        {"Worker": specs["Worker"]["template"]["spec"]["containers"][0]},
        {("Worker", 0): worker},
        tmp_path,
        namespace=job["metadata"]["namespace"],
        host_network={"Worker"},
    )
    env = cluster.env("Worker", 0, node="node-a")
    assert (env["POD_NAME"], env["HOSTNAME"]) == ("gpt-worker-0", "node-a")
    # Re-created by the operator on another node each time, under the same name.
    (first,) = wait_all([cluster.start("Worker", 0, node="node-a")], timeout=90)
    assert first[0] == TRANSIENT_STATUS, first[1][-3000:]
    record = Path(env["OUTPUT_PATH"]) / ".restarts" / "gpt-worker-0.json"
    assert record.is_file()
    (second,) = wait_all([cluster.start("Worker", 0, node="node-b")], timeout=90)
    assert second[0] == EXHAUSTED_STATUS, second[1][-3000:]
    assert second[1].splitlines()[-1] == (
        "error: pod gpt-worker-0 failed with status 203 2 times in a row without a new checkpoint "
        "(--max-pod-restarts 1); exiting 75 so the job stops"
    )


SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "hub", "namespace": "training"},
    "data": {"token": "c2VjcmV0"},  # base64 of "secret"
    "stringData": {"user": "me"},
}
CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "opts", "namespace": "training"}}


def _cluster(tmp_path: Path, *env: dict[str, Any], objects: list[dict[str, Any]]) -> Cluster:
    container = {"command": ["true"], "env": list(env)}
    return Cluster(
        {"Worker": container},
        {("Worker", 0): OperatorPod("p-worker-0")},
        tmp_path,
        namespace="training",
        objects=objects,
    )


def _ref(kind: str, name: str, key: str, **more: Any) -> dict[str, Any]:
    return {"valueFrom": {kind: {"name": name, "key": key, **more}}}


def test_value_from_resolves_as_the_kubelet_does(tmp_path: Path) -> None:
    other_namespace = {**CONFIG, "metadata": {"name": "opts", "namespace": "elsewhere"}, "data": {"lr": "9"}}
    cluster = _cluster(
        tmp_path,
        {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "TOKEN", **_ref("secretKeyRef", "hub", "token")},
        {"name": "USER", **_ref("secretKeyRef", "hub", "user")},
        {"name": "LR", **_ref("configMapKeyRef", "opts", "lr")},
        {"name": "GONE", **_ref("configMapKeyRef", "opts", "missing", optional=True)},
        objects=[SECRET, {**CONFIG, "data": {"lr": "0.1"}}, other_namespace],
    )
    env = cluster.env("Worker", 0)
    assert {k: env.get(k) for k in ("NAME", "NS", "IP", "TOKEN", "USER", "LR", "GONE")} == {
        "NAME": "p-worker-0",
        "NS": "training",
        "IP": "127.0.0.2",
        "TOKEN": "secret",
        "USER": "me",
        "LR": "0.1",
        "GONE": None,
    }


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (_ref("secretKeyRef", "hub", "nope"), r"Secret training/hub has no key 'nope'"),
        (_ref("configMapKeyRef", "absent", "lr"), r"ConfigMap training/absent has no key 'lr'"),
    ],
)
def test_a_missing_reference_keeps_the_container_from_starting(tmp_path: Path, entry: dict, problem: str) -> None:
    cluster = _cluster(tmp_path, {"name": "X", **entry}, objects=[SECRET, CONFIG])
    with pytest.raises(MissingReference, match=problem):
        cluster.start("Worker", 0)


def test_a_value_source_not_modelled_is_refused(tmp_path: Path) -> None:
    limits = {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}}
    with pytest.raises(ValueError, match=r"valueFrom \['resourceFieldRef'\]: only fieldRef"):
        _cluster(tmp_path, limits, objects=[]).env("Worker", 0)
    node = {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    with pytest.raises(ValueError, match=r"fieldRef 'spec.nodeName': only"):
        _cluster(tmp_path / "n", node, objects=[]).env("Worker", 0)

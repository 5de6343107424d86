"""Emitted JAXJobs and TFJobs run as the Training Operator v1.9.4 starts their pods, on the
stand-in cluster of ``test_kind_runs`` (each pod a local process with its own loopback address
for its name), with the programs docs/job-kinds.md shows.

What the stand-in adds for a TFJob: the hosts in ``TF_CONFIG`` (``<pod>.<namespace>.svc``)
resolve to the pods' addresses, and each replica type has its own free port, as TensorFlow's
server listens on every interface of the host the pods share. TensorFlow runs from its own
environment, ``.venv-tf`` (requirements-tf.txt).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, free_port, missing
from fixtures.local_cluster import STUCK_S, Cluster, Mutation, wait_all, with_env
from fixtures.operator_pods import OperatorPod, operator_pods, replica_containers, tf_config
from test_jobs import IMAGE, context
from test_kind_runs import DOC, emitted, v1_cluster

from components.config import TrainingJobSpec
from components.manifests import CPU_PLACEMENT, kubeflow_job


def documented(marker: str) -> str:
    """The Python program in docs/job-kinds.md that contains ``marker``."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    return next(block for block in blocks if marker in block)


# ---- JAX -----------------------------------------------------------------------------------


def jax() -> None:
    try:
        import jax  # noqa: F401
    except ImportError:
        missing(
            "jax",
            ci="requirements-kinds.txt pins jax and jaxlib, which ./dev test installs",
            install="./dev test, or pip install -r requirements-kinds.txt, brings jax and jaxlib",
        )


def jax_job(nodes: int = 2) -> TrainingJobSpec:
    """The docs' ``jax`` example, on CPU."""
    return TrainingJobSpec(
        name="jax",
        image=IMAGE,
        framework="jax",
        nodes=nodes,
        gpus_per_node=0,
        command=["python", "train_jax.py"],
    )


def run_jax(tmp_path: Path, wrong: Mutation | None = None, timeout: float = 90) -> list[tuple[int, str]]:
    cluster = v1_cluster(emitted(jax_job()), tmp_path, wrong)
    (cluster.workdir / "train_jax.py").write_text(documented("jax.distributed.initialize"))
    procs = [cluster.start(replica, index) for replica, index in cluster.pods]
    return wait_all(procs, timeout=timeout)


def printed(results: list[tuple[int, str]]) -> list[dict[str, Any]]:
    """The last JSON line each process printed."""
    return [json.loads(re.findall(r"^\{.*\}$", out, re.M)[-1]) for _, out in results]


def test_jax_pods_get_the_operators_coordinator_and_process_ids() -> None:
    pods = operator_pods(emitted(jax_job(nodes=3)))
    port = pods[("Worker", 0)].env["COORDINATOR_PORT"]
    assert [(pod.name, pod.env["PROCESS_ID"]) for pod in pods.values()] == [
        ("jax-worker-0", "0"),
        ("jax-worker-1", "1"),
        ("jax-worker-2", "2"),
    ]
    for pod in pods.values():
        assert pod.command is None and pod.files == {}
        assert pod.env == pod.env | {
            "COORDINATOR_ADDRESS": "jax-worker-0",
            "COORDINATOR_PORT": port,
            "NUM_PROCESSES": "3",
            "PYTHONUNBUFFERED": "1",
        }
    manifest = emitted(jax_job())
    manifest["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"] = []
    with pytest.raises(ValueError, match="the jax container has no port named jaxjob-port"):
        operator_pods(manifest)


def test_a_jax_job_sums_across_its_pods(tmp_path: Path) -> None:
    jax()
    results = run_jax(tmp_path)
    assert [status for status, _ in results] == [0, 0], results
    # 1 + 2: each process's PROCESS_ID + 1, on one device each.
    assert printed(results) == [
        {"process": 0, "devices": 2, "sum": 3.0},
        {"process": 1, "devices": 2, "sum": 3.0},
    ], results


def _in_worker(index: int, **env: str) -> Mutation:
    """An operator that gives one Worker other values."""
    return lambda rtype, i, pod: replace(pod, env=pod.env | env) if i == index else pod


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        # The coordinator aborts on the second registration of task 0, or both wait for task 1.
        pytest.param(with_env("Worker", PROCESS_ID="0"), "", id="process-id-duplicated"),
        # JAX itself would run on with the coordinator's count: the documented check stops it.
        pytest.param(_in_worker(1, NUM_PROCESSES="3"), "env: 1 of 3", id="num-processes-off-by-one"),
        pytest.param(
            with_env("Worker", NUM_PROCESSES="1"), "process_id < num_processes", id="num-processes-of-one-pod"
        ),
    ],
)
def test_a_wrong_jax_variable_fails_the_run(tmp_path: Path, wrong: Mutation, said: str) -> None:
    jax()
    # A good run takes seconds; processes left waiting for a peer are killed, as a failed job's pods.
    results = run_jax(tmp_path, wrong, timeout=STUCK_S)
    assert any(status != 0 for status, _ in results), results
    assert not any('"sum": 3.0' in out for _, out in results), results
    assert any(said in out for _, out in results), results


# ---- TensorFlow ----------------------------------------------------------------------------


def tf_job(**extra: Any) -> TrainingJobSpec:
    return TrainingJobSpec(
        name="tf-ps", image=IMAGE, framework="tensorflow", command=["python", "train_ps.py"], **extra
    )


def test_the_documented_tf_config_is_the_operators() -> None:
    """The docs' ``tf-ps`` example: Chief, 2 Workers, 2 PS and an Evaluator, ports as emitted."""
    manifest = kubeflow_job(tf_job(nodes=3, parameter_servers=2, evaluator=True), context(CPU_PLACEMENT, 0))
    documented = re.search(r"```json\n(\{\"cluster\".*?)\n```", DOC.read_text(), re.S)
    assert documented is not None
    assert tf_config(manifest, "Worker", 1) == documented[1]


def test_tf_pods_name_their_own_task_in_one_cluster() -> None:
    manifest = emitted(tf_job(nodes=2))
    pods = operator_pods(manifest)
    port = manifest["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]["ports"][0]
    cluster = {
        "chief": [f"tf-ps-chief-0.training.svc:{port['containerPort']}"],
        "worker": [f"tf-ps-worker-0.training.svc:{port['containerPort']}"],
    }
    assert {key: (pod.name, json.loads(pod.env["TF_CONFIG"])) for key, pod in pods.items()} == {
        ("Chief", 0): (
            "tf-ps-chief-0",
            {"cluster": cluster, "task": {"type": "chief", "index": 0}, "environment": "cloud"},
        ),
        ("Worker", 0): (
            "tf-ps-worker-0",
            {"cluster": cluster, "task": {"type": "worker", "index": 0}, "environment": "cloud"},
        ),
    }
    assert all(list(pod.env) == ["TF_CONFIG"] for pod in pods.values())


def test_a_tf_port_missing_from_a_template_is_the_default_one() -> None:
    manifest = emitted(tf_job(nodes=2))
    manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"] = []
    cluster = json.loads(tf_config(manifest, "Chief", 0) or "")["cluster"]
    assert cluster["worker"] == ["tf-ps-worker-0.training.svc:2222"]
    assert cluster["chief"] != ["tf-ps-chief-0.training.svc:2222"]


def test_a_tf_job_of_one_pod_gets_no_tf_config() -> None:
    pods = operator_pods(emitted(tf_job(nodes=1)))
    assert list(pods) == [("Chief", 0)]
    chief = pods[("Chief", 0)]
    assert (chief.name, chief.env, chief.files, chief.command) == ("tf-ps-chief-0", {}, {}, None)


TF_PYTHON = ROOT / ".venv-tf" / "bin" / "python"


def tensorflow() -> None:
    if not TF_PYTHON.exists():
        missing(
            "TensorFlow (.venv-tf)",
            ci=".ci/run makes .venv-tf from requirements-tf.txt",
            install="python3 -m venv .venv-tf && .venv-tf/bin/pip install -r requirements-tf.txt",
        )


class TFCluster(Cluster):
    """A TFJob's pods: ``python`` is TensorFlow's environment, and ``TF_CONFIG``'s Service names
    resolve; a name that is no pod stays as it is and does not resolve."""

    python = str(TF_PYTHON)

    def __init__(self, manifest: dict[str, Any], tmp_path: Path, wrong: Mutation | None = None) -> None:
        super().__init__(replica_containers(manifest), operator_pods(manifest), tmp_path, wrong)
        self.namespace = manifest["metadata"]["namespace"]

    def _resolve(self, value: str) -> str:
        namespace = re.escape(self.namespace)
        service = rf"([a-z0-9-]+)\.{namespace}\.svc"
        return re.sub(service, lambda m: self.address.get(m[1], m[0]), super()._resolve(value))


def tf_emitted(job: TrainingJobSpec) -> dict[str, Any]:
    """The builder's object, with a free port for each replica type's ``tfjob-port``."""
    manifest = emitted(job)
    for spec in manifest["spec"]["tfReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = free_port()
    return manifest


def run_tf(tmp_path: Path, wrong: Mutation | None = None) -> list[tuple[int, str]]:
    cluster = TFCluster(tf_emitted(tf_job(nodes=2, gpus_per_node=0)), tmp_path, wrong)
    (cluster.workdir / "train_ps.py").write_text(documented("MultiWorkerMirroredStrategy"))
    procs = [cluster.start(replica, index) for replica, index in cluster.pods]
    return wait_all(procs, timeout=120)


def test_a_tf_job_trains_one_model_on_the_chief_and_the_worker(tmp_path: Path) -> None:
    tensorflow()
    results = run_tf(tmp_path)
    assert [status for status, _ in results] == [0, 0], results
    chief, worker = printed(results)
    assert (chief["task"], worker["task"]) == ("chief-0", "worker-0")
    assert chief["replicas"] == worker["replicas"] == 2
    # 256 examples in global batches of 32.
    assert chief["steps"] == worker["steps"] == 8
    assert chief["weights"] == worker["weights"] and chief["loss"] == worker["loss"]


def _tf_task(replica: str, index: int) -> Mutation:
    """An operator that names another task index in ``replica``'s ``TF_CONFIG``."""

    def wrong(rtype: str, i: int, pod: OperatorPod) -> OperatorPod:
        if rtype != replica:
            return pod
        config = json.loads(pod.env["TF_CONFIG"])
        config["task"]["index"] = index
        return replace(pod, env=pod.env | {"TF_CONFIG": json.dumps(config)})

    return wrong


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(_tf_task("Worker", 1), id="worker-index-past-the-workers"),
        pytest.param(_tf_task("Chief", 1), id="chief-index-1"),
    ],
)
def test_a_wrong_tf_config_task_fails_the_run(tmp_path: Path, wrong: Mutation) -> None:
    tensorflow()
    results = run_tf(tmp_path, wrong)
    assert any(status != 0 for status, _ in results), results
    assert any("exceeds the maximum id" in out for _, out in results), results

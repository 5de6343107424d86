"""Emitted JAXJobs run as the Training Operator v1.9.4 starts their pods, on the stand-in cluster
of ``test_kind_runs`` (each pod a local process with its own loopback address for its name);
TFJobs' ``TF_CONFIG`` is derived and compared whole, as no TensorFlow runs here (see
docs/job-kinds.md, Known limits).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fixtures.operator_pods import OperatorPod, operator_pods, tf_config
from test_jobs import IMAGE, context
from test_kind_runs import DOC, Cluster, Mutation, emitted, wait_all, with_env

from components.config import TrainingJobSpec
from components.manifests import CPU_PLACEMENT, kubeflow_job


def documented_jax_program() -> str:
    """The JAX program docs/job-kinds.md shows: ``jax.distributed.initialize`` from the
    operator's variables, then one sum over every process's devices."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    return next(block for block in blocks if "jax.distributed.initialize" in block)


# ---- JAX -----------------------------------------------------------------------------------


def jax() -> None:
    try:
        import jax  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("jax is missing: requirements-dev.txt pins jax and jaxlib, which .ci/run installs")
        pytest.skip("jax is not installed (pip install -r requirements-dev.txt brings jax and jaxlib)")


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
    cluster = Cluster(emitted(jax_job()), tmp_path, wrong)
    (cluster.workdir / "train_jax.py").write_text(documented_jax_program())
    procs = [cluster.start(replica, index) for replica, index in cluster.pods]
    return wait_all(procs, timeout=timeout)


def summed(results: list[tuple[int, str]]) -> list[dict[str, Any]]:
    """What each process printed last: its number, the devices it saw and the sum."""
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
    assert summed(results) == [
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
    results = run_jax(tmp_path, wrong, timeout=20)
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
    assert pods == {("Chief", 0): OperatorPod("tf-ps-chief-0")}

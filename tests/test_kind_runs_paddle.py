"""Emitted PaddleJobs run as the Training Operator v1.9.4 starts their pods: each Worker is a
local process on the stand-in cluster of ``fixtures.local_cluster`` running the builder's
command, ``python -m paddle.distributed.launch`` with the program docs/job-kinds.md shows,
with exactly the ``PADDLE_*`` variables ``fixtures.operator_pods`` derives. Paddle's CPU
build reduces over Gloo, so the run needs no GPU.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import ROOT, missing
from fixtures.local_cluster import STUCK_S, Mutation, wait_all, with_env
from fixtures.operator_pods import OperatorPod, operator_pods
from test_jobs import IMAGE
from test_kind_runs import emitted, v1_cluster

from components.config import TrainingJobSpec

DOC = ROOT / "docs" / "job-kinds.md"

GOOD_RUN_S = 120
"""Two launchers, each starting one Paddle process: well under a minute, even on a busy host.
A launcher that never finds its peers waits for ever (``HTTPMaster.sync_peers``): such runs
get ``STUCK_S``."""


def paddle() -> None:
    # Found, not imported: only the pods' processes need Paddle, which takes seconds to import.
    if importlib.util.find_spec("paddle") is None:
        missing(
            "paddle",
            ci="requirements-kinds.txt pins paddlepaddle, which ./dev test installs",
            install="./dev test, or pip install -r requirements-kinds.txt, brings paddlepaddle",
        )


def documented_paddle_program() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    return next(block for block in blocks if "init_parallel_env" in block)


def paddle_job(nodes: int = 2) -> TrainingJobSpec:
    return TrainingJobSpec(
        name="paddle",
        image=IMAGE,
        framework="paddle",
        nodes=nodes,
        gpus_per_node=0,
        command=["python", "-m", "paddle.distributed.launch", "train_paddle.py"],
    )


def run_paddle(
    tmp_path: Path, wrong: Mutation | None = None, timeout: float = GOOD_RUN_S
) -> tuple[list[tuple[int, str]], list[dict]]:
    """Every Worker's status and output, and what each rank wrote."""
    cluster = v1_cluster(emitted(paddle_job()), tmp_path, wrong)
    (cluster.workdir / "train_paddle.py").write_text(documented_paddle_program())
    results = wait_all([cluster.start(replica, index) for replica, index in cluster.pods], timeout=timeout)
    output = Path(cluster.env("Worker", 0)["OUTPUT_PATH"])
    ranks = [json.loads(path.read_text()) for path in sorted(output.glob("rank-*.json"))]
    return results, ranks


def with_master(host: str) -> Mutation:
    """A controller that gives every Worker ``PADDLE_MASTER=<host>:<the port>`` (``index``
    formats into ``host``)."""

    def wrong(rtype: str, index: int, pod: OperatorPod) -> OperatorPod:
        port = pod.env["PADDLE_MASTER"].rpartition(":")[2]
        return replace(pod, env=pod.env | {"PADDLE_MASTER": f"{host.format(index=index)}:{port}"})

    return wrong


def test_paddle_pods_get_the_operators_master_node_count_and_job_id(tmp_path: Path) -> None:
    manifest = emitted(paddle_job(nodes=3))
    port = manifest["spec"]["paddleReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"][0]
    assert port["name"] == "master"
    pods = operator_pods(manifest)
    assert list(pods) == [("Worker", 0), ("Worker", 1), ("Worker", 2)]
    common = {"PYTHONUNBUFFERED": "1", "PADDLE_JOB_ID": "paddle", "PADDLE_NNODES": "3"}
    assert pods[("Worker", 0)] == OperatorPod(
        "paddle-worker-0",
        common | {"POD_IP_DUMMY": "paddle-worker-0", "PADDLE_MASTER": f"$(POD_IP_DUMMY):{port['containerPort']}"},
    )
    for index in (1, 2):
        master = f"paddle-worker-0:{port['containerPort']}"
        assert pods[("Worker", index)] == OperatorPod(f"paddle-worker-{index}", common | {"PADDLE_MASTER": master})
    # Kubernetes expands $(POD_IP_DUMMY) into Worker 0's own address, which the others reach
    # through its Service.
    cluster = v1_cluster(manifest, tmp_path)
    assert {cluster.env("Worker", i)["PADDLE_MASTER"] for i in (0, 1, 2)} == {f"127.0.0.2:{port['containerPort']}"}


def test_paddle_pods_are_derived_in_collective_mode_only() -> None:
    manifest = emitted(paddle_job())
    specs = manifest["spec"]["paddleReplicaSpecs"]
    with pytest.raises(ValueError, match="a PaddleJob with a Master runs in parameter-server mode"):
        operator_pods(manifest | {"spec": {"paddleReplicaSpecs": specs | {"Master": specs["Worker"]}}})
    specs["Worker"]["template"]["spec"]["containers"][0]["ports"] = []
    with pytest.raises(ValueError, match="the paddle container has no port named master"):
        operator_pods(manifest)


def test_a_paddle_job_all_reduces_across_its_pods(tmp_path: Path) -> None:
    paddle()
    results, ranks = run_paddle(tmp_path)
    assert [status for status, _ in results] == [0, 0], results
    # Rank r adds r + 1: both ranks joined one world of two.
    assert ranks == [{"rank": 0, "world": 2, "sum": 3.0}, {"rank": 1, "world": 2, "sum": 3.0}], results


@pytest.mark.parametrize(
    ("wrong", "timeout"),
    [
        pytest.param(with_env("Worker", PADDLE_NNODES="1"), GOOD_RUN_S, id="one-node-each"),
        # Each Worker starts a rendezvous server of its own and waits there for the other.
        pytest.param(with_master("paddle-worker-{index}"), STUCK_S, id="master-naming-its-own-pod"),
        pytest.param(with_master("paddle-worker"), STUCK_S, id="master-without-the-index"),
    ],
)
def test_a_wrong_paddle_variable_fails_the_run(tmp_path: Path, wrong: Mutation, timeout: float) -> None:
    paddle()
    results, ranks = run_paddle(tmp_path, wrong, timeout)
    good = [status for status, _ in results] == [0, 0]
    assert not (good and [(r["rank"], r["world"], r["sum"]) for r in ranks] == [(0, 2, 3.0), (1, 2, 3.0)]), results

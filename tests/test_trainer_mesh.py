"""Tensor and pipeline parallelism for the Llama model: the mesh's rules as tables, and real
two-process torchrun runs (gloo, CPU) that train as one process does, resume bit-identically
across a killed worker, and resume a tensor-parallel checkpoint under FSDP.

Tolerance against the one-process run: losses to a relative 1e-5 and final weights to an
absolute 1e-5 (they are about 0.02 in size). Tensor parallelism adds each row-parallel
projection's partial sums in another order (a reduce-scatter of two halves rather than one dot
product), and a pipeline sums its micro-batches' gradients one by one rather than in one
matrix product: both change fp32 rounding (2^-24 relative, about 6e-8) in every step, and
AdamW's normalised update carries such differences on. Over 36 steps they stay below 1e-6 here;
1e-5 leaves room while still failing on any wrong scale or misplaced shard, which moves the
weights by the learning rate itself (1e-4 and more per step). A run resumed at the same mesh
must match its uninterrupted twin bit for bit.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
import torch
from test_trainer import children, final_weights, metrics, run, start, torchrun, wait_for

from trainer.checkpoint import read_commit
from trainer.mesh import MeshShape, check_split, mesh_shape, stage_layers
from trainer.shapes import LLAMA_SIZES

LLAMA = ["--model", "llama", "--batch-size", "4", "--synthetic-size", "400", "--log-every", "6"]
STEPS = ["--max-steps", "36", "--checkpoint-every", "12"]


@pytest.mark.parametrize(
    ("world", "tp", "pp", "shape"),
    [(2, 2, 1, MeshShape(1, 1, 2)), (2, 1, 2, MeshShape(1, 2, 1)), (8, 2, 2, MeshShape(2, 2, 2))],
)
def test_the_mesh_of_a_world(world: int, tp: int, pp: int, shape: MeshShape) -> None:
    assert mesh_shape(world, tp, pp) == shape


def test_tensor_parallel_ranks_are_consecutive_and_stages_tp_apart() -> None:
    shape = MeshShape(2, 2, 2)
    assert [shape.coordinates(r) for r in range(8)] == [
        (0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1), (1, 0, 0), (1, 0, 1), (1, 1, 0), (1, 1, 1)
    ]  # fmt: skip


def test_a_mesh_that_does_not_divide_the_world_is_refused_naming_the_flags() -> None:
    with pytest.raises(ValueError, match=r"--tp 2 × --pp 2 = 4 does not divide the job's 6 processes"):
        mesh_shape(6, 2, 2)


def test_stages_take_consecutive_blocks_the_earlier_ones_the_extra() -> None:
    assert [stage_layers(80, 3, s) for s in range(3)] == [range(0, 27), range(27, 54), range(54, 80)]
    assert [stage_layers(4, 2, s) for s in range(2)] == [range(0, 2), range(2, 4)]


@pytest.mark.parametrize(
    ("size", "tp", "pp", "batch", "microbatches", "error"),
    [
        ("tiny", 2, 1, 4, 1, None),
        ("8b", 8, 1, 1, 1, None),  # 32 query heads, 8 key-value heads: one kv head per rank
        ("70b", 8, 4, 4, 4, None),
        ("tiny", 4, 1, 4, 1, "--tp 4: --llama-size tiny has 2 key-value heads, which 4 ranks cannot split evenly; "
         "choose --tp from 1, 2"),
        ("8b", 16, 1, 1, 1, "--tp 16: --llama-size 8b has 8 key-value heads, which 16 ranks cannot split evenly; "
         "choose --tp from 1, 2, 4, 8"),
        ("tiny", 1, 8, 8, 8, "--pp 8: --llama-size tiny has 4 blocks; choose --pp up to 4"),
        ("1b", 1, 2, 2, 2, "--pp 2: --llama-size 1b ties its output head to its embedding"),
        ("tiny", 1, 2, 4, 1, "--microbatches 1: the 1F1B schedule needs at least --pp (2) micro-batches"),
        ("tiny", 1, 2, 5, 2, "--batch-size 5 must divide into them evenly"),
    ],
)  # fmt: skip
def test_what_a_llama_can_be_split_by(
    size: str, tp: int, pp: int, batch: int, microbatches: int, error: str | None
) -> None:
    why = check_split(LLAMA_SIZES[size], size, tp, pp, batch, microbatches)
    assert why == error if error is None else error in why


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--model", "gpt", "--tp", "2"], "error: --tp and --pp split the llama model's layers, not --model gpt"),
        (
            ["--model", "llama", "--tp", "2", "--parallel", "ddp"],
            "error: --parallel ddp with --tp 2 --pp 1: beside tensor or pipeline parallelism the data-parallel "
            "replicas are FSDP shards (--parallel fsdp, or leave --parallel out); --parallel auto chooses --tp and "
            "--pp itself",
        ),
        (
            ["--model", "llama", "--tp", "3"],
            "error: --tp 3: --llama-size tiny has 4 query heads, which 3 ranks cannot split evenly; choose --tp from "
            "1, 2",
        ),
        (
            ["--model", "llama", "--tp", "2"],
            "error: --tp 2 × --pp 1 = 2 does not divide the job's 1 processes: the processes are arranged as "
            "data-parallel replicas × --pp × --tp; choose --tp and --pp whose product divides 1",
        ),
    ],
)
def test_bad_mesh_flags_are_refused_in_one_line(tmp_path: Path, flags: list[str], error: str) -> None:
    refused = run([sys.executable, "-m", "trainer", *flags, "--max-steps", "1", "--output-dir", str(tmp_path)])
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1] == error
    assert "Traceback" not in refused.stderr


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unsharded run every mesh is compared with: one process, the same global batch."""
    out = tmp_path_factory.mktemp("one-process")
    # One thread (the harness's OMP_NUM_THREADS), as each of the two processes has.
    done = run([sys.executable, "-m", "trainer", *LLAMA, *STEPS, "--output-dir", str(out)])
    assert done.returncode == 0, done.stderr
    return out


def matches_one_process(out: Path, one_process: Path) -> None:
    rows, reference = metrics(out), metrics(one_process)
    assert [r["step"] for r in rows] == [r["step"] for r in reference] == list(range(6, 37, 6))
    for row, ref in zip(rows, reference, strict=True):
        assert row["loss"] == pytest.approx(ref["loss"], rel=1e-5)
        assert row["grad_norm"] == pytest.approx(ref["grad_norm"], rel=1e-4)
    assert rows[-1]["loss"] < rows[0]["loss"] - 0.5
    a, b = final_weights(out), final_weights(one_process)
    assert list(a) == list(b) and all(a[k].shape == b[k].shape for k in a)
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5


def kill_after_first_checkpoint(args: list[str], out: Path, restarts: int) -> str:
    """``args`` under torchrun, one worker killed once step 12's checkpoint is committed."""
    launcher = start(torchrun(*args, "--output-dir", str(out), restarts=restarts))
    try:
        wait_for(lambda: read_commit(out / "checkpoints" / "step-000000012") is not None, timeout=200)
        workers = children(launcher.pid)
        assert len(workers) == 2
        os.kill(max(workers), signal.SIGKILL)
        log, _ = launcher.communicate(timeout=240)
    finally:
        launcher.kill()
    assert (launcher.returncode == 0) == (restarts > 0), log
    return log


def same_weights(a: Path, b: Path) -> bool:
    x, y = final_weights(a), final_weights(b)
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


@pytest.fixture(scope="module")
def tensor_parallel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tp")
    done = run(torchrun("trainer", *LLAMA, *STEPS, "--tp", "2", "--output-dir", str(out)))
    assert done.returncode == 0, done.stderr
    assert "training llama on 2 process(es) (mesh dp 1 × pp 1 × tp 2)" in done.stdout
    return out


def test_tensor_parallel_trains_as_one_process_does(tensor_parallel: Path, one_process: Path) -> None:
    matches_one_process(tensor_parallel, one_process)


def test_tensor_parallel_resumes_bit_identical_after_a_kill(tensor_parallel: Path, tmp_path: Path) -> None:
    log = kill_after_first_checkpoint(["trainer", *LLAMA, *STEPS, "--tp", "2"], tmp_path, restarts=1)
    assert "resumed from step-000000012" in log
    assert same_weights(tmp_path, tensor_parallel)


def test_a_tensor_parallel_checkpoint_resumes_under_fsdp(tensor_parallel: Path, tmp_path: Path) -> None:
    # Saved at dp 1 × tp 2, resumed as FSDP over 2 processes, each reading half of the same
    # global batch of 4: DCP reshards every parameter and AdamW moment from column and row
    # slices to FSDP's dim-0 shards.
    kill_after_first_checkpoint(["trainer", *LLAMA, *STEPS, "--tp", "2"], tmp_path, restarts=0)
    assert [p.name for p in (tmp_path / "checkpoints").glob("step-*")] == ["step-000000012"]
    fsdp = [a if a != "4" else "2" for a in LLAMA]
    resumed = run(torchrun("trainer", *fsdp, *STEPS, "--parallel", "fsdp", "--output-dir", str(tmp_path)))
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from step-000000012" in resumed.stdout and "(FSDP)" in resumed.stdout
    rows = {r["step"]: r for r in metrics(tmp_path)}
    for row in metrics(tensor_parallel):
        assert rows[row["step"]]["loss"] == pytest.approx(row["loss"], rel=1e-5)
    a, b = final_weights(tmp_path), final_weights(tensor_parallel)
    assert a.keys() == b.keys() and max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pp")
    done = run(torchrun("trainer", *LLAMA, *STEPS, "--pp", "2", "--output-dir", str(out)))
    assert done.returncode == 0, done.stderr
    assert "training llama on 2 process(es) (mesh dp 1 × pp 2 × tp 1)" in done.stdout
    return out


def test_a_pipeline_trains_as_one_process_does(pipeline: Path, one_process: Path) -> None:
    matches_one_process(pipeline, one_process)


def test_a_pipeline_resumes_bit_identical_after_a_kill(pipeline: Path, tmp_path: Path) -> None:
    log = kill_after_first_checkpoint(["trainer", *LLAMA, *STEPS, "--pp", "2"], tmp_path, restarts=1)
    assert "resumed from step-000000012" in log
    assert same_weights(tmp_path, pipeline)

"""Tensor and pipeline parallelism for the Llama model: the mesh's rules as tables, and real
two- and four-process torchrun runs (gloo, CPU) that train as one process does, resume
bit-identically across a killed worker, and resume a tensor-parallel checkpoint under FSDP.

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

import sys
from pathlib import Path

import pytest
import torch
from conftest import free_port
from test_trainer import final_weights, metrics, run, torchrun
from test_trainer_exporter import by_label, scrape_when
from worker_kill import kill_a_worker

from trainer.config import LLAMA_SIZES, Config, check_split
from trainer.models.llama import Llama
from trainer.parallelism.auto import memory_inputs, split_choices
from trainer.parallelism.mesh import MeshShape, mesh_shape, stage_layers
from trainer.parallelism.strategy import DecisionError, Inputs, decide
from trainer.parallelism.topology import Topology
from trainer.parallelism.wrap import AUTOCAST, FP32, FSDP_POLICY, compute_precision, fully_shards, precision_context
from trainer.telemetry.metric_names import MESH_LABELS, PARALLEL_MESH, SHARD_GROUP

GIB = 2**30

LLAMA = ["--model", "llama", "--batch-size", "4", "--synthetic-size", "400", "--log-every", "6"]
STEPS = ["--max-steps", "36", "--checkpoint-every", "12"]


@pytest.mark.parametrize(
    ("world", "tp", "pp", "shape"),
    [(2, 2, 1, MeshShape(1, 1, 2)), (2, 1, 2, MeshShape(1, 2, 1)), (8, 2, 2, MeshShape(2, 2, 2))],
)
def test_the_mesh_of_a_world(world: int, tp: int, pp: int, shape: MeshShape) -> None:
    assert mesh_shape(world, tp, pp) == shape


def test_tensor_parallel_ranks_are_consecutive_and_stages_furthest_apart() -> None:
    shape = MeshShape(2, 2, 2)  # (dp, pp, tp) of each rank:
    assert [shape.coordinates(r) for r in range(8)] == [
        (0, 0, 0), (0, 0, 1), (1, 0, 0), (1, 0, 1), (0, 1, 0), (0, 1, 1), (1, 1, 0), (1, 1, 1)
    ]  # fmt: skip
    assert [shape.stage_leader(s) for s in range(2)] == [0, 4]
    # 4 nodes of 8 at --pp 4: each node one stage, its 8 processes FSDP replicas of it.
    nodes = MeshShape(8, 4, 1)
    assert [{nodes.coordinates(r)[1] for r in range(n * 8, n * 8 + 8)} for n in range(4)] == [{0}, {1}, {2}, {3}]


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


def gpus(size: str, nodes: int, memory_gib: int, intra: float, inter: float | None, batch: int, ckpt: bool) -> Inputs:
    """What ``--parallel auto`` sees for a Llama size on ``nodes`` nodes of 8 GPUs."""
    with torch.device("meta"):
        model = Llama(LLAMA_SIZES[size])
    cfg = Config(model="llama", llama_size=size, batch_size=batch, activation_checkpointing=ckpt)
    return Inputs(
        params=sum(p.numel() for p in model.parameters()),
        world=nodes * 8,
        local_world=8,
        device_memory_bytes=memory_gib * GIB,
        param_bytes=2,
        intra_GBps=intra,
        inter_GBps=inter,
        **memory_inputs(model, cfg, cuda=True),
        **split_choices(cfg, Topology(0, nodes * 8, 0, 8, torch.device("cpu"))),
    )


NVLINK, PCIE, ROCE, ERDMA = 300.0, 20.0, 50.0, 10.0
"""Measured all-reduce bus bandwidths, GB/s: NVLink/NVSwitch and PCIe inside a node, 8 × 400 Gb/s
RoCE and a single eRDMA interface between nodes."""


@pytest.mark.parametrize(
    ("fabric", "model", "mesh", "reason"),
    [
        # 8B on one node of 80 GiB GPUs: its 120 GiB of state sharded 8 ways fits; no split.
        ((NVLINK, None), ("8b", 1, 80, 1, False), ("fsdp", 8, 1, 1), "fits fsdp"),
        # The same on 24 GiB GPUs: FSDP alone needs 32.9 GiB; 8 tensor-parallel ranks split the
        # activations too.
        ((NVLINK, None), ("8b", 1, 24, 1, False), ("fsdp", 1, 1, 8), "mesh dp 1 × pp 1 × tp 8; 19.2 GiB per device "
         "against 21.6 GiB fits, where no flat strategy does; tensor parallel over 8 ranks inside a node on "
         "NVLink-class links (300 GB/s, at least 100)"),
        # Over PCIe tensor parallelism is not worth its collectives: refused, with the fixes.
        ((PCIE, None), ("8b", 1, 24, 1, False), None, "sharded over all 8 processes, one needs 32.9 GiB"),
        # 2 nodes on slow links: HSDP keeps the all-gathers inside each node; no split.
        ((NVLINK, ERDMA), ("8b", 2, 80, 1, False), ("hsdp", 8, 1, 1), "fits hsdp/fsdp"),
        # 70B on 4 nodes at RoCE speed, no recomputation: 97.4 GiB flat; 2 tensor-parallel ranks fit.
        ((NVLINK, ROCE), ("70b", 4, 80, 1, False), ("fsdp", 16, 1, 2), "mesh dp 16 × pp 1 × tp 2; 66.6 GiB"),
        ((PCIE, ROCE), ("70b", 4, 80, 1, False), None, "one needs 97.4 GiB"),
        # 70B recomputing on 4 nodes over eRDMA: flat FSDP fits but all-gathers every block across
        # the slow link; a stage per node instead (4 micro-batches of a batch of 4).
        ((NVLINK, ERDMA), ("70b", 4, 80, 4, True), ("fsdp", 8, 4, 1), "mesh dp 8 × pp 4 × tp 1; 49.9 GiB per device "
         "against 72.0 GiB fits, where flat FSDP would all-gather every block across the slow link; a pipeline stage "
         "per node: the inter-node link (10 GB/s, under 25) carries activations, not parameters; FSDP over the 8 "
         "data-parallel replicas"),
        # The same at batch 3, which 4 stages cannot cut into micro-batches: tensor parallelism alone
        # would leave FSDP's all-gathers across the slow link; flat FSDP stays.
        ((NVLINK, ERDMA), ("70b", 4, 80, 3, True), ("fsdp", 32, 1, 1), "fits fsdp"),
        # 70B on 2 nodes over eRDMA: a stage per node and 8 tensor-parallel ranks in each.
        ((NVLINK, ERDMA), ("70b", 2, 80, 2, True), ("fsdp", 1, 2, 8), "mesh dp 1 × pp 2 × tp 8; 69.0 GiB"),
    ],
)  # fmt: skip
def test_auto_chooses_the_mesh_from_the_fabric_the_model_and_the_memory(
    fabric: tuple, model: tuple, mesh: tuple | None, reason: str
) -> None:
    size, nodes, memory, batch, ckpt = model
    inputs = gpus(size, nodes, memory, *fabric, batch, ckpt)
    if mesh is None:
        with pytest.raises(DecisionError, match=reason):
            decide(inputs)
        return
    chosen = decide(inputs)
    assert (chosen.strategy, chosen.shard_group, chosen.pp, chosen.tp) == mesh
    assert reason in "; ".join(chosen.reasons)
    if chosen.tp * chosen.pp > 1:
        assert chosen.flags() == ["--parallel", "fsdp", "--tp", str(chosen.tp), "--pp", str(chosen.pp)]


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--model", "gpt", "--tp", "2"], "error: --tp and --pp split the llama model's layers, not --model gpt"),
        (
            ["--model", "llama", "--tp", "2", "--parallel", "ddp"],
            "error: --parallel ddp with --tp 2 and --pp 1: beside tensor or pipeline parallelism the data-parallel "
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


@pytest.mark.parametrize(
    ("device", "shape", "fsdp", "precision"),
    [
        ("cuda", MeshShape(8, 1, 1), True, FSDP_POLICY),  # flat FSDP or HSDP
        ("cuda", MeshShape(8, 1, 1), False, AUTOCAST),  # DDP
        ("cuda", MeshShape(1, 1, 1), True, AUTOCAST),  # one process, whatever --parallel says
        ("cuda", MeshShape(1, 1, 8), True, FSDP_POLICY),  # --tp 8 on one node: FSDP over a dp of 1
        ("cuda", MeshShape(1, 4, 1), True, FSDP_POLICY),  # --pp 4: no autocast around the pipeline
        ("cuda", MeshShape(2, 2, 2), True, FSDP_POLICY),
        ("cpu", MeshShape(1, 1, 8), True, FP32),
        ("cpu", MeshShape(8, 1, 1), False, FP32),
        ("cpu", MeshShape(8, 1, 1), True, FP32),
    ],
)
def test_every_gpu_mesh_computes_in_bf16_by_fsdp_and_cpus_in_fp32(
    device: str, shape: MeshShape, fsdp: bool, precision: str
) -> None:
    assert compute_precision(device, fully_shards(shape, fsdp)) == precision


def test_only_autocast_opens_a_bf16_context() -> None:
    context = precision_context(AUTOCAST, "cpu")
    assert isinstance(context, torch.autocast) and context.fast_dtype == torch.bfloat16
    for precision in (FSDP_POLICY, FP32):
        with precision_context(precision, "cpu"):
            assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32


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


def kill_after_first_checkpoint(
    args: list[str], out: Path, restarts: int, port: int | None = None, procs: int = 2
) -> str:
    """``args`` under torchrun on ``procs`` processes, one worker killed once step 12's checkpoint
    is committed; with ``port``, the mesh rank 0 serves there is checked first."""
    metrics_port = ["--metrics-port", str(port)] if port else []

    def served_mesh() -> None:
        served = scrape_when(port, lambda samples: PARALLEL_MESH.name in samples)
        mesh = [by_label(served, PARALLEL_MESH.name, label) for label in MESH_LABELS]
        assert mesh == [{"1": 1}, {"1": 1}, {"2": 1}]
        assert served[SHARD_GROUP.name] == {(): 1.0}

    cmd = torchrun(*args, *metrics_port, "--output-dir", str(out), restarts=restarts, procs=procs)
    checkpoint = out / "checkpoints" / "step-000000012"
    status, log = kill_a_worker(cmd, checkpoint, workers=procs, wait_s=200, before=served_mesh if port else None)
    assert (status == 0) == (restarts > 0), log
    return log


def same_weights(a: Path, b: Path) -> bool:
    x, y = final_weights(a), final_weights(b)
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


@pytest.fixture(scope="module")
def tensor_parallel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tp")
    done = run(torchrun("trainer", *LLAMA, *STEPS, "--tp", "2", "--output-dir", str(out)))
    assert done.returncode == 0, done.stderr
    assert "training llama on 2 process(es) (mesh dp 1 × pp 1 × tp 2, FSDP over dp 1)" in done.stdout
    # The per-dimension NCCL options are decided and shown, and applied only on NCCL.
    assert "mesh dp 1 × pp 1 × tp 2, NCCL options (not on gloo) per dimension: tp: high-priority stream" in done.stdout
    return out


def test_tensor_parallel_trains_as_one_process_does(tensor_parallel: Path, one_process: Path) -> None:
    matches_one_process(tensor_parallel, one_process)


def test_tensor_parallel_resumes_bit_identical_after_a_kill(tensor_parallel: Path, tmp_path: Path) -> None:
    log = kill_after_first_checkpoint(["trainer", *LLAMA, *STEPS, "--tp", "2"], tmp_path, restarts=1, port=free_port())
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
    assert "training llama on 2 process(es) (mesh dp 1 × pp 2 × tp 1, FSDP over dp 1)" in done.stdout
    return out


def test_a_pipeline_trains_as_one_process_does(pipeline: Path, one_process: Path) -> None:
    matches_one_process(pipeline, one_process)


def test_a_pipeline_resumes_bit_identical_after_a_kill(pipeline: Path, tmp_path: Path) -> None:
    log = kill_after_first_checkpoint(["trainer", *LLAMA, *STEPS, "--pp", "2"], tmp_path, restarts=1)
    assert "resumed from step-000000012" in log
    assert same_weights(tmp_path, pipeline)


def test_a_pipeline_starts_from_pretrained_weights_as_one_process_does(one_process: Path, tmp_path: Path) -> None:
    # Each stage keeps its part of the whole model's state_dict (the one-process run's final one).
    start_from = ["--init-from", str(one_process / "final_model.pt"), "--max-steps", "6", "--synthetic-size", "64"]
    common = [*LLAMA, *start_from]
    staged = run(torchrun("trainer", *common, "--pp", "2", "--output-dir", str(tmp_path / "pp")))
    whole = run([sys.executable, "-m", "trainer", *common, "--output-dir", str(tmp_path / "one")])
    assert staged.returncode == whole.returncode == 0, staged.stderr + whole.stderr
    assert "initialised from" in staged.stdout
    a, b = final_weights(tmp_path / "pp"), final_weights(tmp_path / "one")
    assert list(a) == list(b) and max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5


def test_a_pipeline_runs_the_epochs_last_smaller_step_as_one_process_does(tmp_path: Path) -> None:
    # 10 samples in steps of 4: the third step has 2, which the stages must take at the shape
    # their buffers were sized for on the first step (padded with targets the loss ignores).
    short = [*LLAMA[:4], "--synthetic-size", "10", "--log-every", "1", "--max-steps", "4"]
    staged = run(torchrun("trainer", *short, "--pp", "2", "--output-dir", str(tmp_path / "pp")))
    whole = run([sys.executable, "-m", "trainer", *short, "--output-dir", str(tmp_path / "one")])
    assert staged.returncode == whole.returncode == 0, staged.stderr + whole.stderr
    rows, reference = metrics(tmp_path / "pp"), metrics(tmp_path / "one")
    assert [(r["step"], r["epoch"]) for r in rows] == [(1, 0), (2, 0), (3, 0), (4, 1)]
    for row, ref in zip(rows, reference, strict=True):
        assert row["loss"] == pytest.approx(ref["loss"], rel=1e-5)
        assert row["grad_norm"] == pytest.approx(ref["grad_norm"], rel=1e-4)


# Four processes: tensor parallelism inside each pipeline stage, and FSDP replicas of a pipeline.
TP_PP = ["trainer", *LLAMA, *STEPS, "--tp", "2", "--pp", "2"]
# Two replicas of --batch-size 2 read the one-process run's global batch of 4.
PP_DP = ["trainer", *[a if a != "4" else "2" for a in LLAMA], *STEPS, "--pp", "2"]


@pytest.fixture(scope="module")
def tensor_parallel_stages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tp-pp")
    done = run(torchrun(*TP_PP, "--output-dir", str(out), procs=4))
    assert done.returncode == 0, done.stderr
    assert "training llama on 4 process(es) (mesh dp 1 × pp 2 × tp 2, FSDP over dp 1)" in done.stdout
    assert "NCCL options (not on gloo) per dimension: tp: high-priority stream" in done.stdout
    return out


def test_tensor_parallel_stages_train_as_one_process_does(tensor_parallel_stages: Path, one_process: Path) -> None:
    matches_one_process(tensor_parallel_stages, one_process)


def test_tensor_parallel_stages_resume_bit_identical_after_a_kill(tensor_parallel_stages: Path, tmp_path: Path) -> None:
    log = kill_after_first_checkpoint(TP_PP, tmp_path, restarts=1, procs=4)
    assert "resumed from step-000000012" in log
    assert same_weights(tmp_path, tensor_parallel_stages)


@pytest.fixture(scope="module")
def sharded_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pp-dp")
    done = run(torchrun(*PP_DP, "--output-dir", str(out), procs=4))
    assert done.returncode == 0, done.stderr
    assert "training llama on 4 process(es) (mesh dp 2 × pp 2 × tp 1, FSDP over dp 2)" in done.stdout
    return out


def test_fsdp_replicas_of_a_pipeline_train_as_one_process_does(sharded_pipeline: Path, one_process: Path) -> None:
    matches_one_process(sharded_pipeline, one_process)


def test_fsdp_replicas_of_a_pipeline_resume_bit_identical_after_a_kill(sharded_pipeline: Path, tmp_path: Path) -> None:
    log = kill_after_first_checkpoint(PP_DP, tmp_path, restarts=1, procs=4)
    assert "resumed from step-000000012" in log
    assert same_weights(tmp_path, sharded_pipeline)


# Two replicas of --batch-size 2, each a tensor-parallel group of two.
TP_DP = ["trainer", *[a if a != "4" else "2" for a in LLAMA], *STEPS, "--tp", "2"]


@pytest.fixture(scope="module")
def sharded_tensor_parallel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tp-dp")
    done = run(torchrun(*TP_DP, "--output-dir", str(out), procs=4))
    assert done.returncode == 0, done.stderr
    assert "training llama on 4 process(es) (mesh dp 2 × pp 1 × tp 2, FSDP over dp 2)" in done.stdout
    return out


def test_fsdp_replicas_of_tensor_parallel_groups_train_as_one_process_does(
    sharded_tensor_parallel: Path, one_process: Path
) -> None:
    matches_one_process(sharded_tensor_parallel, one_process)


def test_fsdp_replicas_of_tensor_parallel_groups_resume_bit_identical_after_a_kill(
    sharded_tensor_parallel: Path, tmp_path: Path
) -> None:
    log = kill_after_first_checkpoint(TP_DP, tmp_path, restarts=1, procs=4)
    assert "resumed from step-000000012" in log
    assert same_weights(tmp_path, sharded_tensor_parallel)

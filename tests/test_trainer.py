"""The trainer, run for real: torchrun with two gloo processes on CPU."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT, free_port
from worker_kill import ENV, children, kill_a_worker, start, wait_for

from trainer.checkpoints.sharded import list_checkpoints, read_commit
from trainer.data import GlobalOrder
from trainer.models import MnistCNN

SMALL = ["--synthetic-size", "2048", "--batch-size", "16", "--log-every", "10"]


def torchrun(*args: str, procs: int = 2, restarts: int = 0, launcher: str = "torch.distributed.run") -> list[str]:
    return [
        sys.executable,
        "-m",
        launcher,
        "--standalone",
        f"--nproc-per-node={procs}",
        f"--max-restarts={restarts}",
        "-m",
        *args,
    ]


def run(cmd: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)


def one_process_pods(cmd: list[str], pods: int = 2) -> list[subprocess.Popen]:
    """``cmd`` in ``pods`` processes, as the operator launches one-process pods: ``WORLD_SIZE``,
    ``RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``, no torchrun; each pod a node of its own."""
    env = {**ENV, "WORLD_SIZE": str(pods), "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
    env["MASTER_PORT"] = str(free_port())
    return [
        subprocess.Popen(
            cmd, cwd=ROOT, env={**env, "RANK": str(r)}, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for r in range(pods)
    ]


def metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def final_weights(out: Path) -> dict[str, torch.Tensor]:
    return torch.load(out / "final_model.pt", weights_only=True)


def test_global_order_covers_every_sample_once_per_epoch() -> None:
    order = GlobalOrder(size=103, global_batch=16, seed=7)
    for world in (1, 3, 4):
        seen = []
        position = 0
        while position < order.size:
            lo, hi = order.step_slice(position)
            shares = [GlobalOrder.rank_share(lo, hi, r, world) for r in range(world)]
            assert shares[0][0] == lo and shares[-1][1] == hi
            assert max(b - a for a, b in shares) - min(b - a for a, b in shares) <= 1
            seen += order.permutation(0)[lo:hi].tolist()
            position = hi
        assert sorted(seen) == list(range(103))
    assert not torch.equal(order.permutation(0), order.permutation(1))


def test_ddp_training_reduces_loss(tmp_path: Path) -> None:
    result = run(torchrun("trainer", "--max-steps", "60", "--output-dir", str(tmp_path), *SMALL))
    assert result.returncode == 0, result.stderr
    rows = metrics(tmp_path)
    assert [r["step"] for r in rows] == [10, 20, 30, 40, 50, 60]
    assert rows[-1]["loss"] < 0.25 * rows[0]["loss"]
    assert all(r["samples_per_s"] > 0 for r in rows)
    weights = final_weights(tmp_path)
    assert set(weights) >= {"conv1.weight", "fc2.bias"}


def test_sigkilled_worker_resumes_bit_identical(tmp_path: Path) -> None:
    args = ["trainer", "--max-steps", "120", "--checkpoint-every", "30", *SMALL]
    reference = run(torchrun(*args, "--output-dir", str(tmp_path / "reference")))
    assert reference.returncode == 0, reference.stderr

    out = tmp_path / "killed"
    status, log = kill_a_worker(
        torchrun(*args, "--output-dir", str(out), restarts=1), out / "checkpoints" / "step-000000030"
    )
    assert status == 0, log
    assert "resumed from step-000000030" in log
    resumed, expected = final_weights(out), final_weights(tmp_path / "reference")
    assert resumed.keys() == expected.keys()
    assert all(torch.equal(resumed[k], expected[k]) for k in expected)


def test_sigterm_checkpoints_the_current_step(tmp_path: Path) -> None:
    launcher = start(
        torchrun(
            "trainer", "--max-steps", "100000", "--checkpoint-every", "1000", "--output-dir", str(tmp_path), *SMALL
        )
    )
    try:
        wait_for(lambda: (tmp_path / "metrics.jsonl").is_file() and len(metrics(tmp_path)) >= 2)
        launcher.send_signal(signal.SIGTERM)
        log, _ = launcher.communicate(timeout=120)
    finally:
        launcher.kill()
    saved = list_checkpoints(tmp_path / "checkpoints")
    assert len(saved) == 1, log
    meta = read_commit(saved[0])
    assert meta["reason"] == "sigterm"
    assert meta["step"] >= metrics(tmp_path)[-1]["step"] >= 20


def test_truncated_newest_checkpoint_is_skipped(tmp_path: Path) -> None:
    first = run(
        [
            sys.executable,
            "-m",
            "trainer",
            "--max-steps",
            "40",
            "--checkpoint-every",
            "20",
            "--output-dir",
            str(tmp_path),
            *SMALL,
        ]
    )
    assert first.returncode == 0, first.stderr
    newest = tmp_path / "checkpoints" / "step-000000040" / "__0_0.distcp"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    second = run([sys.executable, "-m", "trainer", "--max-steps", "50", "--output-dir", str(tmp_path), *SMALL])
    assert second.returncode == 0, second.stderr
    assert "warning: skipping checkpoint" in second.stderr and "step-000000040" in second.stderr
    assert "resumed from step-000000020" in second.stdout


def test_resume_with_fewer_processes_continues_at_the_same_sample(tmp_path: Path) -> None:
    first = run(torchrun("trainer", "--max-steps", "10", "--output-dir", str(tmp_path), *SMALL))
    assert first.returncode == 0, first.stderr
    state = read_commit(tmp_path / "checkpoints" / "step-000000010")
    assert (state["position"], state["world_size"]) == (10 * 16 * 2, 2)
    second = run([sys.executable, "-m", "trainer", "--max-steps", "12", "--output-dir", str(tmp_path), *SMALL])
    assert second.returncode == 0, second.stderr
    assert "resumed from step-000000010: step 10, epoch 0, sample 320" in second.stdout
    # The global batch is kept: one process accumulates two micro-batches of 16.
    assert "keeping the checkpoint's global batch of 32: 1 process(es) × batch 16 × 2" in second.stdout
    state = read_commit(tmp_path / "checkpoints" / "step-000000012")
    assert (state["position"], state["global_batch"]) == (320 + 2 * 32, 32)
    odd_batch = ["--max-steps", "14", "--output-dir", str(tmp_path), *SMALL, "--batch-size", "12"]
    odd = run(torchrun("trainer", *odd_batch, launcher="trainer.launch"))
    assert odd.returncode == 2
    assert "global batch of 32 samples per step, which 2 process(es) × --batch-size 12 cannot make up" in odd.stderr
    assert "(e.g. --batch-size 8)" in odd.stderr


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: None, "error: --data-dir {d}: no train.npz (expected arrays 'images' uint8 N×1×28×28 and 'labels')"),
        (
            lambda d: np.savez(d / "train.npz", images=np.zeros((4, 28, 28), np.uint8), labels=np.zeros(4)),
            "error: --data-dir {d}: train.npz 'images' must be uint8 N×1×28×28, got uint8 (4, 28, 28)",
        ),
        (
            lambda d: (d / "train.npz").write_bytes(b"not a zip"),
            "error: --data-dir {d}: train.npz is unreadable or lacks 'images'/'labels'",
        ),
    ],
)
def test_bad_data_dir_fails_fast_on_every_rank(tmp_path: Path, setup, message: str) -> None:
    # Both ranks launched as the operator launches pods: by environment, no torchrun to
    # tear the slower one down. Each must fail on its own before any collective.
    data = tmp_path / "data"
    data.mkdir()
    setup(data)
    port = free_port()
    started = time.monotonic()
    ranks = [
        subprocess.Popen(
            [sys.executable, "-m", "trainer", "--data-dir", str(data), "--output-dir", str(tmp_path / "out")],
            cwd=ROOT,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**ENV, "WORLD_SIZE": "2", "RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)},
        )
        for rank in range(2)
    ]
    for rank in ranks:
        _, stderr = rank.communicate(timeout=60)
        assert rank.returncode == 2
        assert stderr.startswith(message.format(d=data)) and len(stderr.splitlines()) == 1, stderr
    assert time.monotonic() - started < 30


def test_bad_data_dir_under_torchrun_fails_without_hanging(tmp_path: Path) -> None:
    args = ["trainer", "--data-dir", str(tmp_path / "missing"), "--output-dir", str(tmp_path / "out")]
    result = run(torchrun(*args), timeout=60)
    assert result.returncode != 0
    assert f"error: --data-dir {tmp_path / 'missing'}: no such directory" in result.stderr
    # The pods' launcher keeps the workers' status: a retry cannot fix bad input.
    assert run(torchrun(*args, launcher="trainer.launch"), timeout=60).returncode == 2


def test_pod_launcher_exits_retryable_after_eviction_or_a_killed_worker(tmp_path: Path) -> None:
    args = ["trainer", "--max-steps", "100000", *SMALL]
    runs = ("evicted", "killed")
    evicted = start(torchrun(*args, "--output-dir", str(tmp_path / "evicted"), launcher="trainer.launch"))
    killed = start(torchrun(*args, "--output-dir", str(tmp_path / "killed"), launcher="trainer.launch"))
    try:
        wait_for(lambda: all((tmp_path / d / "metrics.jsonl").is_file() and metrics(tmp_path / d) for d in runs))
        evicted.send_signal(signal.SIGTERM)
        workers = children(killed.pid)
        assert len(workers) == 2
        os.kill(max(workers), signal.SIGKILL)
        logs = [evicted.communicate(timeout=120)[0], killed.communicate(timeout=120)[0]]
    finally:
        evicted.kill()
        killed.kill()
    # Plain torchrun exits 1 for both, which restartPolicy ExitCode would take as final.
    assert (evicted.returncode, killed.returncode) == (143, 137), logs
    newest = list_checkpoints(tmp_path / "evicted" / "checkpoints")[-1]
    assert read_commit(newest)["reason"] == "sigterm"


@pytest.mark.parametrize(
    ("codes", "status"),
    [
        ([-9, 1], 137),
        ([1, -6], 134),
        ([143, 143], 143),
        ([2, 2], 2),
        ([1], 1),
        ([2, -15], 2),
        ([-15], 143),
        # A killed worker's sibling loses it in a collective and exits 203: the kill is the cause.
        ([203, -9], 137),
        ([-9, 203], 137),
        ([203, 1], 203),
    ],
)
def test_pod_launcher_status_prefers_signals(codes: list[int], status: int) -> None:
    from trainer.launch import exit_status

    assert exit_status(codes) == status


def test_bad_flags_and_unwritable_output(tmp_path: Path) -> None:
    flags = run([sys.executable, "-m", "trainer", "--batch-size", "0"])
    assert flags.returncode == 2 and flags.stderr.strip() == "error: --batch-size must be at least 1, got 0"
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = run([sys.executable, "-m", "trainer", "--output-dir", str(blocker / "out")])
    assert out.returncode == 2 and out.stderr.startswith(f"error: --output-dir {blocker / 'out'}: not writable")


def test_real_data_files_are_loaded(tmp_path: Path) -> None:
    images = np.random.default_rng(0).integers(0, 255, (256, 1, 28, 28), dtype=np.uint8)
    np.savez(tmp_path / "train.npz", images=images, labels=np.arange(256) % 10)
    cnn = run(
        [
            sys.executable,
            "-m",
            "trainer",
            "--data-dir",
            str(tmp_path),
            "--max-steps",
            "4",
            "--batch-size",
            "32",
            "--output-dir",
            str(tmp_path / "cnn"),
        ]
    )
    assert cnn.returncode == 0, cnn.stderr
    assert "256 samples" in cnn.stdout
    np.arange(129 * 40, dtype=np.uint16).__mod__(4096).astype(np.uint16).tofile(tmp_path / "train.bin")
    gpt = run(
        [
            sys.executable,
            "-m",
            "trainer",
            "--model",
            "gpt",
            "--data-dir",
            str(tmp_path),
            "--max-steps",
            "3",
            "--batch-size",
            "4",
            "--log-every",
            "1",
            "--output-dir",
            str(tmp_path / "gpt"),
        ]
    )
    assert gpt.returncode == 0, gpt.stderr
    assert "40 samples" in gpt.stdout and metrics(tmp_path / "gpt")[0]["tokens_per_s"] > 0


def test_gradient_accumulation_matches_a_larger_batch(tmp_path: Path) -> None:
    common = [sys.executable, "-m", "trainer", "--max-steps", "5", "--no-channels-last", "--synthetic-size", "512"]
    one = run([*common, "--batch-size", "32", "--output-dir", str(tmp_path / "one")])
    two = run([*common, "--batch-size", "16", "--grad-accum", "2", "--output-dir", str(tmp_path / "two")])
    assert one.returncode == two.returncode == 0, one.stderr + two.stderr
    a, b = final_weights(tmp_path / "one"), final_weights(tmp_path / "two")
    # Same samples per step; dropout streams differ, so close rather than equal.
    assert all(torch.allclose(a[k], b[k], atol=5e-3) for k in a)


def test_allreduce_benchmark_prints_bandwidth_lines() -> None:
    result = run(torchrun("trainer.bench", "--max-size", "64MiB", "--iters", "2", "--warmup", "1"))
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [r["size_bytes"] for r in rows] == [2**20 * 2**i for i in range(7)]
    for row in rows:
        assert row["world_size"] == 2 and row["backend"] == "gloo"
        assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"], rel=0.01) and row["algbw_GBps"] > 0


def test_fsdp_gpt_learns_and_resumes_bit_identical(tmp_path: Path) -> None:
    args = [
        "trainer",
        "--model",
        "gpt",
        "--fsdp",
        "--batch-size",
        "4",
        "--synthetic-size",
        "400",
        "--checkpoint-every",
        "12",
        "--log-every",
        "6",
    ]
    reference = run(torchrun(*args, "--max-steps", "24", "--output-dir", str(tmp_path / "reference")))
    assert reference.returncode == 0, reference.stderr
    rows = metrics(tmp_path / "reference")
    assert rows[-1]["loss"] < rows[0]["loss"] - 0.5 and rows[-1]["tokens_per_s"] > 0
    out = str(tmp_path / "resumed")
    assert run(torchrun(*args, "--max-steps", "12", "--output-dir", out)).returncode == 0
    resumed = run(torchrun(*args, "--max-steps", "24", "--output-dir", out))
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from step-000000012" in resumed.stdout
    a, b = final_weights(tmp_path / "reference"), final_weights(tmp_path / "resumed")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_resumed_run_follows_its_own_schedule_from_the_first_step(tmp_path: Path) -> None:
    # Extending a finished run (or changing --lr): the checkpoint's optimizer holds the
    # rate the old run ended on (the 10% floor); the next step must use the new schedule's.
    from trainer.config import Config
    from trainer.data import synthetic_images
    from trainer.loop import Trainer
    from trainer.models.spec import model_spec
    from trainer.parallelism.topology import topology
    from trainer.schedule import lr_factor

    data = synthetic_images(256, 3)
    cfg = Config(output_dir=str(tmp_path), batch_size=8, max_steps=25)
    finished = Trainer(cfg, topology(), data, model_spec(cfg))
    permutation = finished.progress.order.permutation(0)
    while finished.progress.step < 25:
        loss = finished.train_step(permutation)
    finished.checkpoints.save("final", loss, wait=True)
    finished.close()
    assert finished.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 1e-3)

    for lr in (None, 2e-3):
        cfg = Config(output_dir=str(tmp_path), batch_size=8, max_steps=30, lr=lr)
        extended = Trainer(cfg, topology(), data, model_spec(cfg))
        assert extended.checkpoints.resume()
        base = lr or 1e-3
        assert extended.optimizer.param_groups[0]["lr"] == base * lr_factor(25, 30) > 0.5 * base
        extended.train_step(permutation)
        extended.close()
        assert extended.scheduler.get_last_lr()[0] == base * lr_factor(26, 30)


def test_compiled_ddp_matches_eager_resumes_and_reports_mfu(tmp_path: Path) -> None:
    args = ["trainer", "--model", "gpt", "--batch-size", "8", "--synthetic-size", "1024", "--log-every", "5"]
    eager = run(torchrun(*args, "--max-steps", "30", "--output-dir", str(tmp_path / "eager")))
    assert eager.returncode == 0, eager.stderr
    compiled = [*args, "--compile", "--peak-tflops", "0.1", "--output-dir", str(tmp_path / "compiled")]
    first = run(torchrun(*compiled, "--max-steps", "20"), timeout=600)
    assert first.returncode == 0, first.stderr
    resumed = run(torchrun(*compiled, "--max-steps", "30"), timeout=600)
    assert resumed.returncode == 0 and "resumed from step-000000020" in resumed.stdout, resumed.stderr
    want, got = metrics(tmp_path / "eager"), metrics(tmp_path / "compiled")
    assert [r["step"] for r in got] == [r["step"] for r in want] == [5, 10, 15, 20, 25, 30]
    # Inductor fuses and reorders float arithmetic, so equal to rounding, not bit for bit.
    assert all(abs(g["loss"] - w["loss"]) < 1e-4 * w["loss"] for g, w in zip(got, want, strict=True))
    assert all("mfu" not in r for r in want)

    from trainer.config import GPT_SIZES
    from trainer.models import GPT

    flops_per_token = GPT(GPT_SIZES["tiny"]).flops_per_token()
    for row in got:
        expected = row["tokens_per_s"] * flops_per_token / (0.1e12 * 2)
        assert row["mfu"] == pytest.approx(expected, rel=1e-3, abs=1e-4)


@pytest.mark.parametrize(
    ("name", "peak"),
    [
        ("NVIDIA H200", 989.0),
        ("NVIDIA H200 NVL", 835.0),
        ("NVIDIA H800", 989.0),
        ("NVIDIA H800 PCIe", 756.0),
        ("NVIDIA H20", 148.0),
        ("NVIDIA H100 80GB HBM3", 989.0),
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA A10", 125.0),
        ("NVIDIA L20", 119.5),
        ("Tesla V100-SXM2-32GB", None),
    ],
)
def test_mfu_peak_is_looked_up_by_the_most_specific_name(name: str, peak: float | None) -> None:
    from trainer.telemetry.metrics import peak_tflops

    assert peak_tflops(name) == peak


@pytest.mark.parametrize(("step_time", "every"), [(0.02, 10), (0.5, 4), (2.5, 1), (30.0, 1)])
def test_sigterm_is_checked_about_every_two_seconds_of_steps(step_time: float, every: int) -> None:
    from trainer.schedule import stop_check_interval

    assert stop_check_interval(step_time) == every


def test_gpt_residual_projections_get_the_scaled_init() -> None:
    from trainer.config import GPT_SIZES
    from trainer.models import GPT

    torch.manual_seed(0)
    cfg = GPT_SIZES["tiny"]
    weights = dict(GPT(cfg).named_parameters())
    scaled = 0.02 / (2 * cfg.n_layer) ** 0.5
    for i in range(cfg.n_layer):
        for name, std in (("proj", scaled), ("mlp.proj", scaled), ("qkv", 0.02), ("mlp.fc", 0.02)):
            assert weights[f"blocks.{i}.{name}.weight"].std().item() == pytest.approx(std, rel=0.05), name


def test_fsdp_checkpoint_is_not_resumed_by_a_ddp_run(tmp_path: Path) -> None:
    args = [
        "trainer",
        "--model",
        "gpt",
        "--batch-size",
        "4",
        "--synthetic-size",
        "100",
        "--max-steps",
        "2",
        "--output-dir",
        str(tmp_path),
    ]
    assert run(torchrun(*args, "--fsdp")).returncode == 0
    mixed = run([sys.executable, "-m", *args[:-2], "--max-steps", "3", "--output-dir", str(tmp_path)])
    assert mixed.returncode == 2
    assert mixed.stderr.strip() == (
        f"error: --output-dir {tmp_path} holds a checkpoint of a run with --fsdp True, "
        "not False: use another output directory"
    )
    cnn = run([sys.executable, "-m", "trainer", "--fsdp"])
    assert (
        cnn.stderr.strip()
        == "error: --fsdp (--parallel hsdp) shards the gpt and llama models; the cnn is small enough for plain DDP"
    )


def test_runs_as_the_operator_launches_pods(tmp_path: Path) -> None:
    # No torchrun: WORLD_SIZE, RANK, MASTER_ADDR and MASTER_PORT only, and no LOCAL_RANK.
    port = free_port()
    env = {
        **ENV,
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "OUTPUT_PATH": str(tmp_path),
        "FINAL_MODEL_PATH": str(tmp_path / "model" / "weights.pt"),
    }
    env.pop("LOCAL_RANK", None)
    pods = [
        subprocess.Popen(
            [sys.executable, "-m", "trainer", "--max-steps", "20", *SMALL],
            cwd=ROOT,
            text=True,
            env={**env, "RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for rank in range(2)
    ]
    outputs = [pod.communicate(timeout=120) for pod in pods]
    assert [pod.returncode for pod in pods] == [0, 0], outputs
    assert "training cnn on 2 process(es)" in outputs[0][0] and outputs[1][0] == ""  # rank 0 alone logs
    assert (tmp_path / "model" / "weights.pt").is_file() and (tmp_path / "checkpoints" / "step-000000020").is_dir()


def test_tensorboard_events_are_written_when_installed(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    result = run([sys.executable, "-m", "trainer", "--max-steps", "20", "--output-dir", str(tmp_path), *SMALL])
    assert result.returncode == 0, result.stderr
    events = list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1 and events[0].stat().st_size > 0


def test_convnet_matches_the_examples_order_of_operations_bit_for_bit() -> None:
    import torch.nn.functional as F

    from trainer.models import MnistCNN

    torch.manual_seed(0)
    model = MnistCNN().eval()  # dropout off: the two orders then see the same values
    x = torch.randn(8, 1, 28, 28)

    def examples_order(m: MnistCNN, images: torch.Tensor) -> torch.Tensor:
        h = F.max_pool2d(F.relu(m.conv2(F.relu(m.conv1(images)))), 2)
        return m.fc2(F.relu(m.fc1(torch.flatten(h, 1))))

    ours = model(x)
    ours.sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    theirs = examples_order(model, x)
    theirs.sum().backward()
    assert torch.equal(ours, theirs)
    assert all(torch.equal(grads[n], p.grad) for n, p in model.named_parameters())


def test_byte_dropout_keeps_the_right_fraction_and_scales() -> None:
    from trainer.models import ByteDropout

    torch.manual_seed(0)
    for p in (0.25, 0.5):
        x = torch.ones(1_000, 1_000, requires_grad=True)
        y = ByteDropout(p)(x)
        kept = (y > 0).float().mean().item()
        assert abs(kept - (1 - p)) < 0.003
        assert torch.all((y == 0) | (y == 1 / (1 - p)))
        y.sum().backward()
        assert torch.equal(x.grad, y.detach())
    with pytest.raises(ValueError, match="multiple of 1/256"):
        ByteDropout(0.3)


def test_gpt2_small_flops_per_token_match_the_standard_estimate() -> None:
    from trainer.config import GPT_SIZES
    from trainer.models import GPT

    model = GPT(GPT_SIZES["124m"])
    params = sum(p.numel() for p in model.parameters())
    assert 124.0e6 < params < 124.8e6  # GPT-2 small with its vocabulary padded to 50304
    # 6 FLOPs per weight (forward + backward) without the position table, plus attention:
    # 12 * layers * width * context. About 0.85 GFLOP per token for this shape.
    expected = 6 * (params - 1024 * 768) + 12 * 12 * 768 * 1024
    assert model.flops_per_token() == expected
    assert 0.84e9 < expected < 0.86e9


@pytest.mark.filterwarnings("ignore:Seems like `optimizer.step\\(\\)` has been overridden")
def test_accumulated_and_uneven_batches_give_the_mean_gradient(tmp_path: Path) -> None:
    # Gradients, not weights: AdamW is blind to a gradient's scale, so only the gradient
    # itself shows whether the loss weighting makes each step the mean over its samples.
    import torch.nn.functional as F

    from trainer.config import Config
    from trainer.data import synthetic_images
    from trainer.loop import Trainer
    from trainer.models.spec import model_spec
    from trainer.parallelism.topology import topology

    data = synthetic_images(40, 7)  # 40 samples, batch 32: the epoch's second step holds 8

    def gradient(batch: int, accum: int, position: int) -> dict[str, torch.Tensor]:
        out = tmp_path / f"{batch}-{accum}-{position}"
        out.mkdir()
        cfg = Config(output_dir=str(out), batch_size=batch, grad_accum=accum, max_steps=9)
        trainer = Trainer(cfg, topology(), data, model_spec(cfg))
        trainer.model.eval()  # no dropout: both runs see the same function
        trainer.optimizer.step = lambda: None
        trainer.optimizer.zero_grad = lambda set_to_none=True: None
        trainer.progress.position = position
        trainer.train_step(trainer.progress.order.permutation(0))
        trainer.close()
        return {n: p.grad for n, p in trainer.model.named_parameters()}

    def reference(indices: torch.Tensor) -> dict[str, torch.Tensor]:
        torch.manual_seed(1234)
        model = MnistCNN().eval()
        x, y = data.batch(indices)
        F.cross_entropy(model(x), y).backward()
        return {n: p.grad for n, p in model.named_parameters()}

    permutation = GlobalOrder(len(data), 32, Config.seed).permutation(0)
    for got, want in (
        (gradient(32, 1, 0), reference(permutation[:32])),
        (gradient(16, 2, 0), reference(permutation[:32])),
        (gradient(32, 1, 32), reference(permutation[32:])),
    ):
        assert all(torch.allclose(got[n], want[n], atol=1e-6, rtol=1e-4) for n in want)


def test_lr_anneals_to_the_end_of_the_epochs_when_max_steps_outruns_them(tmp_path: Path) -> None:
    # A job with maxSteps 10000 on 64 steps per epoch: the run ends with the epoch, and the
    # learning rate must have reached the floor of the decay there, not be still at its peak.
    result = run(
        torchrun(
            "trainer",
            "--max-steps",
            "10000",
            "--epochs",
            "1",
            "--output-dir",
            str(tmp_path),
            *SMALL,
            "--log-every",
            "8",
        )
    )
    assert result.returncode == 0, result.stderr
    rows = metrics(tmp_path)
    assert rows[-1]["step"] == 2048 // (16 * 2)
    assert rows[-1]["lr"] == pytest.approx(0.1 * 1e-3)
    lrs = [r["lr"] for r in rows if r["step"] >= 20]
    assert lrs == sorted(lrs, reverse=True)


@pytest.mark.parametrize(
    ("max_steps", "epochs", "position", "epoch", "step", "total"),
    [
        (None, 2, 0, 0, 0, 2 * 7),  # 100 samples, global batch 16: 7 steps per epoch
        (5, 2, 0, 0, 0, 5),
        (100, 2, 0, 0, 0, 14),
        (100, None, 0, 0, 0, 100),
        # Resumed at another world size after 3 steps of 16: 52 samples left in 2 steps of
        # 32, then one more epoch of 4 steps.
        (None, 2, 48, 0, 3, 3 + 2 + 4),
    ],
)
def test_planned_steps_end_at_max_steps_or_the_last_epoch(max_steps, epochs, position, epoch, step, total) -> None:
    from trainer.schedule import planned_steps

    batch = 16 if step == 0 else 32
    assert planned_steps(step, epoch, position, GlobalOrder(100, batch, 0), max_steps, epochs) == total


@pytest.mark.parametrize(
    "rendezvous",
    [
        # A PyTorchJob Worker whose Master pod is not up yet: its name does not resolve.
        ["--nnodes=2", "--node-rank=1", "--master-addr=master-not-up.invalid", "--rdzv-conf=timeout=2"],
        # An elastic job whose rendezvous host is gone.
        ["--nnodes=1:2", "--rdzv-backend=c10d", "--rdzv-conf=join_timeout=2,read_timeout=2"],
    ],
)
def test_pod_launcher_exits_retryable_when_the_rendezvous_fails(rendezvous: list[str]) -> None:
    port = free_port()
    endpoint = (
        [f"--master-port={port}"] if "--nnodes=2" in rendezvous else [f"--rdzv-endpoint=master-not-up.invalid:{port}"]
    )
    cmd = [sys.executable, "-m", "trainer.launch", *rendezvous, *endpoint, "--nproc-per-node=1", "-m", "trainer"]
    result = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)
    assert result.returncode == 203, result.stderr[-2000:]
    assert "exiting 203 to be retried" in result.stderr


def test_a_worker_launched_directly_exits_retryable_when_the_master_never_comes_up(tmp_path: Path) -> None:
    env = {**ENV, "WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "master-not-up.invalid", "MASTER_PORT": "29500"}
    cmd = [sys.executable, "-m", "trainer", "--timeout-s", "2", "--output-dir", str(tmp_path)]
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 203, result.stderr[-2000:]
    assert "error: lost the other processes" in result.stderr


def test_pod_launcher_turns_off_the_shared_rendezvous_store_unless_told_otherwise() -> None:
    cmd = [sys.executable, "-m", "trainer.launch", "--standalone", "--nproc-per-node=1", "--no-python", "printenv"]
    unset = {k: v for k, v in ENV.items() if k != "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"}
    for env, want in ((unset, "1"), ({**ENV, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "0"}, "0")):
        result = subprocess.run(
            [*cmd, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().splitlines()[-1].endswith(want)

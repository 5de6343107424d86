"""Numerical safety and the metrics that diagnose a cluster."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from conftest import ROOT
from test_trainer import ENV, SMALL, final_weights, metrics, run, torchrun

from trainer.checkpoints.sharded import list_checkpoints


def test_an_injected_nonfinite_loss_is_skipped_and_counted_on_every_rank(tmp_path: Path) -> None:
    # Only the highest rank's loss is NaN at steps 5 and 6; the all-reduced gradients carry
    # it to rank 0, so both ranks skip both steps and the weights stay finite.
    env = {**ENV, "TRAINER_FAULT_NONFINITE_STEPS": "5,6"}
    cmd = torchrun("trainer", "--max-steps", "20", "--clip-grad", "1.0", "--output-dir", str(tmp_path), *SMALL)
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    rows = metrics(tmp_path)
    assert [r["nonfinite_steps"] for r in rows] == [2, 2]
    assert all(math.isfinite(r["grad_norm"]) and r["grad_norm"] > 0 for r in rows)
    assert all(r["slowest_rank"] in (0, 1) and r["step_time_max_s"] >= r["step_time_s"] > 0 for r in rows)
    assert all(r["peak_memory_mb"] > 0 for r in rows)
    weights = final_weights(tmp_path)
    assert all(torch.isfinite(w).all() for w in weights.values())


def test_a_run_that_keeps_producing_nonfinite_losses_stops_with_a_clear_error(tmp_path: Path) -> None:
    env = {**ENV, "TRAINER_FAULT_NONFINITE_STEPS": ",".join(str(s) for s in range(3, 100))}
    cmd = [
        sys.executable,
        "-m",
        "trainer",
        "--max-steps",
        "100",
        "--checkpoint-every",
        "2",
        "--max-nonfinite-steps",
        "5",
    ]
    result = subprocess.run(
        [*cmd, "--output-dir", str(tmp_path), *SMALL], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 1, result.stderr
    assert "error: the last 5 steps (to step 7) all had non-finite gradients and were skipped" in result.stderr
    assert not (tmp_path / "final_model.pt").exists()
    losses = {
        p.name: json.loads((p / "commit.json").read_text())["loss"] for p in list_checkpoints(tmp_path / "checkpoints")
    }
    # Steps 4 and 6 fell inside the streak and were not checkpointed.
    assert list(losses) == ["step-000000002"] and math.isfinite(losses["step-000000002"])


def test_metrics_hold_each_step_once_after_a_resume(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "trainer", "--checkpoint-every", "10", "--log-every", "5"]
    args += ["--output-dir", str(tmp_path), "--synthetic-size", "2048", "--batch-size", "16"]
    # Jobs point the NCCL flight recorder at the output volume; the trainer makes the directory.
    env = {**ENV, "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "flight-recorder" / "rank_")}
    first = subprocess.run([*args, "--max-steps", "30"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "flight-recorder").is_dir()
    # Killed after logging step 30, before its checkpoint was committed.
    shutil.rmtree(tmp_path / "checkpoints" / "step-000000030")
    resumed = run([*args, "--max-steps", "40"])
    assert resumed.returncode == 0 and "resumed from step-000000020" in resumed.stdout, resumed.stderr
    assert [r["step"] for r in metrics(tmp_path)] == [5, 10, 15, 20, 25, 30, 35, 40]

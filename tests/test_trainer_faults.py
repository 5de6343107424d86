"""Faults on real processes: a peer that stops answering, bad data on one rank, bounded retries;
and what the first compiled step does to the numbers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, free_port
from test_trainer import ENV, SMALL, metrics

from trainer.data import GlobalOrder
from trainer.exit_codes import TRANSIENT_STATUS
from trainer.restarts import EXHAUSTED_STATUS

FSDP = ["--model", "gpt", "--fsdp", "--batch-size", "4", "--synthetic-size", "100", "--log-every", "1"]


def pods(args: list[str], env: dict[str, str] | None = None, world: int = 2) -> list[subprocess.Popen]:
    """The ranks of one job started as the operator starts its pods: by environment, no torchrun."""
    port = free_port()
    return [
        subprocess.Popen(
            [sys.executable, "-m", "trainer", *args],
            cwd=ROOT,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={
                **ENV,
                **(env or {}),
                "WORLD_SIZE": str(world),
                "RANK": str(rank),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
            },
        )
        for rank in range(world)
    ]


def test_a_rank_stuck_writing_a_checkpoint_fails_the_others_within_the_runs_timeout(tmp_path: Path) -> None:
    # A named pipe where rank 1's shard of the step-2 checkpoint goes: its write blocks as on
    # a hung NAS mount, while rank 0 has written its shard and waits for rank 1's. Sharded
    # (FSDP), so each rank writes a shard of its own.
    stuck = tmp_path / "checkpoints" / "step-000000002"
    stuck.mkdir(parents=True)
    os.mkfifo(stuck / "__1_0.distcp")
    args = [*FSDP, "--max-steps", "1000", "--checkpoint-every", "2", "--timeout-s", "5", "--storage-wait-s", "1"]
    rank0, rank1 = pods([*args, "--output-dir", str(tmp_path)])
    try:
        # gloo's default timeout would hold rank 0 for 30 minutes here.
        _, stderr = rank0.communicate(timeout=180)
    finally:
        rank0.kill()
        rank1.kill()
        rank1.communicate()
    assert rank0.returncode == TRANSIENT_STATUS, stderr[-3000:]
    # The half-written directory is passed over on start; the timeout is the one error.
    assert stderr.splitlines()[-1].startswith("error: lost the other processes ("), stderr
    assert "Traceback" not in stderr, stderr


def test_a_collective_timeout_must_be_positive(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trainer", "--timeout-s", "0", "--output-dir", str(tmp_path)],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stderr) == (2, "error: --timeout-s must be positive, got 0.0\n")


def test_a_bad_token_seen_by_one_rank_stops_every_rank_with_one_line(tmp_path: Path) -> None:
    seq_len, windows, batch = 128, 64, 4
    tokens = np.arange(windows * seq_len + 1, dtype=np.uint16) % 4000
    # A token beyond the tiny model's vocabulary of 4096, in a window that rank 1 alone
    # reads, in the run's third step.
    order = GlobalOrder(windows, batch * 2, 1234)
    lo, hi = order.step_slice(2 * batch * 2)
    first, _ = GlobalOrder.rank_share(lo, hi, 1, 2)
    window = int(order.permutation(0)[first])
    offset = window * seq_len + 5
    tokens[offset] = 5000
    tokens.tofile(tmp_path / "train.bin")
    args = ["--model", "gpt", "--batch-size", str(batch), "--max-steps", "6", "--data-dir", str(tmp_path)]
    ranks = pods([*args, "--output-dir", str(tmp_path / "out")])
    for rank in ranks:
        _, stderr = rank.communicate(timeout=180)
        assert rank.returncode == 2, stderr[-3000:]
        assert stderr == (
            f"error: rank 1: {tmp_path / 'train.bin'}: token id 5000 at token offset {offset} (window {window}) "
            "is not below the model's vocabulary size 4096: write the file with a header that declares its vocabulary\n"
        )


def test_a_pod_that_keeps_failing_retryably_stops_after_its_restarts(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # A worker whose Master never comes up: torchrun's rendezvous fails, status 203 each time.
    unreachable = ["--nnodes=2", "--node-rank=1", "--master-addr=master-not-up.invalid", "--rdzv-conf=timeout=2"]

    def attempt(pod: str) -> subprocess.CompletedProcess:
        cmd = [
            *[sys.executable, "-m", "trainer.launch", "--max-pod-restarts=1", *unreachable],
            *[f"--master-port={free_port()}", "--nproc-per-node=1", "-m", "trainer"],
        ]
        env = {**ENV, "OUTPUT_PATH": str(out), "POD_NAME": pod}
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    assert attempt("job-worker-0").returncode == TRANSIENT_STATUS
    # A run that commits a new checkpoint in between starts the count again.
    trained = subprocess.run(
        [sys.executable, "-m", "trainer", "--max-steps", "2", "--output-dir", str(out), *SMALL],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert trained.returncode == 0, trained.stderr
    assert attempt("job-worker-0").returncode == TRANSIENT_STATUS
    # Each pod counts its own failures.
    assert attempt("job-master-0").returncode == TRANSIENT_STATUS
    final = attempt("job-worker-0")
    assert final.returncode == EXHAUSTED_STATUS, final.stderr[-2000:]
    assert final.stderr.splitlines()[-1] == (
        "error: pod job-worker-0 failed with status 203 2 times in a row without a new checkpoint "
        "(--max-pod-restarts 1); exiting 75 so the job stops"
    )
    # The job is over: a new submission of it starts from no failures.
    assert not (out / ".restarts" / "job-worker-0.json").exists()
    assert attempt("job-worker-0").returncode == TRANSIENT_STATUS
    # A volume that cannot take the count leaves the retry be, and says so.
    shutil.rmtree(out / ".restarts")
    (out / ".restarts").write_text("")
    uncounted = attempt("job-worker-0")
    assert uncounted.returncode == TRANSIENT_STATUS
    assert uncounted.stderr.splitlines()[-1].startswith(
        f"warning: cannot count this restart in {out / '.restarts' / 'job-worker-0.json'}"
    )


def test_pod_launcher_refuses_a_bad_restart_bound(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "trainer.launch", "--max-pod-restarts", "many", "--nproc-per-node=1", "-m", "trainer"]
    result = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr) == (
        2,
        "error: --max-pod-restarts 'many': give the retries allowed in a row, 0 or more\n",
    )
    unset = {key: value for key, value in ENV.items() if key != "OUTPUT_PATH"}
    cmd[4] = "3"
    result = subprocess.run(cmd, cwd=ROOT, env=unset, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr) == (
        2,
        "error: --max-pod-restarts counts restarts in $OUTPUT_PATH, the job's output directory: set it\n",
    )


def test_the_compile_step_is_left_out_of_throughput_and_mfu(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "trainer", "--model", "gpt", "--batch-size", "4", "--synthetic-size", "40"]
    cmd += ["--compile", "--peak-tflops", "0.1", "--max-steps", "3", "--log-every", "1", "--output-dir", str(tmp_path)]
    result = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3]
    # The first step compiles: it is reported as such, with no rate that its compile time would skew.
    assert rows[0]["compile_s"] > 0
    assert not {"samples_per_s", "tokens_per_s", "mfu"} & rows[0].keys()
    for row in rows[1:]:
        assert "compile_s" not in row
        assert row["samples_per_s"] * row["step_time_s"] == pytest.approx(4, rel=0.01)
        assert row["mfu"] > 0

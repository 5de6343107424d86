"""``trainer.checkpointing`` for a script that keeps its own loop, through the documented
example ``examples/own-loop/train.py`` under real torchrun: a SIGKILLed worker's run resumes
bit-identically, a SIGTERM checkpoints and exits with the preemption status, and the
checkpoints' errors end the script with one line and the contract's status."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import ROOT
from test_trainer import ENV, start, wait_for
from worker_kill import kill_a_worker

from trainer.checkpointing import open_run
from trainer.checkpoints.integrity import TAMPERED
from trainer.checkpoints.sharded import list_checkpoints, read_commit
from trainer.config import UsageError

EXAMPLE = str(ROOT / "examples" / "own-loop" / "train.py")
SCRIPT_ENV = {**ENV, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), ENV.get("PYTHONPATH")]))}


def torchrun(*args: str, restarts: int = 0, launcher: str = "torch.distributed.run") -> list[str]:
    return [
        *(str(ROOT / ".venv" / "bin" / "python"), "-m", launcher, "--standalone", "--nproc-per-node=2"),
        *(f"--max-restarts={restarts}", EXAMPLE, *args),
    ]


def run(cmd: list[str], env: dict[str, str] = SCRIPT_ENV) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)


def weights(out: Path) -> dict[str, torch.Tensor]:
    return torch.load(out / "final_model.pt", weights_only=True)


def test_the_examples_run_resumes_bit_identical_after_a_worker_is_sigkilled(tmp_path: Path) -> None:
    args = ["--steps", "300", "--checkpoint-every", "60"]
    reference = run(torchrun(*args, "--output-dir", str(tmp_path / "reference")))
    assert reference.returncode == 0, reference.stderr

    out = tmp_path / "killed"
    cmd = torchrun(*args, "--output-dir", str(out), restarts=1)
    status, log = kill_a_worker(cmd, out / "checkpoints" / "step-000000060", env=SCRIPT_ENV)
    assert status == 0, log
    assert "resumed from step-0000000" in log
    resumed, expected = weights(out), weights(tmp_path / "reference")
    assert resumed.keys() == expected.keys() == {"0.weight", "0.bias", "3.weight", "3.bias"}
    assert all(torch.equal(resumed[k], expected[k]) for k in expected)
    # The trainer's pruning: the newest three of the run's checkpoints stay, each committed.
    kept = list_checkpoints(out / "checkpoints")
    assert [p.name for p in kept] == ["step-000000180", "step-000000240", "step-000000300"]
    assert read_commit(kept[-1])["values"]["step"] == 300


def test_sigterm_checkpoints_the_step_and_the_pods_launcher_exits_retryable(tmp_path: Path) -> None:
    out = tmp_path / "preempted"
    launcher = start(torchrun("--steps", "1000000", "--output-dir", str(out), launcher="trainer.launch"), SCRIPT_ENV)
    try:
        wait_for(lambda: read_commit(out / "checkpoints" / "step-000000020") is not None)
        launcher.send_signal(signal.SIGTERM)
        log, _ = launcher.communicate(timeout=120)
    finally:
        launcher.kill()
    assert launcher.returncode == 128 + signal.SIGTERM, log
    (last,) = [p for p in list_checkpoints(out / "checkpoints") if read_commit(p)["reason"] == "sigterm"]
    assert read_commit(last)["step"] % 5 == 0 and read_commit(last)["step"] >= 20


def test_a_signed_checkpoint_changed_on_disk_stops_the_script_with_the_tampered_status(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_bytes(os.urandom(32))
    env = {**SCRIPT_ENV, "CHECKPOINT_KEY_FILE": str(key)}
    out = tmp_path / "signed"
    first = run(torchrun("--steps", "40", "--output-dir", str(out)), env)
    assert first.returncode == 0, first.stderr
    newest = list_checkpoints(out / "checkpoints")[-1]
    assert "hmac" in read_commit(newest)
    shard = next(newest.glob("*.distcp"))
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    # The pods' launcher keeps the workers' status: not retried, the checkpoint left in place.
    again = run(torchrun("--steps", "60", "--output-dir", str(out), launcher="trainer.launch"), env)
    assert again.returncode == TAMPERED, again.stderr
    assert "error: " in again.stderr and "signed with this job's key" in again.stderr
    assert "Traceback" not in again.stderr
    assert newest.is_dir()


def test_per_rank_state_does_not_resume_at_another_world_size_and_says_why_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "two"
    first = run(torchrun("--steps", "20", "--output-dir", str(out)))
    assert first.returncode == 0, first.stderr
    # One process: the RNG states of every_rank are one row now, where the checkpoint holds two.
    alone = run([str(ROOT / ".venv" / "bin" / "python"), EXAMPLE, "--steps", "40", "--output-dir", str(out)])
    assert alone.returncode == 2, alone.stderr
    (line,) = [line for line in alone.stderr.splitlines() if line.startswith("error: ")]
    assert "step-000000020: loading failed (rank 0: ValueError: Size mismatch" in line and "for rng" in line
    assert "Traceback" not in alone.stderr


@pytest.fixture
def keep_sigterm():
    """open_run takes SIGTERM; this process's own handler comes back after the test."""
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, handler)


def test_values_come_back_as_saved_and_tensors_are_read_in_place(tmp_path: Path, keep_sigterm) -> None:
    weights = torch.arange(4.0)
    state = {"model": {"w": weights}, "optimizer": {"state": {0: {"step": torch.tensor(3.0)}}, "groups": [{"lr": 0.1}]}}
    open_run(tmp_path).save(7, {**state, "epoch": 2}, loss=0.5)
    commit = read_commit(tmp_path / "checkpoints" / "step-000000007")
    assert commit["tensors"] == ["model.w", "optimizer.state.0.step"] and commit["loss"] == 0.5

    into = {"model": {"w": torch.zeros(4)}, "optimizer": {"state": {0: {"step": torch.zeros(())}}}, "epoch": 0}
    restored = open_run(tmp_path).load_latest(into)
    assert restored["model"]["w"] is into["model"]["w"] and torch.equal(into["model"]["w"], weights)
    assert float(into["optimizer"]["state"][0]["step"]) == 3.0
    assert restored["epoch"] == 2 and restored["optimizer"]["groups"] == [{"lr": 0.1}]


def test_a_state_the_checkpoint_does_not_fit_and_values_that_are_not_json_are_refused(
    tmp_path: Path, keep_sigterm
) -> None:
    run = open_run(tmp_path)
    with pytest.raises(TypeError, match="checkpoint state at the top: .*give tensors, or JSON values"):
        run.save(1, {"w": torch.ones(2), "loader": object()})
    # A dict of mixed keys in a list has no sorted JSON, which the signed commit record needs.
    with pytest.raises(TypeError, match="checkpoint state at the top: .*give tensors, or JSON values"):
        run.save(1, {"w": torch.ones(2), "groups": [{1: "a", "b": 2}]})
    run.save(2, {"w": torch.ones(2)})
    with pytest.raises(UsageError, match=r"step-000000002: holds w, which the state given to load_latest has no"):
        open_run(tmp_path).load_latest({"epoch": 0})

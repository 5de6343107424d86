"""What a resume must refuse or keep, through the trainer's real command line (two gloo
processes under torchrun): checkpoints of the former format, another dataset or seed,
another job's output directory, a run of non-finite steps, and checkpoint storage that
does not accept writes."""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT
from test_trainer import ENV, SMALL, run, start, wait_for
from test_trainer import torchrun as plain_torchrun

from trainer.checkpoints.diskfull import NOT_WRITABLE
from trainer.checkpoints.sharded import list_checkpoints, read_commit

CNN = ["trainer", "--batch-size", "16", "--log-every", "10", "--checkpoint-every", "10"]


def torchrun(*args: str) -> list[str]:
    """Two processes under the pods' launcher, which exits with the workers' own status."""
    return plain_torchrun(*args, launcher="trainer.launch")


def errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def refused(result: subprocess.CompletedProcess, status: int, start: str) -> None:
    """The run stopped with ``status`` and one ``error:`` line per rank, starting ``start``, no traceback.
    A refusal before the ranks join may stop one rank before the other prints: torchrun then ends it."""
    lines = errors(result.stderr)
    assert result.returncode == status, result.stderr[-3000:]
    assert lines and len(lines) <= 2 and all(line.startswith(start) for line in lines), result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]


def test_a_checkpoint_of_the_former_format_survives_a_run_past_its_step(tmp_path: Path) -> None:
    # An earlier trainer wrote step-N/state.pt and meta.json. The run saved its DCP
    # checkpoint of step 10 into that directory, committed it, and pruned it with state.pt.
    root = tmp_path / "checkpoints"
    former = {}
    for step in (5, 10):
        path = root / f"step-{step:09d}"
        path.mkdir(parents=True)
        former[step] = {"state.pt": os.urandom(256), "meta.json": json.dumps({"step": step}).encode()}
        for name, payload in former[step].items():
            (path / name).write_bytes(payload)
    result = run(torchrun(*CNN, *SMALL, "--max-steps", "40", "--keep-checkpoints", "1", "--output-dir", str(tmp_path)))
    assert result.returncode == 0, result.stderr
    aside = root / "superseded" / "step-000000010-former"
    assert f"moved {root / 'step-000000010'} to {aside}: a checkpoint of the former format (state.pt)" in result.stderr
    for step, path in ((5, root / "step-000000005"), (10, aside)):
        assert {p.name: p.read_bytes() for p in path.iterdir()} == former[step]  # whole, nothing written into it
    assert [p.name for p in list_checkpoints(root)] == ["step-000000005", "step-000000040"]


def write_images(path: Path, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    path.mkdir(exist_ok=True)
    images = rng.integers(0, 256, (n, 1, 28, 28), dtype=np.uint8)
    np.savez(path / "train.npz", images=images, labels=rng.integers(0, 10, n))


def test_another_dataset_or_seed_is_refused_unless_the_epoch_is_replanned(tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    write_images(data, 640, seed=1)
    args = [*CNN, "--data-dir", str(data), "--output-dir", str(out)]
    first = run(torchrun(*args, "--max-steps", "10"))
    assert first.returncode == 0, first.stderr
    commit = read_commit(out / "checkpoints" / "step-000000010")

    # Another length: the saved position would index another permutation.
    write_images(data, 512, seed=1)
    shorter = run(torchrun(*args, "--max-steps", "20"))
    refused(shorter, 2, f"error: --output-dir {out}: checkpoint step-000000010 was trained with another dataset (640")
    assert "this run's has 512" in errors(shorter.stderr)[0] and "--replan-epoch" in errors(shorter.stderr)[0]
    # The same length, other images: the fingerprint tells them apart.
    write_images(data, 640, seed=2)
    refused(run(torchrun(*args, "--max-steps", "20")), 2, f"error: --output-dir {out}: checkpoint step-000000010")
    write_images(data, 640, seed=1)
    os.utime(data / "train.npz", ns=(0, 0))  # an identical copy whose times were not kept counts as other data
    refused(run(torchrun(*args, "--max-steps", "20")), 2, f"error: --output-dir {out}: checkpoint step-000000010")
    seed = run(torchrun(*args, "--max-steps", "20", "--seed", "7"))
    refused(seed, 2, f"error: --output-dir {out}: checkpoint step-000000010 was trained with another dataset")
    assert "and another --seed (1234, not 7)" in errors(seed.stderr)[0]
    assert [p.name for p in list_checkpoints(out / "checkpoints")] == ["step-000000010"]
    assert (commit["data"]["samples"], commit["position"]) == (640, 320)

    # Asked for: the epoch starts over in the new data's order, from its first sample.
    write_images(data, 512, seed=3)
    replanned = run(torchrun(*args, "--max-steps", "20", "--replan-epoch"))
    assert replanned.returncode == 0, replanned.stderr
    assert "warning: --replan-epoch: checkpoint step-000000010 was trained with another dataset" in replanned.stderr
    commit = read_commit(out / "checkpoints" / "step-000000020")
    assert (commit["epoch"], commit["position"], commit["data"]["samples"]) == (0, 320, 512)


def test_a_second_job_on_one_output_directory_is_refused(tmp_path: Path) -> None:
    args = [*CNN, *SMALL, "--output-dir", str(tmp_path)]

    def job(name: str, steps: int) -> subprocess.CompletedProcess:
        env = {**ENV, "TRAINING_JOB": name}  # as the platform's jobs set it (job_env)
        return subprocess.run(
            torchrun(*args, "--max-steps", str(steps)), cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
        )

    first = job("team-a/pretrain", 10)
    assert first.returncode == 0, first.stderr
    commit = read_commit(tmp_path / "checkpoints" / "step-000000010")
    other = job("team-b/pretrain", 20)
    refused(other, 2, f"error: --output-dir {tmp_path} belongs to job team-a/pretrain (its owner.json), not team-b/")
    assert read_commit(tmp_path / "checkpoints" / "step-000000010") == commit
    assert commit["job"] == "team-a/pretrain"
    assert [p.name for p in list_checkpoints(tmp_path / "checkpoints")] == ["step-000000010"]
    # The job itself, restarted or submitted again, resumes.
    again = job("team-a/pretrain", 20)
    assert again.returncode == 0 and "resumed from step-000000010" in again.stdout, again.stderr


def test_a_run_of_nonfinite_steps_stops_at_its_limit_and_is_never_checkpointed(tmp_path: Path) -> None:
    # Every step from 3 on is non-finite. The streak was read every 10 steps, so the run
    # stopped at step 10 after 8, and committed steps 4, 6 and 8 from inside it.
    env = {**ENV, "TRAINER_FAULT_NONFINITE_STEPS": ",".join(str(s) for s in range(3, 100))}
    cmd = torchrun(*CNN, *SMALL, "--max-steps", "100", "--checkpoint-every", "2", "--max-nonfinite-steps", "5")
    result = subprocess.run(
        [*cmd, "--output-dir", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )
    refused(result, 1, "error: the last 5 steps (to step 7) all had non-finite gradients and were skipped")
    assert "warning: not checkpointing step 4 (periodic): its last 2 step(s) had non-finite gradients" in result.stderr
    commits = [read_commit(p) for p in list_checkpoints(tmp_path / "checkpoints")]
    assert [c["step"] for c in commits] == [2] and math.isfinite(commits[0]["loss"])
    assert commits[0]["nonfinite_steps"] == {"skipped": 0, "consecutive": 0}


@contextmanager
def tmpfs(path: Path, *options: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", ",".join(["size=64m", *options]), "tmpfs", str(path)], capture_output=True
        )
        refusal = mounted.stderr.decode().strip() if mounted.returncode else None
    except FileNotFoundError:
        refusal = "no mount command"
    if refusal is not None:
        why = f"cannot mount a tmpfs here ({refusal}): needs root, with CAP_SYS_ADMIN in a container"
        # CI runs as root: there these tests must run, not vanish as skips.
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield path
    finally:
        # Lazily: a writer still holding a file there must not turn a failed test into a busy
        # mount point's error, nor leave the mount behind.
        subprocess.run(["umount", "--lazy", str(path)], check=True)


def test_a_read_only_checkpoints_directory_is_refused_before_training(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "checkpoints", "ro"):
        result = run(torchrun(*CNN, *SMALL, "--max-steps", "10", "--output-dir", str(tmp_path)))
    refused(
        result,
        2,
        f"error: --output-dir {tmp_path}: its checkpoints directory {tmp_path / 'checkpoints'}: not writable "
        "(Read-only file system)",
    )
    assert not (tmp_path / "metrics.jsonl").exists()  # not a step trained


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_checkpoints_remounted_read_only_after_a_commit_stop_every_rank_with_one_line(
    tmp_path: Path, mode: str
) -> None:
    # A NAS volume remounted read-only between two saves. Before, every rank printed a
    # PermissionError traceback and the run exited 1. The first save is far enough from the
    # second (hundreds of steps) to remount in between; the test checks it did.
    extra = ["--async-checkpoint"] if mode == "async" else []
    root = tmp_path / "checkpoints"
    with tmpfs(root):
        cmd = torchrun(*CNN, *SMALL, "--checkpoint-every", "300", "--max-steps", "700", *extra)
        launched = start([*cmd, "--output-dir", str(tmp_path)])
        try:
            wait_for(lambda: (root / "step-000000300" / "commit.json").exists())
            subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
            assert not (root / "step-000000600").exists(), "the run reached its next save before the remount"
            output, _ = launched.communicate(timeout=240)
        finally:
            launched.kill()
        lines = errors(output)
        assert launched.returncode == NOT_WRITABLE, output[-3000:]
        assert len(lines) == 2 and "Traceback" not in output, output[-3000:]
        assert lines[0].startswith(f"error: checkpoint step-000000600 could not be written: {root}/step-000000600")
        assert "Read-only file system" in lines[0] and "step-000000300 is still the newest checkpoint" in lines[0]
        assert [p.name for p in list_checkpoints(root)] == ["step-000000300"]

"""Checkpoints under faults: another run's checkpoints, a full disk, host memory of async
saves, and the counters a resumed run must go on from. Real torchrun, two gloo processes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT
from test_trainer import ENV, SMALL, run, torchrun

from trainer.checkpoints import sharded as checkpoint
from trainer.checkpoints.diskfull import DISK_FULL
from trainer.checkpoints.sharded import CheckpointError, list_checkpoints, prune, read_commit, verify

CNN = ["trainer", *SMALL, "--checkpoint-every", "10", "--keep-checkpoints", "2"]


def commit_at(root: Path, step: int, lineage: str, loss: float = 1.0) -> Path:
    path = root / f"step-{step:09d}"
    path.mkdir(parents=True)
    (path / "commit.json").write_text(json.dumps({"step": step, "loss": loss, "lineage": lineage}))
    return path


def test_after_start_fresh_another_runs_checkpoints_are_never_pruned_nor_overwritten(tmp_path: Path) -> None:
    # Run A wrote steps 20 and 30 under its key; run B, with another key, cannot load them
    # and is told to start fresh. Pruning by step alone deleted B's first checkpoint (older
    # than A's), and B's saves at A's steps replaced A's checkpoints.
    keys = {}
    for name in ("a", "b"):
        keys[name] = tmp_path / f"{name}.key"
        keys[name].write_bytes(name.encode() * 32)
    out = tmp_path / "out"
    root = out / "checkpoints"
    first = run(torchrun(*CNN, "--max-steps", "30", "--checkpoint-key-file", str(keys["a"]), "--output-dir", str(out)))
    assert first.returncode == 0, first.stderr
    a_commits = {p.name: read_commit(p) for p in list_checkpoints(root)}
    assert sorted(a_commits) == ["step-000000020", "step-000000030"]
    a_lineage = a_commits["step-000000030"]["lineage"]

    fresh = CNN + ["--checkpoint-key-file", str(keys["b"]), "--output-dir", str(out), "--start-fresh"]
    second = run(torchrun(*fresh, "--max-steps", "20"))
    assert second.returncode == 0, second.stderr
    aside = root / "superseded" / f"step-000000020-{a_lineage}"
    assert f"moved {root / 'step-000000020'} to {aside}: a checkpoint of another run" in second.stderr
    assert f"keeping {root / 'step-000000030'}: a checkpoint of another run" in second.stderr
    assert read_commit(aside) == a_commits["step-000000020"]
    assert read_commit(root / "step-000000030") == a_commits["step-000000030"]
    b_lineage = read_commit(root / "step-000000020")["lineage"]
    assert b_lineage != a_lineage and read_commit(root / "step-000000010")["lineage"] == b_lineage

    # B resumes its own newest past A's, and goes on under its own lineage.
    resumed = run(torchrun(*fresh, "--max-steps", "40"))
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from step-000000020" in resumed.stdout
    assert [p.name for p in list_checkpoints(root)] == ["step-000000030", "step-000000040"]
    assert all(read_commit(p)["lineage"] == b_lineage for p in list_checkpoints(root))
    # A's two checkpoints are whole, still A's, and load under A's key.
    for name, commit in a_commits.items():
        assert read_commit(root / "superseded" / f"{name}-{a_lineage}") == commit
        verify(root / "superseded" / f"{name}-{a_lineage}", keys["a"].read_bytes())


def test_keep_last_k_orders_by_step_keeps_the_newest_usable_and_other_runs(tmp_path: Path) -> None:
    # Past 10⁹ steps the names outgrow their padding and sort before older ones.
    older = commit_at(tmp_path, 999_999_990, "mine")
    newer = commit_at(tmp_path, 1_000_000_000, "mine")
    foreign = commit_at(tmp_path, 1_000_000_010, "theirs")
    assert list_checkpoints(tmp_path) == [older, newer, foreign]
    assert prune(tmp_path, keep=1, lineage="mine") == [foreign]
    assert list_checkpoints(tmp_path) == [newer, foreign]


def test_a_damaged_newest_commit_never_costs_the_last_good_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run(
        [sys.executable, "-m", "trainer", "--max-steps", "2", "--checkpoint-every", "1", *SMALL]
        + ["--output-dir", str(out)]
    )
    assert result.returncode == 0, result.stderr
    root = out / "checkpoints"
    good = list_checkpoints(root)[-1]
    lineage = read_commit(good)["lineage"]
    damaged = commit_at(root, 3, lineage)  # a marker whose shards are missing
    prune(root, keep=1, lineage=lineage)
    assert list_checkpoints(root) == [good, damaged]
    verify(good)


def test_a_deletion_cut_short_leaves_no_committed_checkpoint(tmp_path: Path, monkeypatch) -> None:
    path = commit_at(tmp_path, 10, "mine")
    (path / "__0_0.distcp").write_bytes(b"\0" * 64)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # the process dies between the marker and the shards

    monkeypatch.setattr(shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.remove(path)
    assert read_commit(path) is None and (path / "__0_0.distcp").exists()
    with pytest.raises(CheckpointError, match="a save that did not finish"):
        verify(path)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 20 MiB tmpfs: one checkpoint of the CNN (about 14 MiB) fits, a second does not."""
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mount)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()}): needs root")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_disk_that_fills_during_a_save_stops_every_rank_with_28_and_one_line(
    small_disk: Path, tmp_path: Path, mode: str
) -> None:
    out = small_disk / "out"
    # Async: the save of step 10 fails in the background and is reported at the next save,
    # the final one at step 12, which every rank reaches together.
    extra = ["--async-checkpoint", "--max-steps", "12"] if mode == "async" else ["--max-steps", "10"]
    args = ["trainer", *SMALL, "--checkpoint-every", "5", "--output-dir", str(out), *extra]
    result = run(torchrun(*args, launcher="trainer.launch"))
    assert result.returncode == DISK_FULL, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 2, result.stderr[-3000:]  # one per rank
    assert lines[0].startswith(
        f"error: checkpoint step-000000010 did not fit in {out / 'checkpoints'}: no space left or over quota "
        "(the checkpoint needs about 13.7 MiB,"
    )
    assert "step-000000005 is still the newest checkpoint" in lines[0]
    assert "[rank0]: Traceback" not in result.stderr and "unexpected pos" not in result.stderr
    # The partial save is gone and the previous checkpoint resumes elsewhere.
    assert [p.name for p in list_checkpoints(out / "checkpoints")] == ["step-000000005"]
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    resumed = run(torchrun(*args[:-2], "--max-steps", "10", "--output-dir", str(moved)))
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from step-000000005" in resumed.stdout


def test_an_async_save_under_ddp_copies_each_tensor_to_host_memory_once(tmp_path: Path) -> None:
    cmd = torchrun("bench.async_memory", "--side", "share", "--dir", str(tmp_path / "ckpt"))
    result = run(cmd)
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout.strip().splitlines()[-1])
    # 177 MiB of state: each of the two ranks stages half, not all of it.
    assert row["handed_mib"] == [pytest.approx(row["state_mib"] / 2, rel=0.05)] * 2
    assert all(growth < 0.7 * row["state_mib"] for growth in row["peak_rss_growth_mib"]), row
    committed = list_checkpoints(tmp_path / "ckpt")
    assert [p.name for p in committed] == ["step-000000001"]
    verify(committed[0])


def test_a_resumed_run_goes_on_counting_nonfinite_steps(tmp_path: Path) -> None:
    args = ["trainer", *SMALL, "--checkpoint-every", "10", "--output-dir", str(tmp_path)]

    def launch(steps: int, nonfinite: str) -> None:
        env = {**ENV, "TRAINER_FAULT_NONFINITE_STEPS": nonfinite}
        result = subprocess.run(
            torchrun(*args, "--max-steps", str(steps)), cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
        )
        assert result.returncode == 0, result.stderr

    launch(10, "5,8,9")
    assert read_commit(tmp_path / "checkpoints" / "step-000000010")["nonfinite_steps"] == {
        "skipped": 3,
        "consecutive": 0,
    }
    launch(12, "11")
    assert read_commit(tmp_path / "checkpoints" / "step-000000012")["nonfinite_steps"] == {
        "skipped": 4,
        "consecutive": 0,
    }

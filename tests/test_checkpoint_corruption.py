"""A checkpoint without a key whose files no longer match their digests (a flipped bit, a bad
disk) is corruption: it is moved aside, kept, and the newest checkpoint that verifies is
resumed. Real torchrun, two gloo processes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_trainer import SMALL, run, torchrun

from trainer.checkpoints.sharded import list_checkpoints, prune, read_commit, read_metadata

TWO = ["trainer", *SMALL, "--checkpoint-every", "2"]


@pytest.fixture(scope="module")
def four_steps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-process run's output directory with unsigned checkpoints at steps 2 and 4."""
    out = tmp_path_factory.mktemp("four") / "out"
    first = run(torchrun(*TWO, "--max-steps", "4", "--output-dir", str(out)))
    assert first.returncode == 0, first.stderr
    return out


@pytest.fixture
def output(four_steps: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(four_steps, tmp_path / "out"))


def flip_a_bit(checkpoint: Path) -> bytes:
    """Flip one bit in the middle of fc1.weight's data: the file keeps its size. Returns the
    shard's new bytes."""
    info = next(v for k, v in read_metadata(checkpoint).storage_data.items() if k.fqn == "model.fc1.weight")
    shard = checkpoint / info.relative_path
    data = bytearray(shard.read_bytes())
    data[info.offset + info.length // 2] ^= 0x10
    shard.write_bytes(bytes(data))
    return bytes(data)


def resume(out: Path, steps: int, *flags: str):
    return run(torchrun(*TWO, *flags, "--max-steps", str(steps), "--output-dir", str(out), launcher="trainer.launch"))


def test_a_flipped_bit_in_the_newest_is_kept_aside_and_the_previous_resumes(output: Path) -> None:
    root = output / "checkpoints"
    newest = root / "step-000000004"
    flipped = flip_a_bit(newest)

    resumed = resume(output, 6)
    assert resumed.returncode == 0, resumed.stderr
    aside = root / "corrupt" / newest.name
    moved = [line for line in resumed.stderr.splitlines() if line.startswith(f"warning: moved {newest} to {aside}: ")]
    assert len(moved) == 1, resumed.stderr
    assert "does not match its sha256 in commit.json" in moved[0] and "kept for inspection, never resumed" in moved[0]
    assert "resumed from step-000000002" in resumed.stdout
    assert (aside / "__0_0.distcp").read_bytes() == flipped or (aside / "__1_0.distcp").read_bytes() == flipped
    assert [p.name for p in list_checkpoints(root)] == ["step-000000002", "step-000000004", "step-000000006"]

    again = resume(output, 8)
    assert again.returncode == 0, again.stderr
    assert "resumed from step-000000006" in again.stdout and "skipping" not in again.stderr


def test_with_no_checkpoint_that_verifies_the_run_stops_and_start_fresh_starts(output: Path, tmp_path: Path) -> None:
    root = output / "checkpoints"
    for checkpoint in list_checkpoints(root):
        flip_a_bit(checkpoint)
    fresh = Path(shutil.copytree(output, tmp_path / "fresh"))

    stopped = resume(output, 6)
    assert stopped.returncode == 2, stopped.stderr
    assert "error: no committed checkpoint of this run loads (step-000000004: a file does not match its digest" in (
        stopped.stderr
    )
    assert f"step-000000002: a file does not match its digest (moved to {root / 'corrupt' / 'step-000000002'})" in (
        stopped.stderr
    )
    assert sorted(p.name for p in (root / "corrupt").iterdir()) == ["step-000000002", "step-000000004"]

    started = resume(fresh, 2, "--start-fresh")
    assert started.returncode == 0, started.stderr
    assert "resumed from" not in started.stdout
    assert sorted(p.name for p in (fresh / "checkpoints" / "corrupt").iterdir()) == ["step-000000002", "step-000000004"]
    assert read_commit(fresh / "checkpoints" / "step-000000002")["step"] == 2


def test_pruning_keeps_the_newest_checkpoint_whose_digests_match(output: Path) -> None:
    root = output / "checkpoints"
    lineage = read_commit(root / "step-000000004")["lineage"]
    flip_a_bit(root / "step-000000004")
    # Keeping one, the damaged newest stays as the newest, and step 2, the newest whose every
    # file matches its digest, stays as the one a resume can fall back to.
    prune(root, keep=1, lineage=lineage)
    assert [p.name for p in list_checkpoints(root)] == ["step-000000002", "step-000000004"]

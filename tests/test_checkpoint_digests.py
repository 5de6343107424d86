"""The commit record's digests come from the ranks that wrote the files, as they wrote them:
rank 0 reads no shard back to commit a checkpoint. Real torchrun, two gloo processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from swap_watcher import IN_CLOSE_NOWRITE, IN_NONBLOCK, read_events, watch
from test_trainer import SMALL, run, torchrun

from trainer.checkpoints.integrity import file_digests
from trainer.checkpoints.sharded import list_checkpoints, read_commit


@pytest.mark.parametrize("save", ["sync", "async"])
def test_rank_0_commits_with_the_writers_digests_and_reads_no_shard_back(tmp_path: Path, save: str) -> None:
    out = tmp_path / "out"
    # The save of step 2 goes into this directory, made here so it can be watched from the start.
    checkpoint = out / "checkpoints" / "step-000000002"
    checkpoint.mkdir(parents=True)
    fd = watch(str(checkpoint), IN_CLOSE_NOWRITE, IN_NONBLOCK)
    try:
        flags = ["--async-checkpoint"] if save == "async" else []
        result = run(torchrun("trainer", *SMALL, *flags, "--max-steps", "2", "--output-dir", str(out)))
        assert result.returncode == 0, result.stderr
        read_back = [name for _, name in read_events(fd) if name.endswith(".distcp")]
    finally:
        os.close(fd)
    assert list_checkpoints(out / "checkpoints") == [checkpoint]
    assert read_commit(checkpoint)["files"] == file_digests(checkpoint)
    assert set(file_digests(checkpoint)) == {".metadata", "__0_0.distcp", "__1_0.distcp"}
    assert read_back == []

"""Sharded (DCP) checkpoints: agreed resume, resharding, async saves, commit markers, pruning."""

from __future__ import annotations

import json
import math
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT, free_port
from test_checkpoint_safety import redigest
from test_trainer import ENV, SMALL, final_weights, run, torchrun

from trainer.checkpoints.sharded import (
    Checkpointer,
    CheckpointError,
    list_checkpoints,
    load,
    prune,
    read_commit,
    read_metadata,
    verify,
)

GPT = ["--model", "gpt", "--batch-size", "4", "--synthetic-size", "400", "--log-every", "6", "--checkpoint-every", "6"]


def test_ranks_agree_on_a_checkpoint_one_rank_cannot_see(tmp_path: Path) -> None:
    # Rank 1's view of the output volume lags (an NFS listing cached before step 30 was
    # written): its checkpoints/ lists steps 10 and 20 only. Rank 0 picks step 30, rank 1
    # cannot read it, and both must resume step 20 rather than each its own newest.
    args = ["trainer", "--checkpoint-every", "10", *SMALL]
    reference = run(torchrun(*args, "--max-steps", "40", "--output-dir", str(tmp_path / "reference")))
    assert reference.returncode == 0, reference.stderr
    shared = tmp_path / "shared"
    first = run(torchrun(*args, "--max-steps", "30", "--output-dir", str(shared)))
    assert first.returncode == 0, first.stderr
    stale = tmp_path / "stale-view"
    (stale / "checkpoints").mkdir(parents=True)
    for step in (10, 20):
        name = f"step-{step:09d}"
        (stale / "checkpoints" / name).symlink_to(shared / "checkpoints" / name)

    port = free_port()
    pods = [
        subprocess.Popen(
            [sys.executable, "-m", "trainer", *args[1:], "--max-steps", "40", "--storage-wait-s", "1"]
            + ["--output-dir", str(view)],
            cwd=ROOT,
            text=True,
            env={**ENV, "WORLD_SIZE": "2", "RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for rank, view in enumerate((shared, stale))
    ]
    outputs = [pod.communicate(timeout=180) for pod in pods]
    assert [pod.returncode for pod in pods] == [0, 0], outputs
    (out0, err0), (_, err1) = outputs
    assert "cannot read checkpoint" in err1 and "step-000000030" in err1
    assert "skipping checkpoint" in err0 and "not every rank can read it" in err0
    assert "resumed from step-000000020" in out0
    resumed, expected = final_weights(shared), final_weights(tmp_path / "reference")
    assert all(torch.equal(resumed[k], expected[k]) for k in expected)


def test_async_checkpoints_resume_bit_identical_and_leave_only_committed_ones(tmp_path: Path) -> None:
    # The same two runs (25 steps, then extended to 40) with synchronous saves and with
    # asynchronous ones: the copy taken for the background write must be the state as of
    # the step, whatever training does to the live tensors meanwhile.
    args = ["trainer", "--checkpoint-every", "10", "--keep-checkpoints", "2", *SMALL]
    reference = tmp_path / "reference"
    for steps in ("25", "40"):
        assert run(torchrun(*args, "--max-steps", steps, "--output-dir", str(reference))).returncode == 0
    out = tmp_path / "async"
    assert run(torchrun(*args, "--async-checkpoint", "--max-steps", "25", "--output-dir", str(out))).returncode == 0
    # Saves cut short by a SIGKILL: shards written, never committed.
    partial = [out / "checkpoints" / f"step-{step:09d}" for step in (22, 30, 35)]
    for path in partial:
        path.mkdir()
        (path / "__0_0.distcp").write_bytes(b"\0" * 64)
    resumed = run(torchrun(*args, "--async-checkpoint", "--max-steps", "40", "--output-dir", str(out)))
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from step-000000025" in resumed.stdout
    assert all(f"removing {partial[i]}: a save that did not finish" in resumed.stderr for i in (0, 2))
    assert [p.name for p in list_checkpoints(out / "checkpoints")] == ["step-000000030", "step-000000040"]
    assert all(read_commit(p) is not None for p in list_checkpoints(out / "checkpoints"))
    a, b = final_weights(out), final_weights(reference)
    assert all(torch.equal(a[k], b[k]) for k in b)


@pytest.mark.parametrize(("before", "after"), [(2, 1), (1, 2)])
def test_fsdp_checkpoint_reshards_to_another_world_size(tmp_path: Path, before: int, after: int) -> None:
    # The global batch is kept across the resize (8 samples: 2 × 4, or 1 × 4 × 2
    # accumulated), so the resumed run sees the same steps as one that never resized and
    # ends with the same weights up to float summation order.
    def launch(procs: int, steps: int, out: Path) -> subprocess.CompletedProcess:
        accum = ["--grad-accum", str(2 // procs)]
        cmd = torchrun(
            "trainer", *GPT, "--fsdp", *accum, "--max-steps", str(steps), "--output-dir", str(out), procs=procs
        )
        return run(cmd if procs > 1 else [sys.executable, *cmd[cmd.index("-m") :]])

    reference = launch(before, 12, tmp_path / "reference")
    assert reference.returncode == 0, reference.stderr
    out = tmp_path / "resized"
    assert launch(before, 6, out).returncode == 0
    resumed = launch(after, 12, out)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from step-000000006: step 6, epoch 0, sample 48" in resumed.stdout
    a, b = final_weights(out), final_weights(tmp_path / "reference")
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], atol=2e-5, rtol=1e-4) for k in b)


def test_keep_last_k_never_deletes_the_newest_checkpoint_with_a_finite_loss(tmp_path: Path) -> None:
    for step, loss in ((10, 2.0), (20, 1.5), (30, math.nan), (40, math.inf), (50, math.nan)):
        path = tmp_path / f"step-{step:09d}"
        path.mkdir()
        (path / "commit.json").write_text(json.dumps({"step": step, "loss": loss, "reason": "periodic"}))
    for step in (15, 60):
        (tmp_path / f"step-{step:09d}").mkdir()  # saves that never finished
    former = tmp_path / "step-000000005"  # the single-file format: neither resumed nor removed
    former.mkdir()
    (former / "state.pt").write_bytes(b"")
    prune(tmp_path, keep=2, lineage="")  # markers of an earlier trainer: lineage ""
    with pytest.raises(CheckpointError, match="former single-file format"):
        verify(former)
    assert [p.name for p in list_checkpoints(tmp_path)] == [
        "step-000000005",
        "step-000000020",
        "step-000000040",
        "step-000000050",
        "step-000000060",  # newer than the newest commit: its marker may just not show yet
    ]


def test_checkpoint_metadata_is_unpickled_through_an_allow_list(tmp_path: Path) -> None:
    result = run([sys.executable, "-m", "trainer", "--max-steps", "2", "--output-dir", str(tmp_path), *SMALL])
    assert result.returncode == 0, result.stderr
    checkpoint = list_checkpoints(tmp_path / "checkpoints")[-1]
    assert read_metadata(checkpoint).state_dict_metadata  # the real file loads

    class Payload:
        def __reduce__(self):
            return (subprocess.call, (["touch", str(tmp_path / "owned")],))

    (checkpoint / ".metadata").write_bytes(pickle.dumps(Payload()))
    redigest(checkpoint)
    with pytest.raises(CheckpointError, match="subprocess.call is not allowed"):
        read_metadata(checkpoint)
    assert not (tmp_path / "owned").exists()
    resumed = run([sys.executable, "-m", "trainer", "--max-steps", "3", "--output-dir", str(tmp_path), *SMALL])
    # The only committed checkpoint cannot be read: the run stops instead of starting over.
    assert resumed.returncode == 2 and not (tmp_path / "owned").exists()
    assert "skipping checkpoint" in resumed.stderr and "not allowed" in resumed.stderr
    assert "no committed checkpoint of this run loads" in resumed.stderr


def test_async_saves_stage_into_the_host_memory_of_the_first(tmp_path: Path) -> None:
    # The stager's cache (torch 2.13 distributed/checkpoint/_state_dict_stager.py, keyed by the
    # live storage) holds the host copy of each tensor; the second save must copy into the
    # first's, and each checkpoint must still hold the state as of its own save.
    state = {"model": {"w": torch.arange(4096.0)}, "optimizer": {"m": torch.ones(512)}}
    checkpointer = Checkpointer(tmp_path, None, True, keep=3, async_save=True)
    cache = checkpointer.stager._state_dict_stager._cached_storage_mapping
    snapshots = []
    for step in (1, 2):
        checkpointer.save(state, {"step": step, "reason": "periodic", "loss": 1.0}, wait=False)
        snapshots.append({live.data_ptr(): staged for live, staged in cache.items()})
        state["model"]["w"] += 1  # training goes on while the background write runs
        state["optimizer"]["m"] *= 3
    checkpointer.wait()
    checkpointer.close()
    first, second = snapshots
    assert len(first) == 2 and set(first) == set(second)
    assert all(second[ptr] is first[ptr] and second[ptr].data_ptr() == first[ptr].data_ptr() for ptr in first)
    for step, scale in ((1, 1.0), (2, 3.0)):
        path = tmp_path / f"step-{step:09d}"
        into = {"model": {"w": torch.zeros(4096)}, "optimizer": {"m": torch.zeros(512)}}
        load(into, path, read_commit(path), None)
        assert torch.equal(into["model"]["w"], torch.arange(4096.0) + step - 1)
        assert torch.equal(into["optimizer"]["m"], torch.full((512,), scale))

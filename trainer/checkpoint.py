"""Sharded checkpoints that every rank writes and reads in parallel, resumed by agreement.

A checkpoint is a directory ``checkpoints/step-<N>/`` written with
``torch.distributed.checkpoint`` (DCP): each rank writes its own shard files
(``__<rank>_<i>.distcp``), rank 0 writes DCP's ``.metadata`` once every rank has
finished, and then ``commit.json``, the commit marker, holding the step, the data
position, the loss, the config and the sha256 of every other file of the checkpoint. The
state is tensors only; everything else a resumed run needs is in the marker, as JSON. A
directory without a readable marker is a save that was cut short (a SIGKILL, a full
disk): it is never resumed, and rank 0 removes it once a newer checkpoint is committed.
DCP records global tensor shapes, so a checkpoint resumes at another world size, DDP or
FSDP, each rank reading only the slices it holds.

Resume is agreed, because NAS (NFSv3) listings and attributes can lag by tens of seconds
and differ between nodes: rank 0 alone lists the directory, checks the newest candidate
(marker, metadata and shard sizes: small reads and ``stat`` calls, never the state) and
broadcasts its step; every rank then checks that it sees that checkpoint too, waiting a
while for a lagging view, and only when all do do they load it together. Otherwise they
all move on to the next older checkpoint: no rank ever continues from a different state.

Loading runs nothing a checkpoint's bytes ask for (:mod:`trainer.integrity`): the
``.metadata`` pickle is read through an exact allow-list of metadata classes, tensor sizes
and dtypes; an entry stored as bytes, which DCP would unpickle in full, is refused by the
metadata check and by the load planner; tensors are read with ``weights_only=True``.
Before a rank reads a file, it checks the file's sha256 against the marker: a changed
file stops every rank with :class:`IntegrityError` naming it, and no older checkpoint is
tried in its place. With the job's key (``--checkpoint-key-file``) rank 0 signs each
marker, and a marker the key did not sign is skipped like a torn checkpoint.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter

from .integrity import (
    DIGESTS,
    MARKER,
    METADATA,
    SIGNATURE,
    CheckpointError,
    SafeReader,
    TensorOnlyLoadPlanner,
    check_signature,
    file_digests,
    read_metadata,
    sign,
)
from .metrics import warn

# A one-process run saves and loads without a process group, on purpose.
warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")

PREFIX = "step-"
FORMER_STATE = "state.pt"
"""The single file of the former checkpoint format: such directories are neither resumed
nor removed, so an upgrade never deletes them."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` through a temporary file, fsync and rename, so readers
    see the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def step_dir(root: Path, step: int) -> Path:
    return root / f"{PREFIX}{step:09d}"


def list_checkpoints(root: Path) -> list[Path]:
    """Checkpoint directories, committed or not, oldest first."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX))


def read_commit(path: Path) -> dict[str, Any] | None:
    """The commit marker of ``path``, or None when the save never finished."""
    try:
        return json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None


def verify(path: Path, key: bytes | None = None) -> dict[str, Any]:
    """Check a checkpoint without reading its state: the marker (signed with ``key``, when
    given), the metadata, and that every shard file exists, has a digest in the marker and
    is as long as the metadata says. The digests themselves are checked by :func:`load`,
    which reads the files anyway. A marker of an earlier trainer has no digests; without a
    key it is accepted, so an upgrade resumes: whoever could remove the digests could
    rewrite them as well.

    Returns:
        The commit marker.

    Raises:
        CheckpointError: what is wrong with it.
    """
    commit = read_commit(path)
    if commit is None and (path / FORMER_STATE).exists():
        raise CheckpointError(
            f"a checkpoint in the former single-file format ({FORMER_STATE}), which this trainer does not resume"
        )
    if commit is None:
        raise CheckpointError(f"no readable {MARKER} (a save that did not finish)")
    if key is not None:
        check_signature(commit, key)
    digests = commit.get(DIGESTS)
    if digests is not None and not isinstance(digests, dict):
        raise CheckpointError(f"{MARKER}: {DIGESTS!r} is not a table of file digests")
    needed: dict[str, int] = {METADATA: 0}
    for info in read_metadata(path).storage_data.values():
        end = info.offset + info.length
        needed[info.relative_path] = max(needed.get(info.relative_path, 0), end)
    for name, size in needed.items():
        if digests is not None and name not in digests:
            raise CheckpointError(f"{name} has no digest in {MARKER}")
        try:
            actual = (path / name).stat().st_size
        except OSError as err:
            raise CheckpointError(f"{name}: {err.strerror}") from None
        if actual < size:
            raise CheckpointError(f"{name} is {actual} bytes, the metadata needs {size}")
    return commit


def load(state: dict[str, Any], path: Path, commit: dict[str, Any], group: dist.ProcessGroup | None) -> None:
    """Read the checkpoint at ``path`` into the tensors of ``state``, in place. A collective.

    Args:
        state: nested dicts of the live tensors (plain or DTensor), the destination.
        path: a checkpoint that :func:`verify` accepted.
        commit: its commit marker, whose file digests every rank checks before reading.

    Raises:
        CheckpointException: DCP's gathered failures of every rank, among them an
            :class:`IntegrityError` for a file that is not the one committed.
    """
    dcp.load(
        state,
        storage_reader=SafeReader(path, commit.get(DIGESTS)),
        planner=TensorOnlyLoadPlanner(),
        process_group=group,
        no_dist=group is None,
    )


def prune(root: Path, keep: int) -> None:
    """Rank 0, after a commit: keep the newest ``keep`` committed checkpoints, and always
    the newest one whose loss was finite, so a run gone numerically bad can still go back
    to a sound state; remove saves that never finished and are older than the newest
    committed checkpoint. Checkpoints of the former format are left alone.

    Uncommitted directories newer than that are left alone: a stale NFS lookup can hide a
    marker that exists, and the next save of that step starts by clearing it anyway.
    """
    listed = [(path, read_commit(path)) for path in list_checkpoints(root)]
    committed = [(path, commit) for path, commit in listed if commit is not None]
    finite = [path for path, commit in committed if math.isfinite(commit.get("loss", math.nan))]
    keep_paths = {path for path, _ in committed[-keep:]} | set(finite[-1:])
    newest = committed[-1][0] if committed else None
    for path, commit in listed:
        if commit is None and (path / FORMER_STATE).exists():
            continue
        if commit is None and newest is not None and path < newest:
            warn(f"removing {path}: a save that did not finish")
        elif commit is None or path in keep_paths:
            continue
        shutil.rmtree(path, ignore_errors=True)


def _leaves(state: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``(dotted key, value)`` for every value that is not a dict, as DCP flattens them."""
    found = []
    for key, value in state.items():
        if isinstance(value, dict):
            found += _leaves(value, f"{prefix}{key}.")
        else:
            found.append((f"{prefix}{key}", value))
    return found


class Checkpointer:
    """Writes checkpoints, in the background with ``async_save``.

    Args:
        root: the checkpoints directory.
        group: the process group for DCP's collectives, or None for one process.
        is_main: whether this is rank 0, which commits and prunes.
        keep: committed checkpoints to keep.
        async_save: return once the state is copied to host memory and write it in a
            background thread, so steps do not wait on the NAS.
        on_commit: called on rank 0 with the step and the Unix time once a checkpoint is
            committed (with async saves, when the background save has finished).
        key: the job's checkpoint key, with which rank 0 signs each marker.
    """

    def __init__(
        self,
        root: Path,
        group: dist.ProcessGroup | None,
        is_main: bool,
        keep: int,
        async_save: bool,
        on_commit: Callable[[int, float], None] | None = None,
        key: bytes | None = None,
    ):
        self.root, self.group, self.is_main, self.keep = root, group, is_main, keep
        self.async_save, self.on_commit, self.key = async_save, on_commit, key
        self.pending: tuple[Future, Path, dict[str, Any]] | None = None

    def save(self, state: dict[str, Any], commit: dict[str, Any], wait: bool) -> None:
        """Save ``state`` (tensors only) as checkpoint ``commit["step"]``. A collective.

        Args:
            state: nested dicts of tensors (plain or DTensor).
            commit: what the marker records; JSON-serialisable.
            wait: return only once the checkpoint is committed (a SIGTERM or the last save).
        """
        not_tensors = sorted(key for key, value in _leaves(state) if not isinstance(value, torch.Tensor))
        if not_tensors:
            # Loading refuses anything but tensors, so such a checkpoint could never resume.
            raise TypeError(
                f"checkpoint state holds non-tensors at {', '.join(not_tensors)}: record them in the commit"
            )
        self.wait()
        path = step_dir(self.root, commit["step"])
        if self.is_main and (path / MARKER).exists():
            # The same step again, after resuming an older checkpoint: uncommit it first, so
            # a save cut short here leaves an uncommitted directory, not a mix of two saves.
            (path / MARKER).unlink()
            _fsync_dir(path)
        if self.group is not None:
            dist.barrier(group=self.group)
        # Every rank's writer creates the directory, so no rank waits for another's mkdir
        # to show on shared storage.
        kwargs = {"storage_writer": FileSystemWriter(path), "process_group": self.group, "no_dist": self.group is None}
        if self.async_save and not wait:
            self.pending = (dcp.async_save(state, **kwargs), path, commit)
        else:
            dcp.save(state, **kwargs)
            self._commit(path, commit)

    def poll(self) -> None:
        """Commit a background save that has finished; cheap enough to call every step."""
        if self.pending is not None and self.pending[0].done():
            self.wait()

    def wait(self) -> None:
        """Finish and commit the background save, if one is running."""
        if self.pending is None:
            return
        future, path, commit = self.pending
        self.pending = None
        future.result()
        self._commit(path, commit)

    def _commit(self, path: Path, commit: dict[str, Any]) -> None:
        # DCP has written .metadata only after gathering every rank's write results, so once
        # rank 0's save returns, every shard is on disk: the marker can go in.
        if not self.is_main:
            return
        commit = {**commit, DIGESTS: file_digests(path)}
        if self.key is not None:
            commit[SIGNATURE] = sign(commit, self.key)
        write_atomic(path / MARKER, json.dumps(commit).encode())
        if self.on_commit is not None:
            self.on_commit(commit["step"], time.time())
        prune(self.root, self.keep)
        print(f"checkpoint {path.name} ({commit['reason']})", flush=True)

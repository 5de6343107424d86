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
Each file is read once and its sha256 checked against the marker before its bytes are
parsed (:class:`IntegrityError` names a file that does not match). With the job's key
(``--checkpoint-key-file``) rank 0 signs each marker, and a marker the key did not sign is
skipped like a torn checkpoint. What a mismatch means is :mod:`trainer.resume`'s to decide:
corruption of an unsigned checkpoint, which goes to ``checkpoints/corrupt/``, or tampering
with a signed one, which stops the run.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
import uuid
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException

from .console import log, warn
from .digest_writer import DigestingWriter
from .diskfull import NotWritable, denied, disk_full, not_writable, out_of_space, shared_failure
from .integrity import (
    DIGESTS,
    MARKER,
    METADATA,
    SIGNATURE,
    CheckpointError,
    IntegrityError,
    check_files,
    check_signature,
    read_metadata,
    sign,
)
from .replicas import leaves, share
from .verified_read import SafeReader, TensorOnlyLoadPlanner

# A one-process run saves and loads without a process group, on purpose.
warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")

PREFIX = "step-"
LINEAGE = "lineage"
"""The commit record's key for the run a checkpoint belongs to: drawn at random when a run
starts from step 0, and carried on by every run that resumes one of its checkpoints.
Pruning removes only checkpoints of its own lineage (a marker of an earlier trainer has
none, which counts as the lineage ``""``)."""
SUPERSEDED = "superseded"
"""A checkpoint of another lineage at a step this run saves goes, whole, to
``<checkpoints>/superseded/step-<N>-<its lineage>/`` rather than be overwritten: never
resumed nor pruned there."""
FORMER_STATE = "state.pt"
"""The single file of the former checkpoint format: such directories are neither resumed
nor removed, so an upgrade never deletes them; one at a step this run saves goes, whole, to
``<checkpoints>/superseded/step-<N>-former/`` first, never written into."""
FORMER = "former"


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


def step_of(path: Path) -> int | None:
    """The step of a checkpoint directory's name, or None for a name of another kind."""
    digits = path.name.removeprefix(PREFIX)
    return int(digits) if path.name.startswith(PREFIX) and digits.isdigit() else None


def list_checkpoints(root: Path) -> list[Path]:
    """Checkpoint directories, committed or not, oldest first: by step, as names sort
    differently once steps outgrow their padding (``step-1000000000`` before ``step-999999999``)."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and step_of(p) is not None]
    return sorted(found, key=step_of)


def read_commit(path: Path) -> dict[str, Any] | None:
    """The commit marker of ``path``, or None when the save never finished."""
    try:
        return json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None


def verify(path: Path, key: bytes | None = None) -> dict[str, Any]:
    """Check a checkpoint without reading its state: the marker (signed with ``key``, when
    given), the metadata (its digest checked before it is unpickled), and that every shard
    file exists, has a digest in the marker and is as long as the metadata says. The shards'
    digests are checked by :func:`load`, which reads the files anyway. A marker of an earlier
    trainer has no digests; without a key it is accepted, so an upgrade resumes: whoever
    could remove the digests could rewrite them as well.

    Returns:
        The commit marker.

    Raises:
        CheckpointError: what is wrong with it.
        IntegrityError: the metadata is not the file the marker lists.
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
    if digests is not None and not (isinstance(digests, dict) and all(isinstance(d, str) for d in digests.values())):
        raise CheckpointError(f"{MARKER}: {DIGESTS!r} is not a table of file digests")
    needed: dict[str, int] = {METADATA: 0}
    for info in read_metadata(path, digests).storage_data.values():
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


def remove(path: Path) -> None:
    """Delete a checkpoint, its marker first: a deletion cut short leaves a save that
    never finished, which nothing resumes, rather than a committed checkpoint missing shards."""
    try:
        (path / MARKER).unlink()
        _fsync_dir(path)
    except FileNotFoundError:
        pass
    shutil.rmtree(path, ignore_errors=True)


def move_into(path: Path, place: Path, name: str) -> Path:
    """Move a checkpoint, whole, to ``place/name`` (a fresh name if that is taken), out of the
    way of resume and pruning, which look only at ``step-<N>`` directories of the root."""
    place.mkdir(exist_ok=True)
    target = place / name
    if target.exists():
        target = place / f"{name}-{uuid.uuid4().hex[:8]}"
    os.replace(path, target)
    _fsync_dir(path.parent)
    return target


def set_aside(path: Path, suffix: str, what: str) -> None:
    """Move a checkpoint this run must not write into out of its way, whole, to
    :data:`SUPERSEDED` under its name and ``suffix``, and say what it is and where it went."""
    target = move_into(path, path.parent / SUPERSEDED, f"{path.name}-{suffix}")
    warn(f"moved {path} to {target}: {what} at a step this run saves, kept, never resumed")


def clear_the_way(path: Path, lineage: str) -> None:
    """Rank 0, before a save of ``path``: move aside a checkpoint of the former format or of
    another lineage there, or uncommit this lineage's own, so that a save cut short leaves an
    uncommitted directory, never a mix of two saves under one marker."""
    if (path / FORMER_STATE).exists():
        set_aside(path, FORMER, f"a checkpoint of the former format ({FORMER_STATE})")
        return
    previous = read_commit(path)
    if previous is None:
        return
    if previous.get(LINEAGE, "") != lineage:
        set_aside(path, previous.get(LINEAGE, "") or "unnamed", "a checkpoint of another run")
    else:
        # The same step again, after resuming an older checkpoint.
        (path / MARKER).unlink()
        _fsync_dir(path)


def _usable(path: Path, key: bytes | None, written: Path | None) -> bool:
    """Whether ``path`` would resume: it verifies and every file matches its digest. The
    checkpoint ``written``, just committed, is taken as it was written: reading it back at
    every commit would cost rank 0 what digesting on the writing ranks saves."""
    try:
        commit = verify(path, key)
        if path != written and isinstance(commit.get(DIGESTS), dict):
            check_files(path, commit[DIGESTS])
        return True
    except (CheckpointError, IntegrityError):
        return False


def prune(root: Path, keep: int, lineage: str, key: bytes | None = None, written: Path | None = None) -> list[Path]:
    """Rank 0, after committing ``written``: of this lineage's checkpoints, keep the newest
    ``keep`` committed ones, the newest whose loss was finite, so a run gone numerically bad
    can still go back to a sound state, and the newest that checks out (:func:`verify`, and
    every file's digest, not only its size), so a damaged newest commit never costs the last
    good one; remove saves that never finished and are older than the newest committed
    checkpoint. A directory holding a checkpoint of the former format is left alone, even one
    an earlier trainer committed a save into.

    Uncommitted directories newer than that are left alone: a stale NFS lookup can hide a
    marker that exists, and the next save of that step starts by clearing it anyway.

    Returns:
        The committed checkpoints of other lineages, which are never removed.
    """
    listed = [(path, read_commit(path)) for path in list_checkpoints(root)]
    committed = [(path, commit) for path, commit in listed if commit is not None]
    own = [path for path, commit in committed if commit.get(LINEAGE, "") == lineage]
    finite = [path for path, commit in committed if path in own and math.isfinite(commit.get("loss", math.nan))]
    usable = next((path for path in reversed(own) if _usable(path, key, written)), None)
    keep_paths = set(own[-keep:]) | set(finite[-1:]) | {usable}
    newest = step_of(committed[-1][0]) if committed else None
    for path, commit in listed:
        if (path / FORMER_STATE).exists():
            continue
        if commit is None and newest is not None and step_of(path) < newest:
            warn(f"removing {path}: a save that did not finish")
        elif commit is None or path in keep_paths or path not in own:
            continue
        remove(path)
    return [path for path, _ in committed if path not in own]


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
        replicas: this rank's index among the ranks that hold the same plain tensors, and their
            number (:func:`trainer.replicas.share`); every rank of ``group`` when None. A
            pipeline's stages hold different ones.

    Attributes:
        lineage: the run's lineage (:data:`LINEAGE`), recorded in every marker; a resumed
            run sets the one of the checkpoint it loaded.
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
        replicas: tuple[int, int] | None = None,
    ):
        self.root, self.group, self.is_main, self.keep = root, group, is_main, keep
        self.async_save, self.on_commit, self.key = async_save, on_commit, key
        self.pending: tuple[Future, Path, dict[str, Any], int, DigestingWriter] | None = None
        self.lineage = uuid.uuid4().hex
        self.foreign: set[Path] = set()
        self.rank = dist.get_rank(group) if group is not None else 0
        self.world = dist.get_world_size(group) if group is not None else 1
        self.replicas = replicas or (self.rank, self.world)

    def save(self, state: dict[str, Any], commit: dict[str, Any], wait: bool) -> None:
        """Save ``state`` (tensors only) as checkpoint ``commit["step"]``. A collective.

        Args:
            state: nested dicts of tensors (plain or DTensor).
            commit: what the marker records; JSON-serialisable.
            wait: return only once the checkpoint is committed (a SIGTERM or the last save).
        """
        not_tensors = sorted(".".join(key) for key, value in leaves(state) if not isinstance(value, torch.Tensor))
        if not_tensors:
            # Loading refuses anything but tensors, so such a checkpoint could never resume.
            raise TypeError(
                f"checkpoint state holds non-tensors at {', '.join(not_tensors)}: record them in the commit"
            )
        self.wait()
        path = step_dir(self.root, commit["step"])
        # A failure of rank 0's alone would leave the others to lose it in the save's collectives.
        failed = shared_failure(lambda: clear_the_way(path, self.lineage) if self.is_main else None, self.group)
        if failed is not None:
            raise self._refused(path, failed) if denied(failed) else failed
        # Every rank's writer creates the directory, so no rank waits for another's mkdir
        # to show on shared storage.
        writer = DigestingWriter(path)
        kwargs = {"storage_writer": writer, "process_group": self.group, "no_dist": self.group is None}
        mine, needed = share(state, *self.replicas)
        if self.async_save and not wait:
            self.pending = (dcp.async_save(mine, **kwargs), path, commit, needed, writer)
            return
        try:
            dcp.save(mine, **kwargs)
        except CheckpointException as err:
            self._failed(err, path, needed)
        self._commit(path, commit, writer.digests)

    def _refused(self, path: Path, err: OSError) -> NotWritable:
        return not_writable(path, err, self._newest_below(path))

    def _newest_below(self, path: Path) -> str | None:
        below = [p.name for p in list_checkpoints(self.root) if step_of(p) < step_of(path) and read_commit(p)]
        return below[-1] if below else None

    def poll(self) -> None:
        """Commit a background save that has finished; cheap enough to call every step. A
        failed one is left to the next :meth:`save` or :meth:`wait`, which every rank
        reaches at the same step, so that all stop together."""
        if self.pending is not None and self.pending[0].done() and self.pending[0].exception() is None:
            self.wait()

    def wait(self) -> None:
        """Finish and commit the background save, if one is running.

        Raises:
            DiskFull: the save did not fit; on every rank.
            NotWritable: the storage refused a write of the save; on every rank.
        """
        if self.pending is None:
            return
        future, path, commit, needed, writer = self.pending
        self.pending = None
        try:
            future.result()
        except CheckpointException as err:
            self._failed(err, path, needed)
        self._commit(path, commit, writer.digests)

    def _failed(self, err: CheckpointException, path: Path, needed: int) -> None:
        """Raise what a failed save means: :class:`NotWritable` when the storage refused a
        write; :class:`DiskFull` when it ran out of space, once rank 0 has removed the
        partial save (never committed, so never resumed), since freeing its space is the
        first thing the user must do; else the error itself."""
        refused = denied(err)
        if refused is not None:
            raise self._refused(path, refused) from None
        if not out_of_space(err):
            raise err
        if self.is_main:
            remove(path)
        raise disk_full(path, needed, self._newest_below(path)) from None

    def _commit(self, path: Path, commit: dict[str, Any], digests: dict[str, str]) -> None:
        # DCP has written .metadata only after gathering every rank's write results, so once
        # rank 0's save returns, every shard is on disk: the marker can go in.
        if not self.is_main:
            return
        commit = {**commit, LINEAGE: self.lineage, DIGESTS: digests}
        if self.key is not None:
            commit[SIGNATURE] = sign(commit, self.key)
        try:
            write_atomic(path / MARKER, json.dumps(commit).encode())
        except OSError as err:
            if denied(err):
                raise self._refused(path, err) from None
            raise
        if self.on_commit is not None:
            self.on_commit(commit["step"], time.time())
        for other in prune(self.root, self.keep, self.lineage, self.key, written=path):
            if other not in self.foreign:
                self.foreign.add(other)
                warn(f"keeping {other}: a checkpoint of another run, which this run never removes")
        log(f"checkpoint {path.name} ({commit['reason']})")

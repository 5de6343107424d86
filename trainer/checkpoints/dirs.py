"""The checkpoints directory: names (``step-<N>``), commit records, what checks a checkpoint
without reading its state, and how rank 0 moves checkpoints aside and prunes them.

:mod:`trainer.checkpoints.sharded` writes and loads checkpoints; this module owns their layout on
storage and their lifecycle there, which resume (:mod:`trainer.checkpoints.resume`) relies on as well.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from ..console import warn
from .integrity import (
    DIGESTS,
    MARKER,
    METADATA,
    CheckpointError,
    IntegrityError,
    check_files,
    check_signature,
    read_metadata,
)

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


def fsync_dir(path: Path) -> None:
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
    fsync_dir(path.parent)


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
    digests are checked by :func:`trainer.checkpoints.sharded.load`, which reads the files anyway. A
    marker of an earlier trainer has no digests; without a key it is accepted, so an upgrade
    resumes: whoever could remove the digests could rewrite them as well.

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


def remove(path: Path) -> None:
    """Delete a checkpoint, its marker first: a deletion cut short leaves a save that
    never finished, which nothing resumes, rather than a committed checkpoint missing shards."""
    try:
        (path / MARKER).unlink()
        fsync_dir(path)
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
    fsync_dir(path.parent)
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
        fsync_dir(path)


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

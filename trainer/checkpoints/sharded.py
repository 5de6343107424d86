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

Loading runs nothing a checkpoint's bytes ask for (:mod:`trainer.checkpoints.integrity`): the
``.metadata`` pickle is read through an exact allow-list of metadata classes, tensor sizes
and dtypes; an entry stored as bytes, which DCP would unpickle in full, is refused by the
metadata check and by the load planner; tensors are read with ``weights_only=True``.
Each file is read once and its sha256 checked against the marker before its bytes are
parsed (:class:`IntegrityError` names a file that does not match). With the job's key
(``--checkpoint-key-file``) rank 0 signs each marker, and a marker the key did not sign is
skipped like a torn checkpoint. What a mismatch means is :mod:`trainer.checkpoints.resume`'s to decide:
corruption of an unsigned checkpoint, which goes to ``checkpoints/corrupt/``, or tampering
with a signed one, which stops the run.
"""

from __future__ import annotations

import json
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
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

from ..console import log, warn
from .digest_writer import DigestingWriter
from .dirs import (
    FORMER,
    FORMER_STATE,
    LINEAGE,
    PREFIX,
    SUPERSEDED,
    clear_the_way,
    list_checkpoints,
    move_into,
    prune,
    read_commit,
    remove,
    step_dir,
    step_of,
    verify,
    write_atomic,
)
from .diskfull import NotWritable, denied, disk_full, not_writable, out_of_space, shared_failure
from .integrity import DIGESTS, MARKER, SIGNATURE, CheckpointError, read_metadata, sign
from .save_plan import leaves, share
from .verified_read import SafeReader, TensorOnlyLoadPlanner

# The directory's helpers are imported from here by resume, the job commands and tests.
__all__ = [
    "FORMER",
    "FORMER_STATE",
    "LINEAGE",
    "MARKER",
    "PREFIX",
    "SUPERSEDED",
    "CheckpointError",
    "Checkpointer",
    "host_stager",
    "list_checkpoints",
    "load",
    "move_into",
    "prune",
    "read_commit",
    "read_metadata",
    "remove",
    "step_dir",
    "step_of",
    "verify",
    "write_atomic",
]

# A one-process run saves and loads without a process group, on purpose.
warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")


def load(state: dict[str, Any], path: Path, commit: dict[str, Any], group: dist.ProcessGroup | None) -> None:
    """Read the checkpoint at ``path`` into the tensors of ``state``, in place. A collective.

    Args:
        state: nested dicts of the live tensors (plain or DTensor), the destination.
        path: a checkpoint that :func:`trainer.checkpoints.dirs.verify` accepted.
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


def host_stager() -> DefaultStager:
    """The stager of a run's async saves: one for the whole run, which keeps the host copy of
    each tensor it staged and copies into it at the next save (torch 2.13
    ``distributed/checkpoint/_state_dict_stager.py``, ``StateDictStager._stage_untyped_storage``,
    keyed by the live tensor's storage), where a fresh writer per save allocated the whole
    state anew each time. Reuse is safe because a save first waits for the previous one's
    writes (:meth:`Checkpointer.save`). Pinned memory only with CUDA, where it speeds the
    device-to-host copy, which may then be non-blocking (the stager synchronises before it
    returns); on CPU pinning would only lock pages. Staging stays on the calling thread:
    training must not change the state while it is copied."""
    cuda = torch.cuda.is_available()
    options = StagingOptions(
        use_pinned_memory=cuda, use_shared_memory=False, use_async_staging=False, use_non_blocking_copy=cuda
    )
    return DefaultStager(options)


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
            number (:func:`trainer.checkpoints.save_plan.share`); every rank of ``group`` when None. A
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
        self.stager = host_stager() if async_save else None
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
            self.pending = (dcp.async_save(mine, async_stager=self.stager, **kwargs), path, commit, needed, writer)
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

    def close(self) -> None:
        """Release the staging memory (a background save still running keeps the copy it writes)."""
        if self.stager is not None:
            self.stager.close()
            self.stager = None

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

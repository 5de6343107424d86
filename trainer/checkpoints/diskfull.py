"""A checkpoint that does not fit, or storage that refuses writes: each told in one line,
with an exit status of its own.

PyTorch's zip writer, which DCP's file writer saves each shard file with, turns a short
write into ``RuntimeError: [enforce fail at inline_container.cc:...] . unexpected pos A vs
B`` (``caffe2/serialize/inline_container.cc`` in torch 2.13: the position after ``fwrite``
is checked, its errno is not kept), so a full disk or quota reaches the trainer without
``ENOSPC``. A save that failed either way is taken for a full disk, and the free space
the trainer measures is in the message, so a failed write of another cause reads as such.
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Callable
from pathlib import Path

import torch.distributed as dist
from torch.distributed.checkpoint.api import CheckpointException

DISK_FULL = errno.ENOSPC
"""The exit status of every rank when a checkpoint does not fit (28, ENOSPC's number).
Under ``restartPolicy: ExitCode`` the Training Operator v1.9.4 recreates a pod only for a
status of 128 and above (``pkg/util/train/train_util.go`` ``IsRetryableExitCode``) and fails
the job on any other (``pkg/controller.v1/common/pod.go``): 28 is final, as a retry would
fill the same disk again."""

SPACE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
"""No space, over a quota, a file larger than allowed: what a retry cannot fix."""

SHORT_WRITE = "unexpected pos"

NOT_WRITABLE = errno.EROFS
"""The exit status of every rank when the checkpoints directory refuses a write during a save
(30, EROFS's number): a volume remounted read-only, permissions or a policy taken away. Final
like :data:`DISK_FULL`: a retry would meet the same storage."""

DENIED_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS}
"""Permission denied, operation not permitted, a read-only file system."""


class DiskFull(Exception):
    """A checkpoint did not fit on its volume; the previous one is still the newest committed."""


class NotWritable(Exception):
    """The checkpoints directory refused a write; the previous checkpoint is still the newest committed."""


def _failures(err: CheckpointException) -> list[BaseException]:
    # DCP gathers every rank's failure and raises the same CheckpointException on all of
    # them, so every rank classifies alike.
    return [e for e, _ in err.failures.values()]


def out_of_space(err: CheckpointException) -> bool:
    """Whether a failed save ran out of space."""
    return any(
        e.errno in SPACE_ERRNOS if isinstance(e, OSError) else isinstance(e, RuntimeError) and SHORT_WRITE in str(e)
        for e in _failures(err)
    )


def denied(err: BaseException) -> OSError | None:
    """The write the storage refused, in a failed save (a :class:`CheckpointException`) or
    a file operation (an :class:`OSError`), or None when it failed otherwise."""
    found = _failures(err) if isinstance(err, CheckpointException) else [err]
    return next((e for e in found if isinstance(e, OSError) and e.errno in DENIED_ERRNOS), None)


def shared_failure(operation: Callable[[], None], group: dist.ProcessGroup | None) -> OSError | None:
    """Run ``operation`` (rank 0's file operations before a save; nothing on the others) and
    give every rank of ``group`` the :class:`OSError` it raised on rank 0, or None. A collective.
    """
    failure: list[tuple[int, str, str | None] | None] = [None]
    try:
        operation()
    except OSError as err:
        failure = [(err.errno or 0, err.strerror or str(err), None if err.filename is None else str(err.filename))]
    if group is not None:
        dist.broadcast_object_list(failure, group_src=0, group=group)
    return OSError(*failure[0]) if failure[0] is not None else None


def mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def disk_full(path: Path, needed: int, kept: str | None) -> DiskFull:
    """The one-line account of a save that ran out of space.

    Args:
        path: the checkpoint directory that was being written, its partial files removed.
        needed: the bytes of the state the checkpoint holds, about its size on disk.
        kept: the newest committed checkpoint, which the failed save leaves the newest.
    """
    try:
        free = mib(shutil.disk_usage(path.parent).free)
    except OSError:
        free = "unknown"
    previous = f"{kept} is still the newest checkpoint" if kept else "there is no earlier checkpoint"
    return DiskFull(
        f"checkpoint {path.name} did not fit in {path.parent}: no space left or over quota (the checkpoint "
        f"needs about {mib(needed)}, {free} is free without it); {previous}: free space, raise the volume's "
        "quota or lower --keep-checkpoints, then resubmit"
    )


def not_writable(path: Path, err: OSError, kept: str | None) -> NotWritable:
    """The one-line account of a save the storage refused.

    Args:
        path: the checkpoint directory that was being written.
        err: the refused operation (its errno and file name are told).
        kept: the newest committed checkpoint, which the failed save leaves the newest.
    """
    where = err.filename or path
    previous = f"{kept} is still the newest checkpoint" if kept else "there is no earlier checkpoint"
    return NotWritable(
        f"checkpoint {path.name} could not be written: {where}: {err.strerror} (the checkpoints directory "
        f"{path.parent} does not accept writes: a volume mounted or remounted read-only, or its permissions); "
        f"{previous}: make {path.parent} writable for the job, then resubmit"
    )

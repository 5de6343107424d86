"""A checkpoint that does not fit: told in one line, with its own exit status.

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
from pathlib import Path

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


class DiskFull(Exception):
    """A checkpoint did not fit on its volume; the previous one is still the newest committed."""


def out_of_space(err: CheckpointException) -> bool:
    """Whether a failed save ran out of space. DCP gathers every rank's failure and raises
    the same :class:`CheckpointException` on all of them, so every rank answers alike."""
    return any(
        e.errno in SPACE_ERRNOS if isinstance(e, OSError) else isinstance(e, RuntimeError) and SHORT_WRITE in str(e)
        for e, _ in err.failures.values()
    )


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

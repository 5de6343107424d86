"""One job per output directory: the first run with a ``--job-id`` claims ``--output-dir``
for its job, and a run of another job is refused there.

Two jobs writing one ``checkpoints/`` would each move the other's checkpoints aside as
another lineage's, and a restart of either could resume the other's state. The claim is
``<output-dir>/owner.json``, made with ``link(2)``, which creates a name only if it does not
exist, on NFS as well (open(2), "O_EXCL": the portable way to lock a file over NFS is to
link a unique file to the lock name). Every rank claims before any collective: the ranks of
one job race to it harmlessly, as they all claim for the same job.

The identity is the job's namespace and name, not its uid: a job deleted and submitted
again under its name resumes its own checkpoints, as a full disk's or a read-only volume's
message tells the user to do.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from ..config import UsageError

OWNER = "owner.json"


def check_output_dir(path: Path, rank: int) -> None:
    """Create ``--output-dir`` and check this rank can write there and in its ``checkpoints/``,
    when that exists, before any collective: a volume mounted read-only there would otherwise
    let the run train until its first save. A missing one is created by the first save, in
    the output directory just checked."""
    checkpoints = path / "checkpoints"
    names = {path: f"--output-dir {path}"}
    if checkpoints.is_dir():
        names[checkpoints] = f"--output-dir {path}: its checkpoints directory {checkpoints}"
    for directory, what in names.items():
        try:
            directory.mkdir(parents=True, exist_ok=True)
            probe = directory / f".write-test-{rank}-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as err:
            raise UsageError(f"{what}: not writable ({err.strerror})") from None


def owner_of(output: Path) -> str | None:
    """The job that claimed ``output``, or None when none has.

    Raises:
        UsageError: the claim cannot be read.
    """
    try:
        return json.loads((output / OWNER).read_text())["job"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UsageError(f"--output-dir {output}: {OWNER} is unreadable ({err}): restore it or remove it") from None


def claim(output: Path, job_id: str | None) -> None:
    """Claim ``output`` for ``job_id``, or check that it is that job's. No-op without an id.

    Raises:
        UsageError: another job claimed it (or the claim cannot be made).
    """
    if job_id is None:
        return
    owner = owner_of(output)
    if owner is None:
        tmp = output / f".{OWNER}.{socket.gethostname()}-{os.getpid()}"
        try:
            tmp.write_text(json.dumps({"job": job_id}) + "\n")
            try:
                os.link(tmp, output / OWNER)
            except FileExistsError:
                pass  # another rank, or another job, claimed it first: read whose it is
        except OSError as err:
            raise UsageError(f"--output-dir {output}: cannot write {OWNER} ({err.strerror})") from None
        finally:
            tmp.unlink(missing_ok=True)
        owner = owner_of(output)
    if owner != job_id:
        raise UsageError(
            f"--output-dir {output} belongs to job {owner} (its {OWNER}), not {job_id}: two jobs on one output "
            f"directory would move each other's checkpoints aside; give this job its own output directory, or, "
            f"once {owner} is gone for good, remove {output / OWNER} to hand the directory and its checkpoints over"
        )

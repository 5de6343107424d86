"""``torchrun`` with exit statuses that tell a retry from a failure.

torchrun exits 1 whatever went wrong, including when its pod is being evicted: it got
SIGTERM, forwarded it, and the workers checkpointed and exited 143. The Training
Operator's ``restartPolicy: ExitCode`` retries only statuses 128-255, so under plain
torchrun an evicted or preempted pod would end the whole job. This runs torchrun in
process and exits:

- 128 + N when torchrun got signal N, or when a worker died of signal N or exited with a
  status of 128 or more itself (eviction, a peer's NCCL abort, the OOM killer):
  retryable;
- otherwise the failed worker's own status, 1-127 (a bad flag, bad data, a bug): a retry
  would fail the same way;
- 0 when training finished.

    python -m trainer.launch [torchrun flags] -m trainer [trainer flags]
"""

from __future__ import annotations

import sys

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main as torchrun


def exit_status(worker_codes: list[int]) -> int:
    """One status for the failed workers (``exitcode`` < 0: killed by that signal).

    A signal anywhere wins: when one worker is killed, the others often fail first with
    an ordinary error (gloo's "connection closed by peer" is a RuntimeError), which is a
    consequence, not the cause. A bug that makes a peer abort is then retried too, as
    often as the job's ``backoffLimit`` allows.
    """
    statuses = [128 - code if code < 0 else code for code in worker_codes]
    signalled = [status for status in statuses if status >= 128]
    return (signalled or statuses)[0]


def main(argv: list[str] | None = None) -> int:
    try:
        torchrun(argv)
    except SignalException as stopped:
        return 128 + int(stopped.sigval)
    except ChildFailedError as failed:
        return exit_status([failure.exitcode for failure in failed.failures.values()])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``torchrun`` with exit statuses that tell a retry from a failure.

torchrun exits 1 whatever went wrong, including when its pod is being evicted: it got
SIGTERM, forwarded it, and the workers checkpointed and exited 143. The Training
Operator's ``restartPolicy: ExitCode`` retries only statuses 128-255, so under plain
torchrun an evicted or preempted pod would end the whole job. This runs torchrun in
process and exits:

- 128 + N when torchrun got signal N, or when a worker died of signal N or exited with a
  status of 128 or more itself (eviction, a peer's NCCL abort, the OOM killer):
  retryable;
- 203 (``TRANSIENT_STATUS``) when the rendezvous, the store or the network failed: a
  Master pod not up yet (its name does not resolve, or nothing listens), a lost
  rendezvous host, a store timeout. Retryable: the next attempt usually finds the peers;
- otherwise the failed worker's own status, 1-127 (a bad flag, bad data, a bug): a retry
  would fail the same way;
- 0 when training finished.

With ``--max-pod-restarts N`` first, a retryable status past N in a row without a new
checkpoint becomes 75 (:mod:`trainer.restarts`): ``restartPolicy: ExitCode`` alone retries a
pod forever, whatever the job's ``backoffLimit``. The count lives in ``$OUTPUT_PATH``.

It also sets ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` when the environment does not say
otherwise: with the shared store a restarted torchrun can fail or stall (pytorch/pytorch#135712).

    python -m trainer.launch [--max-pod-restarts N] [torchrun flags] -m trainer [trainer flags]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from torch.distributed import DistNetworkError, DistStoreError
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.elastic.rendezvous import RendezvousError
from torch.distributed.run import main as torchrun

from .console import error
from .exit_codes import TRANSIENT_STATUS, exit_status
from .restarts import RestartBudget, pod_name

MAX_POD_RESTARTS = "--max-pod-restarts"

TRANSIENT_ERRORS = (RendezvousError, DistNetworkError, DistStoreError, TimeoutError, ConnectionError)
"""Failures to reach or keep the other nodes: a retry can succeed once they are reachable."""


class LaunchError(ValueError):
    """A launcher flag or the environment it needs is wrong."""


def restart_budget(argv: list[str]) -> tuple[RestartBudget | None, list[str]]:
    """``--max-pod-restarts N`` (or ``=N``) when ``argv`` starts with it, and torchrun's arguments.

    Raises:
        LaunchError: N is not a count, or ``$OUTPUT_PATH`` is not set.
    """
    if not argv or not argv[0].startswith(MAX_POD_RESTARTS):
        return None, argv
    flag, _, value = argv[0].partition("=")
    if flag != MAX_POD_RESTARTS:
        return None, argv
    rest = argv[1:] if value else argv[2:]
    value = value or (argv[1] if len(argv) > 1 else "")
    if not value.isdigit():
        raise LaunchError(f"{MAX_POD_RESTARTS} {value!r}: give the retries allowed in a row, 0 or more")
    output = os.environ.get("OUTPUT_PATH")
    if not output:
        raise LaunchError(f"{MAX_POD_RESTARTS} counts restarts in $OUTPUT_PATH, the job's output directory: set it")
    return RestartBudget(Path(output), pod_name(), int(value)), rest


def attempt(argv: list[str] | None) -> int:
    """Run torchrun with ``argv`` once; the exit status, as the module docstring lists."""
    os.environ.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    try:
        torchrun(argv)
    except SignalException as stopped:
        return 128 + int(stopped.sigval)
    except ChildFailedError as failed:
        return exit_status([failure.exitcode for failure in failed.failures.values()])
    except TRANSIENT_ERRORS as unreachable:
        # torch has logged the failure in detail; this line says what happens next.
        error(f"cannot reach the other nodes ({unreachable}); exiting {TRANSIENT_STATUS} to be retried")
        return TRANSIENT_STATUS
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run torchrun with ``argv`` (``sys.argv[1:]`` when None), ``--max-pod-restarts`` first.

    Returns:
        The exit status, as the module docstring lists.
    """
    try:
        budget, argv = restart_budget(sys.argv[1:] if argv is None else argv)
    except LaunchError as err:
        error(str(err))
        return 2
    status = attempt(argv)
    return budget.settle(status) if budget is not None else status


if __name__ == "__main__":
    sys.exit(main())

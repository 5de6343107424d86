"""Exit statuses that tell a retry from a failure, for every launcher. Standard library only:
it runs in any image that carries the ``trainer`` package, torch or not.

The Training Operator's ``restartPolicy: ExitCode`` retries statuses 128-255 and fails the
job on 1-127 (kubeflow/trainer v1.9.4 ``pkg/util/train/train_util.go`` ``IsRetryableExitCode``).
"""

from __future__ import annotations

import signal

TRANSIENT_STATUS = 128 + 75
"""Exit status for failures a retry can fix (the rendezvous, the store or the network):
128 + EX_TEMPFAIL, inside the 128-255 range ``restartPolicy: ExitCode`` retries and above
128 + 64, the highest signal number, so it never reads as "killed by signal N"."""


LOSS_SPIKES = 65
"""Exit status of a run stopped by a loss spike it could not roll back (``--spike-max-rollbacks``
spent, or no checkpoint to go back to): EX_DATAERR, as the data is the usual suspect; below 128,
so no restart policy retries what would spike again."""


def exit_status(worker_codes: list[int]) -> int:
    """One status for the failed workers (``exitcode`` < 0: killed by that signal).

    A signal anywhere wins, except the SIGTERM with which torchrun stops the others after
    a failure: when one worker is killed, the others often fail first, losing it in a
    collective (the trainer then exits ``TRANSIENT_STATUS``), which is a consequence, not
    the cause. A bug that makes a peer abort is then retried too, as
    often as the job's ``backoffLimit`` allows.
    """
    # torchrun stops the surviving workers with SIGTERM once one fails; a worker that had
    # not failed yet then shows as killed by SIGTERM, which says nothing about the cause.
    causes = [code for code in worker_codes if code != -signal.SIGTERM] or worker_codes
    statuses = [128 - code if code < 0 else code for code in causes]
    # A worker killed by a signal is the cause; a sibling that then lost it in a collective
    # exits TRANSIENT_STATUS, a consequence.
    signalled = [status for status in statuses if 128 < status < TRANSIENT_STATUS]
    retryable = [status for status in statuses if status >= 128]
    return (signalled or retryable or statuses)[0]


NODE_BELOW_BASELINE = 69
"""Exit status of the pre-job node check (:mod:`trainer.health.check`) on a node whose GPUs all-reduce
below the pool's baseline: EX_UNAVAILABLE, below 128 so that no policy reads it as a retry."""

"""A bound on a pod's retries, which ``restartPolicy: ExitCode`` does not keep.

Under ``ExitCode`` the Training Operator v1.9.4 deletes a pod that exited with 128 or above
and creates it again (kubeflow/trainer v1.9.4 ``pkg/controller.v1/common/pod.go``
``ReconcilePods``), with the pod-level ``restartPolicy: Never`` (``pkg/core/pod.go``
``setRestartPolicy``). No container then ever restarts, so ``backoffLimit`` never trips: it sums
the restart counts of running pods (``pkg/core/job.go`` ``PastBackoffLimit``) or compares
the job's work-queue requeues (``pkg/controller.v1/common/job.go``), which the PyTorchJob
controller's ``FakeWorkQueue`` always reports as 0 (``pkg/common/util/fake_workqueue.go``).
With ``backoffLimit`` 1 or more, a pod that keeps failing with 128 or above is retried forever.

So the pod's launcher counts: each retryable failure is recorded in the job's output
directory, one file per pod (``.restarts/<pod name>.json``), and a failure past the limit
exits :data:`EXHAUSTED_STATUS` instead, which the operator does not retry. A committed
checkpoint newer than the one the last failure saw starts the count again: a long run that
is preempted now and then keeps going, a run that fails before it saves anything new stops.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from .checkpoints.sharded import PREFIX, list_checkpoints, read_commit, write_atomic
from .console import error, warn

EXHAUSTED_STATUS = 75
"""A retryable failure past the limit: EX_TEMPFAIL, the transient status less 128, below 128
so that ``restartPolicy: ExitCode`` ends the job."""


def newest_commit(checkpoints: Path) -> int:
    """The step of the newest committed checkpoint under ``checkpoints``, or -1."""
    steps = [int(p.name.removeprefix(PREFIX)) for p in list_checkpoints(checkpoints) if read_commit(p) is not None]
    return max(steps, default=-1)


def pod_name() -> str:
    """This pod's name: ``$POD_NAME`` (the downward API; the host's name under host
    networking is the node's), else the host name, which Kubernetes makes the pod's."""
    return os.environ.get("POD_NAME") or socket.gethostname()


@dataclass(frozen=True)
class RestartBudget:
    """This pod's retries in a row without a new checkpoint.

    Args:
        output: the job's output directory (its checkpoints and the count live there).
        pod: this pod's name, stable across the operator's re-creations.
        limit: retryable failures in a row allowed; the next one is final.
    """

    output: Path
    pod: str
    limit: int

    @property
    def record(self) -> Path:
        return self.output / ".restarts" / f"{self.pod}.json"

    def settle(self, status: int) -> int:
        """The status to exit with after this attempt ended with ``status``; counts it."""
        if status < 128:
            # Done, or failed for good: a later submission of the job starts a new count.
            self.record.unlink(missing_ok=True)
            return status
        seen = newest_commit(self.output / "checkpoints")
        try:
            last = json.loads(self.record.read_text())
            failures = last["failures"] if last["checkpoint"] == seen else 0
        except (OSError, ValueError, KeyError, TypeError):
            failures = 0
        failures += 1
        if failures > self.limit:
            self.record.unlink(missing_ok=True)
            error(
                f"pod {self.pod} failed with status {status} {failures} times in a row without a new "
                f"checkpoint (--max-pod-restarts {self.limit}); exiting {EXHAUSTED_STATUS} so the job stops"
            )
            return EXHAUSTED_STATUS
        try:
            self.record.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.record, json.dumps({"failures": failures, "checkpoint": seen}).encode())
        except OSError as err:
            # A full or read-only volume must not turn a retry into a crash of the launcher.
            warn(f"cannot count this restart in {self.record} ({err})")
        return status

"""Run any command (``python train.py``, ``accelerate launch ...``) and exit with a status the
restart policy can act on, as ``trainer.launch`` does for torchrun:

- 128 + N when this wrapper got signal N (the pod is being evicted or preempted), whatever
  the command then did: it was stopped, not broken; retryable;
- 128 + N when the command died of signal N (the OOM killer, a kill): retryable;
- otherwise the command's own status: 1-127 a failure a retry would repeat, 128 or more
  what the command itself marks retryable;
- 127 when the command does not exist.

SIGTERM and SIGINT are passed on to the command, so it can checkpoint before the pod's grace
period ends. Standard library only: user images need no torch for it.

    python -m trainer.run python train.py --epochs 3
"""

from __future__ import annotations

import signal
import subprocess
import sys

from .console import error, line
from .exit_codes import exit_status

NOT_FOUND_STATUS = 127
"""The shell's status for a command that does not exist; not retryable."""


def main(argv: list[str] | None = None) -> int:
    """Run ``argv`` (``sys.argv[1:]`` when None) and return its status, as the module docstring lists."""
    command = list(sys.argv[1:] if argv is None else argv)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        line("usage: python -m trainer.run COMMAND [ARGS...]", sys.stderr)
        return 2
    try:
        child = subprocess.Popen(command)
    except OSError as err:
        error(f"cannot start {command[0]!r}: {err.strerror}")
        return NOT_FOUND_STATUS
    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    code = child.wait()
    if received:
        return 128 + received[0]
    return exit_status([code]) if code else 0


if __name__ == "__main__":
    sys.exit(main())

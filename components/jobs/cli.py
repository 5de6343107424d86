"""``ack-jobs``'s entry point (the commands are in :mod:`.commands`).

The commands need the ``[jobs]`` extra (the kubernetes client, ``kubeflow-training``,
``prometheus-client``). They are imported only when a command runs, so that ``ack-jobs``
installed without them says what to install instead of failing on an import.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

EXTRA_MODULES = ("kubernetes", "kubeflow", "prometheus_client")
"""Top-level modules that come with the ``[jobs]`` extra (pyproject.toml)."""
INSTALL = "pip install 'ack-training-platform[jobs]'"


def run(
    argv: Sequence[str] | None = None, out: Callable[[str], None] = print, sleep: Callable[[float], None] = time.sleep
) -> int:
    """:func:`.commands.run`, imported only now, so that :func:`main` can name the missing
    ``[jobs]`` extra instead of failing at import."""
    from .commands import run as run_command

    return run_command(argv, out, sleep)


def main() -> None:
    """Console entry point (``ack-jobs``)."""
    try:
        code = run()
    except ModuleNotFoundError as err:
        package = (err.name or "").partition(".")[0]
        if package not in EXTRA_MODULES:
            raise
        print(
            f"ack-jobs: {package} is not installed; the job commands need the [jobs] extra: {INSTALL}", file=sys.stderr
        )
        code = 2
    sys.exit(code)

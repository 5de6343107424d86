"""``ack-jobs``'s entry point (the commands are in :mod:`.commands`).

The commands need the ``[jobs]`` extra (the kubernetes client, ``kubeflow-training``,
``prometheus-client``); their flags do not. The commands are imported only when one runs, so
that ``ack-jobs --help`` works without the extra and a command says what to install instead
of failing on an import.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from .commands.flags import parse

EXTRA_MODULES = ("kubernetes", "kubeflow", "prometheus_client")
"""Top-level modules that come with the ``[jobs]`` extra (pyproject.toml)."""
INSTALL = "pip install 'ack-training-platform[jobs] @ git+https://github.com/<org>/ack-training-platform@<tag>'"


def run(
    argv: Sequence[str] | None = None, out: Callable[[str], None] = print, sleep: Callable[[float], None] = time.sleep
) -> int:
    """Parse the flags, then run the command: :mod:`.commands.dispatch` is imported only then,
    so that ``--help`` works without the ``[jobs]`` extra and :func:`main` can name it."""
    args, extra = parse(argv)
    from .commands.dispatch import run as run_command

    return run_command(args, extra, out, sleep)


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

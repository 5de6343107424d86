"""Console lines that stay whole when several processes share one pod log.

Every rank of a pod writes to the same stdout and stderr, and the image sets
``PYTHONUNBUFFERED=1`` so a killed pod's log keeps its last line. Unbuffered,
``print`` issues the text and its newline as two writes, and a second rank's line
lands between them. One ``write`` of the whole line is one system call, and a pipe
keeps such a write whole up to ``PIPE_BUF`` (4096 bytes on Linux, pipe(7)).
"""

from __future__ import annotations

import sys
from typing import TextIO


def line(text: str, stream: TextIO | None = None) -> None:
    """Write ``text`` and its newline in one call, then flush (stdout when no stream is given)."""
    out = sys.stdout if stream is None else stream
    out.write(text + "\n")
    out.flush()


def log(message: str) -> None:
    """A console line on stdout."""
    line(message)


def warn(message: str) -> None:
    """A warning on stderr."""
    line(f"warning: {message}", sys.stderr)


def error(message: str) -> None:
    """An error on stderr: the one line a failing process leaves for its operator."""
    line(f"error: {message}", sys.stderr)

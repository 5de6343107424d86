"""Console lines stay whole when the ranks of a pod share its log."""

from __future__ import annotations

import ast
import io
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from trainer import console


class Recorder(io.RawIOBase):
    """An unbuffered file that keeps each write the stream makes, as one system call would carry it."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.writes.append(bytes(data))
        return len(data)


def unbuffered_stderr(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """stderr as ``PYTHONUNBUFFERED=1`` (the image's setting) makes it: text written through to the fd.

    Set inside the test: pytest puts its own capture back on ``sys.stderr`` after fixtures run.
    """
    raw = Recorder()
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(raw, encoding="utf-8", write_through=True))
    return raw


def test_print_splits_a_line_in_two_writes_where_another_rank_can_cut_in(monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = unbuffered_stderr(monkeypatch)
    print("error: disk full", file=sys.stderr, flush=True)
    assert stderr.writes == [b"error: disk full", b"\n"]


def test_an_error_and_a_warning_are_each_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = unbuffered_stderr(monkeypatch)
    console.error("checkpoint step-000000010 did not fit")
    console.warn("cannot count this restart")
    assert stderr.writes == [
        b"error: checkpoint step-000000010 did not fit\n",
        b"warning: cannot count this restart\n",
    ]


def test_the_trainer_writes_its_console_lines_only_through_console() -> None:
    printing = []
    for path in sorted((ROOT / "trainer").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                printing.append(f"{Path(path).relative_to(ROOT)}:{node.lineno}")
    assert not printing, f"print splits a line under PYTHONUNBUFFERED; use trainer.console: {printing}"

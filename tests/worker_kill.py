"""Killing a worker of a running torchrun job once a checkpoint is committed: the harness of
every kill-and-resume test (the trainer's, its Llama's, meshes' and spike guard's, a job's own
model's, and the own-loop example's), and the process helpers it is made of."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from conftest import ROOT

from trainer.checkpoints.sharded import read_commit

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "PYTHONUNBUFFERED": "1"}


def start(cmd: list[str], env: dict[str, str] = ENV) -> subprocess.Popen:
    """A launcher in the background, its output (stdout and stderr) read at the end."""
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(predicate, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.02)


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def kill_a_worker(
    cmd: list[str],
    checkpoint: Path,
    *,
    env: dict[str, str] = ENV,
    workers: int = 2,
    wait_s: float = 120,
    before: Callable[[], None] | None = None,
) -> tuple[int, str]:
    """Run the launcher ``cmd``, SIGKILL one of its ``workers`` once ``checkpoint`` is committed,
    and let the launcher finish (torchrun restarts the workers when ``cmd`` allows restarts).

    Args:
        before: checks to make while the job runs, before the kill.

    Returns:
        The launcher's exit status and its output.
    """
    launcher = start(cmd, env)
    try:
        if before is not None:
            before()
        wait_for(lambda: read_commit(checkpoint) is not None, timeout=wait_s)
        found = children(launcher.pid)
        assert len(found) == workers
        os.kill(max(found), signal.SIGKILL)
        log, _ = launcher.communicate(timeout=240)
    finally:
        launcher.kill()
    return launcher.returncode, log

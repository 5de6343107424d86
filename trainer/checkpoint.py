"""Checkpoints that survive being killed at any instant.

A checkpoint is a directory ``checkpoints/step-<N>/`` holding ``state.pt`` and
``meta.json`` (the state's SHA-256, step and why it was written). It is written under a
temporary name, fsynced, and renamed into place, so ``step-<N>`` either exists whole
or not at all; a checkpoint whose hash does not match (a torn copy, a full disk) is
skipped on load with a warning and the previous one is used.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import torch

PREFIX = "step-"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` through a temporary file, fsync and rename."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def save(root: Path, step: int, state: dict[str, Any], reason: str, keep: int) -> Path:
    """Write checkpoint ``step`` under ``root`` and prune all but the newest ``keep``.

    Returns:
        The checkpoint directory.
    """
    root.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    final = root / f"{PREFIX}{step:09d}"
    tmp = root / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name, data in (
        ("state.pt", payload),
        (
            "meta.json",
            json.dumps(
                {"step": step, "reason": reason, "bytes": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
            ).encode(),
        ),
    ):
        with open(tmp / name, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    _fsync_dir(tmp)
    if final.exists():
        # The same step again (a SIGTERM right after a periodic save): keep the first.
        shutil.rmtree(tmp)
        return final
    os.rename(tmp, final)
    _fsync_dir(root)
    for old in list_checkpoints(root)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(root: Path) -> list[Path]:
    """Checkpoint directories, oldest first (temporary ones excluded)."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX))


def _load_verified(path: Path) -> dict[str, Any]:
    meta = json.loads((path / "meta.json").read_text())
    payload = (path / "state.pt").read_bytes()
    if hashlib.sha256(payload).hexdigest() != meta["sha256"]:
        raise ValueError(f"state.pt is {len(payload)} bytes and does not match its recorded hash")
    return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=False)


def load_latest(root: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint that is whole, or ``None``; broken ones are reported and skipped."""
    for path in reversed(list_checkpoints(root)):
        try:
            return path, _load_verified(path)
        except (OSError, ValueError, KeyError, RuntimeError, json.JSONDecodeError) as err:
            print(f"warning: skipping checkpoint {path}: {err}", file=sys.stderr, flush=True)
    return None

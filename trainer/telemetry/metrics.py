"""What a run reports: ``metrics.jsonl``, TensorBoard, the console, and the MFU peaks."""

from __future__ import annotations

import functools
import json
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..console import log

PEAK_TFLOPS = {
    "H200 NVL": 835.0,
    "H200": 989.0,
    "H20": 148.0,
    "H100 PCIe": 756.0,
    "H100 NVL": 835.0,
    "H100": 989.0,
    "H800 PCIe": 756.0,
    "H800": 989.0,
    "A100": 312.0,
    "A800": 312.0,
    "A10": 125.0,
    "L40S": 362.0,
    "L20": 119.5,
}
"""Dense bf16 tensor-core TFLOP/s for MFU, by device-name substring. Order matters: the
first substring found wins, so "H200 NVL" precedes "H200", which precedes "H20", and
"A100" precedes "A10". PCIe and NVL cards run lower clocks than the SXM parts."""


MFU_KEYS = {"mfu": False, "mfu_causal": True}
"""The log row's MFU figures and whether each counts attention as causal: ``mfu`` counts every
query against every key, as PaLM (appendix B) and nanoGPT do, so it compares with theirs;
``mfu_causal`` counts the half a causal model computes, and is the lower."""


def peak_tflops(device_name: str) -> float | None:
    """The dense bf16 peak of a GPU named like ``torch.cuda.get_device_name``; None if unknown."""
    return next((peak for key, peak in PEAK_TFLOPS.items() if key in device_name), None)


def device_sync(device: torch.device) -> Callable[[], None]:
    """What waits until ``device`` has finished the work queued on it. CUDA runs kernels
    asynchronously, so the host's clock alone reads the time their launch ended; a CPU's work
    is done when the call that did it returns."""
    if device.type == "cuda":
        return functools.partial(torch.cuda.synchronize, device)
    return _nothing


def _nothing() -> None:
    return None


@dataclass
class Window:
    """The steps, samples and training time since the last log row.

    Every time it reads is read once the device has finished the work queued so far
    (``sync``), so a window's start and end both mark the end of work, and its length is the
    device's, not the host's, which on a GPU runs ahead.

    Under ``--compile`` a process's first step traces and compiles the graphs (minutes for a
    large model) before it trains: its time goes to ``compile_s`` instead, so throughput and
    MFU are of the compiled steps alone. A row whose window holds only that step has no rates.

    Args:
        compiling: whether the next step is the first of a compiled run.
        sync: waits for the device (:func:`device_sync`).
        clock: seconds, monotonic.
    """

    compiling: bool
    sync: Callable[[], None] = _nothing
    clock: Callable[[], float] = time.perf_counter
    start: float = field(init=False)
    steps: int = 0
    samples: int = 0
    compile_s: float | None = None

    def __post_init__(self) -> None:
        self.start = self.now()

    def now(self) -> float:
        """The clock, read once the device has finished its queued work."""
        self.sync()
        return self.clock()

    def add(self, samples: int) -> None:
        """Count a step that has just ended, of ``samples`` samples."""
        if self.compiling:
            now = self.now()
            self.compiling, self.compile_s, self.start = False, now - self.start, now
        else:
            self.steps += 1
            self.samples += samples

    def leave_out(self, seconds: float) -> None:
        """Keep time that was not training (a checkpoint save) out of the window."""
        self.start += seconds

    def elapsed(self) -> float:
        return self.now() - self.start

    def restart(self) -> None:
        self.start, self.steps, self.samples, self.compile_s = self.now(), 0, 0, None


class Metrics:
    """``metrics.jsonl`` (one object per log step) and TensorBoard when it is installed."""

    def __init__(self, path: Path, after_step: int = 0):
        if path.exists():
            # A resumed run logs the steps after its checkpoint again: drop the rows the
            # interrupted run wrote for them, so every step appears once.
            rows = path.read_text().splitlines(keepends=True)
            kept = [row for row in rows if _step_of(row) is not None and _step_of(row) <= after_step]
            if len(kept) < len(rows):
                path.write_text("".join(kept))
        self.file = open(path, "a", buffering=1)
        try:
            from torch.utils.tensorboard import SummaryWriter

            # purge_step: TensorBoard hides the events an interrupted run wrote past it.
            self.tensorboard = SummaryWriter(str(path.parent / "tensorboard"), purge_step=after_step + 1)
        except ImportError:
            self.tensorboard = None

    def close(self) -> None:
        self.file.close()
        if self.tensorboard is not None:
            self.tensorboard.close()

    def log(self, row: dict[str, Any]) -> None:
        self.file.write(json.dumps(row) + "\n")
        log(" ".join(f"{k}={v}" for k, v in row.items()))
        if self.tensorboard is not None:
            for key, value in row.items():
                if key != "step":
                    self.tensorboard.add_scalar(key, value, row["step"])


def _step_of(row: str) -> int | None:
    """The step of a ``metrics.jsonl`` line; None for a line torn by a kill."""
    try:
        return int(json.loads(row)["step"])
    except (ValueError, KeyError, TypeError):
        return None


def peak_memory_mb(device: torch.device) -> float:
    """This process's peak memory: CUDA allocations on a GPU, resident set size on CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB

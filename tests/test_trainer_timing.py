"""Throughput timing: every clock reading behind a log row follows a device sync, in the window
itself and in the training loop that drives it."""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from trainer.config import Config
from trainer.data import load_dataset
from trainer.loop import Trainer
from trainer.models.spec import model_spec
from trainer.parallelism.topology import topology
from trainer.telemetry.metrics import Window, device_sync


def test_the_window_reads_the_clock_only_after_the_device_has_finished() -> None:
    events: list[str] = []
    ticks = iter(range(100))

    def clock() -> float:
        events.append("clock")
        return float(next(ticks))

    window = Window(compiling=True, sync=lambda: events.append("sync"), clock=clock)
    window.add(8)  # the compiled run's first step: its time is compile time
    window.add(8)
    window.add(8)
    elapsed = window.elapsed()
    window.restart()
    assert events == ["sync", "clock"] * 4
    assert (window.steps, elapsed) == (0, 1.0)


def test_a_gpu_is_synchronised_and_a_cpu_is_not_waited_for() -> None:
    gpu = torch.device("cuda", 3)
    sync = device_sync(gpu)
    assert isinstance(sync, functools.partial) and sync.func is torch.cuda.synchronize and sync.args == (gpu,)
    assert device_sync(torch.device("cpu"))() is None


def test_the_loop_syncs_before_each_log_row_and_around_each_save(tmp_path: Path) -> None:
    cfg = Config(
        model="gpt",
        output_dir=str(tmp_path),
        batch_size=4,
        synthetic_size=64,
        max_steps=6,
        log_every=3,
        checkpoint_every=4,
    )
    spec = model_spec(cfg)
    trainer = Trainer(cfg, topology(), load_dataset(cfg, spec), spec)
    synced_at: list[int] = []
    real_sync = trainer.sync
    trainer.sync = lambda: (synced_at.append(trainer.progress.step), real_sync())[-1]
    try:
        assert trainer.train() == 0
    finally:
        trainer.close()
    # The window opens at step 0; the rows at steps 3 and 6 read its end and reopen it; the
    # periodic save at step 4 is timed from a sync to a sync.
    assert synced_at == [0, 3, 3, 4, 4, 6, 6]

"""Where a run stands (:class:`Progress`) and the learning-rate schedule over it: a pure
function of the step and the run's length."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .data import GlobalOrder

WARMUP_STEPS = 20


def lr_factor(step: int, total: int) -> float:
    """The learning rate at ``step`` as a fraction of the base: linear warmup, then cosine
    decay to 10% at ``total`` steps."""
    if step < WARMUP_STEPS:
        return (step + 1) / WARMUP_STEPS
    if step >= total:
        return 0.1
    progress = (step - WARMUP_STEPS) / max(1, total - WARMUP_STEPS)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def planned_steps(
    step: int, epoch: int, position: int, order: GlobalOrder, max_steps: int | None, epochs: int | None
) -> int:
    """The step a run ends at: ``--max-steps`` or the end of its last epoch, whichever
    comes first, counted from where the run stands now.

    Counting from the current position rather than multiplying epochs by steps per epoch
    keeps the end right after an elastic resize, which changes the global batch and so
    the steps an epoch takes.

    Args:
        step: optimizer steps taken so far.
        epoch: the current epoch (0-based).
        position: samples of the current epoch already consumed.
        order: the data order, which knows the epoch size and the global batch.
        max_steps: ``--max-steps``, or None.
        epochs: ``--epochs``, or None for no epoch limit (then ``max_steps`` is set).

    Returns:
        The total number of optimizer steps of the run.
    """
    ends = [max_steps] if max_steps is not None else []
    if epochs is not None:
        this_epoch = math.ceil(max(0, order.size - position) / order.global_batch) if epoch < epochs else 0
        ends.append(step + this_epoch + max(0, epochs - epoch - 1) * order.steps_per_epoch)
    return min(ends)


@dataclass
class Progress:
    """Where a run stands in its data and its schedule. One object, shared by the Trainer,
    which advances it step by step, and its :class:`trainer.state.Checkpoints`, which save
    it and set it on a resume.

    Args:
        order: the data order; a resume at another world size replaces it with one that
            keeps the checkpoint's global batch.
        grad_accum: micro-batches per optimizer step, which that resume changes too.
        total_steps: the step the learning-rate schedule ends at (:func:`planned_steps`),
            planned anew on a resume.
        step: optimizer steps taken.
        epoch: the current epoch (0-based).
        position: samples of the current epoch already consumed.
    """

    order: GlobalOrder
    grad_accum: int
    total_steps: int
    step: int = 0
    epoch: int = 0
    position: int = 0

    def replan(
        self, optimizer: torch.optim.Optimizer, base_lr: float, max_steps: int | None, epochs: int | None
    ) -> None:
        """Plan the schedule's end anew from where the run stands (after a resume, or a jump
        over skipped samples, which changes what is left of the epochs) and set the current
        step's learning rate on it, as the scheduler would have."""
        self.total_steps = planned_steps(self.step, self.epoch, self.position, self.order, max_steps, epochs)
        for group in optimizer.param_groups:
            group["lr"] = base_lr * lr_factor(self.step, self.total_steps)


STOP_CHECK_SECONDS = 2.0
STOP_CHECK_MAX_STEPS = 10
"""The ranks agree on a SIGTERM about every two seconds of training, but at most every ten
steps: a collective per step costs a few percent on CPU, while slow steps (a large model)
must still leave the checkpoint time inside the eviction grace period."""


def stop_check_interval(step_time_s: float) -> int:
    """Steps between SIGTERM agreements for a given step time."""
    return max(1, min(STOP_CHECK_MAX_STEPS, int(STOP_CHECK_SECONDS / step_time_s)))

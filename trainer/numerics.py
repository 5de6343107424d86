"""Numerical safety: the gradient norm, optional clipping, and skipping steps whose
gradients are not finite, without a host sync per step.

The decision is the same on every rank without a collective of its own: it is taken on
the gradients after their all-reduce (DDP) or from a norm FSDP reduces across the shards,
so a NaN on any one rank poisons the gradients, and the norm, everywhere.

The streak is read on the host only at the steps where it could first reach
``--max-nonfinite-steps``: the run stops at exactly that many skipped steps in a row, with
a host sync every ``--max-nonfinite-steps`` steps at most rather than every step.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

NONFINITE = "nonfinite_steps"
"""The commit record's key for the guard's counters, so a resumed run goes on counting."""


class NonFiniteError(RuntimeError):
    """Training kept producing non-finite gradients; continuing would only skip steps."""


class StepGuard:
    """Computes the gradient norm before each optimizer step, clips to it, and makes the
    fused optimizer skip the step (its ``found_inf``, as for AMP's GradScaler) when the
    norm is not finite. Counters stay on the device until someone reads them.

    Args:
        optimizer: a fused optimizer (``fused=True``), which honours ``found_inf``.
        clip: the largest gradient norm allowed, or None not to clip.
        max_consecutive: skipped steps in a row after which :meth:`check` raises.
        device: where the gradients live.
        pipeline_group: the ranks of this rank's pipeline, whose stages' norms make the
            model's; None without one.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        clip: float | None,
        max_consecutive: int,
        device: torch.device,
        pipeline_group: dist.ProcessGroup | None = None,
    ):
        self.optimizer, self.clip, self.max_consecutive = optimizer, clip, max_consecutive
        self.pipeline_group = pipeline_group
        self.norm = torch.zeros((), device=device)
        self.skipped = torch.zeros((), device=device)
        self.consecutive = torch.zeros((), device=device)
        self.next_check = max_consecutive
        """The first step at which the streak could reach ``max_consecutive``."""

    def before_step(self, params: Iterable[torch.nn.Parameter]) -> None:
        """Measure (and clip) the gradients of ``params`` and arm the skip for this step."""
        params = [p for p in params if p.grad is not None]
        norm = torch.nn.utils.get_total_norm([p.grad for p in params], foreach=True)
        if isinstance(norm, DTensor):
            norm = norm.full_tensor()  # the partial norms of the shards, reduced across ranks
        if self.pipeline_group is not None:
            # Each stage holds other parameters: the whole model's norm is the root of the
            # stages' summed squares.
            squares = norm.double() ** 2
            dist.all_reduce(squares, group=self.pipeline_group)
            norm = squares.sqrt().to(norm.dtype)
        if self.clip is not None:
            torch.nn.utils.clip_grads_with_norm_(params, self.clip, norm, foreach=True)
        found_inf = (~torch.isfinite(norm)).float()
        self.optimizer.found_inf = found_inf
        self.norm = norm.detach()
        self.skipped += found_inf
        self.consecutive = (self.consecutive + found_inf) * found_inf

    def counters(self) -> dict[str, int]:
        """The skipped steps, in all and in a row (a host sync)."""
        return {"skipped": int(self.skipped.item()), "consecutive": int(self.consecutive.item())}

    def restore(self, counters: dict[str, int], step: int) -> None:
        """Go on from :meth:`counters` of the checkpoint of ``step``; one of an earlier
        trainer has none."""
        self.skipped.fill_(counters.get("skipped", 0))
        consecutive = counters.get("consecutive", 0)
        self.consecutive.fill_(consecutive)
        self.next_check = step + self.max_consecutive - consecutive

    def in_streak(self) -> int:
        """The steps skipped in a row up to now (a host sync): a checkpoint taken while it is
        not 0 would resume into the streak."""
        return int(self.consecutive.item())

    def check(self, step: int) -> None:
        """After each step: raise when the last ``max_consecutive`` steps were all skipped.
        Reads the streak (a host sync) only from the first step at which it could be that long.

        Raises:
            NonFiniteError: with the step and what to do about it.
        """
        if step < self.next_check:
            return
        run = self.in_streak()
        self.next_check = step + self.max_consecutive - run
        if run >= self.max_consecutive:
            raise NonFiniteError(
                f"the last {run} steps (to step {step}) all had non-finite gradients and were skipped; stopping "
                "without a checkpoint or final model (the newest checkpoint with a finite loss is kept): "
                "lower --lr or set --clip-grad, then resume"
            )

"""The loss-spike guard (``--spike-guard``): a finite loss far above its running mean is not
trained on; the run goes back to its newest checkpoint and skips the data from there
through the spike, as large runs do by hand (PaLM, Chowdhery et al. 2022, section 5.1:
restart about 100 steps before the spike and skip 200-500 batches; the OPT-175B logbook:
roll back to the last checkpoint and skip data).

The statistic is the step's loss averaged over every rank (one all-reduce per step), so
every rank reads the same number and takes the same decision. It is judged against the loss's
recent *level*, an exponential moving average that follows about the last 10 steps, and a
robust *scale*, the same kind of average of the loss's absolute deviations from that level: a
step is a spike when its loss lies more than ``--spike-threshold`` such deviations above the
level, once ``--spike-warmup`` steps have fed them. Following only the recent past keeps the
level close behind a loss in its normal descent, which sits below the level and never looks
like a spike, and keeps the early descent out of the scale, so a loss that jumps to twice its
recent level is caught from the first steps after the warm-up (a variance over the last 100
steps, as this guard kept before, is inflated by the descent for hundreds of steps). The scale
counts as at least :data:`SCALE_FLOOR` of the run's first loss, so a loss near zero does not
trip on a wobble. A non-finite loss is not a spike: the non-finite guard
(:mod:`trainer.numerics`) skips that step, and it feeds no average.

Skipped data is named by sample positions in an epoch's order (:class:`trainer.data.GlobalOrder`),
the unit of a checkpoint's position, so ``--skip-samples`` can skip the same data in another run.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass, field
from typing import Any

from .config import SPIKE_DEFAULTS

SPIKES = "loss_spikes"
"""The commit record's key for the guard's state, so a resumed run decides as the one it continues."""
EMA_DECAY = 0.9
"""Weight of the level's and the scale's past: they follow about the last 10 steps."""
SCALE_FLOOR = 0.01
"""The scale a loss's rise is measured in is at least this fraction of the run's first loss:
on a flat stretch, or near a loss of zero, whose deviations are next to nothing, a wobble is
not a spike."""


def add_spike_flags(p: argparse.ArgumentParser) -> None:
    """Add the guard's flags and ``--skip-samples`` to the trainer's command line."""
    p.add_argument(
        "--spike-guard",
        action="store_true",
        help="on a loss spike, go back to the newest checkpoint and skip the data from there through the spike",
    )
    p.add_argument(
        "--spike-threshold",
        type=float,
        default=SPIKE_DEFAULTS["threshold"],
        help="mean absolute deviations above the loss's recent level that make a spike",
    )
    p.add_argument(
        "--spike-warmup",
        type=int,
        default=SPIKE_DEFAULTS["warmup"],
        help="steps that feed the loss's recent level and deviation before the guard judges any",
    )
    p.add_argument(
        "--spike-max-rollbacks",
        type=int,
        default=SPIKE_DEFAULTS["max_rollbacks"],
        help="rollbacks allowed; the next spike stops the run (exit 65)",
    )
    p.add_argument(
        "--spike-skip-extra",
        type=int,
        default=SPIKE_DEFAULTS["skip_extra"],
        help="steps' worth of samples a rollback skips beyond the spike's",
    )
    p.add_argument(
        "--skip-samples",
        type=skip_samples,
        default=(),
        help="EPOCH:START-STOP[,...]: sample positions in an epoch's order not to train on, as the spike guard "
        "logs them",
    )


class LossSpikeError(RuntimeError):
    """A loss spike the guard cannot roll back: the budget is spent or no checkpoint exists."""


@dataclass(frozen=True)
class Skip:
    """Samples ``[start, stop)`` of epoch ``epoch``'s order, which the run does not train on."""

    epoch: int
    start: int
    stop: int

    def __str__(self) -> str:
        return f"{self.epoch}:{self.start}-{self.stop}"


SKIP_PATTERN = re.compile(r"(\d+):(\d+)-(\d+)")


def parse_skips(text: str) -> tuple[Skip, ...]:
    """``--skip-samples``' value: comma-separated ``EPOCH:START-STOP`` ranges.

    Raises:
        ValueError: a range that is not of that form or is empty.
    """
    skips = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        match = SKIP_PATTERN.fullmatch(part)
        if match is None or int(match[2]) >= int(match[3]):
            raise ValueError(
                f"--skip-samples {part!r}: give EPOCH:START-STOP with START below STOP (sample positions in "
                "the epoch's order, as the loss-spike guard logs them), e.g. 0:640-800"
            )
        skips.append(Skip(int(match[1]), int(match[2]), int(match[3])))
    return tuple(skips)


def skip_samples(text: str) -> tuple[tuple[int, int, int], ...]:
    """``--skip-samples``' value as ``(epoch, start, stop)`` triples."""
    try:
        return tuple((s.epoch, s.start, s.stop) for s in parse_skips(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--skip-samples ")) from None


@dataclass
class Spike:
    """A step the guard refused: its number, where its data lay, its loss, the level it rose
    from and by how many deviations."""

    step: int
    epoch: int
    stop: int
    """The position just after the step's samples."""
    loss: float
    level: float
    z: float

    def __str__(self) -> str:
        return (
            f"loss spike at step {self.step}: loss {self.loss:.4g}, {self.z:.1f} mean absolute deviations above "
            f"its recent level {self.level:.4g}"
        )


@dataclass
class SpikeGuard:
    """The loss's recent level and deviation, and what the guard has done about spikes.

    Args:
        enabled: whether spikes are looked for (``--spike-guard``); ranges to skip are
            honoured either way.
        threshold: mean absolute deviations above the level beyond which a loss is a spike.
        warmup: steps whose losses feed the averages before any is judged.
        max_rollbacks: rollbacks a run may make; the next spike stops it.
        given: ranges ``--skip-samples`` names.
    """

    enabled: bool
    threshold: float
    warmup: int
    max_rollbacks: int
    given: tuple[Skip, ...] = ()
    level: float = 0.0
    deviation: float = 0.0
    first: float = 0.0
    """The run's first loss, which the scale's floor is a fraction of."""
    seen: int = 0
    rollbacks: int = 0
    skipped: list[Skip] = field(default_factory=list)
    """The ranges the guard's rollbacks skipped, in order."""

    def observe(self, step: int, epoch: int, stop: int, loss: float) -> Spike | None:
        """Judge the loss of ``step`` (the mean over every rank, the same on each), whose
        samples end at ``stop`` in epoch ``epoch``. Returns the spike, or None after adding
        the loss to the averages (a non-finite loss is left out of them)."""
        if not self.enabled or not math.isfinite(loss):
            return None
        if self.seen >= self.warmup:
            z = (loss - self.level) / max(self.deviation, SCALE_FLOOR * abs(self.first))
            if z > self.threshold:
                return Spike(step, epoch, stop, loss, self.level, z)
        if self.seen == 0:
            self.level = self.first = loss
        else:
            delta = loss - self.level
            # The first deviation starts the average, which would otherwise begin at zero and
            # take its first steps to grow.
            self.deviation = (
                abs(delta) if self.seen == 1 else self.deviation + (1 - EMA_DECAY) * (abs(delta) - self.deviation)
            )
            self.level += (1 - EMA_DECAY) * delta
        self.seen += 1
        return None

    def check_budget(self, spike: Spike) -> None:
        """Before a rollback for ``spike``.

        Raises:
            LossSpikeError: the rollbacks allowed are spent.
        """
        if self.rollbacks >= self.max_rollbacks:
            raise LossSpikeError(
                f"{spike}, after {self.rollbacks} rollback(s) (--spike-max-rollbacks {self.max_rollbacks}); stopping "
                "without a checkpoint or final model (the newest checkpoint is from before it): lower --lr, or "
                f"skip the data around sample {spike.stop} of epoch {spike.epoch} with --skip-samples, and resume"
            )

    def skip_to(self, epoch: int, position: int) -> int | None:
        """Where training goes on when ``position`` of ``epoch`` lies in a range to skip; None
        when it does not."""
        for skip in (*self.given, *self.skipped):
            if skip.epoch == epoch and skip.start <= position < skip.stop:
                return skip.stop
        return None

    def state(self) -> dict[str, Any]:
        """What a checkpoint records (floats round-trip exactly through JSON)."""
        return {
            "level": self.level,
            "deviation": self.deviation,
            "first": self.first,
            "seen": self.seen,
            "rollbacks": self.rollbacks,
            "skipped": [str(s) for s in self.skipped],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Go on from :meth:`state`; a checkpoint of a run without the guard has none, and one of
        an earlier trainer kept another statistic (a mean and variance): the level and deviation
        then start over, warm-up included."""
        if "level" in state:
            self.level, self.deviation, self.first = state["level"], state["deviation"], state["first"]
            self.seen = state["seen"]
        else:
            self.level, self.deviation, self.first, self.seen = 0.0, 0.0, 0.0, 0
        self.rollbacks = state.get("rollbacks", 0)
        self.skipped = list(parse_skips(",".join(state.get("skipped", []))))


def rollback_skips(epoch: int, position: int, spike: Spike, size: int, global_batch: int, extra: int) -> list[Skip]:
    """The ranges a rollback skips: from a checkpoint's ``position`` in ``epoch`` through the
    spike's samples, and ``extra`` steps' worth beyond them, in epochs of ``size`` samples."""
    end_epoch, end = spike.epoch, spike.stop
    for _ in range(extra):
        if end >= size:
            end_epoch, end = end_epoch + 1, 0
        end = min(end + global_batch, size)
    skips = []
    while epoch <= end_epoch:
        stop = end if epoch == end_epoch else size
        if position < stop:
            skips.append(Skip(epoch, position, stop))
        epoch, position = epoch + 1, 0
    return skips

"""What a resume compares between a checkpoint's commit record and the run taking it up: the
data and seed its epoch plan is of, and the gradient clipping it was trained with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import Config, UsageError

DATA = "data"
"""The commit record's key for the dataset a checkpoint's epoch plan is of: its ``samples``
and ``fingerprint`` (:func:`trainer.data.fingerprint`); the seed is in its ``config``."""
GRAD_CLIP = "grad_clip"
"""The commit record's key for the gradient norm the run clipped to (None: no clipping)."""


def _clipping(clip: float | None) -> str:
    return "no gradient clipping" if clip is None else f"gradient clipping to {clip:g}"


def clip_changed(name: str, commit: dict[str, Any], clip: float | None) -> str | None:
    """The warning for a run that clips gradients otherwise (``clip``) than the one that wrote
    checkpoint ``name``; None when it does not. A checkpoint of an earlier trainer records only
    ``--clip-grad``, whose absence then meant no clipping, where gpt and llama now clip to 1.0
    by default."""
    saved = commit[GRAD_CLIP] if GRAD_CLIP in commit else commit["config"].get("clip_grad")
    if saved == clip:
        return None
    return (
        f"{name} was trained with {_clipping(saved)}, this run uses {_clipping(clip)}: "
        f"pass --clip-grad {saved or 0:g} to go on as it was trained"
    )


def data_changed(
    name: str, commit: dict[str, Any], cfg: Config, samples: int, fingerprint: str, output: Path
) -> str | None:
    """How this run's data (``samples``, ``fingerprint``) and seed differ from those checkpoint
    ``name``'s epoch plan is of (None when they do not; a record of an earlier trainer has no
    data to compare).

    Raises:
        UsageError: they differ and ``--replan-epoch`` was not given.
    """
    saved_seed = commit["config"].get("seed", cfg.seed)
    saved = commit.get(DATA) or {"samples": samples, "fingerprint": fingerprint}
    changes = []
    if (saved["samples"], saved["fingerprint"]) != (samples, fingerprint):
        changes.append(
            f"another dataset ({saved['samples']} samples, fingerprint {saved['fingerprint']}; this run's has "
            f"{samples}, fingerprint {fingerprint})"
        )
    if saved_seed != cfg.seed:
        changes.append(f"another --seed ({saved_seed}, not {cfg.seed})")
    if not changes:
        return None
    change = f"checkpoint {name} was trained with {' and '.join(changes)}"
    if not cfg.replan_epoch:
        raise UsageError(
            f"--output-dir {output}: {change}: its position in epoch {commit['epoch']} would repeat or "
            "skip samples of this run's order; resume with the data and --seed it was trained with, pass "
            f"--replan-epoch to go on with these (epoch {commit['epoch']} starts over), or use another --output-dir"
        )
    return change

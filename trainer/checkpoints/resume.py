"""How the ranks of a run settle on the checkpoint to resume, and when they refuse to.

Rank 0 lists the committed checkpoints newest first and picks the first that verifies; every
rank must see it whole (shared storage lags) and load it, or all pass to the next. When
committed checkpoints exist and none loads (a different vocabulary or model size, a key
missing after an upgrade, storage that cannot be read), the run stops with every reason
rather than train from step 0 beside them: ``--start-fresh`` says that is meant. The new run
leaves them where they are (:func:`trainer.checkpoints.dirs.prune` removes only its own lineage's).

A checkpoint whose files do not match the digests of its commit record is damaged. Without a
key that is corruption (a flipped bit, a bad disk): rank 0 moves it to ``checkpoints/corrupt/``
and the ranks go on to the next older one. With a key it is tampering, by someone who can
write the volume but not sign: every rank stops (:data:`trainer.checkpoints.integrity.TAMPERED`) and
leaves it in place, since falling back to an older state is what such a writer could be
after; ``--start-fresh`` then moves it aside and goes on as without a key.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.api import CheckpointException

from ..console import warn
from .dirs import LINEAGE, list_checkpoints, move_into, read_commit, step_dir, step_of, verify
from .integrity import DIGESTS, CheckpointError, IntegrityError, TamperedCheckpoint

TAMPERED_CANDIDATE = -2
"""What rank 0 broadcasts for a signed checkpoint it found tampered with, so that all stop."""
CORRUPT = "corrupt"
"""Where a checkpoint whose files do not match their digests goes, whole:
``<checkpoints>/corrupt/step-<N>/``, never resumed nor pruned there."""


def set_aside_corrupt(path: Path, why: str) -> Path:
    """Move a checkpoint whose files do not match their digests to :data:`CORRUPT`, kept (it
    may be worth a look), and say so in one line.

    Returns:
        Where it went.
    """
    target = move_into(path, path.parent / CORRUPT, path.name)
    warn(f"moved {path} to {target}: {why}; kept for inspection, never resumed")
    return target


def failure(err: CheckpointException) -> str:
    """DCP's gathered failure in one line: the lowest failed rank's error. Its own text holds
    every rank's traceback (torch 2.13 ``distributed/checkpoint/api.py``,
    ``CheckpointException.__str__``), which would make the run's one-line error a page."""
    rank, (cause, _) = min(err.failures.items(), key=lambda item: item[0])
    return f"rank {rank}: {type(cause).__name__}: {cause}"


class UnloadableCheckpoints(Exception):
    """Committed checkpoints exist and none of them loads: a non-retryable stop."""

    def __init__(self, reasons: list[str]):
        self.reasons = reasons
        detail = "; ".join(reasons) if reasons else "see rank 0's message"
        super().__init__(
            f"no committed checkpoint of this run loads ({detail}): fix the cause (the same model, "
            "vocabulary and key as the run that wrote them), or pass --start-fresh to train from step 0 "
            "and leave them be"
        )


@dataclass
class Agreement:
    """How the ranks settle on one checkpoint.

    Args:
        group: the process group (None when there is one process).
        is_main: whether this is rank 0, which lists and picks.
        wait_s: how long a rank keeps looking for a checkpoint rank 0 sees before the ranks
            give it up together (NFS attribute caches hold a stale view for up to 60 s).
        key: the job's checkpoint key; checkpoints whose marker it did not sign are skipped.
        start_fresh: start from step 0 when committed checkpoints exist but none loads (a
            changed model or vocabulary on purpose), and move a tampered checkpoint aside
            rather than stop; otherwise both stop the run.
    """

    group: dist.ProcessGroup | None
    is_main: bool
    wait_s: float
    key: bytes | None = None
    start_fresh: bool = False

    tampered: IntegrityError | None = None
    """What rank 0 found in a tampered checkpoint, for the error it stops with."""

    def _stops(self) -> bool:
        """Whether a checkpoint whose files do not match its record stops the run."""
        return self.key is not None and not self.start_fresh

    def _tampered(self) -> TamperedCheckpoint:
        detail = (
            f"{self.tampered}; its commit record is signed with this job's key, so someone without the key changed it"
            if self.tampered is not None
            else "rank 0 found a file of a signed checkpoint that does not match it (see its message)"
        )
        return TamperedCheckpoint(
            f"{detail}: stopping rather than resume an older checkpoint, and leaving it as it is for inspection; "
            "restore the file, or pass --start-fresh to move it to checkpoints/corrupt/ and resume the newest "
            "checkpoint that verifies"
        )

    def _broadcast(self, value: int) -> int:
        if self.group is None:
            return value
        t = torch.tensor([value], dtype=torch.int64)
        dist.broadcast(t, group_src=0, group=self.group)
        return int(t.item())

    def _all(self, ok: bool) -> bool:
        if self.group is None:
            return ok
        t = torch.tensor([1 if ok else 0], dtype=torch.int64)
        dist.all_reduce(t, op=dist.ReduceOp.MIN, group=self.group)
        return bool(t.item())

    def _same(self, commit: dict[str, Any] | None) -> bool:
        """Whether every rank read the same commit record. Each rank reads its own (shared
        storage lags), and each then loads its part and takes its step and position from it:
        two records, even both signed, would make the ranks one state spliced from two
        checkpoints (a lagging view of a step saved again, or a directory renamed in between)."""
        if self.group is None:
            return True
        digest = hashlib.sha256(json.dumps(commit, sort_keys=True).encode()).digest()
        low = torch.tensor([int.from_bytes(digest[i : i + 7], "big") for i in range(0, 28, 7)], dtype=torch.int64)
        high = low.clone()
        dist.all_reduce(low, op=dist.ReduceOp.MIN, group=self.group)
        dist.all_reduce(high, op=dist.ReduceOp.MAX, group=self.group)
        return torch.equal(low, high)

    def _damaged(self, path: Path, err: IntegrityError, passed_over: dict[Path, str]) -> bool:
        """Rank 0: deal with a checkpoint whose files do not match its record. Returns whether
        the run must stop (a signed one, without ``start_fresh``); else it is moved aside."""
        if self._stops():
            self.tampered = err
            return True
        target = set_aside_corrupt(path, str(err).removeprefix(f"checkpoint {path}: "))
        passed_over[path] = f"a file does not match its digest (moved to {target})"
        return False

    def _next_candidate(self, root: Path, below: float, passed_over: dict[Path, str], lineage: str | None) -> int:
        """Rank 0: the newest checkpoint under ``below`` (of ``lineage`` alone, unless None) that
        checks out, or -1, or :data:`TAMPERED_CANDIDATE`; each committed one that does not is
        added to ``passed_over`` with the reason."""
        for path in reversed(list_checkpoints(root)):
            step = step_of(path)
            if step >= below:
                continue
            if lineage is not None and (read_commit(path) or {}).get(LINEAGE, "") != lineage:
                continue
            try:
                verify(path, self.key)
                return step
            except IntegrityError as err:
                if self._damaged(path, err, passed_over):
                    return TAMPERED_CANDIDATE
            except CheckpointError as err:
                warn(f"skipping checkpoint {path}: {err}")
                if read_commit(path) is not None:
                    passed_over[path] = str(err)
        return -1

    def _sees(self, path: Path) -> dict[str, Any] | None:
        """The commit record of the checkpoint when this rank sees it whole, retrying while its
        view lags; None when it does not."""
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                return verify(path, self.key)
            except IntegrityError as err:
                # A lagging view shows an older file or none, never one that fails its digest.
                warn(f"this rank cannot read checkpoint {path}: {err}")
                return None
            except CheckpointError as err:
                if time.monotonic() >= deadline:
                    warn(f"this rank cannot read checkpoint {path}: {err}")
                    return None
            time.sleep(min(1.0, self.wait_s))

    def resume(
        self, root: Path, load: Callable[[Path, dict[str, Any]], None], lineage: str | None = None
    ) -> Path | None:
        """Load the newest checkpoint every rank can read, on every rank. A collective.

        Args:
            root: the checkpoints directory.
            load: loads one checkpoint given its path and commit marker (a collective).
            lineage: consider only checkpoints of this lineage (a running run going back to
                one of its own); None: any, as at start, when the run's lineage is the one it
                resumes.

        Returns:
            The checkpoint loaded, or None when there is none (or, with ``start_fresh``, none
            that loads).

        Raises:
            TamperedCheckpoint: a file of a signed checkpoint differs from its digest; on
                every rank (without ``start_fresh``), and no older checkpoint is tried.
            UnloadableCheckpoints: committed checkpoints exist and none loads; on every
                rank. Starting over would train from step 0 beside them, and pruning
                would then remove the new run's checkpoints.
        """
        below = math.inf
        passed_over: dict[Path, str] = {}
        while True:
            step = self._broadcast(self._next_candidate(root, below, passed_over, lineage) if self.is_main else 0)
            if step == TAMPERED_CANDIDATE:
                raise self._tampered()
            if step < 0:
                if self._broadcast(int(bool(passed_over) and not self.start_fresh)):
                    raise UnloadableCheckpoints([f"{p.name}: {why}" for p, why in passed_over.items()])
                return None
            path = step_dir(root, step)
            commit = self._sees(path)
            seen = self._all(commit is not None)
            if seen and not self._same(commit):
                if self.is_main:
                    warn(f"skipping checkpoint {path}: the ranks read different commit records of it")
                    passed_over[path] = "the ranks read different commit records of it"
            elif seen:
                try:
                    if self.is_main and DIGESTS not in commit:
                        warn(f"checkpoint {path} has no file digests (an earlier trainer): loading it unchecked")
                    load(path, commit)
                    return path
                except CheckpointException as err:
                    # DCP gathers every rank's failure and raises on all of them, so every
                    # rank decides alike; the files are checked before any rank parses any,
                    # so a damaged checkpoint has changed no live tensor.
                    changed = [e for e, _ in err.failures.values() if isinstance(e, IntegrityError)]
                    if changed and self._stops():
                        self.tampered = changed[0]
                        raise self._tampered() from None
                    if changed:
                        if self.is_main:
                            self._damaged(path, changed[0], passed_over)
                    elif self.is_main:
                        warn(f"skipping checkpoint {path}: loading failed ({failure(err)})")
                        passed_over[path] = f"loading failed ({failure(err)})"
            elif self.is_main:
                warn(f"skipping checkpoint {path}: not every rank can read it")
                passed_over[path] = "not every rank can read it"
            below = step

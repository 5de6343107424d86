"""The bundled trainer's checkpoints and exit statuses for a script that keeps its own training
loop: atomic, sharded, digested (and signed, with the job's key) checkpoints, the agreed resume
that falls back to the newest checkpoint every rank can read, and the exit statuses the
platform's restart policy acts on, in a few calls::

    from trainer import checkpointing

    def train() -> int:
        run = checkpointing.open_run(os.environ["OUTPUT_PATH"], key_file=os.environ.get("CHECKPOINT_KEY_FILE"))
        model_state, optim_state = get_state_dict(model, optimizer)
        state = {"model": model_state, "optimizer": optim_state, "step": 0}
        state = run.load_latest(state) or state          # None: nothing to resume
        for step in range(state["step"] + 1, steps + 1):
            ...                                          # one optimizer step
            if run.stop_requested():                     # SIGTERM on any rank; a collective
                run.save(step, {**state, "step": step}, reason="sigterm")
                return checkpointing.PREEMPTED
            if step % 100 == 0:
                run.save(step, {**state, "step": step})
        return checkpointing.DONE

    sys.exit(checkpointing.main(train))

``examples/own-loop/train.py`` is a whole script; ``docs/checkpoints.md`` ("A loop of your own")
says what each call does. The checkpoints are the trainer's (``<output>/checkpoints/step-<N>/``,
:mod:`trainer.checkpoints.sharded`, :mod:`trainer.checkpoints.resume`), so pruning, damage handling and the
``ack-jobs`` views apply unchanged.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from .checkpoints import sharded as checkpoint
from .checkpoints.diskfull import DISK_FULL, NOT_WRITABLE, DiskFull, NotWritable
from .checkpoints.integrity import TAMPERED, IntegrityError, TamperedCheckpoint, read_key
from .checkpoints.ownership import check_output_dir, claim
from .checkpoints.resume import Agreement, UnloadableCheckpoints
from .checkpoints.save_plan import leaves
from .config import UsageError
from .console import error, log
from .exit_codes import TRANSIENT_STATUS
from .parallelism.topology import lost_peer
from .state import JOB

DONE = 0
"""Training finished."""
INVALID = 2
"""Bad input (flags, data, a checkpoint directory of another run or state): a retry would fail alike."""
PREEMPTED = 128 + signal.SIGTERM
"""Stopped by SIGTERM (an eviction, a preemption) after checkpointing: retried."""
__all__ = [
    "DISK_FULL",
    "DONE",
    "INVALID",
    "NOT_WRITABLE",
    "PREEMPTED",
    "TAMPERED",
    "TRANSIENT_STATUS",
    "Run",
    "every_rank",
    "main",
    "open_run",
    "report",
    "status_of",
]

VALUES = "values"
"""The commit record's key for the state's values that are not tensors, as JSON."""
TENSORS = "tensors"
"""The commit record's key for the dotted paths of the state's tensors."""


def _split(state: dict[str, Any], prefix: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    """The tensors of nested dicts (the same nesting) and everything else, JSON-ready."""
    tensors: dict[str, Any] = {}
    values: dict[str, Any] = {}
    for key, value in state.items():
        if isinstance(value, dict):
            tensors[key], values[str(key)] = _split(value, f"{prefix}{key}.")
        elif isinstance(value, torch.Tensor):
            tensors[key] = value
        else:
            values[str(key)] = value
    try:
        # As the commit record is signed (sorted keys), so that a value that cannot be is refused
        # here, on every rank, rather than on rank 0 alone once the shards are written.
        json.dumps(values, sort_keys=True)
    except (TypeError, ValueError) as err:
        raise TypeError(f"checkpoint state {prefix or 'at the top'}: {err}; give tensors, or JSON values") from None
    return tensors, values


def _merge(template: dict[str, Any], saved: dict[str, Any]) -> dict[str, Any]:
    """``template``'s tensors (loaded in place) and the saved values, in ``template``'s nesting;
    saved values the template does not name are kept too."""
    merged: dict[str, Any] = {key: value for key, value in saved.items() if key not in map(str, template)}
    for key, value in template.items():
        if isinstance(value, dict):
            merged[key] = _merge(value, saved.get(str(key), {}))
        elif isinstance(value, torch.Tensor):
            merged[key] = value
        else:
            merged[key] = saved.get(str(key), value)
    return merged


def _paths(tensors: dict[str, Any]) -> list[str]:
    return sorted(".".join(map(str, path)) for path, _ in leaves(tensors))


def every_rank(tensor: torch.Tensor) -> torch.Tensor:
    """Every rank's copy of ``tensor`` (the same shape on each), stacked in rank order on the CPU:
    how a per-rank value (an RNG state) goes into a checkpoint, whose plain tensors are taken to
    be the same on every rank. A collective; one process gets ``tensor[None]``.
    """
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return tensor.detach().cpu()[None]
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else tensor.device
    local = tensor.detach().to(device)
    gathered = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, local)
    return torch.stack([t.cpu() for t in gathered])


class Run:
    """A run directory's checkpoints, for a script's own loop. Made by :func:`open_run`.

    Attributes:
        rank: this process's rank (0 without a process group).
        saved_step: the step of the last checkpoint saved or loaded; None before either.
    """

    def __init__(
        self,
        output: Path,
        *,
        key: bytes | None,
        job_id: str | None,
        keep: int,
        storage_wait_s: float,
        start_fresh: bool,
        timeout_s: float,
    ):
        self.output, self.job_id, self.storage_wait_s, self.start_fresh = output, job_id, storage_wait_s, start_fresh
        distributed = dist.is_initialized() and dist.get_world_size() > 1
        self.rank = dist.get_rank() if distributed else 0
        # A gloo group of its own, as the trainer's checkpoints have: the resume agreement moves
        # CPU tensors whatever the training backend, and a stalled save must not outwait the run.
        timeout = timedelta(seconds=timeout_s + storage_wait_s)
        self.group = dist.new_group(backend="gloo", timeout=timeout) if distributed else None
        self.checkpointer = checkpoint.Checkpointer(
            output / "checkpoints", self.group, self.rank == 0, keep, async_save=False, key=key
        )
        self.saved_step: int | None = None
        self._signal: int | None = None
        signal.signal(signal.SIGTERM, lambda signum, frame: setattr(self, "_signal", signum))

    def save(self, step: int, state: dict[str, Any], *, reason: str = "periodic", loss: float | None = None) -> None:
        """Checkpoint ``state`` as step ``step``, committed atomically; a step already saved is
        not saved again. A collective: every rank calls it at the same step.

        Args:
            step: the step the state is of; checkpoints are ``checkpoints/step-<step>/``.
            state: nested dicts of tensors (plain ones the same on every rank, DTensors as
                FSDP shards them, per-rank ones through :func:`every_rank`) and JSON values
                (numbers, strings, lists; rank 0's), which go into the signed commit record.
            reason: why (periodic, sigterm, final), recorded in the commit record.
            loss: recorded too; pruning keeps the newest checkpoint whose loss was finite.

        Raises:
            DiskFull: the checkpoint did not fit; on every rank.
            NotWritable: the storage refused a write of it; on every rank.
            TypeError: a value is neither a tensor nor JSON.
        """
        if step == self.saved_step:
            return
        tensors, values = _split(state)
        commit = {
            "step": step,
            "reason": reason,
            "loss": float("nan") if loss is None else float(loss),
            VALUES: values,
            TENSORS: _paths(tensors),
            JOB: self.job_id,
        }
        self.checkpointer.save(tensors, commit, wait=True)
        self.saved_step = step

    def load_latest(self, state: dict[str, Any]) -> dict[str, Any] | None:
        """Load the newest checkpoint every rank can read into ``state``'s tensors, in place,
        falling back to older ones as the trainer does. A collective.

        Args:
            state: the state as :meth:`save` was given it: every tensor the checkpoint holds
                must have a tensor of its shape here to be read into (for an optimizer, use
                ``torch.distributed.checkpoint.state_dict.get_state_dict``, which holds its state
                before the first step too).

        Returns:
            ``state`` with the checkpoint's values in place of its own, or None when there is
            no checkpoint to resume.

        Raises:
            UsageError: the checkpoint holds a tensor ``state`` has none for.
            UnloadableCheckpoints: committed checkpoints exist and none loads.
            TamperedCheckpoint: a file of a signed checkpoint was changed.
        """
        tensors, _ = _split(state)
        loaded: dict[str, Any] = {}

        def load(path: Path, commit: dict[str, Any]) -> None:
            if TENSORS not in commit:
                raise UsageError(
                    f"{self.output}: {path.name} is a checkpoint of the bundled trainer, not of this script: "
                    "give the script an output directory of its own"
                )
            missing = sorted(set(commit[TENSORS]) - set(_paths(tensors)))
            if missing:
                raise UsageError(
                    f"{path}: holds {', '.join(missing[:3])}{' …' if len(missing) > 3 else ''}, which the state "
                    "given to load_latest has no tensor for: give the same structure as saved (an optimizer's "
                    "state from get_state_dict holds its tensors before its first step)"
                )
            checkpoint.load(tensors, path, commit, self.group)
            self.checkpointer.lineage = commit.get(checkpoint.LINEAGE, "")
            loaded.update(commit)

        agreement = Agreement(self.group, self.rank == 0, self.storage_wait_s, self.checkpointer.key, self.start_fresh)
        path = agreement.resume(self.output / "checkpoints", load)
        if path is None:
            return None
        self.saved_step = loaded["step"]
        if self.rank == 0:
            log(f"resumed from {path.name}: step {loaded['step']}")
        return _merge(state, loaded[VALUES])

    def stop_requested(self) -> bool:
        """Whether any rank got SIGTERM (an eviction, a preemption), all ranks agreeing, so that
        all checkpoint the same step and return :data:`PREEMPTED`. A collective: call it every
        few steps, at the same steps on every rank."""
        flag = torch.tensor([1 if self._signal else 0])
        if self.group is not None:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.group)
        return bool(flag.item())


def open_run(
    output_dir: str | Path,
    *,
    key_file: str | None = None,
    job_id: str | None = None,
    keep: int = 3,
    storage_wait_s: float = 30.0,
    start_fresh: bool = False,
    timeout_s: float = 300.0,
) -> Run:
    """Open ``output_dir`` for a run's checkpoints, after the script's process group (if any) is up.

    Checks that it is writable, claims it for ``job_id`` (a run of another job is refused there,
    :mod:`trainer.checkpoints.ownership`), reads the key and takes SIGTERM, which :meth:`Run.stop_requested` reports.

    Args:
        output_dir: the run directory; checkpoints go to its ``checkpoints/``.
        key_file: the job's checkpoint key (``$CHECKPOINT_KEY_FILE`` in the platform's jobs): each
            commit record is signed with it and only signed ones are resumed. None: unsigned.
        job_id: the run's identity (``$TRAINING_JOB``); None: no claim.
        keep: committed checkpoints kept (the newest with a finite loss is kept besides).
        storage_wait_s: how long a rank waits to see the checkpoint rank 0 picked.
        start_fresh: start from nothing when committed checkpoints exist and none loads.
        timeout_s: how long the checkpoint collectives wait for a lost peer (plus ``storage_wait_s``).

    Raises:
        UsageError: the directory is not writable or is another job's, or the key cannot be read.
    """
    output = Path(output_dir)
    rank = dist.get_rank() if dist.is_initialized() else 0
    check_output_dir(output, rank)
    claim(output, job_id)
    key = read_key(key_file)
    return Run(
        output,
        key=key,
        job_id=job_id,
        keep=keep,
        storage_wait_s=storage_wait_s,
        start_fresh=start_fresh,
        timeout_s=timeout_s,
    )


STATUSES: tuple[tuple[type[BaseException], int], ...] = (
    (TamperedCheckpoint, TAMPERED),
    (DiskFull, DISK_FULL),
    (NotWritable, NOT_WRITABLE),
    (UsageError, INVALID),
    (IntegrityError, INVALID),
    (UnloadableCheckpoints, INVALID),
)
"""The exit status of each error of the checkpoints (``docs/failures.md`` has the whole table)."""


def status_of(err: BaseException) -> int | None:
    """The exit status for ``err`` under the platform's contract, or None for an error that is
    not the checkpoints' (a bug, which should go on with its traceback)."""
    for kind, status in STATUSES:
        if isinstance(err, kind):
            return status
    if isinstance(err, RuntimeError) and lost_peer(err):
        return TRANSIENT_STATUS
    return None


def report(err: BaseException) -> int | None:
    """Tell ``err`` in one line (``error: ...``) and return its status (:func:`status_of`); None,
    and nothing told, for an error that is not the checkpoints'."""
    status = status_of(err)
    if status is not None:
        error(f"lost the other processes ({err})" if status == TRANSIENT_STATUS else str(err))
    return status


def main(train: Callable[[], int]) -> int:
    """Run ``train`` and return its status, or the contract's for an error it raised, told in one
    line (``error: ...``) without a traceback; the process group is destroyed on every path.

    Args:
        train: the script's training, returning :data:`DONE`, :data:`PREEMPTED` or a status of its own.
    """
    try:
        return train()
    except Exception as err:
        status = report(err)
        if status is None:
            raise
        return status
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()

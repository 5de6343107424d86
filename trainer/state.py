"""A run's state on disk: what a checkpoint holds, how a run resumes one (at the same or
another world size), and the plain weights a run starts from and ends with.

:class:`Checkpoints` is the object a :class:`trainer.loop.Trainer` holds for all of it; the
Trainer trains. The two share the run's :class:`trainer.schedule.Progress`: the Trainer
advances it, a save records it, a resume sets it.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_state_dict,
)

from .checkpoints import sharded as checkpoint
from .checkpoints.integrity import read_key
from .checkpoints.resume import Agreement
from .checkpoints.resume_guards import DATA, GRAD_CLIP, clip_changed, data_changed
from .checkpoints.weights import WeightsError, export
from .checkpoints.weights import load as load_weights
from .config import Config, UsageError
from .console import log, warn
from .data import GlobalOrder
from .numerics import NONFINITE, StepGuard
from .parallelism.mesh import MeshShape
from .parallelism.pipeline import gather_stages
from .parallelism.topology import Topology, gather
from .schedule import Progress
from .spikes import SPIKES, SpikeGuard
from .telemetry.exporter import Exporter

FULL_STATE = StateDictOptions(full_state_dict=True, cpu_offload=True)
"""The final model holds whole tensors, gathered to rank 0 from the shards under FSDP."""
JOB = "job"
"""The commit record's key for ``--job-id``, the job that wrote it (null outside a job)."""


class Checkpoints:
    """Checkpointing, resuming and plain weights for one run.

    Args:
        cfg: the run's config (as :func:`trainer.parallelism.auto.resolve` settled it).
        topo: rank, world size and device.
        model: the model, wrapped or sharded as it trains.
        optimizer: its optimizer.
        scheduler: the learning-rate scheduler over ``optimizer``.
        guard: the non-finite step guard, whose counters a checkpoint keeps.
        spikes: the loss-spike guard, whose statistics and rollbacks a checkpoint keeps.
        progress: where the run stands, saved by :meth:`save` and set by :meth:`resume`.
        exporter: told of every committed checkpoint.
        sharded: whether the model is sharded (FSDP, HSDP, TP or PP), so that gathering its
            weights is a collective.
        data_fingerprint: what identifies the run's dataset, recorded and checked on a resume.
        mesh: the job as ``dp × pp × tp`` (:mod:`trainer.parallelism.mesh`); None: every process a
            data-parallel replica.
    """

    def __init__(
        self,
        *,
        cfg: Config,
        topo: Topology,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        guard: StepGuard,
        spikes: SpikeGuard,
        progress: Progress,
        exporter: Exporter,
        sharded: bool,
        data_fingerprint: str,
        mesh: MeshShape | None = None,
    ):
        self.cfg, self.topo, self.model, self.optimizer = cfg, topo, model, optimizer
        self.scheduler, self.guard, self.progress, self.exporter = scheduler, guard, progress, exporter
        self.spikes = spikes
        self.sharded, self.data_fingerprint = sharded, data_fingerprint
        self.mesh = mesh or MeshShape(topo.world, 1, 1)
        self.output = Path(cfg.output_dir)
        self.threads = torch.get_num_threads()
        self.saved_step: int | None = None
        # The checkpoint and resume collectives move small CPU tensors, with async saves from
        # a background thread: a gloo group of their own keeps them apart from training's
        # collectives (NCCL on GPUs), which they would otherwise interleave with.
        # Their timeout is the run's, and the storage wait on top, which a rank may spend looking
        # for a checkpoint while the others wait in a collective: gloo's default of 30 minutes
        # would stall every rank that long for a peer lost during a save.
        timeout = timedelta(seconds=cfg.timeout_s + cfg.storage_wait_s)
        self.group = dist.new_group(backend="gloo", timeout=timeout) if topo.world > 1 else None
        # A pipeline's stages hold different parameters: the ranks of each stage share the
        # writing of its plain tensors among themselves.
        replica, _, column = self.mesh.coordinates(topo.rank)
        stage_ranks = self.mesh.dp * self.mesh.tp
        self.checkpointer = checkpoint.Checkpointer(
            self.output / "checkpoints",
            self.group,
            topo.is_main,
            cfg.keep_checkpoints,
            cfg.async_checkpoint,
            on_commit=exporter.checkpoint_committed,
            key=read_key(cfg.checkpoint_key_file),
            replicas=(replica * self.mesh.tp + column, stage_ranks),
        )
        if self.group is not None:
            # Rank 0's view of the data decides: a node whose NFS attribute cache still holds
            # the old files' times must not refuse a resume the others go on with.
            shared = [data_fingerprint]
            dist.broadcast_object_list(shared, group_src=0, group=self.group)
            self.data_fingerprint = shared[0]

    def _all_reduce(self, value: torch.Tensor) -> torch.Tensor:
        if self.topo.world > 1:
            dist.all_reduce(value)
        return value

    def model_state(self) -> dict[str, torch.Tensor] | None:
        """The whole model on the CPU for rank 0 (gathered from the shards with FSDP, which
        makes this a collective); ``None`` on other ranks, which write nothing."""
        if self.mesh.pp > 1:
            # Every rank of a stage gathers its stage whole; rank 0 collects the stages.
            stage = get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True))
            return gather_stages(self.model, stage, self.mesh, self.topo.rank, self.group)
        if self.sharded:
            return get_model_state_dict(self.model, options=FULL_STATE)
        if not self.topo.is_main:
            return None
        return {k: v.detach().cpu() for k, v in self.model.state_dict().items()}

    def state_dict(self) -> dict[str, Any]:
        """The tensors a resumed run needs, as each rank holds them (DTensor shards under
        FSDP, whole tensors under DDP, which DCP writes once). A collective."""
        state: dict[str, Any] = {
            "model": get_model_state_dict(self.model),
            "optimizer": get_optimizer_state_dict(self.model, self.optimizer)["state"],
            "rng": torch.stack(gather(self.topo, torch.get_rng_state())),
        }
        if self.topo.device.type == "cuda":
            state["cuda_rng"] = torch.stack(gather(self.topo, torch.cuda.get_rng_state(self.topo.device)))
        return state

    def commit_record(self, reason: str, loss: float) -> dict[str, Any]:
        """What a checkpoint's marker records besides the tensors."""
        progress = self.progress
        return {
            "step": progress.step,
            "epoch": progress.epoch,
            "position": progress.position,
            "reason": reason,
            "loss": loss,
            "scheduler": self.scheduler.state_dict(),
            "world_size": self.topo.world,
            "global_batch": progress.order.global_batch,
            "threads": self.threads,
            "config": asdict(self.cfg),
            GRAD_CLIP: self.cfg.grad_clip,
            NONFINITE: self.guard.counters(),
            SPIKES: self.spikes.state(),
            DATA: {"samples": progress.order.size, "fingerprint": self.data_fingerprint},
            JOB: self.cfg.job_id,
        }

    def load(self, path: Path, commit: dict[str, Any]) -> None:
        """Load a checkpoint into this run, every rank reading its own part. A collective.

        Raises:
            UsageError: the checkpoint is of another kind of run, or of other data or seed
                without ``--replan-epoch``.
        """
        saved = commit["config"]
        for key, flag in (("model", "--model"), ("fsdp", "--fsdp")):
            if saved.get(key, False) != getattr(self.cfg, key):
                raise UsageError(
                    f"--output-dir {self.output} holds a checkpoint of a run with {flag} "
                    f"{saved.get(key, False)!r}, not {getattr(self.cfg, key)!r}: use another output directory"
                )
        if (clipping := clip_changed(path.name, commit, self.cfg.grad_clip)) and self.topo.is_main:
            warn(clipping)
        replan = data_changed(path.name, commit, self.cfg, self.progress.order.size, self.data_fingerprint, self.output)
        progress = self.progress
        if commit["global_batch"] != progress.order.global_batch:
            self._keep_global_batch(commit["global_batch"])
        # The live tensors are the destination: DCP reads into them in place, so a rank
        # never holds a second copy of its state.
        optimizer = get_optimizer_state_dict(self.model, self.optimizer)
        state = {"model": get_model_state_dict(self.model), "optimizer": optimizer["state"]}
        same_world = commit["world_size"] == self.topo.world
        cuda = self.topo.device.type == "cuda"
        if same_world:
            state["rng"] = torch.stack(gather(self.topo, torch.get_rng_state()))
            if cuda:
                state["cuda_rng"] = torch.stack(gather(self.topo, torch.cuda.get_rng_state(self.topo.device)))
        checkpoint.load(state, path, commit, self.group)
        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state["model"],
            optim_state_dict={"state": state["optimizer"], "param_groups": optimizer["param_groups"]},
        )
        self.scheduler.load_state_dict(commit["scheduler"])
        self.guard.restore(commit.get(NONFINITE, {}), commit["step"])
        self.spikes.restore(commit.get(SPIKES, {}))
        self.checkpointer.lineage = commit.get(checkpoint.LINEAGE, "")
        progress.step, progress.epoch, progress.position = commit["step"], commit["epoch"], commit["position"]
        if replan:
            progress.position = 0
            if self.topo.is_main:
                warn(
                    f"--replan-epoch: {replan}; epoch {progress.epoch} starts over from its first sample, "
                    "in the order of this run's data and seed"
                )
        # The schedule is a function of the step and this run's flags: a run resumed with a
        # new --max-steps, --epochs or --lr follows the new curve from its first step rather
        # than taking one step at the rate the old run stopped at.
        self.scheduler.base_lrs = [self.cfg.base_lr for _ in self.optimizer.param_groups]
        progress.replan(self.optimizer, self.cfg.base_lr, self.cfg.max_steps, self.cfg.epoch_limit)
        self.saved_step = progress.step
        if same_world:
            # A row of the stacked states is a view into it; the generators read a state
            # from the start of its storage, so each gets a copy of its own.
            torch.set_rng_state(state["rng"][self.topo.rank].clone())
            if cuda:
                torch.cuda.set_rng_state(state["cuda_rng"][self.topo.rank].clone(), self.topo.device)
        else:
            # Elastic resize: data position is exact, dropout streams start anew.
            torch.manual_seed(self.cfg.seed + self.topo.rank + 7919 * progress.step)
        if commit["threads"] != torch.get_num_threads():
            # The intra-op thread count changes reduction order, so it is part of the state.
            torch.set_num_threads(commit["threads"])
            self.threads = commit["threads"]

    def _keep_global_batch(self, global_batch: int) -> None:
        """Resume at another world size with the checkpoint's global batch, by changing the
        gradient accumulation: the optimizer and the learning-rate schedule then see the
        same steps as before the resize, and data positions stay step boundaries.

        Raises:
            UsageError: this world size and ``--batch-size`` cannot make up the global batch.
        """
        replicas = self.mesh.dp
        who = f"{replicas} process(es)" if self.mesh.dp == self.topo.world else f"{replicas} data-parallel replica(s)"
        per_micro_step = self.cfg.batch_size * replicas
        if global_batch % per_micro_step:
            fits = [b for b in range(1, self.cfg.batch_size + 1) if global_batch % (b * replicas) == 0]
            fix = (
                f"e.g. --batch-size {fits[-1]}"
                if fits
                else f"no batch size can: use a data-parallel replica count that divides {global_batch}"
            )
            raise UsageError(
                f"--output-dir {self.output} holds a run with a global batch of {global_batch} samples per step, "
                f"which {who} × --batch-size {self.cfg.batch_size} cannot make up "
                f"by accumulating gradients ({fix}); a resized run keeps the global batch so that its "
                "optimizer steps and learning-rate schedule stay those of the run it continues"
            )
        progress = self.progress
        progress.grad_accum = global_batch // per_micro_step
        progress.order = GlobalOrder(progress.order.size, global_batch, self.cfg.seed)
        if self.topo.is_main:
            log(
                f"keeping the checkpoint's global batch of {global_batch}: {who} × "
                f"batch {self.cfg.batch_size} × {progress.grad_accum} accumulated micro-batches"
            )

    def save(self, reason: str, loss: torch.Tensor, wait: bool = False) -> None:
        """Checkpoint the current step unless it already is. A collective.

        Args:
            reason: why (periodic, sigterm, final), recorded in the marker.
            loss: this rank's share of the step's loss.
            wait: return only once the checkpoint is committed, even with async saves.
        """
        if self.saved_step == self.progress.step:
            self.checkpointer.wait()
            return
        streak = self.guard.in_streak()
        if streak:
            # Its steps were skipped, so the weights are sound, but a resume would go on from
            # inside the streak; the previous checkpoint, taken before it, is the one to resume.
            self.checkpointer.wait()
            if self.topo.is_main:
                warn(
                    f"not checkpointing step {self.progress.step} ({reason}): its last {streak} step(s) had "
                    "non-finite gradients and were skipped; a resume goes back to the checkpoint before them"
                )
            return
        mean_loss = self._all_reduce(loss.detach().clone()).item() / self.topo.world
        self.checkpointer.save(self.state_dict(), self.commit_record(reason, mean_loss), wait=wait)
        self.saved_step = self.progress.step

    def poll(self) -> None:
        """Commit a background save that has finished; cheap enough to call every step."""
        self.checkpointer.poll()

    def resume(self, lineage: str | None = None) -> bool:
        """Resume the newest checkpoint every rank can read (of ``lineage`` alone, unless None).
        A collective.

        Returns:
            Whether a checkpoint was resumed.
        """
        root = self.output / "checkpoints"
        agreement = Agreement(
            self.group, self.topo.is_main, self.cfg.storage_wait_s, self.checkpointer.key, self.cfg.start_fresh
        )
        path = agreement.resume(root, self.load, lineage)
        if self.topo.is_main and path is not None:
            progress = self.progress
            log(f"resumed from {path.name}: step {progress.step}, epoch {progress.epoch}, sample {progress.position}")
            # The marker's write is the commit, so its modification time is the commit time.
            self.exporter.checkpoint_committed(progress.step, (path / checkpoint.MARKER).stat().st_mtime)
        return path is not None

    def roll_back(self) -> bool:
        """Go back to the newest committed checkpoint of this run's lineage, once a background
        save has committed (it is of a step before the one rolled back from). A collective.

        Checkpoints of another lineage, which a ``--start-fresh`` run leaves beside its own,
        are not candidates: one of them that loads (its marker hidden at start by a lagging
        view of shared storage, or storage that could not be read then) would carry the run
        into another run's state, and its lineage with it.

        Returns:
            Whether there was one to go back to.
        """
        self.checkpointer.wait()
        return self.resume(self.checkpointer.lineage)

    def close(self) -> None:
        """Release the async saves' staging memory."""
        self.checkpointer.close()

    def write_final_model(self) -> None:
        """Rank 0 exports the model's weights; a collective under FSDP (the shards are gathered)."""
        weights = self.model_state()
        if weights is None or not self.topo.is_main:
            return
        path = Path(self.cfg.final_model_path) if self.cfg.final_model_path else self.output / "final_model.pt"
        for written in export(weights, path):
            log(f"final model: {written}")

    def init_weights(self, path: Path) -> None:
        """Start from pretrained weights: every rank maps the file and keeps its own part.

        Raises:
            WeightsError: the file does not hold weights of this model.
        """
        weights = load_weights(path)
        if self.mesh.pp > 1:
            # A pipeline stage takes its own part of the whole model's weights.
            own = {name for name, _ in self.model.named_parameters()}
            weights = {name: tensor for name, tensor in weights.items() if name in own}
        try:
            set_model_state_dict(self.model, weights, options=StateDictOptions(full_state_dict=True))
        except (RuntimeError, KeyError, ValueError) as err:
            raise WeightsError(f"--init-from {path}: does not fit --model {self.cfg.model} ({err})") from None
        if self.topo.is_main:
            log(f"initialised from {path}")

"""The bundled DDP trainer: trains, checkpoints atomically, resumes exactly.

Launch it anywhere::

    python -m trainer --max-steps 100                                # one process, synthetic data
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --standalone --nproc-per-node=2 --max-restarts=3 \\
        -m trainer --data-dir /data --output-dir /ckpt                 # one node, restarts resume
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --nnodes=4 --nproc-per-node=8 \\
        --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29400 -m trainer --model gpt

In a PyTorchJob the operator injects ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``,
``RANK`` and the ``PET_*`` variables torchrun reads; ``TRAIN_DATA_PATH``, ``OUTPUT_PATH``
and ``MODEL_PATH`` give the defaults of ``--data-dir``, ``--output-dir`` and
``--model-path``. ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` keeps torchrun restarts from
failing or stalling on a stale rendezvous store (pytorch/pytorch#135712).

NCCL on CUDA, gloo on CPU. Checkpoints every ``--checkpoint-every`` steps and on SIGTERM
(then exit status 143, which ``python -m trainer.launch``, the pods' torchrun, passes on
so ``restartPolicy: ExitCode`` retries); on start the newest whole
checkpoint in ``<output-dir>/checkpoints`` is resumed. On CPU a resumed run ends with
weights bit-identical to an uninterrupted one (same world size and thread count); on GPU
cuDNN/NCCL kernels are not bit-deterministic, so a resumed run matches statistically.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import time
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_state_dict,
)
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel

from . import checkpoint
from .config import DEFAULT_LR, Config, UsageError, parse_args
from .data import DataError, GlobalOrder, TokenDataset, load_images, load_tokens, synthetic_images, synthetic_tokens
from .metrics import Metrics, log, peak_tflops
from .models import GPT, GPT_SIZES, MnistCNN
from .schedule import lr_factor, planned_steps
from .topology import TRANSIENT_STATUS, Topology, default_threads, topology

STOP_CHECK_SECONDS = 2.0
STOP_CHECK_MAX_STEPS = 10
"""The ranks agree on a SIGTERM about every two seconds of training, but at most every ten
steps: a collective per step costs a few percent on CPU, while slow steps (a large model)
must still leave the checkpoint time inside the eviction grace period."""
FULL_STATE = StateDictOptions(full_state_dict=True, cpu_offload=True)
"""The final model holds whole tensors, gathered to rank 0 from the shards under FSDP."""


def stop_check_interval(step_time_s: float) -> int:
    """Steps between SIGTERM agreements for a given step time."""
    return max(1, min(STOP_CHECK_MAX_STEPS, int(STOP_CHECK_SECONDS / step_time_s)))


def summed_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy summed over every target, in fp32. Compiled, the upcast fuses into
    the reduction, so fp32 logits (13 GB for GPT-2 small at batch 64) are never stored."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), reduction="sum")


class Trainer:
    """Owns the model, optimizer, data order and position of one run.

    Args:
        cfg: the run's config.
        topo: rank, world size and device.
        dataset: a dataset with ``__len__`` and ``batch(index)``.
    """

    def __init__(self, cfg: Config, topo: Topology, dataset: Any):
        self.cfg, self.topo, self.dataset = cfg, topo, dataset
        self.output = Path(cfg.output_dir)
        self.threads = torch.get_num_threads()
        torch.manual_seed(cfg.seed)  # identical initial weights on every rank
        if cfg.model == "cnn":
            model: torch.nn.Module = MnistCNN()
            self.memory_format = torch.channels_last if cfg.channels_last else torch.contiguous_format
        else:
            model = GPT(GPT_SIZES[cfg.gpt_size])
            self.memory_format = torch.contiguous_format
        self.model = model.to(topo.device, memory_format=self.memory_format)
        torch.manual_seed(cfg.seed + topo.rank)  # distinct dropout per rank
        self.ddp = None
        self.sharded = cfg.fsdp and topo.world > 1
        if self.sharded:
            for block in self.model.blocks:
                fully_shard(block)
            fully_shard(self.model)
        elif topo.world > 1:
            # Gradients as views into the all-reduce buckets: one copy fewer per step.
            self.ddp = DistributedDataParallel(
                self.model,
                device_ids=[topo.device.index] if topo.device.type == "cuda" else None,
                gradient_as_bucket_view=True,
            )
        self.forward = self.ddp if self.ddp is not None else self.model
        self.loss = summed_cross_entropy
        if cfg.compile:
            # Two graphs: compiling the DDP wrapper is the supported way to keep its
            # bucketed all-reduce overlapping the backward pass.
            self.forward = torch.compile(self.forward)
            self.loss = torch.compile(summed_cross_entropy)
        self.base_lr = cfg.lr or DEFAULT_LR[cfg.model]
        # The fused kernel exists for CPU and CUDA and beats the per-tensor loop on both;
        # sharded (DTensor) parameters take the per-tensor loop.
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(),
            lr=self.base_lr,
            weight_decay=0.0,
            fused=not self.sharded,
            foreach=self.sharded or None,
        )
        self.grad_accum = cfg.grad_accum
        self.order = GlobalOrder(len(dataset), cfg.batch_size * topo.world * cfg.grad_accum, cfg.seed)
        self.total_steps = planned_steps(0, 0, 0, self.order, cfg.max_steps, cfg.epoch_limit)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: lr_factor(s, self.total_steps))
        self.step = 0
        self.epoch = 0
        self.position = 0
        self.saved_step: int | None = None
        # The checkpoint and resume collectives move small CPU tensors, with async saves from
        # a background thread: a gloo group of their own keeps them apart from training's
        # collectives (NCCL on GPUs), which they would otherwise interleave with.
        self.group = dist.new_group(backend="gloo") if topo.world > 1 else None
        self.checkpointer = checkpoint.Checkpointer(
            self.output / "checkpoints", self.group, topo.is_main, cfg.keep_checkpoints, cfg.async_checkpoint
        )
        self.metrics = Metrics(self.output / "metrics.jsonl") if topo.is_main else None
        self.stop_signal: int | None = None
        self.stop_check_every = STOP_CHECK_MAX_STEPS
        self.autocast = (
            torch.autocast("cuda", dtype=torch.bfloat16) if topo.device.type == "cuda" else contextlib.nullcontext()
        )
        flops = self.model.flops_per_token() if isinstance(self.model, GPT) else None
        peak = cfg.peak_tflops or (
            peak_tflops(torch.cuda.get_device_name(topo.device)) if topo.device.type == "cuda" else None
        )
        self.flops_per_sample = flops * self.model.cfg.seq_len if flops and peak else None
        self.peak_flops = peak * 1e12 if peak else None

    # --- state -----------------------------------------------------------------------

    def _gather(self, state: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's copy of a fixed-size byte tensor (all_gather_object needs NumPy in
        some builds; plain tensors do not)."""
        if self.topo.world == 1:
            return [state]
        on_device = state.to(self.topo.device)
        gathered = [torch.empty_like(on_device) for _ in range(self.topo.world)]
        dist.all_gather(gathered, on_device)
        return [t.cpu() for t in gathered]

    def _all_reduce(self, value: torch.Tensor) -> torch.Tensor:
        if self.topo.world > 1:
            dist.all_reduce(value)
        return value

    def model_state(self) -> dict[str, torch.Tensor] | None:
        """The whole model on the CPU for rank 0 (gathered from the shards with FSDP, which
        makes this a collective); ``None`` on other ranks, which write nothing."""
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
            "rng": torch.stack(self._gather(torch.get_rng_state())),
        }
        if self.topo.device.type == "cuda":
            state["cuda_rng"] = torch.stack(self._gather(torch.cuda.get_rng_state(self.topo.device)))
        return state

    def commit_record(self, reason: str, loss: float) -> dict[str, Any]:
        """What a checkpoint's marker records besides the tensors."""
        return {
            "step": self.step,
            "epoch": self.epoch,
            "position": self.position,
            "reason": reason,
            "loss": loss,
            "scheduler": self.scheduler.state_dict(),
            "world_size": self.topo.world,
            "global_batch": self.order.global_batch,
            "threads": self.threads,
            "config": asdict(self.cfg),
        }

    def load_checkpoint(self, path: Path, commit: dict[str, Any]) -> None:
        """Load a checkpoint into this run, every rank reading its own part. A collective.

        Raises:
            UsageError: the checkpoint is of another kind of run.
        """
        saved = commit["config"]
        for key, flag in (("model", "--model"), ("fsdp", "--fsdp")):
            if saved.get(key, False) != getattr(self.cfg, key):
                raise UsageError(
                    f"--output-dir {self.output} holds a checkpoint of a run with {flag} "
                    f"{saved.get(key, False)!r}, not {getattr(self.cfg, key)!r}: use another output directory"
                )
        if commit["global_batch"] != self.order.global_batch:
            self._keep_global_batch(commit["global_batch"])
        # The live tensors are the destination: DCP reads into them in place, so a rank
        # never holds a second copy of its state.
        optimizer = get_optimizer_state_dict(self.model, self.optimizer)
        state = {"model": get_model_state_dict(self.model), "optimizer": optimizer["state"]}
        same_world = commit["world_size"] == self.topo.world
        cuda = self.topo.device.type == "cuda"
        if same_world:
            state["rng"] = torch.stack(self._gather(torch.get_rng_state()))
            if cuda:
                state["cuda_rng"] = torch.stack(self._gather(torch.cuda.get_rng_state(self.topo.device)))
        dcp.load(
            state,
            storage_reader=checkpoint.SafeReader(path),
            process_group=self.group,
            no_dist=self.group is None,
        )
        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state["model"],
            optim_state_dict={"state": state["optimizer"], "param_groups": optimizer["param_groups"]},
        )
        self.scheduler.load_state_dict(commit["scheduler"])
        self.step, self.epoch, self.position = commit["step"], commit["epoch"], commit["position"]
        # The schedule is a function of the step and this run's flags: a run resumed with a
        # new --max-steps, --epochs or --lr follows the new curve from its first step rather
        # than taking one step at the rate the old run stopped at.
        self.total_steps = planned_steps(
            self.step, self.epoch, self.position, self.order, self.cfg.max_steps, self.cfg.epoch_limit
        )
        self.scheduler.base_lrs = [self.base_lr for _ in self.optimizer.param_groups]
        for group in self.optimizer.param_groups:
            group["lr"] = self.base_lr * lr_factor(self.step, self.total_steps)
        self.saved_step = self.step
        if same_world:
            # A row of the stacked states is a view into it; the generators read a state
            # from the start of its storage, so each gets a copy of its own.
            torch.set_rng_state(state["rng"][self.topo.rank].clone())
            if cuda:
                torch.cuda.set_rng_state(state["cuda_rng"][self.topo.rank].clone(), self.topo.device)
        else:
            # Elastic resize: data position is exact, dropout streams start anew.
            torch.manual_seed(self.cfg.seed + self.topo.rank + 7919 * self.step)
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
        per_micro_step = self.cfg.batch_size * self.topo.world
        if global_batch % per_micro_step:
            fits = [b for b in range(1, self.cfg.batch_size + 1) if global_batch % (b * self.topo.world) == 0]
            fix = (
                f"e.g. --batch-size {fits[-1]}"
                if fits
                else f"no batch size can: use a process count that divides {global_batch}"
            )
            raise UsageError(
                f"--output-dir {self.output} holds a run with a global batch of {global_batch} samples per step, "
                f"which {self.topo.world} process(es) × --batch-size {self.cfg.batch_size} cannot make up "
                f"by accumulating gradients ({fix}); a resized run keeps the global batch so that its "
                "optimizer steps and learning-rate schedule stay those of the run it continues"
            )
        self.grad_accum = global_batch // per_micro_step
        self.order = GlobalOrder(self.order.size, global_batch, self.cfg.seed)
        if self.topo.is_main:
            log(
                f"keeping the checkpoint's global batch of {global_batch}: {self.topo.world} process(es) × "
                f"batch {self.cfg.batch_size} × {self.grad_accum} accumulated micro-batches"
            )

    def save_checkpoint(self, reason: str, loss: torch.Tensor, wait: bool = False) -> None:
        """Checkpoint the current step unless it already is. A collective.

        Args:
            reason: why (periodic, sigterm, final), recorded in the marker.
            loss: this rank's share of the step's loss.
            wait: return only once the checkpoint is committed, even with async saves.
        """
        if self.saved_step == self.step:
            self.checkpointer.wait()
            return
        mean_loss = self._all_reduce(loss.detach().clone()).item() / self.topo.world
        self.checkpointer.save(self.state_dict(), self.commit_record(reason, mean_loss), wait=wait)
        self.saved_step = self.step

    def resume(self) -> bool:
        """Resume the newest checkpoint every rank can read. A collective.

        Returns:
            Whether a checkpoint was resumed.
        """
        root = self.output / "checkpoints"
        agreement = checkpoint.Agreement(self.group, self.topo.is_main, self.cfg.storage_wait_s)
        path = agreement.resume(root, self.load_checkpoint)
        if self.topo.is_main and path is not None:
            log(f"resumed from {path.name}: step {self.step}, epoch {self.epoch}, sample {self.position}")
        return path is not None

    # --- training --------------------------------------------------------------------

    def train_step(self, permutation: torch.Tensor) -> torch.Tensor:
        """One optimizer step over the next global batch; returns this rank's loss share."""
        lo, hi = self.order.step_slice(self.position)
        total = hi - lo
        micro = self.grad_accum
        bounds = [lo + total * i // micro for i in range(micro + 1)]
        loss_share = torch.zeros((), device=self.topo.device)
        for i in range(micro):
            rlo, rhi = GlobalOrder.rank_share(bounds[i], bounds[i + 1], self.topo.rank, self.topo.world)
            x, y = self.dataset.batch(permutation[rlo:rhi])
            x = x.to(self.topo.device, non_blocking=True)
            if x.dim() == 4:
                x = x.contiguous(memory_format=self.memory_format)
            y = y.to(self.topo.device, non_blocking=True)
            # Shares can differ by one sample (the epoch's last step): weighting each rank's
            # summed loss by world/total makes DDP's mean over ranks the mean over samples.
            last = i == micro - 1
            if self.sharded:
                self.model.set_requires_gradient_sync(last)
            sync = contextlib.nullcontext() if self.ddp is None or last else self.ddp.no_sync()
            with sync:
                with self.autocast:
                    out = self.forward(x)
                    summed = self.loss(out, y)
                    loss = summed / (y[0].numel() if y.dim() > 1 and len(y) else 1) * self.topo.world / total
                loss.backward()
            loss_share += loss.detach()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        self.position = hi
        return loss_share

    def _finished(self) -> bool:
        if self.cfg.max_steps is not None and self.step >= self.cfg.max_steps:
            return True
        epochs = self.cfg.epoch_limit
        return epochs is not None and self.epoch >= epochs

    def _stop_everywhere(self) -> bool:
        """Whether any rank received SIGTERM; all ranks agree, so they stop at one step."""
        flag = torch.tensor([1.0 if self.stop_signal else 0.0], device=self.topo.device)
        if self.topo.world > 1:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def train(self) -> int:
        """Train until done or stopped. Returns the exit status (143 after SIGTERM)."""
        permutation = self.order.permutation(self.epoch)
        window_start, window_steps = time.perf_counter(), 0
        window_samples = 0
        loss = torch.zeros((), device=self.topo.device)
        while not self._finished():
            if self.position >= self.order.size:
                self.epoch, self.position = self.epoch + 1, 0
                if self._finished():
                    break
                permutation = self.order.permutation(self.epoch)
            before = self.position
            loss = self.train_step(permutation)
            window_steps += 1
            window_samples += self.position - before
            if self.step % self.cfg.log_every == 0:
                step_time = (time.perf_counter() - window_start) / window_steps
                # One collective for both: the loss across ranks, and a step time every
                # rank agrees on, so they all check for SIGTERM at the same steps.
                stats = torch.stack([loss, torch.tensor(step_time, device=loss.device)])
                loss_value, step_time = (self._all_reduce(stats) / self.topo.world).tolist()
                self.stop_check_every = stop_check_interval(step_time)
                elapsed = time.perf_counter() - window_start
                if self.metrics is not None:
                    self.metrics.log(self._metrics(loss_value, window_samples / elapsed, elapsed / window_steps))
                window_start, window_steps, window_samples = time.perf_counter(), 0, 0
            if self.step % self.stop_check_every == 0 and self._stop_everywhere():
                self.save_checkpoint("sigterm", loss, wait=True)
                return 128 + signal.SIGTERM
            saving = time.perf_counter()
            if self.step % self.cfg.checkpoint_every == 0:
                self.save_checkpoint("periodic", loss)
            self.checkpointer.poll()
            # Throughput and MFU are of training: time spent saving is left out of the window.
            window_start += time.perf_counter() - saving
        self.save_checkpoint("final", loss, wait=True)
        self.write_final_model()
        return 0

    def _metrics(self, loss: float, samples_per_s: float, step_time: float) -> dict[str, Any]:
        row = {
            "step": self.step,
            "epoch": self.epoch,
            "loss": round(loss, 6),
            "lr": self.scheduler.get_last_lr()[0],
            "samples_per_s": round(samples_per_s, 2),
            "step_time_s": round(step_time, 5),
        }
        if isinstance(self.model, GPT):
            row["tokens_per_s"] = round(samples_per_s * self.model.cfg.seq_len, 1)
        if self.flops_per_sample and self.peak_flops:
            row["mfu"] = round(samples_per_s * self.flops_per_sample / (self.peak_flops * self.topo.world), 4)
        return row

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()

    def write_final_model(self) -> None:
        """Rank 0 writes a plain state_dict; a collective under FSDP (the shards are gathered)."""
        weights = self.model_state()
        if weights is None or not self.topo.is_main:
            return
        path = Path(self.cfg.model_path) if self.cfg.model_path else self.output / "final_model.pt"
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        torch.save(weights, buffer)
        checkpoint.write_atomic(path, buffer.getvalue())
        log(f"final model: {path}")


def load_dataset(cfg: Config) -> Any:
    if cfg.data_dir is None:
        if cfg.model == "cnn":
            return synthetic_images(cfg.synthetic_size, cfg.seed)
        gpt = GPT_SIZES[cfg.gpt_size]
        return TokenDataset(
            synthetic_tokens(cfg.synthetic_size * gpt.seq_len + 1, gpt.vocab_size, cfg.seed), gpt.seq_len
        )
    data_dir = Path(cfg.data_dir)
    if not data_dir.is_dir():
        raise DataError(f"--data-dir {data_dir}: no such directory")
    if cfg.model == "cnn":
        return load_images(data_dir)
    gpt = GPT_SIZES[cfg.gpt_size]
    return load_tokens(data_dir, gpt.seq_len, gpt.vocab_size)


def check_output_dir(path: Path, rank: int) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{rank}-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise UsageError(f"--output-dir {path}: not writable ({err.strerror})") from None


def main(argv: list[str] | None = None) -> int:
    """Run one training process; every exit path releases the process group."""
    topo = topology()
    try:
        cfg = parse_args(argv)
        # Validate everything before joining the process group: a bad flag or data dir
        # fails fast on every rank instead of leaving the others waiting in a collective.
        check_output_dir(Path(cfg.output_dir), topo.rank)
        dataset = load_dataset(cfg)
    except (UsageError, DataError) as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 2
    torch.set_num_threads(default_threads(topo.local_world))
    trainer: Trainer | None = None
    try:
        if topo.world > 1:
            backend = "nccl" if topo.device.type == "cuda" else "gloo"
            if topo.device.type == "cuda":
                torch.cuda.set_device(topo.device)
            dist.init_process_group(backend, timeout=timedelta(seconds=cfg.timeout_s))
        trainer = Trainer(cfg, topo, dataset)
        signal.signal(signal.SIGTERM, lambda signum, frame: setattr(trainer, "stop_signal", signum))
        trainer.resume()
        if topo.is_main:
            log(
                f"training {cfg.model} on {topo.world} process(es), {torch.get_num_threads()} thread(s) each, "
                f"{len(dataset)} samples, global batch {trainer.order.global_batch}, device {topo.device}"
            )
        return trainer.train()
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 2
    except (dist.DistNetworkError, dist.DistStoreError) as err:
        # The store on the Master is unreachable or lost: a retry can find it.
        print(f"error: lost the other processes ({err})", file=sys.stderr, flush=True)
        return TRANSIENT_STATUS
    finally:
        if trainer is not None:
            trainer.close()
        if dist.is_initialized():
            dist.destroy_process_group()

"""The training loop: :class:`Trainer` owns the model, optimizer, data order and position of
one run, trains it step by step, and holds its :class:`trainer.state.Checkpoints`.

:mod:`trainer.train` launches it (the launch commands are there).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from .config import Config
from .console import log
from .data import GlobalOrder, agree_on_data
from .models.spec import IGNORE_INDEX, IMAGES, TOKENS, ModelSpec, build, summed_cross_entropy
from .numerics import StepGuard
from .parallelism.auto import resolve
from .parallelism.pipeline import Pipeline
from .parallelism.topology import Topology, gather
from .parallelism.wrap import compute_precision, parallelize, precision_context
from .schedule import STOP_CHECK_MAX_STEPS, Progress, lr_factor, planned_steps, stop_check_interval
from .spikes import LossSpikeError, Skip, Spike, SpikeGuard, rollback_skips
from .state import Checkpoints
from .telemetry.exporter import serve
from .telemetry.metric_names import CHECKPOINT_EVERY, CHECKPOINT_STEP, POD, RESTARTS, TRAINING, TRAINING_LOOP
from .telemetry.metrics import MFU_KEYS, Metrics, Window, device_sync, peak_memory_mb, peak_tflops


class Trainer:
    """Trains one run. Owns its model and optimizer; ``progress`` is where the run stands
    (data order, step, epoch, position), which ``checkpoints`` saves with the model and
    optimizer and sets on a resume.

    Args:
        cfg: the run's config.
        topo: rank, world size and device.
        dataset: a dataset with ``__len__``, ``batch(index)`` and ``fingerprint``
            (:class:`trainer.data.ImageDataset`, :class:`trainer.data.TokenDataset`).
        spec: what ``--model``'s factory returned (:func:`trainer.models.spec.model_spec`).
    """

    def __init__(self, cfg: Config, topo: Topology, dataset: Any, spec: ModelSpec):
        # The factory's learning rate stands in for an unset --lr, so checkpoints record the one used.
        cfg = replace(cfg, lr=cfg.lr or spec.lr)
        self.cfg, self.topo, self.dataset, self.spec = cfg, topo, dataset, spec
        self.output = Path(cfg.output_dir)
        vocab = None
        if spec.inputs == TOKENS:
            vocab = spec.vocab_size
            declared = getattr(dataset, "vocab_size", None)
            if declared and declared > vocab:
                # The data's vocabulary, padded to a multiple of 64 for tensor cores.
                vocab = -(-declared // 64) * 64
            dataset.limit = vocab
        torch.manual_seed(cfg.seed)  # identical initial weights on every rank
        model = build(spec, cfg, vocab)
        self.memory_format = (
            torch.channels_last if cfg.channels_last and spec.inputs == IMAGES else torch.contiguous_format
        )
        if not any(p.is_meta for p in model.parameters()):
            model = model.to(topo.device, memory_format=self.memory_format)
        self.model = model
        torch.manual_seed(cfg.seed + topo.rank)  # distinct dropout per rank
        self.network = resolve(cfg, topo, model)
        self.cfg = cfg = self.network.cfg
        self.parallel = parallel = parallelize(self.model, cfg, topo)
        self.forward, self.ddp, self.sharded = parallel.forward, parallel.ddp, parallel.sharded
        self.parallel_kind = parallel.kind
        # The ranks of a tensor-parallel group or a pipeline read the same samples: the data is
        # split over the data-parallel replicas only.
        self.dp_rank, self.dp_world = parallel.dp_rank, parallel.mesh.dp
        # The loss is a graph of its own, so the fp32 upcast of the logits fuses into the sum.
        self.loss = torch.compile(summed_cross_entropy) if cfg.compile else summed_cross_entropy
        # The fused kernel exists for CPU and CUDA, takes DTensor parameters (FSDP2) too,
        # beats the per-tensor loop, and alone honours found_inf, which skips a non-finite
        # step without a host sync.
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg.base_lr, weight_decay=0.0, fused=True)
        self.guard = StepGuard(
            self.optimizer, cfg.grad_clip, cfg.max_nonfinite_steps, topo.device, parallel.pipeline_group
        )
        self.spikes = SpikeGuard(
            cfg.spike_guard,
            cfg.spike_threshold,
            cfg.spike_warmup,
            cfg.spike_max_rollbacks,
            tuple(Skip(*skip) for skip in cfg.skip_samples),
        )
        self.pipeline = (
            Pipeline(
                self.model,
                parallel.stage,
                parallel.mesh.pp,
                parallel.pipeline_group,
                topo.device,
                cfg.pipeline_microbatches,
                lambda out, y: self.loss(out, y) / y[0].numel(),
            )
            if parallel.pipeline_group is not None
            else None
        )
        order = GlobalOrder(len(dataset), cfg.batch_size * self.dp_world * cfg.grad_accum, cfg.seed)
        self.progress = progress = Progress(
            order, cfg.grad_accum, planned_steps(0, 0, 0, order, cfg.max_steps, cfg.epoch_limit)
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: lr_factor(s, progress.total_steps))
        # The first process of every pod serves, so no pod is a dead scrape target; the
        # training metrics come from rank 0 alone.
        self.exporter = serve(cfg.metrics_port if topo.local_rank == 0 else None, TRAINING if topo.is_main else POD)
        self.exporter.set(CHECKPOINT_EVERY, cfg.checkpoint_every)
        self.network.export(self.exporter, topo, parallel.mesh)
        # Step 0 until a checkpoint commits (a resume sets its own): a run whose saves fail
        # from the start must still trip the stale-checkpoint alert, which subtracts this.
        self.exporter.set(CHECKPOINT_STEP, 0)
        self.exporter.set(RESTARTS, int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)))
        self.checkpoints = Checkpoints(
            cfg=cfg,
            topo=topo,
            model=self.model,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            guard=self.guard,
            spikes=self.spikes,
            progress=progress,
            exporter=self.exporter,
            sharded=self.sharded,
            data_fingerprint=dataset.fingerprint,
            mesh=parallel.mesh,
        )
        # The ranks settle on a data error before each step's collectives, on a group of its
        # own, since an async save's collectives run on the checkpoints' group from another thread.
        self.data_group = (
            dist.new_group(backend="gloo", timeout=timedelta(seconds=cfg.timeout_s)) if topo.world > 1 else None
        )
        self.metrics: Metrics | None = None
        self.loader = ThreadPoolExecutor(1, thread_name_prefix="prefetch")
        self.prefetched: tuple[tuple[int, int], Future] | None = None
        self.stop_signal: int | None = None
        self.stop_check_every = STOP_CHECK_MAX_STEPS
        self.precision = compute_precision(topo.device.type, parallel.fsdp)
        self.autocast = precision_context(self.precision, topo.device.type)
        # Waited on before a log window's clock is read (metrics.Window).
        self.sync = device_sync(topo.device)
        self.seq_len = spec.seq_len  # None: images
        peak = cfg.peak_tflops or (
            peak_tflops(torch.cuda.get_device_name(topo.device)) if topo.device.type == "cuda" else None
        )
        # MFU as PaLM and nanoGPT count it (attention over every key), and beside it the
        # causal figure: the FLOPs a causal model actually computes (models.training_flops).
        self.flops_per_sample = (
            {key: self.model.flops_per_token(causal) * self.seq_len for key, causal in MFU_KEYS.items()}
            if self.seq_len and peak and hasattr(self.model, "flops_per_token")
            else {}
        )
        self.peak_flops = peak * 1e12 if peak else None

    def _batches(self, permutation: torch.Tensor, position: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """This rank's micro-batches for the step that starts at ``position``, on the host."""
        grad_accum = self.progress.grad_accum
        lo, hi = self.progress.order.step_slice(position)
        bounds = [lo + (hi - lo) * i // grad_accum for i in range(grad_accum + 1)]
        batches = []
        for i in range(grad_accum):
            rlo, rhi = GlobalOrder.rank_share(bounds[i], bounds[i + 1], self.dp_rank, self.dp_world)
            x, y = self.dataset.batch(permutation[rlo:rhi])
            if self.cfg.compile or self.pipeline is not None:
                # Compiled graphs are specialised on shapes and strides, and a pipeline stage's
                # receive buffers on the first step's micro-batch shape: the epoch's last,
                # smaller step is padded to the usual shape with targets the loss ignores,
                # and every batch is made contiguous (token windows are strided views),
                # so no step recompiles and every stage gets the shape it expects.
                pad = self.cfg.batch_size - len(y)
                x = torch.cat([x, x.new_zeros((pad, *x.shape[1:]))])
                y = torch.cat([y, y.new_full((pad, *y.shape[1:]), IGNORE_INDEX)])
            if self.topo.device.type == "cuda":
                x, y = x.pin_memory(), y.pin_memory()  # so the copies below overlap compute
            batches.append((x, y))
        return batches

    def train_step(self, permutation: torch.Tensor) -> torch.Tensor | Spike:
        """One optimizer step over the next global batch; returns this rank's loss share, or
        the spike for which the loss-spike guard refused the step, which is then not taken.

        The next step's batches are read in a background thread meanwhile, so the latency
        of shared storage (page faults on a memory-mapped NAS file) overlaps compute.
        """
        progress = self.progress
        lo, hi = progress.order.step_slice(progress.position)
        total = hi - lo
        ahead = self.prefetched
        if ahead and ahead[0] == (progress.epoch, lo):
            batches = agree_on_data(ahead[1].result, self.topo.rank, self.data_group)
        else:
            batches = agree_on_data(lambda: self._batches(permutation, lo), self.topo.rank, self.data_group)
        self.prefetched = None
        if hi < progress.order.size:
            self.prefetched = ((progress.epoch, hi), self.loader.submit(self._batches, permutation, hi))
        loss_share = torch.zeros((), device=self.topo.device)
        for i, (x, y) in enumerate(batches):
            x = x.to(self.topo.device, non_blocking=True)
            if x.dim() == 4:
                x = x.contiguous(memory_format=self.memory_format)
            y = y.to(self.topo.device, non_blocking=True)
            # Shares can differ by one sample (the epoch's last step): weighting each replica's
            # summed loss by replicas/total makes the data-parallel mean the mean over samples.
            last = i == len(batches) - 1
            if self.parallel.fsdp:
                self.model.set_requires_gradient_sync(last)
            if self.pipeline is not None:
                loss_share += self.pipeline.step(x, y, self.dp_world / total)
                continue
            sync = contextlib.nullcontext() if self.ddp is None or last else self.ddp.no_sync()
            with sync:
                with self.autocast:
                    out = self.forward(x)
                    summed = self.loss(out, y)
                    loss = summed / (y[0].numel() if y.dim() > 1 and len(y) else 1) * self.dp_world / total
                if progress.step + 1 in self.cfg.fault_nonfinite_steps and self.topo.rank == self.topo.world - 1:
                    loss = loss * math.nan
                loss.backward()
            loss_share += loss.detach()
        if self.spikes.enabled:
            # Every rank judges the same number, the all-reduced mean, so all decide alike.
            mean = loss_share.clone()
            if self.topo.world > 1:
                dist.all_reduce(mean)
            spike = self.spikes.observe(progress.step + 1, progress.epoch, hi, mean.item() / self.topo.world)
            if spike is not None:
                self.optimizer.zero_grad(set_to_none=True)
                return spike
        self.guard.before_step(self.model.parameters())
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        progress.step += 1
        progress.position = hi
        return loss_share

    def _move_on(self) -> bool:
        """Past the epoch's end and past samples to skip; returns whether the epoch changed."""
        progress, epoch = self.progress, self.progress.epoch
        while True:
            if progress.position >= progress.order.size:
                progress.epoch, progress.position = progress.epoch + 1, 0
            stop = self.spikes.skip_to(progress.epoch, progress.position)
            if stop is None:
                return progress.epoch != epoch
            progress.position = min(stop, progress.order.size)
            # Fewer samples are left in the run's epochs: its schedule ends sooner.
            progress.replan(self.optimizer, self.cfg.base_lr, self.cfg.max_steps, self.cfg.epoch_limit)

    def _roll_back(self, spike: Spike) -> None:
        """Go back to the newest checkpoint on every rank after ``spike``, and mark the samples
        from its position through the spike's, and ``--spike-skip-extra`` steps' more, to be
        skipped. A collective.

        Raises:
            LossSpikeError: ``--spike-max-rollbacks`` are spent, or there is no checkpoint.
        """
        spikes, progress = self.spikes, self.progress
        self.checkpoints.checkpointer.wait()  # a save from before the spike: kept even when stopping
        spikes.check_budget(spike)
        # The rollbacks and the skips outlive the checkpoint they go back to.
        rollbacks, skipped = spikes.rollbacks, list(spikes.skipped)
        self.prefetched = None
        if not self.checkpoints.roll_back():
            raise LossSpikeError(
                f"{spike}, and no committed checkpoint to go back to: checkpoint sooner (--checkpoint-every) "
                "or judge later (--spike-warmup)"
            )
        order = progress.order
        skips = rollback_skips(
            progress.epoch, progress.position, spike, order.size, order.global_batch, self.cfg.spike_skip_extra
        )
        spikes.rollbacks, spikes.skipped = rollbacks + 1, skipped + skips
        if self.topo.is_main:
            log(
                f"{spike}: rolled back to step {progress.step} and skipping samples "
                f"{','.join(str(s) for s in skips)} (--skip-samples form), rollback {spikes.rollbacks} of "
                f"{self.cfg.spike_max_rollbacks}"
            )
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = Metrics(self.output / "metrics.jsonl", after_step=progress.step)

    def _finished(self) -> bool:
        if self.cfg.max_steps is not None and self.progress.step >= self.cfg.max_steps:
            return True
        epochs = self.cfg.epoch_limit
        return epochs is not None and self.progress.epoch >= epochs

    def _stop_everywhere(self) -> bool:
        """Whether any rank received SIGTERM; all ranks agree, so they stop at one step."""
        flag = torch.tensor([1.0 if self.stop_signal else 0.0], device=self.topo.device)
        if self.topo.world > 1:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def train(self) -> int:
        """Train until done or stopped. Returns the exit status (143 after SIGTERM)."""
        if self.topo.is_main:
            # Opened here, after any resume: rows past the resumed step are dropped, as the
            # run is about to log those steps again.
            self.metrics = Metrics(self.output / "metrics.jsonl", after_step=self.progress.step)
        progress = self.progress
        permutation = progress.order.permutation(progress.epoch)
        window = Window(compiling=self.cfg.compile, sync=self.sync)
        loss = torch.zeros((), device=self.topo.device)
        self.exporter.set(TRAINING_LOOP, 1)
        while not self._finished():
            if self._move_on():
                if self._finished():
                    break
                permutation = progress.order.permutation(progress.epoch)
            before = progress.position
            stepped = self.train_step(permutation)
            if isinstance(stepped, Spike):
                self._roll_back(stepped)
                permutation = progress.order.permutation(progress.epoch)
                window.restart()
                continue
            loss = stepped
            window.add(progress.position - before)
            self.guard.check(progress.step)
            if progress.step % self.cfg.log_every == 0:
                row = self._metrics(loss, window)
                self.stop_check_every = stop_check_interval(row["step_time_s"])
                if self.metrics is not None:
                    self.metrics.log(row)
                window.restart()
            if progress.step % self.stop_check_every == 0:
                if self._stop_everywhere():
                    self.exporter.set(TRAINING_LOOP, 0)
                    self.checkpoints.save("sigterm", loss, wait=True)
                    return 128 + signal.SIGTERM
            if progress.step % self.cfg.checkpoint_every == 0:
                # Throughput and MFU are of training: the save is left out of the window, timed
                # from the end of the step's device work (not its launch) to the save's end.
                # Only here: a device sync every step would stall the launch queue.
                saving = window.now()
                self.checkpoints.save("periodic", loss)
                window.leave_out(window.now() - saving)
            # A background save's commit stays in the window: training waits for it.
            self.checkpoints.poll()
        # The final save and export can outlast the no-progress alert's window with the step frozen.
        self.exporter.set(TRAINING_LOOP, 0)
        self.checkpoints.save("final", loss, wait=True)
        self.checkpoints.write_final_model()
        return 0

    def _metrics(self, loss: torch.Tensor, window: Window) -> dict[str, Any]:
        """The log row for ``window``. A collective: one all-gather of every rank's loss, step
        time and peak memory, so the row shows stragglers, and every rank gets the same mean
        step time to pace its SIGTERM checks with."""
        elapsed = window.elapsed()
        step_s = elapsed / window.steps if window.steps else window.compile_s
        local = torch.tensor([0.0, step_s, peak_memory_mb(self.topo.device)], device=loss.device)
        local[0] = loss
        ranks = torch.stack(gather(self.topo, local))
        step_time = ranks[:, 1].mean().item()
        row: dict[str, Any] = {
            "step": self.progress.step,
            "epoch": self.progress.epoch,
            "loss": round(ranks[:, 0].sum().item() / self.topo.world, 6),
            "lr": self.scheduler.get_last_lr()[0],
            "step_time_s": round(step_time, 5),
            "step_time_max_s": round(ranks[:, 1].max().item(), 5),
            "slowest_rank": int(ranks[:, 1].argmax().item()),
            "peak_memory_mb": round(ranks[:, 2].max().item(), 1),
            "grad_norm": round(self.guard.norm.item(), 6),
            "nonfinite_steps": int(self.guard.skipped.item()),
        }
        if window.compile_s is not None:
            row["compile_s"] = round(window.compile_s, 3)
        if window.steps:
            samples_per_s = window.samples / elapsed
            row["samples_per_s"] = round(samples_per_s, 2)
            if self.seq_len:
                row["tokens_per_s"] = round(samples_per_s * self.seq_len, 1)
            for key, flops in self.flops_per_sample.items():
                row[key] = round(samples_per_s * flops / (self.peak_flops * self.topo.world), 4)
        self.exporter.log_step(row, ranks[:, 1].tolist(), (ranks[:, 2] * 2**20).tolist())
        return row

    def close(self) -> None:
        self.loader.shutdown(cancel_futures=True)
        self.checkpoints.close()
        if self.metrics is not None:
            self.metrics.close()
        self.exporter.close()

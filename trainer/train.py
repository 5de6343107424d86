"""The bundled trainer (DDP, FSDP2, HSDP, or tensor and pipeline parallelism with FSDP2):
trains, checkpoints in shards, resumes exactly.

Launch it anywhere::

    python -m trainer --max-steps 100                                # one process, synthetic data
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --standalone --nproc-per-node=2 --max-restarts=3 \\
        -m trainer --data-dir /data --output-dir /ckpt                 # one node, restarts resume
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --nnodes=4 --nproc-per-node=8 \\
        --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29400 -m trainer --model gpt
    torchrun --nnodes=2 --nproc-per-node=8 ... -m trainer --model llama --llama-size 8b --tp 8 --pp 2

In a PyTorchJob the operator injects ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``,
``RANK`` and the ``PET_*`` variables torchrun reads; ``TRAIN_DATA_PATH``, ``OUTPUT_PATH``,
``MODEL_PATH`` and ``FINAL_MODEL_PATH`` give the defaults of ``--data-dir``,
``--output-dir``, ``--init-from`` (pretrained weights to start from) and
``--final-model-path``. ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` keeps torchrun restarts from
failing or stalling on a stale rendezvous store (pytorch/pytorch#135712).

NCCL on CUDA, gloo on CPU. Checkpoints every ``--checkpoint-every`` steps and on SIGTERM
(then exit status 143, which ``python -m trainer.launch``, the pods' torchrun, passes on
so ``restartPolicy: ExitCode`` retries); on start the ranks agree on the newest committed
checkpoint in ``<output-dir>/checkpoints`` that every one of them can read and resume it
(:mod:`trainer.checkpoints.sharded`). On CPU a resumed run ends with weights bit-identical to an
uninterrupted one (same world size and thread count); on GPU cuDNN/NCCL kernels are not
bit-deterministic, so a resumed run matches statistically.

This module holds ``main``; :mod:`trainer.loop` the training loop, :mod:`trainer.config`
the flags, :mod:`trainer.parallelism.wrap` DDP/FSDP and the TP/PP mesh, :mod:`trainer.state` checkpoint and weights I/O,
:mod:`trainer.numerics` the non-finite guard, :mod:`trainer.spikes` the loss-spike guard,
:mod:`trainer.telemetry.metrics` what is logged, :mod:`trainer.telemetry.exporter` what rank 0 serves to Prometheus (``--metrics-port``).
"""

from __future__ import annotations

import signal
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from .checkpointing import report
from .checkpoints.integrity import read_key
from .checkpoints.ownership import check_output_dir, claim
from .checkpoints.weights import WeightsError
from .config import UsageError
from .console import error, log
from .data import DataError, load_dataset
from .exit_codes import LOSS_SPIKES
from .flags import parse_args
from .loop import Trainer
from .models.spec import model_spec
from .numerics import NonFiniteError
from .parallelism.topology import default_threads, prepare_flight_recorder, topology
from .spikes import LossSpikeError


def main(argv: list[str] | None = None) -> int:
    """Run one training process; every exit path releases the process group."""
    topo = topology()
    try:
        cfg = parse_args(argv)
        # Validate everything before joining the process group: a bad flag or data dir
        # fails fast on every rank instead of leaving the others waiting in a collective.
        check_output_dir(Path(cfg.output_dir), topo.rank)
        claim(Path(cfg.output_dir), cfg.job_id)
        prepare_flight_recorder()
        if cfg.init_from and not Path(cfg.init_from).is_file():
            raise UsageError(f"--init-from {cfg.init_from}: no such file (pretrained weights to start from)")
        read_key(cfg.checkpoint_key_file)
        spec = model_spec(cfg)
        dataset = load_dataset(cfg, spec)
    except (UsageError, DataError) as err:
        error(str(err))
        return 2
    torch.set_num_threads(default_threads(topo.local_world))
    trainer: Trainer | None = None
    try:
        if topo.world > 1:
            backend = "nccl" if topo.device.type == "cuda" else "gloo"
            if topo.device.type == "cuda":
                torch.cuda.set_device(topo.device)
            dist.init_process_group(backend, timeout=timedelta(seconds=cfg.timeout_s))
        trainer = Trainer(cfg, topo, dataset, spec)
        signal.signal(signal.SIGTERM, lambda signum, frame: setattr(trainer, "stop_signal", signum))
        if not trainer.checkpoints.resume() and cfg.init_from:
            trainer.checkpoints.init_weights(Path(cfg.init_from))
        if topo.is_main:
            log(
                f"training {cfg.model} on {topo.world} process(es) ({trainer.parallel_kind}), "
                f"{torch.get_num_threads()} thread(s) each, "
                f"{len(dataset)} samples, global batch {trainer.progress.order.global_batch}, device {topo.device}"
            )
        return trainer.train()
    except (WeightsError, DataError) as err:
        error(str(err))
        return 2
    except NonFiniteError as err:
        error(str(err))
        return 1
    except LossSpikeError as err:
        error(str(err))
        return LOSS_SPIKES
    except Exception as err:
        # Bad flags, the checkpoints' errors and a lost peer, as every loop reports them
        # (trainer.checkpointing); anything else is a bug and goes on with its traceback.
        status = report(err)
        if status is None:
            raise
        return status
    finally:
        if trainer is not None:
            trainer.close()
        if dist.is_initialized():
            dist.destroy_process_group()

"""The trainer's command line: flags, their defaults from the environment, and the parse into a
validated :class:`~trainer.config.Config`. Imports no torch, as :mod:`trainer.config`."""

from __future__ import annotations

import argparse
import os

from .config import GPT_SIZES, LLAMA_SIZES, PARALLEL_CHOICES, Config, UsageError
from .spikes import add_spike_flags


def metrics_port(text: str) -> int | None:
    """``--metrics-port``'s value: a TCP port, or None (off) for an empty string."""
    if not text.strip():
        return None
    if not text.strip().isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a TCP port (1-65535; empty for no metrics; the default comes from $METRICS_PORT)"
        )
    return int(text)


def add_metrics_port(parser: argparse.ArgumentParser) -> None:
    """Add ``--metrics-port``, whose default is ``$METRICS_PORT`` (set in the platform's jobs):
    off outside a cluster unless asked for.

    Args:
        parser: the command's parser.
    """
    parser.add_argument(
        "--metrics-port",
        type=metrics_port,
        default=os.environ.get("METRICS_PORT"),
        help="serve Prometheus metrics on this port from rank 0 (/metrics); default $METRICS_PORT, else off",
    )


def parser() -> argparse.ArgumentParser:
    """The trainer's command line; the defaults some flags take from the environment are read now."""
    env = os.environ
    p = argparse.ArgumentParser(
        prog="python -m trainer", description="DDP/FSDP trainer with sharded checkpoints and exact resume."
    )
    p.add_argument(
        "--model",
        default=Config.model,
        help="cnn (MNIST convnet), gpt (small decoder), llama (Llama-family decoder), or your own model's factory "
        "as package.module:factory, importable from the working directory or PYTHONPATH",
    )
    p.add_argument(
        "--data-dir",
        default=env.get("TRAIN_DATA_PATH"),
        help="train.npz (cnn), or train.bin or token shards with manifest.json (gpt, llama); default $TRAIN_DATA_PATH",
    )
    # --synthetic: the former spelling, accepted for one more release.
    p.add_argument(
        "--synthetic-data",
        "--synthetic",
        dest="synthetic_data",
        action="store_true",
        help="use synthetic data even if $TRAIN_DATA_PATH is set (syntheticData in a job's trainer settings)",
    )
    p.add_argument(
        "--output-dir",
        default=env.get("OUTPUT_PATH", Config.output_dir),
        help="checkpoints and metrics; default $OUTPUT_PATH",
    )
    p.add_argument(
        "--final-model-path",
        default=env.get("FINAL_MODEL_PATH"),
        help="where the final state_dict goes; default $FINAL_MODEL_PATH or <output-dir>/final_model.pt",
    )
    p.add_argument(
        "--init-from",
        default=env.get("MODEL_PATH") or None,
        help="pretrained weights to start a new run from (plain state_dict, .pt or .safetensors); default $MODEL_PATH",
    )
    p.add_argument("--batch-size", type=int, default=Config.batch_size, help="per process")
    p.add_argument("--grad-accum", type=int, default=Config.grad_accum, help="micro-batches per optimizer step")
    p.add_argument("--max-steps", type=int, help="the run ends here or at the end of --epochs, whichever comes first")
    p.add_argument("--epochs", type=int, help="epochs to train; default: no epoch limit under --max-steps, else 1")
    p.add_argument("--lr", type=float)
    p.add_argument("--seed", type=int, default=Config.seed)
    p.add_argument("--checkpoint-every", type=int, default=Config.checkpoint_every, help="steps")
    p.add_argument("--keep-checkpoints", type=int, default=Config.keep_checkpoints)
    p.add_argument(
        "--async-checkpoint",
        action="store_true",
        help="write checkpoints in the background once the state is copied to host memory",
    )
    p.add_argument(
        "--checkpoint-key-file",
        default=env.get("CHECKPOINT_KEY_FILE") or None,
        help="the job's secret key; checkpoints are signed with it and only those are resumed; "
        "default $CHECKPOINT_KEY_FILE",
    )
    p.add_argument(
        "--start-fresh",
        action="store_true",
        help="train from step 0 even though the output directory holds committed checkpoints none of which loads",
    )
    p.add_argument(
        "--replan-epoch",
        action="store_true",
        help="resume a checkpoint trained on another dataset or --seed: its epoch starts over in the new order",
    )
    p.add_argument(
        "--job-id",
        default=env.get("TRAINING_JOB") or None,
        help="this run's identity (<namespace>/<job>), which claims --output-dir; another's is refused there; "
        "default $TRAINING_JOB",
    )
    p.add_argument(
        "--storage-wait-s",
        type=float,
        default=Config.storage_wait_s,
        help="seconds a rank waits to see the checkpoint rank 0 picked before all fall back to an older one",
    )
    p.add_argument(
        "--clip-grad",
        type=float,
        help="clip the gradient norm to this; 0: no clipping (default 1.0 for gpt and llama, none for cnn)",
    )
    p.add_argument(
        "--max-nonfinite-steps",
        type=int,
        default=Config.max_nonfinite_steps,
        help="stop after this many consecutive steps with non-finite gradients (each is skipped)",
    )
    add_spike_flags(p)
    p.add_argument("--log-every", type=int, default=Config.log_every, help="steps")
    p.add_argument("--gpt-size", default=Config.gpt_size, help=f"one of {', '.join(GPT_SIZES)}")
    # No default here: a size given to another model is refused rather than ignored.
    p.add_argument(
        "--llama-size", help=f"--model llama's shape: one of {', '.join(LLAMA_SIZES)} (default {Config.llama_size})"
    )
    p.add_argument("--synthetic-size", type=int, default=Config.synthetic_size)
    p.add_argument("--timeout-s", type=float, default=Config.timeout_s, help="collective timeout")
    p.add_argument("--compile", action="store_true", help="torch.compile the model and the loss")
    p.add_argument(
        "--peak-tflops",
        type=float,
        help="per-device peak TFLOP/s for MFU; default: the GPU's dense bf16 peak, looked up by name",
    )
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    p.add_argument(
        "--activation-checkpointing",
        action="store_true",
        help="recompute the gpt or llama blocks' activations in the backward pass instead of storing them",
    )
    p.add_argument(
        "--fsdp",
        action="store_true",
        help="the same as --parallel hsdp: shard the gpt or llama model with FSDP2 instead of replicating it (DDP); "
        "HSDP on several nodes",
    )
    p.add_argument(
        "--parallel",
        choices=PARALLEL_CHOICES,
        help="ddp (default), fsdp (shard over every process), hsdp (shard within a node, replicate across nodes) "
        "or auto (chosen from the model size, device memory and the fabric probe)",
    )
    # No defaults here: unset, they are the job spec's unset (1 each, or --parallel auto's choice).
    p.add_argument("--tp", type=int, help="tensor-parallel ranks per sample (llama), in a node; default 1")
    p.add_argument("--pp", type=int, help="pipeline stages (llama), e.g. one per node; default 1")
    p.add_argument("--microbatches", type=int, help="micro-batches per pipeline step (default: --pp)")
    p.add_argument(
        "--bucket-mb", type=float, default=Config.bucket_mb, help="DDP gradient bucket cap, MB (DDP's default 25)"
    )
    p.add_argument(
        "--reshard-after-forward",
        action=argparse.BooleanOptionalAction,
        default=Config.reshard_after_forward,
        help="FSDP: free gathered parameters after the forward pass (default) or keep them for the backward pass",
    )
    p.add_argument(
        "--fabric-probe",
        action="store_true",
        help="time all-reduce and all-gather inside and across nodes at start (a few seconds); implied by "
        "--parallel auto",
    )
    p.add_argument(
        "--fabric-record",
        help="a fabric probe's JSON (e.g. a netbench job's netbench.json) for --parallel auto to use instead of probing",
    )
    add_metrics_port(p)
    return p


def parse_args(argv: list[str] | None = None) -> Config:
    env = os.environ
    args = vars(parser().parse_args(argv))
    if args["fsdp"] and args["parallel"] not in (None, "hsdp"):
        raise UsageError(f"--fsdp is --parallel hsdp; it contradicts --parallel {args['parallel']}")
    if args["llama_size"] is not None and args["model"] != "llama":
        raise UsageError(f"--llama-size {args['llama_size']} applies to --model llama, not --model {args['model']}")
    args["llama_size"] = args["llama_size"] or Config.llama_size
    for dim in ("tp", "pp"):
        args[dim] = getattr(Config, dim) if args[dim] is None else args[dim]
    split = args["tp"] * args["pp"] > 1
    args["parallel"] = args["parallel"] or ("hsdp" if args["fsdp"] else "fsdp" if split else "ddp")
    args["fsdp"] = args["parallel"] in ("fsdp", "hsdp")
    faults = env.get("TRAINER_FAULT_NONFINITE_STEPS", "")
    try:
        args["fault_nonfinite_steps"] = tuple(int(step) for step in faults.split(",") if step.strip())
    except ValueError:
        raise UsageError(f"$TRAINER_FAULT_NONFINITE_STEPS {faults!r}: give comma-separated step numbers") from None
    if args.pop("synthetic_data"):
        args["data_dir"] = None
    cfg = Config(**args)
    cfg.validate()
    return cfg

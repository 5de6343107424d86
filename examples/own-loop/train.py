"""A training loop of your own with the bundled trainer's checkpoints and exit statuses
(:mod:`trainer.checkpointing`): atomic, digested checkpoints (signed with the job's key when
``$CHECKPOINT_KEY_FILE`` is set), an exact resume after a kill or a preemption, and the exit
statuses the platform's restart policy acts on. The model is a small regression network with
dropout, on data drawn from the seed and the step, so that a resumed run ends with the weights
of an uninterrupted one, bit for bit.

    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node=2 \\
        --max-restarts=3 examples/own-loop/train.py --output-dir /tmp/own-loop --steps 200

In a job: ``command: [python, -m, trainer.launch, --nproc-per-node=2, examples/own-loop/train.py]``
with the script in the job's ``code``; ``OUTPUT_PATH``, ``CHECKPOINT_KEY_FILE`` and ``TRAINING_JOB``
are set by the platform.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.nn.parallel import DistributedDataParallel

from trainer import checkpointing

FEATURES = 16


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="A training loop of its own, checkpointed by trainer.checkpointing.")
    p.add_argument("--output-dir", default=os.environ.get("OUTPUT_PATH", "own-loop-output"))
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--checkpoint-every", type=int, default=20, help="steps")
    p.add_argument("--batch-size", type=int, default=32, help="per process")
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def batch(step: int, rank: int, world: int, args: argparse.Namespace) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's share of step ``step``'s global batch, a function of the seed and the step
    alone: a resumed run reads exactly the batches it would have read."""
    generator = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
    x = torch.randn(world * args.batch_size, FEATURES, generator=generator)
    y = x.sum(dim=1, keepdim=True).sin() + 0.1 * torch.randn(len(x), 1, generator=generator)
    share = slice(rank * args.batch_size, (rank + 1) * args.batch_size)
    return x[share], y[share]


def train() -> int:
    args = parse_args()
    world = int(os.environ.get("WORLD_SIZE", 1))
    if world > 1:
        # The model and its batches stay on the CPU, which NCCL cannot reduce (its backend serves
        # CUDA tensors only: torch 2.13 distributed_c10d.py, Backend.backend_capability). A loop on
        # GPUs moves both to cuda:LOCAL_RANK, joins with NCCL, and saves
        # every_rank(torch.cuda.get_rng_state()) beside the CPU generator's state.
        dist.init_process_group("gloo")
    rank = dist.get_rank() if world > 1 else 0
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Dropout(0.25), nn.Linear(64, 1))
    forward = DistributedDataParallel(model) if world > 1 else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    run = checkpointing.open_run(
        args.output_dir, key_file=os.environ.get("CHECKPOINT_KEY_FILE"), job_id=os.environ.get("TRAINING_JOB")
    )
    torch.manual_seed(args.seed + 1 + rank)  # each rank its own dropout

    def snapshot(step: int) -> dict:
        model_state, optimizer_state = get_state_dict(model, optimizer)
        rng = checkpointing.every_rank(torch.get_rng_state())  # per rank: gathered, one row each
        return {"model": model_state, "optimizer": optimizer_state, "rng": rng, "step": step}

    start = 0
    restored = run.load_latest(snapshot(0))
    if restored is not None:
        set_state_dict(model, optimizer, model_state_dict=restored["model"], optim_state_dict=restored["optimizer"])
        torch.set_rng_state(restored["rng"][rank].clone())
        start = restored["step"]
    loss = torch.zeros(())
    for step in range(start + 1, args.steps + 1):
        x, y = batch(step, rank, world, args)
        loss = F.mse_loss(forward(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 5 == 0 and run.stop_requested():
            run.save(step, snapshot(step), reason="sigterm", loss=loss.item())
            return checkpointing.PREEMPTED
        if step % args.checkpoint_every == 0:
            run.save(step, snapshot(step), loss=loss.item())
    run.save(args.steps, snapshot(args.steps), reason="final", loss=loss.item())
    if rank == 0:
        final = Path(args.output_dir) / "final_model.pt"
        torch.save(model.state_dict(), final.with_suffix(".tmp"))
        os.replace(final.with_suffix(".tmp"), final)
        print(f"final model: {final}", flush=True)
    return checkpointing.DONE


if __name__ == "__main__":
    sys.exit(checkpointing.main(train))

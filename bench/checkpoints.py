"""One checkpoint save of GPT-2 small's training state (124M parameters, AdamW moments:
about 1.5 GB in fp32) sharded with FSDP2, in one of three ways:

- ``full``: the way the trainer saved before sharded checkpoints: the whole state gathered
  to rank 0 (``full_state_dict``, ``cpu_offload``), serialised with ``torch.save`` into
  memory, hashed, and written to one file by rank 0 while the other ranks wait;
- ``dcp``: the trainer's checkpoints: every rank writes its own shards
  (``torch.distributed.checkpoint``), rank 0 commits;
- ``dcp-async``: the same with ``--async-checkpoint``: the time training is blocked (the
  copy to host memory) and the time until the checkpoint is committed.

    torchrun --standalone --nproc-per-node=2 -m bench.checkpoints --side dcp --dir /tmp/ckpt

Rank 0 prints one JSON line: seconds, and every rank's peak resident memory before and
after the save (``ru_maxrss``), in MiB.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import resource
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict
from torch.distributed.fsdp import fully_shard

from trainer.checkpoints.sharded import Checkpointer, write_atomic
from trainer.config import GPT_SIZES
from trainer.models import GPT
from trainer.state import FULL_STATE


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def save_full(model: torch.nn.Module, optimizer: torch.optim.Optimizer, root: Path) -> None:
    """The former single-file checkpoint: gathered to rank 0, serialised in memory, hashed."""
    state = {
        "model": get_model_state_dict(model, options=FULL_STATE),
        "optimizer": get_optimizer_state_dict(model, optimizer, options=FULL_STATE),
    }
    if dist.get_rank() == 0:
        buffer = io.BytesIO()
        torch.save(state, buffer)
        payload = buffer.getvalue()
        digest = hashlib.sha256(payload).hexdigest()
        root.mkdir(parents=True, exist_ok=True)
        write_atomic(root / "state.pt", payload)
        write_atomic(root / "meta.json", json.dumps({"sha256": digest}).encode())
    dist.barrier()


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.checkpoints")
    p.add_argument("--side", choices=("full", "dcp", "dcp-async"), required=True)
    p.add_argument("--dir", required=True, help="where the checkpoint goes (removed first by the caller)")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = GPT(GPT_SIZES["124m"])
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    # Materialises the AdamW moments, as after a first training step.
    get_optimizer_state_dict(model, optimizer)
    group = dist.new_group(backend="gloo")
    before = peak_rss_mib()
    dist.barrier()
    start = time.perf_counter()
    blocked = None
    if args.side == "full":
        save_full(model, optimizer, Path(args.dir))
    else:
        checkpointer = Checkpointer(Path(args.dir), group, rank == 0, keep=1, async_save=args.side == "dcp-async")
        state = {"model": get_model_state_dict(model), "optimizer": get_optimizer_state_dict(model, optimizer)["state"]}
        commit = {"step": 1, "reason": "bench", "loss": 0.0}
        with open(os.devnull, "w") as quiet:
            stdout, sys.stdout = sys.stdout, quiet  # the "checkpoint step-…" line
            checkpointer.save(state, commit, wait=args.side == "dcp")
            blocked = time.perf_counter() - start
            checkpointer.wait()
            sys.stdout = stdout
        dist.barrier()
    seconds = time.perf_counter() - start
    rss = torch.tensor([before, peak_rss_mib()], dtype=torch.float64)
    gathered = [torch.empty_like(rss) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, rss)
    if rank == 0:
        row = {
            "side": args.side,
            "seconds": round(seconds, 3),
            "peak_rss_before_mib": [round(t[0].item()) for t in gathered],
            "peak_rss_mib": [round(t[1].item()) for t in gathered],
        }
        if blocked is not None and args.side == "dcp-async":
            row["blocked_seconds"] = round(blocked, 3)
        print(json.dumps(row), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

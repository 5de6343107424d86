"""Host memory of one async checkpoint save under DDP, where every rank holds the whole state.

- ``every-rank``: the state handed to DCP whole on every rank, as the trainer did before:
  each rank copies all of it to host memory, and DCP drops the duplicates only afterwards;
- ``share``: the trainer's :class:`trainer.checkpoints.sharded.Checkpointer`, which hands each rank
  only its share (:mod:`trainer.checkpoints.save_plan`).

    torchrun --standalone --nproc-per-node=2 -m bench.async_memory --side share --dir /tmp/ckpt

Rank 0 prints one JSON line: the bytes of the state (model and AdamW moments), and for
every rank the bytes it handed to DCP and how much its peak resident memory grew during
the save (``ru_maxrss``), in MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict
from torch.nn.parallel import DistributedDataParallel

from bench.checkpoints import peak_rss_mib
from trainer.checkpoints.save_plan import leaves, nbytes, share
from trainer.checkpoints.sharded import Checkpointer
from trainer.models import GPT, GPTConfig


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.async_memory")
    p.add_argument("--side", choices=("every-rank", "share"), required=True)
    p.add_argument("--dir", required=True, help="where the checkpoint goes (removed first by the caller)")
    p.add_argument("--n-embd", type=int, default=512)
    p.add_argument("--n-layer", type=int, default=4)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(GPT(GPTConfig(n_embd=args.n_embd, n_layer=args.n_layer)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, 4096, (2, 129))
    logits = model(tokens[:, :-1])
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).backward()
    optimizer.step()  # the AdamW moments exist from here on, as in a run
    state = {"model": get_model_state_dict(model), "optimizer": get_optimizer_state_dict(model, optimizer)["state"]}
    total = sum(nbytes(t) for _, t in leaves(state))
    group = dist.new_group(backend="gloo")
    dist.barrier()
    before = peak_rss_mib()
    if args.side == "every-rank":
        handed = total
        dcp.async_save(state, storage_writer=FileSystemWriter(Path(args.dir)), process_group=group).result()
    else:
        handed = sum(nbytes(t) for _, t in leaves(share(state, rank, world)[0]))
        checkpointer = Checkpointer(Path(args.dir), group, rank == 0, keep=1, async_save=True)
        with open(os.devnull, "w") as quiet:
            stdout, sys.stdout = sys.stdout, quiet  # the "checkpoint step-…" line
            checkpointer.save(state, {"step": 1, "reason": "bench", "loss": 0.0}, wait=False)
            checkpointer.wait()
            sys.stdout = stdout
    dist.barrier()
    mine = torch.tensor([handed / 2**20, peak_rss_mib() - before], dtype=torch.float64)
    gathered = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    if rank == 0:
        row = {
            "side": args.side,
            "state_mib": round(total / 2**20, 1),
            "handed_mib": [round(t[0].item(), 1) for t in gathered],
            "peak_rss_growth_mib": [round(t[1].item(), 1) for t in gathered],
        }
        print(json.dumps(row), flush=True)
    dist.barrier()
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    # Seen here with torch 2.13 on CPU: after an async save, one rank of this script now and
    # then never finishes tearing down the process group or the interpreter; every rank has
    # passed the last barrier by then, so each leaves without either.
    os._exit(status)

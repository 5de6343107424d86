"""Training time blocked by each async checkpoint save, one process on CPU, in one of two ways:

- ``fresh``: the state staged into new host memory at every save, as the trainer did before
  (a new ``FileSystemWriter`` per save stages it, ``cache_staged_state_dict=False``);
- ``reused``: the trainer's :func:`trainer.checkpoints.sharded.host_stager`, one for the run, which
  copies into the host memory of its first save.

    python -m bench.staging --side reused --saves 5 --dir /tmp/ckpt

Prints one JSON line: the bytes of the state (a GPT's weights and AdamW moments) and the
seconds each ``async_save`` call blocked (the copy to host memory and DCP's planning); each
save's writes are waited for before the next, as the trainer does.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter

from trainer.checkpoints.save_plan import leaves, nbytes
from trainer.checkpoints.sharded import host_stager
from trainer.models import GPT, GPTConfig


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.staging")
    p.add_argument("--side", choices=("fresh", "reused"), required=True)
    p.add_argument("--saves", type=int, default=5)
    p.add_argument("--dir", required=True, help="where the checkpoints go (removed by the caller)")
    p.add_argument("--n-embd", type=int, default=512)
    p.add_argument("--n-layer", type=int, default=8)
    args = p.parse_args()
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_embd=args.n_embd, n_layer=args.n_layer))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, 4096, (2, 129))
    torch.nn.functional.cross_entropy(model(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten()).backward()
    optimizer.step()  # the AdamW moments exist from here on, as in a run
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()["state"]}
    stager = host_stager() if args.side == "reused" else None
    blocked = []
    for i in range(args.saves):
        writer = FileSystemWriter(Path(args.dir) / f"step-{i}")
        start = time.perf_counter()
        upload = dcp.async_save(state, storage_writer=writer, async_stager=stager, no_dist=True)
        blocked.append(time.perf_counter() - start)
        upload.result()
        with torch.no_grad():  # a step changes the state in place between saves
            for tensor in model.parameters():
                tensor.add_(1e-3)
    if stager is not None:
        stager.close()
    total = sum(nbytes(t) for _, t in leaves(state))
    print(json.dumps({"side": args.side, "state_bytes": total, "blocked_s": blocked}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

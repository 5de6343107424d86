"""Save and commit time of a checkpoint against the bytes written, with the commit record's
sha256s computed two ways, alternated in one run:

- ``rank0``: the way the trainer committed before: every rank writes its shards, then rank 0
  reads the whole checkpoint back and hashes it before it can write ``commit.json``;
- ``per-rank``: the trainer's checkpoints now (``trainer/checkpoints/digest_writer.py``): each rank
  hashes its files as it writes them and rank 0 gathers the digests with DCP's write results.

    torchrun --standalone --nproc-per-node=2 -m bench.commit_digests --dir /tmp/ckpt --gib 1 --rounds 3

Rank 0 prints one JSON line per save: the side, the GiB written, the seconds until every
shard and ``.metadata`` are written (``save_s``), the seconds rank 0 then spends on digests
before the commit (``digest_s``), and both per GiB.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter

from trainer.checkpoints.digest_writer import DigestingWriter
from trainer.checkpoints.integrity import file_digests

TENSOR_MIB = 64


def save(state: dict[str, torch.Tensor], path: Path, side: str, group: dist.ProcessGroup) -> tuple[float, float]:
    """One save; returns the seconds of the save and of rank 0's digests after it."""
    dist.barrier(group)
    start = time.perf_counter()
    writer = DigestingWriter(path) if side == "per-rank" else FileSystemWriter(path)
    dcp.save(state, storage_writer=writer, process_group=group)
    saved = time.perf_counter()
    if dist.get_rank() == 0:
        digests = writer.digests if side == "per-rank" else file_digests(path)
        if ".metadata" not in digests or len(digests) != dist.get_world_size() + 1:
            raise RuntimeError(f"digests of {sorted(digests)}, not of every file")
    digested = time.perf_counter()
    dist.barrier(group)
    return saved - start, digested - saved


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.commit_digests")
    p.add_argument("--dir", required=True, help="where the checkpoints go (emptied before each save)")
    p.add_argument("--gib", type=float, default=1.0, help="GiB written per save, over all ranks")
    p.add_argument("--rounds", type=int, default=3, help="saves per side, alternated")
    args = p.parse_args()
    dist.init_process_group("gloo")
    group = dist.new_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    count = max(1, round(args.gib * 1024 / TENSOR_MIB / world))
    generator = torch.Generator().manual_seed(rank)
    # Random bytes, each rank its own tensors: no rank's file is a copy of another's.
    state = {
        f"rank{rank}.t{i}": torch.rand(TENSOR_MIB * 2**18, generator=generator, dtype=torch.float32)
        for i in range(count)
    }
    gib = count * world * TENSOR_MIB / 1024
    root = Path(args.dir)
    for round_ in range(args.rounds):
        for side in ("rank0", "per-rank") if round_ % 2 == 0 else ("per-rank", "rank0"):
            path = root / side
            if rank == 0:
                shutil.rmtree(path, ignore_errors=True)
            save_s, digest_s = save(state, path, side, group)
            if rank == 0:
                row = {"side": side, "round": round_, "gib": round(gib, 3), "save_s": round(save_s, 3)}
                row |= {"digest_s": round(digest_s, 3), "commit_s_per_gib": round((save_s + digest_s) / gib, 3)}
                row["digest_s_per_gib"] = round(digest_s / gib, 3)
                print(json.dumps(row), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

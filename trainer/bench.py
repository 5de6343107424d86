"""All-reduce bandwidth across the job's processes, to check the network before a big run.

    torchrun --standalone --nproc-per-node=2 -m trainer.bench --max-size 64MiB
    torchrun --nnodes=4 --nproc-per-node=8 ... -m trainer.bench        # NCCL over TCP or RDMA

Prints one JSON line per message size (powers of two from --min-size to --max-size):
size in bytes, median time, algorithm bandwidth (size/time) and bus bandwidth
(algbw × 2(n−1)/n, comparable across world sizes and with nccl-tests).

With ``--metrics-port`` (default ``$METRICS_PORT``, set in the platform's jobs) rank 0 also
serves the bus bandwidth by message size to Prometheus, and keeps serving for
``--serve-after-s`` once done so that a scrape catches a job this short. The other ranks
leave the process group first and exit, so the hold can fail no collective.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from .config import add_metrics_port
from .exporter import serve
from .metric_names import ALLREDUCE_BUS_BANDWIDTH, BENCHMARK, SIZE_LABEL

SERVE_AFTER_S = 75.0
"""Long enough for two scrapes at Prometheus' usual 30 s interval."""

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_size(text: str) -> int:
    match = re.fullmatch(r"(\d+)\s*([KMG]?)(i?B)?", text.strip(), flags=re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 1MiB, 64MiB or 1GiB")
    return int(match[1]) * _UNITS[match[2].upper()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trainer.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--min-size", type=parse_size, default=parse_size("1MiB"))
    p.add_argument("--max-size", type=parse_size, default=parse_size("1GiB"))
    p.add_argument("--iters", type=int, default=5, help="timed repetitions per size (median reported)")
    p.add_argument("--warmup", type=int, default=2)
    add_metrics_port(p)
    p.add_argument(
        "--serve-after-s",
        type=float,
        default=SERVE_AFTER_S,
        help="with --metrics-port: seconds rank 0 keeps serving the results once measured",
    )
    args = p.parse_args(argv)
    if args.min_size > args.max_size:
        print(f"error: --min-size {args.min_size} exceeds --max-size {args.max_size}", file=sys.stderr)
        return 2
    if args.serve_after_s < 0:
        print(f"error: --serve-after-s must not be negative, got {args.serve_after_s}", file=sys.stderr)
        return 2
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(seconds=300))
    world, rank = dist.get_world_size(), dist.get_rank()
    exporter = serve(args.metrics_port if rank == 0 else None, BENCHMARK)
    try:
        size = args.min_size
        while size <= args.max_size:
            tensor = torch.ones(size // 4, dtype=torch.float32, device=device)
            times = []
            for i in range(args.warmup + args.iters):
                dist.barrier()
                if cuda:
                    torch.cuda.synchronize()
                start = time.perf_counter()
                dist.all_reduce(tensor)
                if cuda:
                    torch.cuda.synchronize()
                if i >= args.warmup:
                    times.append(time.perf_counter() - start)
            seconds = statistics.median(times)
            algbw = size / seconds / 1e9
            busbw = algbw * 2 * (world - 1) / world
            exporter.set(ALLREDUCE_BUS_BANDWIDTH, busbw * 1e9, **{SIZE_LABEL: str(size)})
            if rank == 0:
                print(
                    json.dumps(
                        {
                            "size_bytes": size,
                            "world_size": world,
                            "backend": dist.get_backend(),
                            "time_ms": round(seconds * 1e3, 3),
                            "algbw_GBps": round(algbw, 3),
                            "busbw_GBps": round(busbw, 3),
                        }
                    ),
                    flush=True,
                )
            size *= 2
    finally:
        dist.destroy_process_group()
    try:
        exporter.hold(args.serve_after_s)
    finally:
        exporter.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

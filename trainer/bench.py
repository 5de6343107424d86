"""All-reduce bandwidth across the job's processes, to check the network before a big run.

    torchrun --standalone --nproc-per-node=2 -m trainer.bench --max-size 64MiB
    torchrun --nnodes=4 --nproc-per-node=8 ... -m trainer.bench        # NCCL over TCP or RDMA

First takes the fabric probe (:mod:`trainer.parallelism.fabric`: all-reduce and all-gather inside and
across nodes), then prints one JSON line per message size of an all-reduce over the whole job
(powers of two from --min-size to --max-size): size in bytes, median time of the slowest
process, algorithm bandwidth (size/time) and bus bandwidth (algbw × 2(n−1)/n, comparable
across world sizes and with nccl-tests). Rank 0 writes everything to ``--output`` (default
``$OUTPUT_PATH/netbench.json``, the job's directory on the output volume) in the format
``docs/network.md`` describes, which ``python -m trainer --parallel auto --fabric-record``
reads.

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
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from .checkpoints.sharded import write_atomic
from .console import error, log
from .flags import add_metrics_port
from .parallelism.auto import dumps
from .parallelism.fabric import WORLD, probe, sample, slowest, time_collective
from .parallelism.topology import topology
from .telemetry.exporter import serve
from .telemetry.metric_names import ALLREDUCE_BUS_BANDWIDTH, BENCHMARK, SIZE_LABEL

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
    output = os.environ.get("OUTPUT_PATH")
    p.add_argument(
        "--output",
        default=f"{output}/netbench.json" if output else None,
        help="where rank 0 writes the whole result as JSON (docs/network.md); default $OUTPUT_PATH/netbench.json",
    )
    add_metrics_port(p)
    p.add_argument(
        "--serve-after-s",
        type=float,
        default=SERVE_AFTER_S,
        help="with --metrics-port: seconds rank 0 keeps serving the results once measured",
    )
    args = p.parse_args(argv)
    if args.min_size > args.max_size:
        error(f"--min-size {args.min_size} exceeds --max-size {args.max_size}")
        return 2
    if args.serve_after_s < 0:
        error(f"--serve-after-s must not be negative, got {args.serve_after_s}")
        return 2
    topo = topology()
    device = topo.device
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=timedelta(seconds=300))
    exporter = serve(args.metrics_port if topo.is_main else None, BENCHMARK)
    try:
        # Inside and across nodes first, at the probe's sizes; then the whole job's sweep.
        report = probe(topo, iters=args.iters, warmup=args.warmup)
        size = args.min_size
        while size <= args.max_size:
            seconds = slowest(time_collective("all_reduce", size, None, device, args.iters, args.warmup), device)
            row = sample(WORLD, "all_reduce", topo.world, size, seconds)
            report.samples.append(row)
            exporter.set(ALLREDUCE_BUS_BANDWIDTH, row.busbw_GBps * 1e9, **{SIZE_LABEL: str(size)})
            if topo.is_main:
                log(
                    json.dumps(
                        {
                            "size_bytes": size,
                            "world_size": topo.world,
                            "backend": report.backend,
                            "time_ms": row.time_ms,
                            "algbw_GBps": row.algbw_GBps,
                            "busbw_GBps": row.busbw_GBps,
                        }
                    )
                )
            size *= 2
        report.export(exporter)
        if topo.is_main and args.output:
            Path(args.output).parent.mkdir(parents=True, exist_ok=True)
            write_atomic(Path(args.output), dumps(report.to_json()))
            log(f"wrote {args.output}")
    finally:
        dist.destroy_process_group()
    try:
        exporter.hold(args.serve_after_s)
    finally:
        exporter.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

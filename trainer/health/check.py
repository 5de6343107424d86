"""The pre-job node check: an all-reduce across this node's GPUs, its bus bandwidth compared with
the pool's baseline, before the training container starts. It runs as an init container of each
pod of a job that sets ``nodeCheck`` (docs/node-health.md):

    python -m trainer.launch --standalone --nproc-per-node=gpu -m trainer.health.check \\
        --baseline-gbps 360 --min-share 0.8

On GPUs it uses NCCL, on CPUs gloo (the tests' path). Every process times all-reduces of
:data:`SIZES` (the slowest process's time counts, as in :mod:`trainer.parallelism.fabric`) and takes the best
bus bandwidth (nccl-tests' definition, ``size/time x 2(n-1)/n``). Below ``baseline x min-share``
it prints one line naming the node and both figures and exits :data:`NODE_BELOW_BASELINE`, which
fails the pod before any training starts; otherwise one line with the figure, and 0.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Sequence

import torch
import torch.distributed as dist

from .. import console
from ..exit_codes import NODE_BELOW_BASELINE
from ..parallelism.fabric import bus_factor, slowest, time_collective
from .signals import NODE_NAME_ENV

SIZES = (1 << 24, 1 << 26)
"""16 MiB and 64 MiB: large enough to measure bandwidth rather than latency, small enough for a
few seconds in all on NVLink."""
ITERS = 5
WARMUP = 2


def best_bus_bandwidth(device: torch.device, sizes: Sequence[int] = SIZES, iters: int = ITERS) -> float:
    """The best all-reduce bus bandwidth across this job's processes, GB/s (10^9 bytes per second)."""
    n = dist.get_world_size()
    best = 0.0
    for size in sizes:
        seconds = slowest(time_collective("all_reduce", size, None, device, iters, WARMUP), device)
        best = max(best, size / seconds / 1e9 * bus_factor("all_reduce", n))
    return best


def verdict(node: str, gpus: int, measured: float, baseline: float, min_share: float) -> tuple[int, str]:
    """The exit status and the one line that says it."""
    floor = baseline * min_share
    figures = f"all-reduce bus bandwidth {measured:.2f} GB/s across {gpus} processes"
    if measured < floor:
        return NODE_BELOW_BASELINE, (
            f"nodecheck: node {node} FAILED: {figures}, below {min_share:.0%} of the pool's baseline "
            f"{baseline:g} GB/s ({floor:.2f} GB/s)"
        )
    return 0, f"nodecheck: node {node} ok: {figures} (baseline {baseline:g} GB/s)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.health.check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-gbps", type=float, required=True, help="the pool's all-reduce bus bandwidth, GB/s")
    parser.add_argument("--min-share", type=float, default=0.8, help="share of the baseline a node must reach")
    args = parser.parse_args(argv)
    if args.baseline_gbps <= 0 or not 0 < args.min_share <= 1:
        parser.error("--baseline-gbps must be above 0 and --min-share in (0, 1]")
    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", device_id=device if cuda else None)
    try:
        node = os.environ.get(NODE_NAME_ENV) or socket.gethostname()
        gpus = dist.get_world_size()
        if gpus < 2:
            if dist.get_rank() == 0:
                console.log(f"nodecheck: node {node}: one process, no all-reduce to measure")
            return 0
        status, line = verdict(node, gpus, best_bus_bandwidth(device), args.baseline_gbps, args.min_share)
        if dist.get_rank() == 0:
            console.line(line, sys.stderr if status else sys.stdout)
        return status
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())

"""A short probe of the job's network: collective bandwidth inside a node and across nodes.

Any run can take it at start (``python -m trainer --fabric-probe``, implied by
``--parallel auto``); the ``netbench`` preset (:mod:`trainer.bench`) takes it too and writes
the whole result to the output volume. Both serve the summary as
``trainer_fabric_bus_bandwidth_bytes_per_second`` (:mod:`trainer.telemetry.metric_names`).

The processes are split twice, as an HSDP job splits them: *intra-node* groups are the
processes of one node (``LOCAL_WORLD_SIZE`` consecutive ranks); *inter-node* groups hold the
processes with the same local rank on every node, so each of their collectives crosses the
network. A scope with groups of one process (one process per node, or one node) has nothing to
measure and is left out. Each group times an all-reduce and an all-gather at each of
:data:`PROBE_SIZES` (81 MiB in all), :data:`PROBE_WARMUP` + :data:`PROBE_ITERS` times: about
1.3 GiB of messages per process over both scopes, a few seconds at 10 GB/s.

Bus bandwidth follows nccl-tests' definitions, so figures compare across group sizes and with
``all_reduce_perf``: all-reduce ``size/time × 2(n−1)/n``, all-gather (``size`` being the
gathered output) ``size/time × (n−1)/n``.

The JSON document (``FORMAT``, version ``VERSION``) is described in ``docs/network.md``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from ..telemetry.exporter import Exporter
from ..telemetry.metric_names import FABRIC_BUS_BANDWIDTH, OP_LABEL, SCOPE_LABEL
from .topology import Topology

FORMAT = "ack-training-platform/fabric-probe"
VERSION = 1
PROBE_SIZES = (1 << 20, 1 << 24, 1 << 26)
"""1 MiB (latency-bound), 16 MiB (a DDP gradient bucket) and 64 MiB (a large FSDP all-gather)."""
PROBE_ITERS = 3
PROBE_WARMUP = 1
INTRA, INTER, WORLD = "intra-node", "inter-node", "world"
OPS = ("all_reduce", "all_gather")


@dataclass(frozen=True)
class Sample:
    """One timed collective.

    Args:
        scope: ``intra-node``, ``inter-node`` or ``world``.
        op: ``all_reduce`` or ``all_gather``.
        group_size: processes in the group.
        size_bytes: the all-reduced tensor, or the all-gather's gathered output.
        time_ms: median over the timed repetitions, slowest group's.
        busbw_GBps: bus bandwidth, 10^9 bytes per second.
    """

    scope: str
    op: str
    group_size: int
    size_bytes: int
    time_ms: float
    algbw_GBps: float
    busbw_GBps: float


@dataclass
class FabricReport:
    """What a probe measured, in the shape of the JSON document.

    Args:
        world_size, local_world_size, nodes: how the job is laid out.
        backend: the process group's backend (``nccl``, ``gloo``).
        device: ``cuda`` or ``cpu``.
        samples: every timed collective.
    """

    world_size: int
    local_world_size: int
    nodes: int
    backend: str
    device: str
    samples: list[Sample] = field(default_factory=list)

    def best(self, scope: str, op: str = "all_reduce") -> float | None:
        """The highest bus bandwidth of ``op`` in ``scope``, GB/s; None when not measured."""
        figures = [s.busbw_GBps for s in self.samples if s.scope == scope and s.op == op]
        return max(figures) if figures else None

    def summary(self) -> dict[str, float | None]:
        return {f"{scope}/{op}": self.best(scope, op) for scope in (INTRA, INTER, WORLD) for op in OPS}

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "world_size": self.world_size,
            "local_world_size": self.local_world_size,
            "nodes": self.nodes,
            "backend": self.backend,
            "device": self.device,
            "summary_busbw_GBps": {key: value for key, value in self.summary().items() if value is not None},
            "samples": [asdict(sample) for sample in self.samples],
        }

    def export(self, exporter: Exporter) -> None:
        """Serve the best bus bandwidth of each scope and collective."""
        for key, value in self.summary().items():
            if value is not None:
                scope, op = key.split("/")
                exporter.set(FABRIC_BUS_BANDWIDTH, value * 1e9, **{SCOPE_LABEL: scope, OP_LABEL: op})


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' ratio of bus to algorithm bandwidth for a group of ``n``."""
    return (2 if op == "all_reduce" else 1) * (n - 1) / n


def time_collective(
    op: str, size: int, group: dist.ProcessGroup | None, device: torch.device, iters: int, warmup: int
) -> float:
    """Median seconds of one ``op`` of ``size`` bytes in ``group`` (None: the whole job).

    Every member of the group must call it with the same arguments.
    """
    n = dist.get_world_size(group)
    if op == "all_reduce":
        tensor = torch.ones(size // 4, dtype=torch.float32, device=device)
        output = None
    else:
        tensor = torch.ones(size // 4 // n, dtype=torch.float32, device=device)
        output = [torch.empty_like(tensor) for _ in range(n)]
    cuda = device.type == "cuda"
    times = []
    for i in range(warmup + iters):
        dist.barrier(group=group)
        if cuda:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        if output is None:
            dist.all_reduce(tensor, group=group)
        else:
            dist.all_gather(output, tensor, group=group)
        if cuda:
            torch.cuda.synchronize(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def sample(scope: str, op: str, n: int, size: int, seconds: float) -> Sample:
    algbw = size / seconds / 1e9
    return Sample(scope, op, n, size, round(seconds * 1e3, 3), round(algbw, 3), round(algbw * bus_factor(op, n), 3))


def slowest(seconds: float, device: torch.device) -> float:
    """The slowest group's time: the figure that bounds a job whose groups run side by side."""
    worst = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    return worst.item()


def scope_groups(world: int, local_world: int) -> dict[str, list[list[int]]]:
    """The ranks of each intra-node and inter-node group; scopes of one-process groups are left out."""
    nodes = world // local_world
    groups = {
        INTRA: [list(range(node * local_world, (node + 1) * local_world)) for node in range(nodes)],
        INTER: [[local + node * local_world for node in range(nodes)] for local in range(local_world)],
    }
    return {scope: ranks for scope, ranks in groups.items() if len(ranks[0]) > 1}


def probe(
    topo: Topology,
    sizes: Sequence[int] = PROBE_SIZES,
    *,
    iters: int = PROBE_ITERS,
    warmup: int = PROBE_WARMUP,
    scopes: Iterable[str] = (INTRA, INTER),
) -> FabricReport:
    """Time all-reduce and all-gather in each of ``scopes``; a collective over the whole job.

    A job whose nodes run different numbers of processes is probed as ``world`` alone.

    Args:
        topo: this process's place in the job.
        sizes: message sizes in bytes.
        iters: timed repetitions per size (the median is kept).
        warmup: untimed repetitions first (connection set-up, allocator).
        scopes: which of ``intra-node``, ``inter-node`` and ``world`` to measure.

    Returns:
        The same report on every rank.
    """
    even = topo.world % topo.local_world == 0
    layout = scope_groups(topo.world, topo.local_world) if even else {}
    report = FabricReport(
        topo.world,
        topo.local_world,
        topo.world // topo.local_world if even else 0,
        dist.get_backend(),
        topo.device.type,
    )
    for scope in scopes:
        if scope == WORLD:
            group, n = None, topo.world
        elif scope in layout:
            # Every rank creates every group, as new_group requires; each then uses its own.
            group, _ = dist.new_subgroups_by_enumeration(layout[scope])
            n = len(layout[scope][0])
        else:
            continue
        for op in OPS:
            for size in sizes:
                seconds = time_collective(op, size, group, topo.device, iters, warmup)
                report.samples.append(sample(scope, op, n, size, slowest(seconds, topo.device)))
    return report

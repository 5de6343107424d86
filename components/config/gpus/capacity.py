"""What one node of a GPU pool can give to pods (the figures of the ECS instance types the
platform knows, :mod:`.types`, which the pool spec reads, or the per-pool figure a stack gives
for any other type), and how a job's pods take it up (:mod:`..fit` applies it to a job)."""

from __future__ import annotations

from dataclasses import dataclass

from ..base import quantity_bytes

GIB = 2**30


@dataclass(frozen=True)
class NodeShare:
    """What one node offers pods, and where that figure comes from.

    Args:
        millicpu: CPU, in thousandths of a core.
        memory: bytes.
        exact: the figure is the node's allocatable amount (``gpuPool.nodeCapacity``) rather
            than the instance's capacity, of which ACK keeps a part for the system.
        source: how the figure was found, for error messages.
    """

    millicpu: int
    memory: int
    exact: bool
    source: str


def millicpu(cpu: str) -> int:
    """Thousandths of a core in a Kubernetes CPU amount (``8``, ``0.5``, ``500m``)."""
    return int(cpu[:-1]) if cpu.endswith("m") else round(float(cpu) * 1000)


def allocatable_share(cpu: str, memory: str) -> NodeShare:
    """A node's allocatable amounts as a stack gives them (``gpuPool.nodeCapacity``)."""
    return NodeShare(millicpu(cpu), quantity_bytes(memory), exact=True, source="gpuPool.nodeCapacity")


def format_cpu(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def format_bytes(size: int) -> str:
    return f"{size // GIB}Gi" if size % GIB == 0 else f"{size // 2**20}Mi"


def capacity_excess(given: NodeShare, instance: NodeShare) -> tuple[str, str] | None:
    """The first of CPU and memory of which a stack's ``gpuPool.nodeCapacity`` (``given``) says
    more than ``instance`` has, as (key under ``nodeCapacity``, message); ``None`` when it fits.
    Jobs checked against such a figure would pass and then wait for a node that never fits them."""
    for key, asked, has, show in (
        ("cpu", given.millicpu, instance.millicpu, format_cpu),
        ("memory", given.memory, instance.memory, format_bytes),
    ):
        if asked > has:
            return key, (
                f"{show(asked)} is more than {instance.source} has ({show(has)} {key}): give a node's Allocatable "
                "(kubectl describe node), which is less"
            )
    return None


def misfit(cpu: str, memory: str, node: NodeShare, pool: str) -> tuple[str, str] | None:
    """The first of a pod's ``cpu`` and ``memory`` that no node of ``pool`` could give it, as
    (job key, message), or ``None`` when the pod fits.

    ACK gives pods a node's Allocatable = Capacity - Reserved - Eviction threshold, with a
    reservation that grows with the node (ACK: "Resource reservation policy"), so a request
    must stay below an instance's capacity; ``gpuPool.nodeCapacity`` is the allocatable
    amount itself, which a request may use up.
    """
    for key, asked, offered, show in (
        ("cpu", millicpu(cpu), node.millicpu, format_cpu),
        ("memory", quantity_bytes(memory), node.memory, format_bytes),
    ):
        if asked <= offered if node.exact else asked < offered:
            continue
        if node.exact:
            return key, (
                f"{key} {show(asked)} per pod does not fit a node of pool {pool!r}, which can allocate "
                f"{show(offered)} to pods ({node.source}): ask for at most that"
            )
        return key, (
            f"{key} {show(asked)} per pod does not fit a node of pool {pool!r}: {node.source} has {show(offered)}, "
            "of which ACK keeps a part for the system, and the autoscaler adds no node for a pod that cannot fit; "
            "ask for less, or give gpuPool.nodeCapacity (a node's Allocatable, kubectl describe node)"
        )
    return None


def shared_misfit(cpu: str, memory: str, pods: int, node: NodeShare, pool: str) -> tuple[str, str] | None:
    """The first of ``cpu`` and ``memory`` that ``pods`` pods of one job, which their GPUs put on
    one node, cannot have there together, as (job key, message); ``None`` when they fit. Pods
    that do not fit together land on more nodes than the job's GPUs say, which the pool's
    ``maxSize`` was checked against."""
    for key, asked, offered, show in (
        ("cpu", millicpu(cpu), node.millicpu, format_cpu),
        ("memory", quantity_bytes(memory), node.memory, format_bytes),
    ):
        together = pods * asked
        if together <= offered if node.exact else together < offered:
            continue
        return key, (
            f"{pods} pods of the job share a node of pool {pool!r} by their GPUs, but together ask for "
            f"{show(together)} {key} and {node.source} {'can allocate' if node.exact else 'has'} {show(offered)}: "
            f"ask for less than {show(offered // pods)} per pod, or give each pod a whole node's GPUs"
        )
    return None


NODE_MARGIN = 0.1
"""The share of an instance's vCPUs and memory (at least one vCPU and 2 GiB) that a default
request leaves for what ACK reserves on the node ("Resource reservation policy": Allocatable =
Capacity - Reserved - Eviction threshold, with Capacity already below the instance's nominal
memory: its example node of 4 vCPUs shows 7925980Ki Capacity and 5824732Ki Allocatable). The
platform's own margin, not ACK's table, and known to be short for small nodes; a stack that
gives ``gpuPool.nodeCapacity`` is used to the last byte."""


def pod_share(node: NodeShare, pods: int) -> tuple[str, str]:
    """The CPU and memory each of ``pods`` pods that share a node may ask for: all that ``node``
    can allocate when it is the measured Allocatable, else its capacity less :data:`NODE_MARGIN`,
    split evenly and rounded down (whole cores and GiB where that leaves something)."""
    cpu, memory = node.millicpu, node.memory
    if not node.exact:
        cpu -= max(round(cpu * NODE_MARGIN), 1000)
        memory -= max(int(memory * NODE_MARGIN), 2 * GIB)
    cpu, memory = cpu // pods, memory // pods
    cpu = cpu // 1000 * 1000 if cpu >= 1000 else cpu
    memory = memory // GIB * GIB if memory >= GIB else memory // 2**20 * 2**20
    return format_cpu(cpu), format_bytes(memory)

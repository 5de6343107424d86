"""What one node of a GPU pool can give to pods (from the ECS instance types the platform
knows, :mod:`.gpu_types`, or the per-pool figure a stack gives for any other type), and how a
job's pods take it up: GPUs and ``/dev/shm`` per pod, pods per node, nodes per job."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .base import DEFAULT_CPU_SHM_GIB, DEFAULT_SHM_PER_GPU_GIB, quantity_bytes
from .gpu_types import GPU_INSTANCE_TYPES

if TYPE_CHECKING:  # jobs.py (through teams.py) and pools.py import this module
    from .pools import GpuPoolSpec
    from .training_job import TrainingJobSpec

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


def smallest_node(instance_types: list[str]) -> NodeShare:
    """The capacity every one of ``instance_types``, all in :data:`GPU_INSTANCE_TYPES`, has at
    least: a pool may start any of them."""
    types = [GPU_INSTANCE_TYPES[name] for name in instance_types]
    return NodeShare(
        millicpu=min(t.vcpus for t in types) * 1000,
        memory=min(t.memory_gib for t in types) * GIB,
        exact=False,
        source=instance_types[0] if len(instance_types) == 1 else f"the smallest of {', '.join(instance_types)}",
    )


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


def job_shm_size(job: TrainingJobSpec, gpus: int) -> str:
    """``/dev/shm`` size: as configured, else sized for the data loader workers per GPU but
    at most half the pod's memory, which it counts against."""
    if job.shm_size is not None:
        return job.shm_size
    size = min(
        (DEFAULT_SHM_PER_GPU_GIB * gpus if gpus else DEFAULT_CPU_SHM_GIB) * 2**30, quantity_bytes(job.memory) // 2
    )
    return f"{size // 2**30}Gi" if size % 2**30 == 0 else f"{size // 2**20}Mi"


def job_gpus(job: TrainingJobSpec, pool_gpus: int) -> int:
    """GPUs per pod of ``job``: its own setting, else the whole node of a pool with ``pool_gpus``."""
    return job.gpus_per_node if job.gpus_per_node is not None else pool_gpus


def pods_per_node(job: TrainingJobSpec, gpus: int, gpus_per_node: int) -> int:
    """Pods of ``job`` that share a node: as many as its GPUs fit, up to the job's own pods."""
    return min(max(gpus_per_node // gpus, 1), job.max_pods)


def nodes_needed(job: TrainingJobSpec, gpus: int, gpus_per_node: int) -> int:
    """GPU nodes ``job``'s pods need at most (:func:`pods_per_node` to a node)."""
    return -(-job.max_pods // pods_per_node(job, gpus, gpus_per_node))


def pool_problem(job: TrainingJobSpec, pool: GpuPoolSpec) -> tuple[str, str] | None:
    """The first way ``job`` could never run on ``pool``, as (the job's key, message);
    ``None`` when it fits. The stack file's jobs and the TrainingJob component share it."""
    gpus = job_gpus(job, pool.gpus_per_node)
    if not gpus:
        return None
    if job.framework == "pytorch" and job.launcher == "python" and gpus > 1:
        # One PyTorch process drives one GPU; the others would sit idle.
        return "gpusPerNode", (
            f"{gpus} GPUs per pod, and launcher python starts one process, which drives one of them: use launcher "
            "torchrun, or gpusPerNode: 1"
        )
    if gpus > pool.gpus_per_node:
        return (
            "gpus_per_node",
            f"{gpus} GPUs per pod do not fit on a {pool.gpus_per_node}-GPU node of pool {pool.name!r}",
        )
    sharing = pods_per_node(job, gpus, pool.gpus_per_node)
    problem = misfit(job.cpu, job.memory, pool.node_share, pool.name) or (
        shared_misfit(job.cpu, job.memory, sharing, pool.node_share, pool.name) if sharing > 1 else None
    )
    if problem is not None:
        return problem
    needed = nodes_needed(job, gpus, pool.gpus_per_node)
    if needed > pool.max_size:
        return "nodes", (
            f"the job's {job.max_pods} pods need {needed} GPU nodes but gpuPool.maxSize is {pool.max_size}: "
            "raise maxSize or run fewer nodes"
        )
    if job.gpus_per_node is None and job.procs_per_node not in (None, gpus):
        return "procsPerNode", (
            f"procsPerNode ({job.procs_per_node}) must equal the job's {gpus} GPUs per pod: one process drives one GPU"
        )
    if job.gpus_per_node is None and (mesh := job.trainer.mesh_problem(gpus, job.pod_counts)) is not None:
        return f"trainer.{mesh[0]}", mesh[1]
    return None


def quota_problem(job: TrainingJobSpec, gpus: int, quota: Mapping[str, str | int], owner: str) -> str | None:
    """Why ``job``, with ``gpus`` per pod, could never start within ``quota`` (``gpus``,
    ``cpu``, ``memory``; each optional) with all its pods at once; ``None`` when it can.
    ``owner`` names the quota for the message, e.g. ``training.gpuQuota``."""
    pods = job.min_pods
    needs = (
        ("gpus", "GPUs", gpus * pods, int, str),
        ("cpu", "cpu", _cores(job.cpu) * pods, _cores, lambda v: f"{v:g}"),
        ("memory", "memory", quantity_bytes(job.memory) * pods, quantity_bytes, lambda v: f"{v / 2**30:g}Gi"),
    )
    for resource, label, needed, parse, shown in needs:
        if resource in quota and needed > parse(quota[resource]):
            return (
                f"the job needs {shown(needed)} {label} at once but {owner.format(resource=resource)} is "
                f"{shown(parse(quota[resource]))}: it could never start; raise the quota or shrink the job"
            )
    return None


def _cores(cpu: str | int) -> float:
    cpu = str(cpu)
    return int(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)

"""Whether a job fits: its GPUs, shared memory and nodes on a pool, and its pods within a quota.
The stack file's jobs, the TrainingJob component and ``ack-jobs submit`` share these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .base import DEFAULT_CPU_SHM_GIB, DEFAULT_SHM_PER_GPU_GIB, quantity_bytes
from .gpus.capacity import misfit, shared_misfit

if TYPE_CHECKING:
    from .pools import GpuPoolSpec
    from .training_job import TrainingJobSpec


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
    node = pool.node_share
    if node is None:
        problem = unsized_problem(job, pool.name)
    else:
        problem = misfit(job.cpu, job.memory, node, pool.name) or (
            shared_misfit(job.cpu, job.memory, sharing, node, pool.name) if sharing > 1 else None
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


def unset_sizes(job: TrainingJobSpec) -> list[str]:
    """Which of ``cpu`` and ``memory`` ``job`` leaves to the spec's defaults."""
    return [key for key in ("cpu", "memory") if key not in job.model_fields_set]


def unsized_problem(job: TrainingJobSpec, pool: str) -> tuple[str, str] | None:
    """On a pool whose nodes the platform cannot size (an instance type outside its table, no
    ``gpuPool.nodeCapacity``), the first of ``cpu`` and ``memory`` that ``job`` leaves to a default,
    which no figure of the node backs, as (job key, message); ``None`` when it gives both, which
    the platform stack's ``pulumi preview`` checks against what ECS lists for the types
    (components/preflight/; the pool of a TrainingJob or TeamTraining component has no such check)."""
    unset = unset_sizes(job)
    if not unset:
        return None
    return unset[0], (
        f"the GPU job leaves {' and '.join(unset)} to the default, and no default can follow a node of pool "
        f"{pool!r}, whose instance types the platform's table does not list: give the job's cpu and memory per "
        "pod (checked against what ECS lists for the types only by the platform stack's pulumi preview, not for "
        "a TrainingJob or TeamTraining given a pool), or give gpuPool.nodeCapacity (a node's Allocatable, kubectl "
        "describe node)"
    )


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

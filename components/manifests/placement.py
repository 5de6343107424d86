"""Where a job's pods may run and how they reach each other: node pools and their fabric (:mod:`.fabrics`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import GpuPoolSpec
from ..config.gpus.capacity import NodeShare
from .base import POOL_LABEL
from .fabrics import FABRICS, FabricProfile

DRIVER_LABEL = "ack.aliyun.com/nvidia-driver-version"
GPU_RESOURCE = "nvidia.com/gpu"
AUTOSCALER_RESOURCE_TAG = "k8s.io/cluster-autoscaler/node-template/resource/"
"""ACK's autoscaler simulates only CPU, memory, ENIs, ephemeral storage and GPUs; a pool
scaling from zero for pods that request another extended resource must declare it with
an ECS tag ``<prefix><resource>: <count>`` (ACK: FAQ about node auto scaling)."""


@dataclass(frozen=True)
class Placement:
    """Where a job's pods may run, as the GPU node pool exposes it.

    Args:
        node_selector: labels the pods must match.
        tolerations: tolerations for the pool's taints.
        gpus_per_node: GPUs on each node (0: CPU nodes).
        fabric: the pool's RDMA-class network, or ``None`` for TCP only.
        max_nodes: most nodes the pool can have (``None``: not known).
        node: what one node offers pods' CPU and memory (``None``: not known).
    """

    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, str], ...] = ()
    gpus_per_node: int = 0
    fabric: FabricProfile | None = None
    max_nodes: int | None = None
    node: NodeShare | None = None


CPU_PLACEMENT = Placement()


def pool_node_labels(pool: GpuPoolSpec) -> dict[str, str]:
    """Labels set on every node of ``pool``."""
    labels = {POOL_LABEL: pool.name, **pool.labels}
    if pool.driver_version:
        labels[DRIVER_LABEL] = pool.driver_version
    return labels


def pool_tags(pool: GpuPoolSpec) -> dict[str, str]:
    """ECS tags the autoscaler needs to start a node of ``pool`` for a pending pod."""
    fabric = FABRICS.get(pool.fabric)
    return {AUTOSCALER_RESOURCE_TAG + fabric.resource: "1"} if fabric is not None else {}


def pool_placement(pool: GpuPoolSpec) -> Placement:
    """The placement jobs derive from ``pool``: its label selector and taint toleration."""
    taint = pool.taint
    return Placement(
        node_selector={POOL_LABEL: pool.name},
        tolerations=({"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect},),
        gpus_per_node=pool.gpus_per_node,
        fabric=FABRICS.get(pool.fabric),
        max_nodes=pool.max_size,
        node=pool.node_share,
    )

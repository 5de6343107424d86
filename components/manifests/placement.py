"""Where a job's pods may run and how they reach each other: node pools and fabrics."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..config import GpuPoolSpec
from ..config.capacity import NodeShare
from .base import POOL_LABEL

DRIVER_LABEL = "ack.aliyun.com/nvidia-driver-version"
GPU_RESOURCE = "nvidia.com/gpu"
AUTOSCALER_RESOURCE_TAG = "k8s.io/cluster-autoscaler/node-template/resource/"
"""ACK's autoscaler simulates only CPU, memory, ENIs, ephemeral storage and GPUs; a pool
scaling from zero for pods that request another extended resource must declare it with
an ECS tag ``<prefix><resource>: <count>`` (ACK: FAQ about node auto scaling)."""


@dataclass(frozen=True)
class FabricProfile:
    """What a GPU-to-GPU network needs from the cluster and from the pods that use it.

    Args:
        name: the pool's ``fabric`` value.
        addon: the ACK add-on that exposes the devices.
        addon_config: that add-on's configuration, as JSON.
        resource: the extended resource a pod requests to get the devices.
        nccl_env: environment NCCL needs to use them.
    """

    name: str
    addon: str
    addon_config: str
    resource: str
    nccl_env: dict[str, str]


ERDMA = FabricProfile(
    name="erdma",
    addon="ack-erdma-controller",
    # The OFED driver is the one ACK names for GPU instances and NCCL; a training pod takes
    # its whole node, so it gets every eRDMA device rather than one per NUMA node
    # (alibabacloud-erdma-controller chart values: agent.preferDriver, agent.allocateAllDevices).
    addon_config=json.dumps({"agent": {"preferDriver": "ofed", "allocateAllDevices": True}}, sort_keys=True),
    resource="aliyun/erdma",
    # The pods stay on the pod network, unprivileged: the controller's device plugin hands a pod
    # the devices' /dev/infiniband/uverbs* and rdma_cm and nothing else, and its own NCCL benchmark
    # runs two such pods over their pod addresses with NCCL's sockets on eth0 ("pod overlay")
    # (alibabacloud-erdma-controller v0.2.11 internal/deviceplugin/deviceplugin.go Allocate,
    # docs/erdma-benchmark/README.md). A pod gets every device, whose RoCEv2 IPv4 GIDs sit at
    # different indexes, so NCCL picks each one's (GID index -1) rather than a fixed index (same
    # README). NCCL_IB_HCA is left unset: a filter such as "mlx5" would exclude the erdma devices.
    nccl_env={
        "NCCL_IB_DISABLE": "0",
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_IB_GID_INDEX": "-1",
        "NCCL_IB_ADDR_FAMILY": "AF_INET",
        "NCCL_IB_ROCE_VERSION_NUM": "2",
    },
)
FABRICS = {"erdma": ERDMA}


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

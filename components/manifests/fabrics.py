"""The GPU-to-GPU networks a pool can have, and what each needs from the cluster and the pods."""

from __future__ import annotations

import json
from dataclasses import dataclass


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

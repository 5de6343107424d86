"""The GPU node pool and the placement jobs derive from it."""

from __future__ import annotations

import pulumi
import pulumi_alicloud as alicloud

from ._k8s import TOKEN
from .config import GpuPoolSpec
from .manifests import Placement, pool_node_labels, pool_placement

RDMA_ADDON = "ack-rdma-device-plugin"


class GpuNodePool(pulumi.ComponentResource):
    """An autoscaling, tainted ACK node pool of GPU instances.

    Attributes:
        spec: the pool's spec.
        placement: node selector, tolerations, GPUs per node and RDMA availability for
            jobs; nobody retypes a taint.
        node_pool_id: the ACK node pool id.
    """

    def __init__(
        self,
        name: str,
        spec: GpuPoolSpec,
        *,
        cluster_id: pulumi.Input[str],
        vswitch_ids: pulumi.Input[list[str]],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:GpuNodePool", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.spec = spec
        self.placement: Placement = pool_placement(spec)
        spot = spec.spot_strategy != "NoSpot"
        pool = alicloud.cs.NodePool(
            name,
            cluster_id=cluster_id,
            node_pool_name=spec.name,
            vswitch_ids=vswitch_ids,
            instance_types=list(spec.instance_types),
            # Spot capacity runs out zone by zone: try every vSwitch, cheapest first.
            multi_az_policy="COST_OPTIMIZED" if spot else "PRIORITY",
            spot_strategy=spec.spot_strategy,
            spot_price_limits=[
                alicloud.cs.NodePoolSpotPriceLimitArgs(instance_type=t, price_limit=str(spec.spot_price_limit))
                for t in spec.instance_types
            ]
            if spec.spot_price_limit
            else None,
            compensate_with_on_demand=spec.compensate_with_on_demand if spot else None,
            scaling_config=alicloud.cs.NodePoolScalingConfigArgs(
                enable=True, min_size=spec.min_size, max_size=spec.max_size, type="gpu"
            )
            if spec.autoscaling
            else None,
            desired_size=None if spec.autoscaling else str(spec.min_size),
            labels=[alicloud.cs.NodePoolLabelArgs(key=k, value=v) for k, v in pool_node_labels(spec).items()],
            taints=[
                alicloud.cs.NodePoolTaintArgs(key=spec.taint.key, value=spec.taint.value, effect=spec.taint.effect)
            ],
            management=alicloud.cs.NodePoolManagementArgs(enable=True, auto_repair=spec.auto_repair),
            system_disk_category=spec.disk_category,
            system_disk_size=spec.system_disk_gib,
            data_disks=[alicloud.cs.NodePoolDataDiskArgs(category=spec.disk_category, size=spec.data_disk_gib)]
            if spec.data_disk_gib
            else None,
            install_cloud_monitor=True,
            opts=child,
        )
        self.node_pool_id = pool.node_pool_id
        if spec.rdma:
            alicloud.cs.KubernetesAddon(
                f"{name}-rdma",
                cluster_id=cluster_id,
                name=RDMA_ADDON,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[pool]),
            )
        self.register_outputs({"nodePoolId": self.node_pool_id})

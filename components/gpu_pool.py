"""The GPU node pool, its fabric add-on, and the placement jobs derive from it."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_alicloud as alicloud

from ._k8s import TOKEN
from .config import GpuPoolSpec
from .identity import METADATA_TOKENS_REQUIRED, node_role
from .manifests import Placement, pool_node_labels, pool_placement, pool_tags

# What the provider reads back into a node pool's state that the program does not own
# (terraform-provider-alicloud v1.289.0 resource_alicloud_cs_kubernetes_node_pool.go,
# resourceAliCloudAckNodepoolRead; each field Optional and not Computed in its schema, so a
# value the cloud fills shows as a change on every preview and an update would send it away).
# The disk fields are how ECS created and formatted each data disk (scaling_group.data_disks).
# ``[*]`` matches every element (pulumi/pulumi sdk/go/common/resource/properties_path.go).
POOL_DISK_FILLED = ("performanceLevel", "encrypted", "autoFormat", "fileSystem", "mountTarget", "device")
# auto_scaling.eip_internet_charge_type: ACK keeps one for every autoscaled pool, EIP or not.
POOL_SCALING_FILLED = ("eipInternetChargeType",)


def pool_read_back_ignored(*, autoscaling: bool, data_disks: bool) -> list[str]:
    """The node pool paths to leave to the cloud: the data disks' filled fields, and for an
    autoscaled pool its EIP charge type and ``desiredSize`` (scaling_group.desired_size, the
    size the autoscaler last chose: reverting it would undo the autoscaler's work).

    The disk paths only while the pool has its disk: the engine refuses an ignored ``[*]``
    path when the list's length changed ("cannot ignore changes ... one or more elements of
    the path are missing", pulumi/pulumi pkg/resource/deploy/step_generator.go
    processIgnoreChanges), which adding or dropping the disk does.
    """
    ignored = [f"dataDisks[*].{name}" for name in POOL_DISK_FILLED] if data_disks else []
    if autoscaling:
        ignored += ["desiredSize", *(f"scalingConfig.{name}" for name in POOL_SCALING_FILLED)]
    return ignored


class GpuNodePool(pulumi.ComponentResource):
    """An autoscaling, tainted ACK node pool of GPU instances, with the add-on that exposes
    its RDMA-class fabric to pods.

    Args:
        name: Pulumi resource name.
        spec: the pool's spec.
        cluster_id: the ACK cluster.
        vswitch_ids: vSwitches to start nodes in, in order of preference.
        depends_on: what the node pool waits for: the cluster's autoscaler configuration
            (an autoscaling pool grows only once it exists) and its add-ons (auto-repair
            needs node-lifecycle-controller and ack-node-problem-detector installed first).
        keep_addons: leave the fabric add-on installed when the pool goes (an adopted cluster).
        worker_role: name of the pool's own worker RAM role, created here with only what
            nodes need (unique in the account).

    Attributes:
        spec: the pool's spec.
        placement: node selector, tolerations, GPUs per node and fabric for jobs; nobody
            retypes a taint.
        node_pool_id: the ACK node pool id.
        ready: what a job on this pool waits for (the pool and its fabric add-on).
    """

    def __init__(
        self,
        name: str,
        spec: GpuPoolSpec,
        *,
        cluster_id: pulumi.Input[str],
        vswitch_ids: pulumi.Input[list[str]],
        depends_on: Sequence[pulumi.Resource] = (),
        keep_addons: bool = False,
        worker_role: str,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:GpuNodePool", name, None, opts)
        self.spec = spec
        self.placement: Placement = pool_placement(spec)
        spot = spec.spot_strategy != "NoSpot"
        role, policy = node_role(name, role_name=worker_role, parent=self)
        deployment_set = (
            # ECS packs a LowLatency set's instances into one network topology range of one zone
            # (ECS: "Deployment sets", https://www.alibabacloud.com/help/zh/doc-detail/91258.htm);
            # the node pool takes it as deployment_set_id (pulumi_alicloud 4.0.0 cs/node_pool.py).
            alicloud.ecs.EcsDeploymentSet(
                f"{name}-low-latency",
                strategy="LowLatency",
                deployment_set_name=f"{spec.name}-low-latency",
                description=f"Nodes of the {spec.name} GPU pool, close together in the network",
                opts=pulumi.ResourceOptions(parent=self),
            )
            if spec.low_latency
            else None
        )
        pool = alicloud.cs.NodePool(
            name,
            cluster_id=cluster_id,
            node_pool_name=spec.name,
            # A LowLatency set's instances must share one zone: the first vSwitch's.
            vswitch_ids=pulumi.Output.from_input(vswitch_ids).apply(lambda ids: ids[:1])
            if spec.low_latency
            else vswitch_ids,
            deployment_set_id=deployment_set.id if deployment_set is not None else None,
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
            desired_size=None
            if spec.autoscaling
            else str(spec.min_size if spec.desired_size is None else spec.desired_size),
            labels=[alicloud.cs.NodePoolLabelArgs(key=k, value=v) for k, v in pool_node_labels(spec).items()],
            taints=[
                alicloud.cs.NodePoolTaintArgs(key=spec.taint.key, value=spec.taint.value, effect=spec.taint.effect)
            ],
            tags=pool_tags(spec) or None,
            management=alicloud.cs.NodePoolManagementArgs(enable=True, auto_repair=spec.auto_repair),
            system_disk_category=spec.disk_category,
            system_disk_size=spec.system_disk_gib,
            data_disks=[alicloud.cs.NodePoolDataDiskArgs(category=spec.disk_category, size=spec.data_disk_gib)]
            if spec.data_disk_gib
            else None,
            install_cloud_monitor=True,
            # Its own role, and instance metadata only with a session token: both are set
            # when the pool is created (create-only in the provider).
            ram_role_name=role.role_name,
            instance_metadata_options=alicloud.cs.NodePoolInstanceMetadataOptionsArgs(
                http_tokens=METADATA_TOKENS_REQUIRED
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[policy, *depends_on],
                ignore_changes=pool_read_back_ignored(
                    autoscaling=spec.autoscaling, data_disks=bool(spec.data_disk_gib)
                ),
            ),
        )
        self.node_pool_id = pool.node_pool_id
        self.ready: list[pulumi.Resource] = [pool]
        fabric = self.placement.fabric
        if fabric is not None:
            self.ready.append(
                alicloud.cs.KubernetesAddon(
                    f"{name}-{fabric.addon}",
                    cluster_id=cluster_id,
                    name=fabric.addon,
                    config=fabric.addon_config,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[pool], retain_on_delete=keep_addons),
                )
            )
        self.register_outputs({"nodePoolId": self.node_pool_id})

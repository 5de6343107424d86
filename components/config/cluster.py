"""Where the platform runs: the VPC, the ACK cluster and its GPU node pool."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import (
    DEFAULT_GPU_TAINT_KEY,
    DEFAULT_POD_CIDR,
    DEFAULT_SERVICE_CIDR,
    DEFAULT_VPC_CIDR,
    Cidr,
    DnsLabel,
    Spec,
    field_error,
)

# --- network -------------------------------------------------------------------------


class VSwitchSpec(Spec):
    zone_id: str = Field(min_length=1)
    """Zone the vSwitch lives in, e.g. ``cn-hangzhou-k``; pick zones that sell your GPU types."""
    cidr: Cidr
    """IPv4 block of the vSwitch; must lie inside ``network.vpcCidr``."""


class NetworkSpec(Spec):
    """The VPC that the cluster, its nodes and the NAS mount target live in."""

    vpc_id: str | None = Field(default=None)
    """Adopt this existing VPC instead of creating one (needs ``vswitchIds``)."""
    vswitch_ids: list[str] = Field(default_factory=list)
    """Existing vSwitch ids to place nodes in (adopt mode only)."""
    vpc_cidr: Cidr = Field(default=Cidr(DEFAULT_VPC_CIDR))
    """IPv4 block of the VPC. In adopt mode give the real one: the NAS access rule is limited to it."""
    vswitches: list[VSwitchSpec] = Field(default_factory=list)
    """vSwitches to create, one per zone (create mode only; at least one)."""
    pod_cidr: Cidr = Field(default=Cidr(DEFAULT_POD_CIDR))
    """Pod IP range (Flannel); must overlap neither the VPC nor ``serviceCidr``."""
    service_cidr: Cidr = Field(default=Cidr(DEFAULT_SERVICE_CIDR))
    """Service IP range; must overlap neither the VPC nor ``podCidr``."""

    @model_validator(mode="after")
    def _check(self) -> NetworkSpec:
        if self.vpc_id is not None:
            if not self.vswitch_ids:
                raise field_error("vswitchIds", "an adopted VPC (vpcId) needs the vSwitch ids to use, e.g. ['vsw-...']")
            if self.vswitches:
                raise field_error(
                    "vswitches",
                    "vswitches are created only for a new VPC: with vpcId, list existing ones in vswitchIds",
                )
        else:
            if self.vswitch_ids:
                raise field_error("vswitchIds", "vswitchIds adopts existing vSwitches and needs vpcId as well")
            if not self.vswitches:
                raise field_error(
                    "vswitches",
                    "list at least one vSwitch ({zoneId, cidr}) in a zone that sells your GPU instance types",
                )
        for i, vsw in enumerate(self.vswitches):
            if not vsw.cidr.subnet_of(self.vpc_cidr):
                raise field_error(f"vswitches[{i}].cidr", f"{vsw.cidr} is not inside vpcCidr {self.vpc_cidr}")
            for j, other in enumerate(self.vswitches[:i]):
                if vsw.cidr.overlaps(other.cidr):
                    raise field_error(f"vswitches[{i}].cidr", f"{vsw.cidr} overlaps vswitches[{j}].cidr {other.cidr}")
        for key, block in (("podCidr", self.pod_cidr), ("serviceCidr", self.service_cidr)):
            if block.overlaps(self.vpc_cidr):
                raise field_error(
                    key,
                    f"{block} overlaps vpcCidr {self.vpc_cidr}; pick a range outside the VPC, e.g. {DEFAULT_POD_CIDR}",
                )
        if self.pod_cidr.overlaps(self.service_cidr):
            raise field_error("serviceCidr", f"{self.service_cidr} overlaps podCidr {self.pod_cidr}")
        return self


# --- cluster -------------------------------------------------------------------------

DEFAULT_ADDONS = (
    "csi-plugin",
    "csi-provisioner",
    "storage-operator",
    "ack-node-problem-detector",
    "managed-aliyun-acr-credential-helper",
)
"""Add-ons every training cluster gets: NAS/OSS volumes need the CSI pair and the storage
operator; the problem detector lets auto-repair replace nodes with failing GPUs; the ACR
credential helper lets nodes pull private ACR images with no password stored anywhere."""


class LocalClusterSpec(Spec):
    """A cluster that is not on Alibaba Cloud: kind, minikube, or no cluster at all."""

    context: str | None = None
    """kubeconfig context to deploy to (e.g. ``kind-training``); the current context when unset."""
    render_yaml_to_directory: str | None = Field(default=None)
    """Write the manifests to this directory instead of applying them (no cluster needed)."""


class ClusterSpec(Spec):
    """The Kubernetes cluster the platform runs in."""

    name: DnsLabel = "training"
    """Cluster name (also prefixes the cloud resources' names)."""
    existing_cluster_id: str | None = Field(default=None)
    """Adopt this ACK cluster instead of creating one."""
    local: LocalClusterSpec | None = None
    """Use a non-ACK cluster: no cloud resources are created at all."""
    version: str | None = None
    """Kubernetes version, e.g. ``1.33.1-aliyun.1``; ACK's default when unset."""
    cluster_spec: Literal["ack.pro.small", "ack.pro.medium"] = Field(default="ack.pro.small")
    """ACK Pro edition size."""
    deletion_protection: bool = Field(default=True)
    """Refuse deletion of the cluster through the API until switched off."""
    public_api_endpoint: bool = Field(default=False)
    """Expose the API server on the internet. Off: reach it from inside the VPC (VPN, bastion)."""
    addons: list[str] = Field(default_factory=lambda: list(DEFAULT_ADDONS))
    """ACK add-ons to install besides the Flannel network plugin; the RDMA device plugin comes with an RDMA pool."""

    @model_validator(mode="after")
    def _check(self) -> ClusterSpec:
        if self.local is not None and self.existing_cluster_id is not None:
            raise field_error(
                "existingClusterId",
                "a local cluster cannot also adopt an ACK cluster: drop one of local, existingClusterId",
            )
        return self


# --- GPU node pool -------------------------------------------------------------------

RDMA_INSTANCE_FAMILIES = (
    "ecs.ebmgn7ex.",
    "ecs.ebmgn7e.",
    "ecs.ebmgn8v.",
    "ecs.ebmgn8is.",
    "ecs.gn8is.",
    "ecs.ebmgn8te.",
)
"""Instance families with RDMA or eRDMA NICs; the RDMA device plugin exposes them as ``rdma/hca``."""


class TaintSpec(Spec):
    key: str = DEFAULT_GPU_TAINT_KEY
    value: str = "present"
    effect: Literal["NoSchedule", "NoExecute", "PreferNoSchedule"] = "NoSchedule"


class GpuPoolSpec(Spec):
    """An autoscaling node pool of GPU instances, tainted so only GPU work lands there."""

    name: DnsLabel = "gpu"
    """Node pool name; nodes are labelled ``ack-training-platform/pool=<name>``."""
    instance_types: list[str]
    """ECS instance types in order of preference; later ones are fallbacks when one is sold out."""
    gpus_per_node: int = Field(ge=1, le=16)
    """GPUs in each of the instance types (they must agree)."""
    spot_strategy: Literal["NoSpot", "SpotWithPriceLimit", "SpotAsPriceGo"] = Field(default="NoSpot")
    """``NoSpot`` (on-demand), ``SpotAsPriceGo`` (spot at market price) or ``SpotWithPriceLimit``."""
    spot_price_limit: float | None = Field(default=None, gt=0)
    """Hourly price cap per instance, required with ``SpotWithPriceLimit``."""
    compensate_with_on_demand: bool = Field(default=True)
    """Start on-demand instances when spot capacity is gone."""
    min_size: int = Field(default=0, ge=0)
    """Fewest nodes; 0 lets an idle pool cost nothing."""
    max_size: int = Field(default=1, ge=1, le=1000)
    """Most nodes the autoscaler may start."""
    desired_size: int | None = Field(default=None, ge=0)
    """Fixed size: only when ``minSize == maxSize`` (autoscaling off); must equal them."""
    taint: TaintSpec = Field(default_factory=TaintSpec)
    """Taint on every node; jobs get the matching toleration from the pool."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Extra node labels."""
    system_disk_gib: int = Field(default=120, ge=40, le=2048)
    """System disk size; training images are large."""
    data_disk_gib: int = Field(default=200, ge=0, le=32768)
    """Data disk for container images and local scratch (0: none)."""
    disk_category: Literal["cloud_essd", "cloud_auto", "cloud_efficiency"] = Field(default="cloud_essd")
    auto_repair: bool = Field(default=True)
    """Let ACK replace nodes that fail health checks (e.g. a GPU fell off the bus)."""
    rdma: bool = False
    """Install the RDMA device plugin and expose ``rdma/hca``; needs RDMA-capable instance types."""
    driver_version: str | None = Field(default=None)
    """Pin the NVIDIA driver, e.g. ``550.127.08`` (ACK label ``ack.aliyun.com/nvidia-driver-version``)."""

    @model_validator(mode="after")
    def _check(self) -> GpuPoolSpec:
        if not self.instance_types:
            raise field_error("instanceTypes", "list at least one GPU instance type, e.g. ['ecs.gn7i-c8g1.2xlarge']")
        if self.min_size > self.max_size:
            raise field_error("minSize", f"minSize ({self.min_size}) must not exceed maxSize ({self.max_size})")
        if self.desired_size is not None and not self.min_size <= self.desired_size <= self.max_size:
            raise field_error(
                "desiredSize",
                f"desiredSize ({self.desired_size}) must lie between minSize ({self.min_size}) and maxSize ({self.max_size})",
            )
        if self.desired_size is not None and self.min_size != self.max_size:
            raise field_error(
                "desiredSize",
                "desiredSize fixes the pool size and conflicts with autoscaling: drop it, or set minSize == maxSize",
            )
        if (self.spot_strategy == "SpotWithPriceLimit") != (self.spot_price_limit is not None):
            raise field_error(
                "spotPriceLimit", "spotPriceLimit is required with, and only with, spotStrategy SpotWithPriceLimit"
            )
        if self.rdma:
            plain = [t for t in self.instance_types if not t.startswith(RDMA_INSTANCE_FAMILIES)]
            if plain:
                raise field_error(
                    "rdma",
                    f"instance types {plain} have no RDMA NIC; use families {', '.join(f.rstrip('.') for f in RDMA_INSTANCE_FAMILIES)}",
                )
        return self

    @property
    def autoscaling(self) -> bool:
        return self.min_size != self.max_size

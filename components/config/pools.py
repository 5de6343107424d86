"""The node pools: tainted GPU nodes, their network fabric, and the system nodes."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from .base import (
    DEFAULT_GPU_TAINT_KEY,
    SYSTEM_POOL_NAME,
    Cpu,
    DnsLabel,
    LabelKey,
    Labels,
    LabelValue,
    Quantity,
    Spec,
    field_error,
)
from .gpus.capacity import GIB, NodeShare, allocatable_share, capacity_excess
from .gpus.types import GPU_INSTANCE_TYPES, instance_family, misnamed_type

Fabric = Literal["none", "erdma", "rdma"]

_DRIVER_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
"""NVIDIA driver versions are ``<major>.<minor>[.<patch>]`` (``550.127.08``): a word such as ``latest``
is no version a node label can pin."""

ERDMA_INSTANCE_FAMILIES = ("gn8is", "ebmgn8is", "gn8v", "ebmgn8v")
"""The GPU families ACK lists for eRDMA (ACK: "Submit a PyTorch distributed training job
through Arena and enable eRDMA acceleration"), every size of them (``ecs.gn8is-2x.8xlarge``
too); their NICs reach NCCL through the ``ack-erdma-controller`` add-on as the ``aliyun/erdma``
resource. ECS's family page says more families support elastic RDMA interfaces
(:data:`~.gpus.types.GPU_INSTANCE_TYPES`, ``eri``); ACK's guide does not list those for GPU training."""

LOW_LATENCY_MAX_NODES = 20
"""An ECS deployment set with the LowLatency strategy holds at most 20 instances, all in one zone,
and no spot instances (ECS: "Deployment sets", https://www.alibabacloud.com/help/zh/doc-detail/91258.htm)."""

AUTOSCALER_TAG_LIMIT = 12
"""ACK's autoscaler recognises a pool's labels and taints, which it needs to start a node
for a pending pod, only while its ECS tags, taints and labels number fewer than 12
(ACK: FAQ about node auto scaling)."""


def smallest_node(instance_types: list[str]) -> NodeShare:
    """The capacity every one of ``instance_types``, all in :data:`~.gpus.types.GPU_INSTANCE_TYPES`,
    has at least: a pool may start any of them."""
    types = [GPU_INSTANCE_TYPES[name] for name in instance_types]
    return NodeShare(
        millicpu=min(t.vcpus for t in types) * 1000,
        memory=min(t.memory_gib for t in types) * GIB,
        exact=False,
        source=instance_types[0] if len(instance_types) == 1 else f"the smallest of {', '.join(instance_types)}",
    )


class TaintSpec(Spec):
    key: LabelKey = DEFAULT_GPU_TAINT_KEY
    value: LabelValue = "present"
    effect: Literal["NoSchedule", "NoExecute", "PreferNoSchedule"] = "NoSchedule"


class NodeCapacitySpec(Spec):
    """What one node of the pool can give to pods: the ``Allocatable`` that
    ``kubectl describe node`` shows for it (capacity less what ACK keeps for the system)."""

    cpu: Cpu
    """CPU, e.g. ``186`` or ``15800m``."""
    memory: Quantity
    """Memory, e.g. ``990Gi``."""


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
    """Start on-demand nodes, at on-demand price, whenever spot ones cannot be created (price or stock), scale-outs included (spot pools only)."""
    min_size: int = Field(default=0, ge=0)
    """Fewest nodes; 0 lets an idle pool cost nothing."""
    max_size: int = Field(default=1, ge=1, le=1000)
    """Most nodes the autoscaler may start."""
    desired_size: int | None = Field(default=None, ge=0)
    """Fixed size: only when ``minSize == maxSize`` (autoscaling off); must equal them."""
    taint: TaintSpec = Field(default_factory=TaintSpec)
    """Taint on every node; jobs get the matching toleration from the pool."""
    labels: Labels = Field(default_factory=dict)
    """Extra node labels."""
    system_disk_gib: int = Field(default=120, ge=40, le=2048)
    """System disk size; training images are large."""
    data_disk_gib: int = Field(default=200, ge=0, le=32768)
    """Data disk for container images and local scratch (0: none)."""
    disk_category: Literal["cloud_essd", "cloud_auto", "cloud_efficiency"] = Field(default="cloud_essd")
    auto_repair: bool = Field(default=True)
    """Let ACK replace nodes that fail health checks (e.g. a GPU fell off the bus)."""
    fabric: Fabric = "none"
    """GPU-to-GPU network across nodes: ``none`` (TCP), ``erdma`` (Elastic RDMA on gn8is, ebmgn8is, gn8v, ebmgn8v),
    or ``rdma`` (Lingjun)."""
    driver_version: str | None = Field(default=None)
    """Pin the NVIDIA driver, e.g. ``550.127.08`` (ACK label ``ack.aliyun.com/nvidia-driver-version``)."""
    low_latency: bool = Field(default=False)
    """Start the nodes in an ECS deployment set with the ``LowLatency`` strategy: ECS places them in one network
    topology range of one zone, for the shortest paths between them. Only the first vSwitch is used (one zone);
    at most 20 nodes; on-demand only."""
    node_capacity: NodeCapacitySpec | None = Field(default=None)
    """What one node gives pods, against which jobs are checked and their ``cpu`` and ``memory`` defaults are
    sized; checked against what ECS lists for the type at ``pulumi preview``. The platform knows every type of
    ECS's GPU-accelerated compute-optimized family page, listed in the configuration reference under "GPU
    instance types": without nodeCapacity, a type of a family the page lists that is not one of its sizes is
    refused as misspelt, and a pool of a type of another family has GPU jobs that must give their own ``cpu``
    and ``memory``, which only the platform stack's ``pulumi preview`` checks against ECS's figures for the
    type."""

    @model_validator(mode="after")
    def _check(self) -> GpuPoolSpec:
        if self.name == SYSTEM_POOL_NAME:
            raise field_error("name", f"{SYSTEM_POOL_NAME!r} names the platform's system pool: pick another name")
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
        if self.spot_strategy == "NoSpot" and "compensate_with_on_demand" in self.model_fields_set:
            raise field_error(
                "compensateWithOnDemand",
                "compensateWithOnDemand applies to spot pools only: drop it, or set spotStrategy",
            )
        if self.low_latency and self.max_size > LOW_LATENCY_MAX_NODES:
            raise field_error(
                "maxSize",
                f"a lowLatency pool holds at most {LOW_LATENCY_MAX_NODES} nodes (an ECS LowLatency deployment set's "
                f"limit), not {self.max_size}: lower maxSize or drop lowLatency",
            )
        if self.low_latency and self.spot_strategy != "NoSpot":
            raise field_error(
                "lowLatency",
                "an ECS deployment set takes no spot instances: set spotStrategy NoSpot or drop lowLatency",
            )
        if self.fabric == "erdma":
            other = [t for t in self.instance_types if instance_family(t) not in ERDMA_INSTANCE_FAMILIES]
            if other:
                raise field_error(
                    "fabric",
                    f"instance types {other} are not of the GPU families ACK lists for eRDMA training "
                    f"({', '.join(ERDMA_INSTANCE_FAMILIES)}): pick types of those families, or drop fabric erdma",
                )
        if self.fabric == "rdma":
            raise field_error(
                "fabric",
                "Lingjun RDMA (rdma/hca) needs Lingjun nodes and Terway exclusive-ENI networking, which this platform "
                "does not create; ECS GPU families with RDMA NICs (ebmgn8v, gn8v, ebmgn8is, gn8is) use fabric: erdma",
            )
        if self.driver_version is not None and not _DRIVER_VERSION.match(self.driver_version):
            raise field_error(
                "driverVersion",
                f"{self.driver_version!r} is not an NVIDIA driver version: pin one ACK offers, e.g. '550.127.08', "
                "or drop driverVersion for ACK's default",
            )
        for i, name in enumerate(self.instance_types):
            # nodeCapacity vouches for a size newer than the page; without it, ECS's answer at preview
            # is the only other judge, and the offline plan would take the slip.
            problem = misnamed_type(name) if self.node_capacity is None else None
            if problem is not None:
                raise field_error(
                    f"instanceTypes[{i}]",
                    f"{problem}? If ECS sells it and the page does not list it, give nodeCapacity (a node's "
                    "Allocatable, kubectl describe node)",
                )
        if self.node_capacity is not None and not self.unlisted_types:
            self._check_capacity_within(smallest_node(self.instance_types))
        other_gpus = [
            f"{t} has {GPU_INSTANCE_TYPES[t].gpus}"
            for t in self.instance_types
            if t in GPU_INSTANCE_TYPES and GPU_INSTANCE_TYPES[t].gpus != self.gpus_per_node
        ]
        if other_gpus:
            raise field_error(
                "gpusPerNode",
                f"gpusPerNode is {self.gpus_per_node} but {', '.join(other_gpus)}: every instance type of the "
                "pool must have gpusPerNode GPUs",
            )
        if self.autoscaling and self.autoscaler_tag_count >= AUTOSCALER_TAG_LIMIT:
            raise field_error(
                "labels",
                f"the autoscaler reads a pool's labels and taints only while they and its tags number fewer than "
                f"{AUTOSCALER_TAG_LIMIT}; this pool has {self.autoscaler_tag_count}: drop some labels",
            )
        return self

    def _check_capacity_within(self, instance: NodeShare) -> None:
        problem = capacity_excess(self.node_share, instance)
        if problem is not None:
            raise field_error(f"nodeCapacity.{problem[0]}", problem[1])

    @property
    def unlisted_types(self) -> list[str]:
        """The pool's instance types the platform's table (:data:`~.gpus.types.GPU_INSTANCE_TYPES`) does not list."""
        return [t for t in self.instance_types if t not in GPU_INSTANCE_TYPES]

    @property
    def node_share(self) -> NodeShare | None:
        """What one node offers pods' CPU and memory: ``nodeCapacity`` when given, else what the
        smallest of the instance types has (a pool may start any of them); ``None`` when a type
        is not in the table, whose figures only ECS gives, at ``pulumi preview``. Its GPUs are
        ``gpusPerNode``, which every instance type must have."""
        if self.node_capacity is not None:
            return allocatable_share(self.node_capacity.cpu, self.node_capacity.memory)
        return None if self.unlisted_types else smallest_node(self.instance_types)

    @property
    def autoscaling(self) -> bool:
        return self.min_size != self.max_size

    @property
    def autoscaler_tag_count(self) -> int:
        # The pool label, the driver label, the taint and the eRDMA resource tag come with the pool.
        return 2 + len(self.labels) + (self.driver_version is not None) + (self.fabric == "erdma")

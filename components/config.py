"""The one validated description of a training platform.

A stack file (``stacks/Pulumi.<stack>.yaml``) is turned into a :class:`PlatformSpec`
here, and nowhere else. Every top-level model field is one stack config key under the
``ack-training-platform:`` namespace, spelled in camelCase in the stack file. Loading
either returns a fully validated spec or raises :class:`ConfigError` whose messages
name the stack key path (``ack-training-platform:gpuPool.max_size``), the bad value and
what would be valid.

This module is pure: it imports neither Pulumi nor torch, so the offline plan, the
tests and the README's config reference all read the same models.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

PROJECT = "ack-training-platform"

SECRET_KEYS = ("registryPassword", "ossAccessKeyId", "ossAccessKeySecret")
"""Stack keys that hold credentials. They never enter a spec: components read them as
Pulumi secrets so they stay encrypted end to end (``pulumi config set --secret``)."""

REGION_KEY = "alicloud:region"

DEFAULT_GPU_TAINT_KEY = "nvidia.com/gpu"
DEFAULT_OPERATOR_VERSION = "v1.9.4"
DEFAULT_VOLCANO_VERSION = "1.12.1"
DEFAULT_VPC_CIDR = "192.168.0.0/16"
DEFAULT_POD_CIDR = "172.20.0.0/16"
DEFAULT_SERVICE_CIDR = "172.21.0.0/20"
DEFAULT_SHM_PER_GPU_GIB = 16
DEFAULT_CPU_SHM_GIB = 2
JOB_NAME_MAX = 40
"""Derived names such as ``<job>-worker-15`` and their Services must stay DNS labels
(at most 63 characters); 40 leaves room for every suffix the operator appends."""

_DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUANTITY = re.compile(r"^(?P<num>\d+(\.\d+)?)(?P<unit>Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$")
_UNITS = {
    None: 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
}
_VERSION_TAG = re.compile(r"^v\d+\.\d+\.\d+$")


def _dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_1123_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a valid Kubernetes name: use at most 63 lowercase letters, "
            "digits and '-', starting and ending with a letter or digit"
        )
    return value


def quantity_bytes(value: str) -> int:
    """Bytes in a Kubernetes quantity such as ``500Gi``.

    Raises:
        ValueError: ``value`` is not a plain quantity.
    """
    match = _QUANTITY.match(value)
    if not match:
        raise ValueError(
            f"{value!r} is not a size: write a number with an optional unit "
            "(Ki, Mi, Gi, Ti, Pi, k, M, G, T, P), e.g. '500Gi'"
        )
    return int(float(match["num"]) * _UNITS[match["unit"]])


def _quantity(value: str) -> str:
    quantity_bytes(value)
    return value


def _cpu(value: str) -> str:
    if not re.match(r"^(\d+(\.\d+)?|\d+m)$", value):
        raise ValueError(f"{value!r} is not a CPU amount: write cores ('8', '0.5') or millicores ('500m')")
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
Quantity = Annotated[str, AfterValidator(_quantity)]
Cpu = Annotated[str, AfterValidator(_cpu)]
Cidr = ipaddress.IPv4Network


def field_error(key: str, message: str) -> PydanticCustomError:
    """A cross-field error attributed to ``key``, a (dotted) key below the model raising it."""
    return PydanticCustomError("platform", message, {"key": key})


class Spec(BaseModel):
    """Base of every stack-config model: camelCase keys, no unknown keys, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        use_attribute_docstrings=True,
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


# --- storage -------------------------------------------------------------------------


class VolumeSpec(Spec):
    claim_name: DnsLabel
    """PersistentVolumeClaim name."""
    size: Quantity
    """Requested size, e.g. ``500Gi`` (NAS bills what is used; this is the quota)."""


class NasSpec(Spec):
    """A NAS file system shared by every training pod over NFSv3."""

    existing_file_system_id: str | None = Field(default=None)
    """Adopt this file system (needs ``existingMountTargetDomain``)."""
    existing_mount_target_domain: str | None = Field(default=None)
    """Mount target domain of the adopted file system, e.g. ``xxxx.cn-hangzhou.nas.aliyuncs.com``."""
    file_system_type: Literal["standard", "extreme"] = Field(default="standard")
    """``standard`` (general purpose) or ``extreme`` (low latency, for many small files)."""
    storage_type: Literal["Performance", "Capacity", "Premium", "standard", "advance"] = Field(default="Performance")
    """Performance/Capacity/Premium for standard; standard/advance for extreme."""
    capacity_gib: int | None = Field(default=None, ge=100)
    """Provisioned capacity, required for extreme file systems."""
    zone_id: str | None = Field(default=None)
    """Zone of an extreme file system; the first vSwitch's zone when unset."""
    access_cidr: Cidr | None = Field(default=None)
    """Source range of the NAS access rule; the VPC CIDR when unset. Must lie inside the VPC."""
    base_path: str = Field(default="/training", pattern=r"^/[A-Za-z0-9/_-]*$")
    """Directory on the file system under which volumes are created."""

    @model_validator(mode="after")
    def _check(self) -> NasSpec:
        if (self.existing_file_system_id is None) != (self.existing_mount_target_domain is None):
            raise field_error(
                "existingMountTargetDomain",
                "adopting a file system needs both existingFileSystemId and existingMountTargetDomain",
            )
        if self.file_system_type == "extreme":
            if self.storage_type not in ("standard", "advance"):
                raise field_error(
                    "storageType",
                    f"extreme file systems take storageType 'standard' or 'advance', not {self.storage_type!r}",
                )
            if self.capacity_gib is None and self.existing_file_system_id is None:
                raise field_error("capacityGib", "extreme file systems need capacityGib (at least 100)")
        elif self.storage_type not in ("Performance", "Capacity", "Premium"):
            raise field_error(
                "storageType",
                f"standard file systems take storageType 'Performance', 'Capacity' or 'Premium', not {self.storage_type!r}",
            )
        return self


class OssSpec(Spec):
    """A read-mostly dataset in an OSS bucket, mounted read-only (ossfs) as the data volume
    instead of a NAS claim. Credentials: the secret keys ``ossAccessKeyId`` and
    ``ossAccessKeySecret`` (a RAM user with read access to the bucket)."""

    bucket: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
    """Bucket name."""
    path: str = Field(default="/", pattern=r"^/[A-Za-z0-9/_.-]*$")
    """Directory in the bucket holding the dataset."""
    endpoint: str | None = None
    """OSS endpoint; the region's internal one (``oss-<region>-internal.aliyuncs.com``) when unset."""


class StorageSpec(Spec):
    """Where datasets and checkpoints live: NAS on ACK, the cluster's own storage locally."""

    nas: NasSpec | None = None
    """NAS file system settings (ACK stacks)."""
    storage_class_name: DnsLabel = Field(default="nas-training")
    """StorageClass the shared volumes use; created for NAS, must already exist locally."""
    create_storage_class: bool = Field(default=True)
    """Create the NAS StorageClass (off: it exists already, e.g. on a local cluster)."""
    data: VolumeSpec = Field(default_factory=lambda: VolumeSpec(claimName="training-data", size="500Gi"))
    """Training data volume, mounted read-only in jobs."""
    output: VolumeSpec = Field(default_factory=lambda: VolumeSpec(claimName="training-output", size="1Ti"))
    """Checkpoints and final models."""
    access_mode: Literal["ReadWriteMany", "ReadWriteOnce"] = Field(default="ReadWriteMany")
    """NAS volumes are ``ReadWriteMany``; single-node local clusters may only offer ``ReadWriteOnce``."""
    oss: OssSpec | None = None
    """Serve the data volume from an OSS bucket instead of NAS (large read-mostly datasets)."""

    @model_validator(mode="after")
    def _check(self) -> StorageSpec:
        if self.data.claim_name == self.output.claim_name:
            raise field_error(
                "output.claimName",
                f"data and output volumes need different claim names, both are {self.data.claim_name!r}",
            )
        return self


# --- registry ------------------------------------------------------------------------


class RegistrySpec(Spec):
    """Where the training image lives: Alibaba Cloud Container Registry (ACR)."""

    edition: Literal["personal", "enterprise"] = "personal"
    """ACR personal edition (namespace + repository) or an enterprise instance."""
    namespace: DnsLabel = "ml"
    """ACR namespace."""
    repository: DnsLabel = "trainer"
    """Image repository in the namespace."""
    enterprise_instance_id: str | None = Field(default=None)
    """Use this existing enterprise instance (edition enterprise) instead of buying one."""
    enterprise_instance_name: DnsLabel | None = Field(default=None)
    """Name of the enterprise instance (its registry host is ``<name>-registry-vpc.<region>.cr.aliyuncs.com``)."""
    existing_repository_url: str | None = Field(default=None)
    """Adopt any registry: create nothing and pull from this repository URL."""
    username: str | None = None
    """Login for an image pull secret, for registries the ACR credential helper does not cover;
    its password is the secret key ``registryPassword``."""

    @model_validator(mode="after")
    def _check(self) -> RegistrySpec:
        if (
            self.edition == "enterprise"
            and self.existing_repository_url is None
            and self.enterprise_instance_name is None
        ):
            raise field_error(
                "enterpriseInstanceName", "the enterprise edition needs enterpriseInstanceName (its registry host name)"
            )
        if self.existing_repository_url is not None and (
            "://" in self.existing_repository_url or ":" in self.existing_repository_url.split("/")[-1]
        ):
            raise field_error(
                "existingRepositoryUrl",
                f"{self.existing_repository_url!r} must be a repository without scheme or tag, e.g. 'registry-vpc.cn-hangzhou.aliyuncs.com/ml/trainer'",
            )
        return self


# --- operator and namespace ----------------------------------------------------------


class VolcanoSpec(Spec):
    enabled: bool = False
    """Install Volcano and start the operator with ``--gang-scheduler-name=volcano``."""
    version: str = Field(default=DEFAULT_VOLCANO_VERSION, pattern=r"^\d+\.\d+\.\d+$")
    """Volcano Helm chart version (pinned)."""


class OperatorSpec(Spec):
    """The Kubeflow Training Operator (v1) that runs PyTorchJobs."""

    install: bool = True
    """Install it (off: the cluster has one already)."""
    version: str = DEFAULT_OPERATOR_VERSION
    """Release tag of kubeflow/training-operator, pinned."""
    volcano: VolcanoSpec = Field(default_factory=VolcanoSpec)

    @model_validator(mode="after")
    def _check(self) -> OperatorSpec:
        if not _VERSION_TAG.match(self.version):
            raise field_error(
                "version", f"{self.version!r} is not a release tag: pin one such as {DEFAULT_OPERATOR_VERSION!r}"
            )
        if not self.version.startswith("v1."):
            raise field_error(
                "version", f"{self.version!r} is not a v1 release; this platform emits kubeflow.org/v1 PyTorchJobs"
            )
        return self


class TrainingNamespaceSpec(Spec):
    """The namespace jobs run in."""

    namespace: DnsLabel = "training"
    service_account: DnsLabel = Field(default="trainer")
    gpu_quota: int | None = Field(default=None, ge=0)
    """Most GPUs all jobs in the namespace may request together (no quota when unset)."""


# --- jobs ----------------------------------------------------------------------------


def _job_name(value: str) -> str:
    if len(value) > JOB_NAME_MAX or not _DNS_1035_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a valid job name: use at most {JOB_NAME_MAX} lowercase letters, digits "
            "and '-', starting with a letter and ending with a letter or digit"
        )
    return value


class ElasticSpec(Spec):
    min_nodes: int = Field(ge=1)
    max_nodes: int = Field(ge=1)
    max_restarts: int = Field(default=3, ge=0)
    """Restarts of the whole worker group torchrun allows after a failure or membership change."""

    @model_validator(mode="after")
    def _check(self) -> ElasticSpec:
        if self.min_nodes > self.max_nodes:
            raise field_error("minNodes", f"minNodes ({self.min_nodes}) must not exceed maxNodes ({self.max_nodes})")
        return self


class TrainerArgs(Spec):
    """Flags for the bundled trainer (``python -m trainer``)."""

    model: Literal["cnn", "gpt"] = "cnn"
    max_steps: int | None = Field(default=None, ge=1)
    epochs: int = Field(default=1, ge=1)
    batch_size: int = Field(default=64, ge=1)
    """Per process."""
    lr: float | None = Field(default=None, gt=0)
    checkpoint_every: int = Field(default=200, ge=1)
    """Steps between checkpoints; the most work a preemption can lose."""
    synthetic_data: bool = Field(default=False)
    """Train on generated data instead of the data volume (smoke tests)."""

    def to_flags(self) -> list[str]:
        flags = [
            "--model",
            self.model,
            "--epochs",
            str(self.epochs),
            "--batch-size",
            str(self.batch_size),
            "--checkpoint-every",
            str(self.checkpoint_every),
        ]
        if self.max_steps is not None:
            flags += ["--max-steps", str(self.max_steps)]
        if self.lr is not None:
            flags += ["--lr", repr(self.lr)]
        if self.synthetic_data:
            flags += ["--synthetic"]
        return flags


class RunPolicySpec(Spec):
    backoff_limit: int = Field(default=6, ge=0)
    """Pod restarts allowed before the job fails (preemptions count)."""
    active_deadline_seconds: int | None = Field(default=None, ge=1)
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    clean_pod_policy: Literal["None", "Running", "All"] = Field(default="None")
    """``None`` keeps finished pods so their logs stay readable."""
    suspend: bool = False


class SchedulingSpec(Spec):
    queue: str | None = None
    """Volcano queue (needs ``operator.volcano.enabled``)."""
    priority_class: str | None = Field(default=None)
    min_available: int | None = Field(default=None, ge=1)
    """Gang size: pods that must be schedulable together (needs Volcano)."""


class TrainingJobSpec(Spec):
    """One PyTorchJob running the bundled trainer (or your own command)."""

    name: Annotated[str, AfterValidator(_job_name)]
    """Job name (DNS-1035 label, at most 40 characters)."""
    preset: Literal["train", "netbench"] = "train"
    """``train`` runs the trainer; ``netbench`` measures all-reduce bandwidth across the nodes."""
    namespace: DnsLabel | None = None
    """Namespace; the platform's training namespace when unset."""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    image: str | None = None
    """Full image reference, pinned by tag (not ``latest``) or digest."""
    image_tag: str | None = Field(default=None)
    """Tag in the platform's registry repository (instead of ``image``)."""
    command: list[str] | None = None
    """Replace the default ``python -m trainer.launch ... -m trainer`` command (torchrun)."""
    args: list[str] = Field(default_factory=list)
    """Extra arguments appended to the command (e.g. trainer flags not in ``trainer``)."""
    trainer: TrainerArgs = Field(default_factory=TrainerArgs)
    env: dict[str, str] = Field(default_factory=dict)
    nodes: int = Field(default=1, ge=1, le=512)
    """Pods: one Master plus ``nodes - 1`` Workers."""
    elastic: ElasticSpec | None = None
    """Elastic job (Workers only, c10d rendezvous) instead of a fixed ``nodes``."""
    gpus_per_node: int | None = Field(default=None, ge=0, le=16)
    """GPUs per pod; the GPU pool's ``gpusPerNode`` when unset, 0 for a CPU job."""
    procs_per_node: int | None = Field(default=None, ge=1, le=64)
    """Processes per pod; equals the GPU count for GPU jobs, 1 by default for CPU jobs."""
    cpu: Cpu = "8"
    """CPU request and limit per pod."""
    memory: Quantity = "64Gi"
    """Memory request and limit per pod."""
    shm_size: Quantity | None = Field(default=None)
    """``/dev/shm`` size; 16Gi per GPU (2Gi for CPU jobs) when unset. Counts against ``memory``."""
    network: Literal["tcp", "rdma"] = "tcp"
    """``rdma`` enables NCCL over InfiniBand/RoCE with host networking (needs an RDMA pool)."""
    nccl_debug: Literal["INFO", "WARN", "TRACE"] | None = Field(default=None)
    restart_policy: Literal["OnFailure", "ExitCode", "Never"] = Field(default="OnFailure")
    run_policy: RunPolicySpec = Field(default_factory=RunPolicySpec)
    scheduling: SchedulingSpec = Field(default_factory=SchedulingSpec)

    @model_validator(mode="after")
    def _check(self) -> TrainingJobSpec:
        if (self.image is None) == (self.image_tag is None):
            raise field_error(
                "image", "give exactly one of image (a full reference) or imageTag (a tag in the platform registry)"
            )
        if self.image is not None:
            _pinned(self.image, "image")
        if self.image_tag is not None and (
            self.image_tag == "latest" or not re.match(r"^[\w][\w.-]{0,127}$", self.image_tag)
        ):
            raise field_error(
                "imageTag",
                f"{self.image_tag!r} is not a pinned tag: use a version such as 'v1.2.0' or a commit id, not 'latest'",
            )
        if self.elastic is not None and self.nodes != 1:
            raise field_error("nodes", "an elastic job sizes itself with elastic.minNodes/maxNodes: drop nodes")
        if self.gpus_per_node == 0 and self.network == "rdma":
            raise field_error("network", "rdma networking is for GPU jobs; a CPU job uses tcp")
        if self.gpus_per_node and self.procs_per_node not in (None, self.gpus_per_node):
            raise field_error(
                "procsPerNode",
                f"procsPerNode ({self.procs_per_node}) must equal gpusPerNode ({self.gpus_per_node}): one process drives one GPU",
            )
        if self.shm_size is not None and quantity_bytes(self.shm_size) >= quantity_bytes(self.memory):
            raise field_error(
                "shmSize", f"shmSize {self.shm_size} must be smaller than memory {self.memory}: /dev/shm is memory"
            )
        if self.scheduling.min_available is not None and self.scheduling.min_available > self.max_pods:
            raise field_error(
                "scheduling.minAvailable",
                f"minAvailable ({self.scheduling.min_available}) exceeds the job's {self.max_pods} pods",
            )
        return self

    @property
    def max_pods(self) -> int:
        return self.elastic.max_nodes if self.elastic else self.nodes


def _pinned(image: str, key: str) -> None:
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.partition(":")[2]
    if digest:
        if not re.match(r"^sha256:[0-9a-f]{64}$", digest):
            raise field_error(key, f"{image!r} has a malformed digest: expected '@sha256:' and 64 hex digits")
    elif not tag or tag == "latest":
        raise field_error(
            key,
            f"{image!r} is not pinned: add a version tag other than 'latest' (e.g. ':v1.2.0') or a digest (@sha256:...)",
        )


# --- the platform --------------------------------------------------------------------


class PlatformSpec(Spec):
    """Everything one stack deploys. Each field is a stack config key."""

    region: str | None = None
    """Alibaba Cloud region, read from the provider's own key ``alicloud:region``."""
    network: NetworkSpec | None = None
    """VPC and vSwitches (ACK stacks; adopt with ``vpcId``)."""
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    gpu_pool: GpuPoolSpec | None = Field(default=None)
    """GPU node pool; CPU-only when unset."""
    storage: StorageSpec = Field(default_factory=StorageSpec)
    registry: RegistrySpec | None = None
    """Container registry for the training image; jobs must then give full image references."""
    operator: OperatorSpec = Field(default_factory=OperatorSpec)
    training: TrainingNamespaceSpec = Field(default_factory=TrainingNamespaceSpec)
    jobs: list[TrainingJobSpec] = Field(default_factory=list)
    """Training jobs to run; each becomes a PyTorchJob."""

    @property
    def is_local(self) -> bool:
        return self.cluster.local is not None

    @model_validator(mode="after")
    def _check(self) -> PlatformSpec:
        if self.is_local:
            for key, value in (
                ("network", self.network),
                ("gpuPool", self.gpu_pool),
                ("registry", self.registry),
                ("storage.nas", self.storage.nas),
                ("storage.oss", self.storage.oss),
            ):
                if value is not None:
                    raise field_error(key, f"a local cluster (cluster.local) creates no cloud resources: remove {key}")
        else:
            if self.region is None:
                raise PydanticCustomError(
                    "platform",
                    "ACK stacks need the region: pulumi config set alicloud:region cn-hangzhou",
                    {"key": "<region>"},
                )
            if self.network is None:
                raise field_error(
                    "network",
                    "ACK stacks need a network for nodes and NAS: give network.vswitches, "
                    "or adopt a VPC with network.vpcId and network.vswitchIds",
                )
            if self.storage.nas is None:
                raise field_error(
                    "storage.nas", "ACK stacks keep data on NAS: add storage.nas (may be {} for the defaults)"
                )
            nas = self.storage.nas
            if nas.access_cidr is not None and not nas.access_cidr.subnet_of(self.network.vpc_cidr):
                raise field_error(
                    "storage.nas.accessCidr",
                    f"{nas.access_cidr} is wider than the VPC ({self.network.vpc_cidr}): NAS access is limited to the VPC",
                )
        names = [job.name for job in self.jobs]
        for i, job in enumerate(self.jobs):
            if job.name in names[:i]:
                raise field_error(f"jobs[{i}].name", f"job name {job.name!r} is used twice")
            if job.image_tag is not None and self.registry is None:
                raise field_error(
                    f"jobs[{i}].image_tag",
                    "imageTag needs a registry; without one give a full image reference in image",
                )
            gpus = self.job_gpus(job)
            if gpus and self.gpu_pool is None:
                raise field_error(
                    f"jobs[{i}].gpus_per_node",
                    f"the job asks for {gpus} GPUs per node but the stack has no gpuPool; set gpusPerNode: 0 for a CPU job",
                )
            if self.gpu_pool is not None and gpus > self.gpu_pool.gpus_per_node:
                raise field_error(
                    f"jobs[{i}].gpus_per_node",
                    f"{gpus} GPUs per pod do not fit on a {self.gpu_pool.gpus_per_node}-GPU node of pool {self.gpu_pool.name!r}",
                )
            if job.network == "rdma" and not (self.gpu_pool and self.gpu_pool.rdma):
                raise field_error(f"jobs[{i}].network", "rdma networking needs a gpuPool with rdma: true")
            if (job.scheduling.queue or job.scheduling.min_available) and not self.operator.volcano.enabled:
                raise field_error(
                    f"jobs[{i}].scheduling",
                    "queues and gang scheduling need Volcano: set operator.volcano.enabled: true",
                )
        return self

    def job_gpus(self, job: TrainingJobSpec) -> int:
        """GPUs per pod of ``job``: its own setting, else the whole node of the GPU pool."""
        if job.gpus_per_node is not None:
            return job.gpus_per_node
        return self.gpu_pool.gpus_per_node if self.gpu_pool is not None else 0


# --- loading -------------------------------------------------------------------------


class ConfigError(Exception):
    """A stack's configuration is invalid; ``problems`` holds one message per bad key."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems

    def __str__(self) -> str:
        return "invalid stack configuration:\n" + "\n".join(f"  {p}" for p in self.problems)


def load_spec(raw: Mapping[str, Any]) -> PlatformSpec:
    """Validate a stack's config.

    Args:
        raw: namespaced config keys to values, as in a stack file's ``config:`` section
            (``{"ack-training-platform:gpuPool": {...}, "alicloud:region": "cn-hangzhou"}``).

    Returns:
        The validated spec.

    Raises:
        ConfigError: with one message per problem, each naming its stack key.
    """
    prefix = PROJECT + ":"
    ours = {k[len(prefix) :]: v for k, v in raw.items() if k.startswith(prefix)}
    data = {k: v for k, v in ours.items() if k not in SECRET_KEYS}
    if REGION_KEY in raw:
        if "region" in data:
            raise ConfigError([f"{prefix}region: the region is the provider's key; set {REGION_KEY} instead"])
        data["region"] = raw[REGION_KEY]
    try:
        spec = PlatformSpec.model_validate(data)
    except ValidationError as err:
        raise ConfigError([_describe(e) for e in err.errors()]) from None
    needed = {"registryPassword": "registry.username"} if spec.registry and spec.registry.username else {}
    if spec.storage.oss is not None:
        needed.update(ossAccessKeyId="storage.oss", ossAccessKeySecret="storage.oss")
    missing = [
        f"{prefix}{key}: {user} is set but this credential is missing; run: pulumi config set --secret {key} <value>"
        for key, user in needed.items()
        if key not in ours
    ]
    if missing:
        raise ConfigError(missing)
    return spec


def _describe(error: Mapping[str, Any]) -> str:
    loc = list(error["loc"])
    kind = error["type"]
    key_in_ctx = (error.get("ctx") or {}).get("key")
    if key_in_ctx == "<region>":
        return f"{REGION_KEY}: {error['msg']}"
    if key_in_ctx:
        loc += _split_key(key_in_ctx)
    path = _key_path(loc)
    if kind == "extra_forbidden":
        valid = _valid_keys(loc[:-1])
        hint = difflib.get_close_matches(str(loc[-1]), valid, n=1)
        suggestion = f"did you mean {hint[0]!r}? " if hint else ""
        return f"{path}: unknown key; {suggestion}valid keys: {', '.join(valid)}"
    if kind == "missing":
        return f"{path}: required key is missing"
    message = error["msg"].removeprefix("Value error, ")
    if kind in ("platform", "value_error"):
        return f"{path}: {message}"
    return f"{path}: {message} (got {error['input']!r})"


def _split_key(key: str) -> list[str | int]:
    parts: list[str | int] = []
    for part in key.split("."):
        name, *indexes = part.split("[")
        parts.append(to_camel(name))
        parts += [int(i.rstrip("]")) for i in indexes]
    return parts


def _key_path(loc: list[Any]) -> str:
    path = PROJECT + ":"
    for i, part in enumerate(loc):
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if i else "") + str(part)
    return path


def _valid_keys(loc: list[Any]) -> list[str]:
    """The camelCase keys allowed at ``loc`` (a path into PlatformSpec)."""
    model: Any = PlatformSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = next(f for name, f in model.model_fields.items() if part in (name, f.alias))
        model = _model_of(field.annotation)
    # `region` is read from the provider's alicloud:region, never from our namespace.
    return (
        sorted(
            (f.alias or name)
            for name, f in model.model_fields.items()
            if not (model is PlatformSpec and name == "region")
        )
        if model
        else []
    )


def _model_of(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def stack_schema() -> dict[str, Any]:
    """JSON schema of the stack keys under the ``ack-training-platform:`` namespace."""
    schema = PlatformSpec.model_json_schema(by_alias=True)
    schema["properties"].pop("region", None)
    schema["title"] = f"{PROJECT} stack configuration"
    schema["description"] = (
        f"Keys under the '{PROJECT}:' namespace of a stack file. The region is the provider's "
        f"own key, {REGION_KEY}; credentials are the secret keys {', '.join(SECRET_KEYS)}."
    )
    return schema

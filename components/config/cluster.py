"""Where the platform runs: the VPC and the ACK cluster, and how Pulumi reaches its API."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, model_validator

from .base import (
    ADMISSION_POLICY_MIN_KUBERNETES,
    DEFAULT_POD_CIDR,
    DEFAULT_SERVICE_CIDR,
    DEFAULT_VPC_CIDR,
    METADATA_TOKENS_MIN_KUBERNETES,
    TRAINER_V2_MIN_KUBERNETES,
    Cidr,
    DnsLabel,
    Spec,
    field_error,
    set_but_unused,
)

# --- network -------------------------------------------------------------------------

_VPC_ID = re.compile(r"^vpc-[a-z0-9]+$")
_VSWITCH_ID = re.compile(r"^vsw-[a-z0-9]+$")
"""VPC resource ids are the type's prefix and lowercase letters and digits (``vpc-bp1...``,
``vsw-bp1...``); a name there would fail only when the cloud looks it up."""
ACK_VERSION = re.compile(r"^\d+\.\d+\.\d+-aliyun\.\d+$")
"""How ACK names its Kubernetes versions, e.g. ``1.33.1-aliyun.1`` (pulumi-alicloud 4.0.0
``cs/get_kubernetes_version.py``, whose ``kubernetes_version`` the preview checks the version against)."""


class VSwitchSpec(Spec):
    zone_id: str = Field(min_length=1)
    """Zone the vSwitch lives in, one of the region's (``cn-hangzhou-k`` in ``cn-hangzhou``); pick zones that
    sell your GPU types."""
    cidr: Cidr
    """IPv4 block of the vSwitch; must lie inside ``network.vpcCidr``."""


class NetworkSpec(Spec):
    """The VPC that the cluster, its nodes and the NAS mount target live in."""

    vpc_id: str | None = Field(default=None)
    """Adopt this existing VPC instead of creating one (needs ``vswitchIds``): its id, ``vpc-...``, not its name."""
    vswitch_ids: list[str] = Field(default_factory=list)
    """Existing vSwitch ids to place nodes in (adopt mode only): ``vsw-...``, not their names."""
    vpc_cidr: Cidr = Field(default=ipaddress.IPv4Network(DEFAULT_VPC_CIDR))
    """IPv4 block of the VPC. In adopt mode give the real one: the NAS access rule is limited to it."""
    vswitches: list[VSwitchSpec] = Field(default_factory=list)
    """vSwitches to create, one per zone (create mode only; at least one)."""
    pod_cidr: Cidr = Field(default=ipaddress.IPv4Network(DEFAULT_POD_CIDR))
    """Pod IP range (Flannel); must overlap neither the VPC nor ``serviceCidr``."""
    service_cidr: Cidr = Field(default=ipaddress.IPv4Network(DEFAULT_SERVICE_CIDR))
    """Service IP range; must overlap neither the VPC nor ``podCidr``."""

    @model_validator(mode="after")
    def _check(self) -> NetworkSpec:
        if self.vpc_id is not None and not _VPC_ID.match(self.vpc_id):
            raise field_error("vpcId", f"{self.vpc_id!r} is not a VPC id: give the id (vpc-...) the VPC console lists")
        for i, vswitch in enumerate(self.vswitch_ids):
            if not _VSWITCH_ID.match(vswitch):
                raise field_error(
                    f"vswitchIds[{i}]", f"{vswitch!r} is not a vSwitch id: give the id (vsw-...) the VPC console lists"
                )
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

CLUSTER_SPECS = ("ack.standard", "ack.pro.small", "ack.pro.xlarge", "ack.pro.2xlarge", "ack.pro.4xlarge")
"""``cluster_spec`` values pulumi-alicloud 4.0.0 documents for ``cs.ManagedKubernetes``."""

PRIVATE_ACCESS = ("vpn", "cen", "express-connect", "in-vpc")

ALLOWED_CIDRS_KEY = "cluster.apiServer.allowedCidrs"


def set_allowed_cidr(index: int = 0) -> str:
    """The command that sets one allowed range, and what to put there."""
    return (
        f"pulumi config set --path '{ALLOWED_CIDRS_KEY}[{index}]' <range>, with the egress range of "
        "your office, VPN or CI (one address: <address>/32)"
    )


NO_CLIENT_RANGES = {
    ipaddress.IPv4Network(block): name
    for block, name in (
        ("0.0.0.0/8", "'this network' range (RFC 1122)"),
        ("127.0.0.0/8", "loopback range (RFC 1122)"),
        ("169.254.0.0/16", "link-local range (RFC 3927)"),
        ("192.0.0.0/24", "IETF protocol assignment range (RFC 6890)"),
        ("192.0.2.0/24", "documentation range TEST-NET-1 (RFC 5737)"),
        ("198.18.0.0/15", "benchmarking range (RFC 2544)"),
        ("198.51.100.0/24", "documentation range TEST-NET-2 (RFC 5737)"),
        ("203.0.113.0/24", "documentation range TEST-NET-3 (RFC 5737)"),
        ("224.0.0.0/4", "multicast range (RFC 5771)"),
        ("240.0.0.0/4", "reserved range (RFC 1112)"),
    )
}
"""Special-purpose ranges no client reaches the API server from: a whitelist of them locks
everyone out once it is switched on."""

PLATFORM_ADDONS = frozenset(
    {
        "flannel",
        "terway-eniip",
        "csi-plugin",
        "csi-provisioner",
        "storage-operator",
        "ack-node-problem-detector",
        "node-lifecycle-controller",
        "ack-erdma-controller",
        "managed-aliyun-acr-credential-helper",
    }
)
"""Add-ons the platform installs itself, some with a configuration; a second resource for one
would fight over it, and removing either would uninstall it."""


class LocalClusterSpec(Spec):
    """A cluster that is not on Alibaba Cloud: kind, minikube, or no cluster at all."""

    context: str | None = None
    """kubeconfig context to deploy to (e.g. ``kind-training``); the current context when unset."""
    render_yaml_to_directory: str | None = Field(default=None)
    """Write the manifests to this directory instead of applying them (no cluster needed)."""


class ApiServerSpec(Spec):
    """How Pulumi and kubectl reach the Kubernetes API of a cluster this stack creates.
    Pulumi applies every in-cluster object through it, so a stack must say how."""

    public: bool = False
    """Give the API server an internet endpoint. Takes effect when the cluster is created only."""
    allowed_cidrs: list[Cidr] = Field(default_factory=list)
    """Source ranges that may reach the API server: where Pulumi, CI and kubectl connect from.
    Required with ``public``, and set by each deployer (``pulumi config set --path
    'cluster.apiServer.allowedCidrs[0]' <range>``); ``0.0.0.0/0`` and special-purpose ranges
    (documentation, loopback, ...) are refused. The list covers the internal endpoint too
    (one load balancer serves both), and the stack adds the VPC and ACK's control plane."""
    private_access: Literal["vpn", "cen", "express-connect", "in-vpc"] | None = Field(default=None)
    """Without ``public``: how the machine running Pulumi reaches the VPC (a VPN gateway, CEN,
    Express Connect, or a runner inside the VPC)."""


class SystemPoolSpec(Spec):
    """Untainted nodes for the cluster's own workloads: the Training Operator, Volcano,
    CoreDNS, the CSI controllers and TensorBoard. The GPU pool is tainted and may be empty."""

    enabled: bool | None = None
    """On when this stack creates the cluster; an adopted cluster brings its own nodes."""
    instance_types: list[str] = Field(
        default_factory=lambda: ["ecs.g7.xlarge", "ecs.g8i.xlarge", "ecs.g6.xlarge"], min_length=1
    )
    """4-vCPU, 16-GiB general-purpose types in order of preference; later ones are fallbacks."""
    size: int = Field(default=2, ge=1, le=50)
    """Nodes (fixed): two keep CoreDNS and the controllers running through a node's loss."""
    system_disk_gib: int = Field(default=120, ge=40, le=2048)


class AutoscalerSpec(Spec):
    """ACK's cluster autoscaler, which grows the GPU pool from zero for pending pods. Node
    pools scale only once it is configured for the cluster (ACK: auto scaling of nodes)."""

    enabled: bool | None = None
    """On when this stack creates the cluster and the GPU pool autoscales; an adopted cluster
    keeps its own settings unless this is ``true``."""
    idle_minutes: int = Field(default=10, ge=1, le=1440)
    """An idle node is removed after it has been unneeded this long (the autoscaler's ``cool_down_duration``)."""
    gpu_utilization_threshold: float = Field(default=0.5, gt=0, le=1)
    """A GPU node counts as idle below this share of its GPUs requested."""


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
    cluster_spec: Literal[CLUSTER_SPECS] = Field(default="ack.pro.small")  # type: ignore[valid-type]
    """ACK edition: ``ack.standard`` (basic), ``ack.pro.small`` (Pro), or a provisioned Pro control plane."""
    deletion_protection: bool = Field(default=True)
    """Refuse deletion of the cluster through the API until switched off."""
    api_server: ApiServerSpec = Field(default_factory=ApiServerSpec)
    """How Pulumi reaches the API server of a new cluster."""
    system_pool: SystemPoolSpec = Field(default_factory=SystemPoolSpec)
    autoscaler: AutoscalerSpec = Field(default_factory=AutoscalerSpec)
    network: Literal["flannel", "terway"] = "flannel"
    """Pod network, chosen when ACK creates the cluster and never changed after (changing it replaces the
    cluster). ``terway`` gives pods VPC addresses and enforces NetworkPolicy, which team isolation needs;
    ``flannel`` (an overlay on ``podCidr``) enforces none, so it suits one team. For an adopted cluster, say
    which one it runs."""
    shared_network: bool = False
    """Accept several teams on Flannel, whose pods can then all reach each other."""
    addons: list[DnsLabel] = Field(default_factory=list)
    """ACK add-ons to install besides those the platform derives (network, storage, node repair, fabric, registry)."""

    @property
    def is_local(self) -> bool:
        return self.local is not None

    @property
    def creates_cluster(self) -> bool:
        return self.local is None and self.existing_cluster_id is None

    @property
    def needs_allowed_cidrs(self) -> bool:
        """A public API server this stack creates, whose deployer has not listed their ranges yet."""
        return self.creates_cluster and self.api_server.public and not self.api_server.allowed_cidrs

    @property
    def has_system_pool(self) -> bool:
        return self.creates_cluster if self.system_pool.enabled is None else self.system_pool.enabled

    @model_validator(mode="after")
    def _check(self) -> ClusterSpec:
        if self.local is not None and self.existing_cluster_id is not None:
            raise field_error(
                "existingClusterId",
                "a local cluster cannot also adopt an ACK cluster: drop one of local, existingClusterId",
            )
        if not self.creates_cluster:
            mode = "a local cluster" if self.local is not None else "an adopted cluster (existingClusterId)"
            set_but_unused(self, ("version", "cluster_spec", "deletion_protection", "api_server"), f"with {mode}")
            if self.local is not None:
                set_but_unused(self, ("system_pool", "autoscaler", "addons", "network"), f"with {mode}")
            elif self.system_pool.enabled:
                raise field_error(
                    "systemPool.enabled",
                    "an adopted cluster runs its system workloads on its own nodes: drop systemPool",
                )
            else:
                set_but_unused(
                    self.system_pool, ("instance_types", "size", "system_disk_gib"), f"with {mode}", under="systemPool."
                )
            return self
        managed = sorted(set(self.addons) & PLATFORM_ADDONS)
        if managed:
            raise field_error(
                "addons",
                f"{managed} are installed and configured by the platform where it needs them: list only other add-ons",
            )
        if self.version is not None and not ACK_VERSION.match(self.version):
            hint = f"{self.version[1:]!r}" if self.version[1:2].isdigit() else "e.g. '1.33.1-aliyun.1'"
            raise field_error(
                "version", f"{self.version!r} is not an ACK version: write it as ACK lists it, without 'v' ({hint})"
            )
        if older_than(self.version, METADATA_TOKENS_MIN_KUBERNETES):
            needed = ".".join(map(str, METADATA_TOKENS_MIN_KUBERNETES))
            raise field_error(
                "version",
                f"Kubernetes {self.version} is too old: the node pools require instance metadata tokens (IMDSv2), "
                f"which ACK supports from {needed} on; raise version",
            )
        api = self.api_server
        if api.public and api.private_access is not None:
            raise field_error("apiServer.privateAccess", "privateAccess describes a private API server: drop it")
        for i, block in enumerate(api.allowed_cidrs):
            if block.prefixlen == 0:
                raise field_error(
                    f"apiServer.allowedCidrs[{i}]",
                    f"{block} opens the API server to the whole internet: list the ranges you connect from",
                )
            reserved = next((name for special, name in NO_CLIENT_RANGES.items() if block.subnet_of(special)), None)
            if reserved is not None:
                raise field_error(
                    f"apiServer.allowedCidrs[{i}]",
                    f"{block} is in the {reserved}, which no client connects from: once the whitelist is on, "
                    f"nobody could reach the API server. Run: {set_allowed_cidr(i)}",
                )
        return self


def older_than(version: str | None, minimum: tuple[int, int]) -> bool:
    """Whether the ACK ``version`` (``1.33.1-aliyun.1``) is a Kubernetes older than ``minimum``; unset: no."""
    match = re.match(r"^(\d+)\.(\d+)", version or "")
    return match is not None and (int(match[1]), int(match[2])) < minimum


def check_kubernetes_needs(version: str | None, *, trainer_v2: bool, teams: bool, node_health: bool) -> None:
    """The Kubernetes ``cluster.version`` that what the stack runs needs.

    Raises:
        PydanticCustomError: ``version`` is too old for Trainer v2, the teams' or the node health
            controller's admission policies; the message names ``cluster.version``.
    """
    if trainer_v2 and older_than(version, TRAINER_V2_MIN_KUBERNETES):
        needed = ".".join(map(str, TRAINER_V2_MIN_KUBERNETES))
        raise field_error(
            "cluster.version",
            f"Kubernetes {version} is too old for Trainer v2, which needs {needed} or later: raise "
            "cluster.version, or keep the jobs on backend v1 (training.backend, jobs[].backend)",
        )
    policy = "an admission policy (ValidatingAdmissionPolicy v1)"
    for wanted, what in (
        (teams, f"teams, whose pods {policy} keeps within each team"),
        (node_health, f"monitoring.nodeHealth, whose node patches {policy} holds to a cordon"),
    ):
        if wanted and older_than(version, ADMISSION_POLICY_MIN_KUBERNETES):
            needed = ".".join(map(str, ADMISSION_POLICY_MIN_KUBERNETES))
            raise field_error(
                "cluster.version",
                f"Kubernetes {version} is too old for {what}: it needs {needed} or later; raise cluster.version",
            )

"""What only the cloud can tell about a stack, asked before anything is created, so that
``pulumi preview`` fails with the stack key instead of a failed create or an autoscaler
event later: the ACK version can be created, the GPU instance types are sold in the
vSwitches' zones, and the NAS mount target's vSwitch is in a zone that offers the file
system. Adopted vSwitches are looked up for their zones.

Under Pulumi's mock engine the look-ups are answered by :func:`offline_answer`, as by a
cloud that offers whatever the stack asks for: offline, none of this can be known.

Stock comes and goes: a GPU type sold out in every zone for an hour would stop every update
and ``pulumi destroy --run-program`` too. ``ACK_CLOUD_CHECKS=warn`` in the environment turns
the refusals into warnings for one command (a scale-down, a teardown).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_alicloud as alicloud

from ..config import PROJECT, ConfigError, PlatformSpec
from ..config.fit import pods_per_node
from ..config.gpus.capacity import GIB, NodeShare, capacity_excess, misfit, shared_misfit
from ..config.gpus.instance_data import LEFT_OUT
from ..config.gpus.types import family_of_name
from .ecs import INSTANCE_TYPES, instance_types_sold

VERSIONS = "alicloud:cs/getKubernetesVersion:getKubernetesVersion"
CLUSTERS = "alicloud:cs/getClusters:getClusters"
NAS_ZONES = "alicloud:nas/getZones:getZones"
SWITCHES = "alicloud:vpc/getSwitches:getSwitches"
LOOKUPS = (VERSIONS, CLUSTERS, INSTANCE_TYPES, NAS_ZONES, SWITCHES)
"""The provider functions the checks call."""
OFFLINE_ZONE = "(zone known at deploy)"
"""The zone an adopted vSwitch has offline, where nothing can look it up."""


CLOUD_CHECKS_ENV = "ACK_CLOUD_CHECKS"


def warn_only() -> bool:
    """Whether the environment asks for the cloud's refusals as warnings (``ACK_CLOUD_CHECKS=warn``)."""
    return os.environ.get(CLOUD_CHECKS_ENV, "").strip().lower() == "warn"


def check_cloud(spec: PlatformSpec) -> None:
    """Fail before any resource is registered when the cloud refuses what ``spec`` asks for.

    Raises:
        pulumi.RunError: one line per problem, each naming its stack key (a warning instead
            under ``ACK_CLOUD_CHECKS=warn``).
    """
    problems = cloud_problems(spec)
    if problems and warn_only():
        for problem in problems:
            pulumi.log.warn(problem)
    elif problems:
        raise pulumi.RunError(
            f"{ConfigError(problems)}\n(for a command that must go ahead regardless, such as a teardown: "
            f"{CLOUD_CHECKS_ENV}=warn)"
        )


def cloud_problems(spec: PlatformSpec) -> list[str]:
    """What the cloud would refuse, one message per stack key (empty for a local stack)."""
    if spec.is_local or spec.network is None:
        return []
    problems = _version_problems(spec)
    zones, missing = _vswitch_zones(spec)
    problems += missing
    sold, type_problems = instance_types_sold(spec.gpu_pool, zones)
    problems += type_problems
    problems += _fit_problems(spec, sold)
    problems += _nas_problems(spec, zones)
    return problems


def _key(key: str) -> str:
    return f"{PROJECT}:{key}"


def _version_problems(spec: PlatformSpec) -> list[str]:
    version = spec.cluster.version
    if not spec.cluster.creates_cluster or version is None:
        return []
    existing = _existing_cluster(spec)
    if existing is not None:
        _warn_about_running_version(spec, existing)
        return []
    # DescribeKubernetesVersionMetadata (terraform-provider-alicloud v1.289.0
    # data_source_alicloud_cs_kubernetes_version.go). Asked without a version, ACK lists the
    # versions a new cluster can have (the default query mode, "creatable"); asked with one, it
    # ignores the mode and answers for any version it still supports (alibabacloud_cs20151215
    # DescribeKubernetesVersionMetadataRequest). Only a cluster about to be created needs the
    # first answer.
    found = alicloud.cs.get_kubernetes_version(cluster_type="ManagedKubernetes", profile="Default")
    if any(meta.version == version for meta in found.metadatas or []):
        return []
    return [
        f"{_key('cluster.version')}: ACK does not create managed clusters of version {version!r} in "
        f"{spec.region}: pick one that `aliyun cs DescribeKubernetesVersionMetadata --ClusterType ManagedKubernetes "
        f"--Region {spec.region}` lists, or drop version for ACK's default"
    ]


def _existing_cluster(spec: PlatformSpec) -> Any | None:
    """The cluster of the stack's name in its region, once it exists.

    A version ACK no longer offers for new clusters is no reason to refuse an update, a
    refresh or a teardown of a cluster that has it. The stack names its cluster (``cluster.name``),
    so the name finds it; DescribeClustersForRegion filters by name (terraform-provider-alicloud
    v1.289.0 data_source_alicloud_cs_clusters.go), and only an exact match counts.
    """
    name = spec.cluster.name
    found = alicloud.cs.get_clusters(cluster_name=name, cluster_type="ManagedKubernetes")
    return next((cluster for cluster in found.clusters or [] if cluster.cluster_name == name), None)


def _warn_about_running_version(spec: PlatformSpec, cluster: Any) -> None:
    """Warn when the running cluster's version is not the stack's, or ACK no longer supports it.

    Neither stops the run: the cluster exists, and refusing would block its teardown too.
    """
    version = spec.cluster.version
    running = cluster.get("current_version")
    if running and running != version:
        # ACK upgraded the cluster (or someone did in the console): the provider would ask ACK
        # to "upgrade" it back (UpgradeCluster with the stack's version as NextVersion:
        # terraform-provider-alicloud v1.289.0 resource_alicloud_cs_managed_kubernetes.go,
        # UpgradeAlicloudKubernetesCluster), and ACK upgrades only forward.
        pulumi.log.warn(
            f"{_key('cluster.version')}: the cluster {spec.cluster.name!r} runs {running}, the stack says "
            f"{version}: set cluster.version to {running} (docs/day-2.md, upgrades)"
        )
    supported = alicloud.cs.get_kubernetes_version(
        cluster_type="ManagedKubernetes", kubernetes_version=running or version, profile="Default"
    )
    if not any(meta.version == (running or version) for meta in supported.metadatas or []):
        pulumi.log.warn(
            f"{_key('cluster.version')}: ACK no longer supports {running or version}: upgrade the cluster "
            "(docs/day-2.md, upgrades)"
        )


def _vswitch_zones(spec: PlatformSpec) -> tuple[list[tuple[str, str]], list[str]]:
    """The stack key and zone of each vSwitch that exists, in the stack's order, and a problem
    per adopted vSwitch that does not exist."""
    network = spec.network
    if not network.vswitch_ids:
        return [(f"network.vswitches[{j}]", vsw.zone_id) for j, vsw in enumerate(network.vswitches)], []
    found = alicloud.vpc.get_switches(ids=list(network.vswitch_ids), vpc_id=network.vpc_id)
    zone_of = {vsw.id: vsw.zone_id for vsw in found.vswitches or []}
    zones, problems = [], []
    for j, vswitch_id in enumerate(network.vswitch_ids):
        if vswitch_id in zone_of:
            zones.append((f"network.vswitchIds[{j}]", zone_of[vswitch_id]))
        else:
            problems.append(
                f"{_key(f'network.vswitchIds[{j}]')}: there is no vSwitch {vswitch_id!r} in VPC {network.vpc_id!r} "
                f"in {spec.region}"
            )
    return zones, problems


def _fit_problems(spec: PlatformSpec, reported: list[Any]) -> list[str]:
    """What ECS's own figures for the pool's instance types refuse: a ``gpusPerNode`` other
    than the GPUs ECS lists, a ``nodeCapacity`` above the smallest type's vCPUs or memory, and,
    without ``nodeCapacity``, jobs that do not fit that smallest type. The load-time checks used
    the platform's table (components/config/gpus/types.py) and have already refused anything
    above it; here ECS's answer refuses what the table let through, and is the only check of
    the jobs on a pool of types outside the table."""
    pool = spec.gpu_pool
    if pool is None:
        return []
    problems = _gpu_count_problems(spec, reported)
    sizes = [(t.cpu_core_count, t.memory_size) for t in reported if t.get("cpu_core_count") and t.get("memory_size")]
    if not sizes:
        if pool.node_share is None and reported:
            # Offline, where types come back without figures (a type ECS does not sell has its own
            # problem above): say once that these jobs went unchecked, and that a type of a family
            # the platform has never heard of may as well be a slip.
            strangers = [t for t in pool.unlisted_types if family_of_name(t) not in LEFT_OUT]
            pulumi.log.warn(
                f"{_key('gpuPool.instanceTypes')}: the platform's table does not list "
                f"{', '.join(pool.unlisted_types)}, so the cpu and memory of the jobs on pool {pool.name!r} are "
                "checked against what ECS lists for the types only at pulumi preview, not here: give "
                "gpuPool.nodeCapacity to check them offline"
                + (
                    f". Nor does it know the family of {', '.join(strangers)}: a misspelt name is found only at "
                    "pulumi preview (ECS sells no such type)"
                    if strangers
                    else ""
                )
            )
        return problems
    node = NodeShare(
        millicpu=min(cpu for cpu, _ in sizes) * 1000,
        memory=int(min(memory for _, memory in sizes) * GIB),
        exact=False,
        source=", ".join(t.id for t in reported)
        + (", as ECS lists it," if len(sizes) == 1 else ", the smallest as ECS lists them,"),
    )
    if pool.node_capacity is not None:
        excess = capacity_excess(pool.node_share, node)
        if excess is not None:
            problems.append(f"{_key(f'gpuPool.nodeCapacity.{excess[0]}')}: {excess[1]}")
        return problems
    for i, job in enumerate(spec.jobs):
        gpus = spec.job_gpus(job)
        if not gpus:
            continue
        sharing = pods_per_node(job, gpus, pool.gpus_per_node) if gpus <= pool.gpus_per_node else 1
        problem = misfit(job.cpu, job.memory, node, pool.name) or (
            shared_misfit(job.cpu, job.memory, sharing, node, pool.name) if sharing > 1 else None
        )
        if problem is not None:
            problems.append(f"{_key(f'jobs[{i}].{problem[0]}')}: {problem[1]}")
    return problems


def _gpu_count_problems(spec: PlatformSpec, reported: list[Any]) -> list[str]:
    """``gpusPerNode`` against the GPUs ECS lists for each type: DescribeInstanceTypes'
    GPUAmount, which the provider reports as ``gpus[0].amount``, a string
    (terraform-provider-alicloud v1.289.0 data_source_alicloud_instance_types.go)."""
    pool = spec.gpu_pool
    listed = {t.id: int(t.gpus[0].amount) for t in reported if t.get("gpus") and t.gpus[0].get("amount")}
    other = [f"{name} has {gpus}" for name, gpus in listed.items() if gpus != pool.gpus_per_node]
    if not other:
        return []
    return [
        f"{_key('gpuPool.gpusPerNode')}: gpusPerNode is {pool.gpus_per_node} but, as ECS lists them, "
        f"{', '.join(other)}: every instance type of the pool must have gpusPerNode GPUs"
    ]


def _nas_problems(spec: PlatformSpec, zones: list[tuple[str, str]]) -> list[str]:
    nas = spec.storage.nas
    if nas is None or nas.existing_file_system_id is not None or not zones:
        return []
    index = spec.nas_vswitch
    vswitch_key = f"network.vswitchIds[{index}]" if spec.network.vswitch_ids else f"network.vswitches[{index}]"
    zone = dict(zones).get(vswitch_key)
    if zone is None:
        return []
    if spec.nas_zone is not None and spec.nas_zone != zone:
        return [
            f"{_key('storage.nas.zoneId')}: the {nas.file_system_type} file system is created in {spec.nas_zone} but "
            f"its mount target's vSwitch ({vswitch_key}) is in {zone}: set zoneId to {zone}, or list a vSwitch of "
            f"{spec.nas_zone} first"
        ]
    # Zones list the storage types they sell. The provider documents them for extreme NAS
    # only (Standard and Advance: Terraform docs d/nas_zones.html.markdown, which the stack
    # writes in lower case), so only an extreme file system is matched by storage type.
    by_storage_type = nas.file_system_type == "extreme"
    offered = [
        z.zone_id
        for z in alicloud.nas.get_zones(file_system_type=nas.file_system_type).zones or []
        if not by_storage_type or nas.storage_type.lower() in {t.storage_type.lower() for t in z.instance_types or []}
    ]
    if zone in offered:
        return []
    wanted = f"{nas.file_system_type} NAS" + (f" of storage type {nas.storage_type}" if by_storage_type else "")
    key = "storage.nas.zoneId" if by_storage_type else vswitch_key
    return [
        f"{_key(key)}: {zone}, the zone of the NAS mount target's vSwitch ({vswitch_key}), offers no {wanted}; "
        f"zones that do: {', '.join(offered) or 'none'}"
    ]


def offline_answer(token: str, args: Mapping[str, Any], spec: PlatformSpec) -> dict[str, Any]:
    """What a cloud offering everything ``spec`` asks for answers to look-up ``token`` called
    with ``args``, in the provider's wire shape (the SDK's ``Get*Result`` types)."""
    if token == VERSIONS:
        return {
            "clusterType": args.get("clusterType"),
            "metadatas": [{"version": spec.cluster.version, "runtimes": []}],
        }
    if token == CLUSTERS:
        # An empty account: the cluster is yet to be created.
        return {"clusters": []}
    if token == INSTANCE_TYPES:
        zone = args.get("availabilityZone")
        return {"instanceTypes": [{"id": args.get("instanceType"), "availabilityZones": [zone]}]}
    if token == SWITCHES:
        zone = spec.nas_zone or OFFLINE_ZONE
        return {
            "vswitches": [{"id": vswitch_id, "vswitchId": vswitch_id, "zoneId": zone} for vswitch_id in args["ids"]]
        }
    if token == NAS_ZONES:
        network = spec.network
        zones = [vsw.zone_id for vsw in network.vswitches] if network else []
        zones += [spec.nas_zone or OFFLINE_ZONE]
        storage_type = spec.storage.nas.storage_type if spec.storage.nas else None
        return {
            "zones": [
                {"zoneId": zone, "instanceTypes": [{"storageType": storage_type, "protocolType": "NFS"}]}
                for zone in dict.fromkeys(zones)
            ]
        }
    raise KeyError(token)

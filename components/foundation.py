"""What a platform's workloads stand on: the network, cluster, GPU pool, NAS, registry, and the
training and team namespaces with their volumes, on ACK or on a local cluster; each a child of
the :class:`.platform.TrainingPlatform` whose options it is given."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from .cluster import AckCluster, local_providers
from .config import PlatformSpec
from .gpu_pool import GpuNodePool
from .identity import node_role_name, oss_reader
from .manifests import cluster_addons, system_node_selector, team_boundary
from .manifests.platform.images import image_copies
from .namespace import TrainingNamespace
from .network import Network
from .registry import ContainerRegistry, pinned_image
from .storage import NasStorage, SharedVolumes


@dataclass
class Foundation:
    """A platform's parts below its operators and workloads.

    Attributes:
        provider: the Kubernetes provider of the cluster.
        training: the training namespace, and ``volumes`` its claims.
        teams: each team's namespace, and ``team_volumes`` its claims, by team.
        cluster: the ACK cluster; ``None`` on a local cluster, as are ``cluster_id``, ``nas_server``,
            ``api_server_access`` (its ``aclId`` and ``aclStatus``), ``pool`` and ``registry``.
    """

    provider: k8s.Provider
    training: TrainingNamespace
    volumes: SharedVolumes
    teams: dict[str, TrainingNamespace]
    team_volumes: dict[str, SharedVolumes]
    cluster: AckCluster | None = None
    pool: GpuNodePool | None = None
    registry: ContainerRegistry | None = None
    cluster_id: pulumi.Output[str] | None = None
    api_server_access: dict[str, Any] | None = None
    nas_server: pulumi.Output[str] | None = None


def _teams(spec: PlatformSpec, provider: k8s.Provider, opts: pulumi.ResourceOptions) -> dict[str, TrainingNamespace]:
    return {
        team.name: TrainingNamespace(
            team.name,
            spec.training,
            provider=provider,
            team=team,
            network_policies=spec.network_policies,
            scraper_namespace=spec.scraper_namespace,
            admission=team_boundary(spec, team),
            opts=opts,
        )
        for team in spec.teams
    }


def local_foundation(spec: PlatformSpec, opts: pulumi.ResourceOptions) -> Foundation:
    """The namespaces and volumes of a local cluster (``cluster.local``)."""
    provider, kept = local_providers(spec.cluster.local, opts=opts)
    training = TrainingNamespace("training", spec.training, provider=provider, opts=opts)
    volumes = SharedVolumes("shared", spec.storage, namespace=training, provider=kept, opts=opts)
    teams = _teams(spec, provider, opts)
    team_volumes = {
        name: SharedVolumes(name, spec.storage, namespace=ns, provider=kept, opts=opts) for name, ns in teams.items()
    }
    return Foundation(provider, training, volumes, teams, team_volumes)


def cloud_foundation(
    spec: PlatformSpec,
    *,
    registry_password: pulumi.Input[str] | None,
    mirror_fill: list[tuple[str, str]],
    image_digests: Mapping[str, str],
    opts: pulumi.ResourceOptions,
) -> Foundation:
    """The network, cluster, GPU pool, NAS and registry of an ACK stack, with its namespaces and volumes."""
    network = Network(spec.cluster.name, spec.network, opts=opts)
    cluster = AckCluster(
        spec.cluster.name,
        spec.cluster,
        network=network,
        network_spec=spec.network,
        region=spec.region,
        addons=cluster_addons(spec),
        autoscaler=spec.cluster.autoscaler if spec.autoscaler_enabled else None,
        opts=opts,
    )
    provider = cluster.provider
    pool = None
    if spec.gpu_pool is not None:
        pool = GpuNodePool(
            spec.gpu_pool.name,
            spec.gpu_pool,
            cluster_id=cluster.cluster_id,
            vswitch_ids=network.vswitch_ids,
            depends_on=[*([cluster.autoscaler] if cluster.autoscaler else []), *cluster.addons],
            keep_addons=cluster.adopted,
            worker_role=node_role_name(spec.cluster.name, spec.gpu_pool.name),
            opts=opts,
        )
    training = TrainingNamespace("training", spec.training, provider=provider, opts=opts)
    teams = _teams(spec, provider, opts)
    storage = NasStorage(
        "nas",
        spec.storage,
        network=network,
        provider=provider,
        zone_id=spec.nas_zone,
        mount_vswitch_index=spec.nas_vswitch,
        access_cidrs=spec.nas_access_cidrs,
        opts=opts,
    )
    volumes = SharedVolumes(
        "shared",
        spec.storage,
        namespace=training,
        provider=cluster.kept_provider,
        nas_server=storage.server,
        depends_on=storage.ready,
        region=spec.region,
        oss_role=oss_reader(spec.cluster.name, spec.storage.oss, cluster.rrsa, parent=cluster)
        if spec.storage.oss
        else None,
        opts=opts,
    )
    team_volumes = {
        name: SharedVolumes(
            name,
            spec.storage,
            namespace=ns,
            provider=cluster.kept_provider,
            nas_server=storage.server,
            depends_on=storage.ready,
            opts=opts,
        )
        for name, ns in teams.items()
    }
    registry = None
    if spec.registry is not None:
        registry = ContainerRegistry(
            "registry",
            spec.registry,
            region=spec.region,
            namespace=training,
            provider=provider,
            cluster_id=cluster.cluster_id,
            vpc_id=network.vpc_id,
            vswitch_id=network.first_vswitch_id,
            mirrored_images=_mirrored_images(spec),
            mirror_fill=mirror_fill,
            mirror_mode=spec.mirror_fill,
            image_digests=image_digests,
            secret_namespaces=list(teams.values()),
            keep_addons=cluster.adopted,
            password=registry_password,
            opts=opts,
        )
    access = cluster.api_server_access
    return Foundation(
        provider,
        training,
        volumes,
        teams,
        team_volumes,
        cluster=cluster,
        pool=pool,
        registry=registry,
        cluster_id=cluster.cluster_id,
        api_server_access={"aclId": access.acl_id, "aclStatus": access.acl_status} if access else None,
        nas_server=storage.server,
    )


def hand_team_directories(spec: PlatformSpec, base: Foundation) -> None:
    """While NAS trusts root, each team's directories are handed to its uid, with its first job's image."""
    registry = base.registry
    if spec.storage.nas is None or spec.storage.nas.user_access != "no_squash":
        return
    for team in spec.teams:
        first = next((job for job in spec.jobs if job.team == team.name), None)
        if first is not None:
            base.team_volumes[team.name].hand_to(
                team,
                image=pinned_image(first.image, first.image_tag, registry, f"team {team.name!r}'s directories"),
                node_selector=system_node_selector(spec.cluster),
                image_pull_secret=registry.pull_secret if registry is not None else None,
                depends_on=registry.ready if registry is not None else None,
            )


def _mirrored_images(spec: PlatformSpec) -> list[str]:
    """Where the stack's third-party images are pulled from in ``imageMirror`` (none without
    one), as ``python -m components.upstream images`` lists them for copying."""
    if spec.image_mirror is None:
        return []
    try:
        return [target for _, target in image_copies(spec)]
    except ValueError as err:
        pulumi.log.warn(f"imageMirror is not checked before the update: {err}")
        return []

"""The ack-training-platform program: validate the stack, compose, export."""

from pathlib import Path

import pulumi

from components import (
    AckCluster,
    ContainerRegistry,
    DatasetImport,
    GpuNodePool,
    Monitoring,
    NasStorage,
    Network,
    SharedVolumes,
    TeamWorkspace,
    TrainerV2,
    TrainingJob,
    TrainingNamespace,
    TrainingOperator,
    local_providers,
    node_role_name,
    oss_reader,
    platform_context,
)
from components.manifests import (
    cluster_addons,
    job_defaults,
    kueue_objects,
    kueue_queue_name,
    system_node_selector,
    team_boundary,
    v2_fabrics,
)
from components.mirror import mirrored_images
from components.mirror_fill import filled_copies
from components.preflight import check_cloud
from components.registry import image_pushed, pinned_image
from components.stack import image_lock, is_secret_section, local_sources, stack_secret, stack_spec

spec = stack_spec()
sources = local_sources(Path(__file__).resolve().parent, spec)
image_digests = image_lock(Path(__file__).resolve().parent, spec)
check_cloud(spec)
mirror_fill = filled_copies(spec)
pool = registry = cluster = None


def team_namespaces(provider) -> dict[str, TrainingNamespace]:
    return {
        team.name: TrainingNamespace(
            team.name,
            spec.training,
            provider=provider,
            team=team,
            network_policies=spec.network_policies,
            scraper_namespace=spec.scraper_namespace,
            admission=team_boundary(spec, team),
        )
        for team in spec.teams
    }


if spec.cluster.local is not None:
    provider, kept_provider = local_providers(spec.cluster.local)
    namespace = TrainingNamespace("training", spec.training, provider=provider)
    volumes = SharedVolumes("shared", spec.storage, namespace=namespace, provider=kept_provider)
    teams = team_namespaces(provider)
    team_volumes = {
        name: SharedVolumes(name, spec.storage, namespace=ns, provider=kept_provider) for name, ns in teams.items()
    }
else:
    network = Network(spec.cluster.name, spec.network)
    cluster = AckCluster(
        spec.cluster.name,
        spec.cluster,
        network=network,
        network_spec=spec.network,
        region=spec.region,
        addons=cluster_addons(spec),
        autoscaler=spec.cluster.autoscaler if spec.autoscaler_enabled else None,
    )
    provider = cluster.provider
    if spec.gpu_pool is not None:
        pool = GpuNodePool(
            spec.gpu_pool.name,
            spec.gpu_pool,
            cluster_id=cluster.cluster_id,
            vswitch_ids=network.vswitch_ids,
            depends_on=[*([cluster.autoscaler] if cluster.autoscaler else []), *cluster.addons],
            keep_addons=cluster.adopted,
            worker_role=node_role_name(spec.cluster.name, spec.gpu_pool.name),
        )
    namespace = TrainingNamespace("training", spec.training, provider=provider)
    teams = team_namespaces(provider)
    storage = NasStorage(
        "nas",
        spec.storage,
        network=network,
        provider=provider,
        zone_id=spec.nas_zone,
        mount_vswitch_index=spec.nas_vswitch,
        access_cidrs=spec.nas_access_cidrs,
    )
    volumes = SharedVolumes(
        "shared",
        spec.storage,
        namespace=namespace,
        provider=cluster.kept_provider,
        nas_server=storage.server,
        depends_on=storage.ready,
        region=spec.region,
        oss_role=oss_reader(spec.cluster.name, spec.storage.oss, cluster.rrsa, parent=cluster)
        if spec.storage.oss
        else None,
    )
    team_volumes = {
        name: SharedVolumes(
            name,
            spec.storage,
            namespace=ns,
            provider=cluster.kept_provider,
            nas_server=storage.server,
            depends_on=storage.ready,
        )
        for name, ns in teams.items()
    }
    if spec.registry is not None:
        registry = ContainerRegistry(
            "registry",
            spec.registry,
            region=spec.region,
            namespace=namespace,
            provider=provider,
            cluster_id=cluster.cluster_id,
            vpc_id=network.vpc_id,
            vswitch_id=network.first_vswitch_id,
            mirrored_images=mirrored_images(spec),
            mirror_fill=mirror_fill,
            mirror_mode=spec.mirror_fill,
            image_digests=image_digests,
            secret_namespaces=list(teams.values()),
            keep_addons=cluster.adopted,
            password=stack_secret("registryPassword"),
        )
    pulumi.export("clusterId", cluster.cluster_id)
    access = cluster.api_server_access
    pulumi.export("apiServerAccess", {"aclId": access.acl_id, "aclStatus": access.acl_status} if access else None)
    pulumi.export("nasServer", storage.server)
    pulumi.export("registry", {"pushUrl": registry.push_url, "pullUrl": registry.repository_url} if registry else None)

if spec.storage.nas is not None and spec.storage.nas.user_access == "no_squash":
    # While NAS trusts root, each team's directories are handed to its uid, with its first job's image.
    for team in spec.teams:
        first = next((job for job in spec.jobs if job.team == team.name), None)
        if first is not None:
            team_volumes[team.name].hand_to(
                team,
                image=pinned_image(first.image, first.image_tag, registry, f"team {team.name!r}'s directories"),
                node_selector=system_node_selector(spec.cluster),
                image_pull_secret=registry.pull_secret if registry is not None else None,
                depends_on=registry.ready if registry is not None else None,
            )

# With a mirror, the third-party images come from it. It is public: their pulls need the
# registry reachable, no credentials.
mirror_pulls = registry.reachable if registry is not None and spec.image_mirror else None
operator = TrainingOperator(
    "training-operator",
    spec.operator,
    provider=provider,
    sources=sources,
    image_mirror=spec.image_mirror,
    image_digests=image_digests,
    node_selector=system_node_selector(spec.cluster),
    depends_on=mirror_pulls or (),
)
queued = spec.trainer_v2.kueue.enabled
trainer_v2 = (
    TrainerV2(
        "trainer-v2",
        spec.trainer_v2,
        provider=provider,
        sources=sources,
        fabrics=v2_fabrics(spec),
        queue_objects=kueue_objects(spec) if queued else (),
        queue=kueue_queue_name(spec) if queued else None,
        image_mirror=spec.image_mirror,
        image_digests=image_digests,
        node_selector=system_node_selector(spec.cluster),
        depends_on=mirror_pulls or (),
        runtime_image=(
            pinned_image(*spec.runtime_image(), registry, "trainerV2's runtimes") if any(spec.runtime_image()) else None
        ),
        gpu_placement=pool.placement if pool is not None else None,
        namespaces=[
            (platform_context(namespace=ns, storage=shared, registry=registry), [ns.namespace, *shared.claims])
            for ns, shared in [(namespace, volumes), *((teams[name], team_volumes[name]) for name in teams)]
        ],
    )
    if spec.uses_trainer_v2
    else None
)
jobs = [
    TrainingJob(
        job.name,
        job,
        namespace=teams[job.team] if job.team else namespace,
        storage=team_volumes[job.team] if job.team else volumes,
        pool=pool,
        registry=registry,
        operator=operator,
        trainer_v2=trainer_v2,
        backend=spec.job_backend(job),
        provider=provider,
        network_policy=spec.network_policies,
        secret=is_secret_section("jobs"),
    )
    for job in spec.jobs
    if image_pushed(registry, job.image_tag if job.image is None else None, f"job {job.name!r}")
]
datasets = [
    DatasetImport(
        dataset.name,
        dataset,
        namespace=teams[dataset.team] if dataset.team else namespace,
        storage=team_volumes[dataset.team] if dataset.team else volumes,
        provider=provider,
        registry=registry,
        region=spec.region,
        security_context=teams[dataset.team].security_context if dataset.team else None,
        node_selector=system_node_selector(spec.cluster),
    )
    for dataset in spec.datasets
    if image_pushed(registry, dataset.image_tag if dataset.image is None else None, f"dataset {dataset.name!r}")
]

monitoring = Monitoring(
    "monitoring",
    spec.monitoring_scope(),
    namespace=namespace,
    storage=volumes,
    provider=provider,
    node_selector=system_node_selector(spec.cluster),
    registry=registry,
    cluster_id=cluster.cluster_id if cluster is not None else None,
    depends_on=cluster.addons if cluster is not None else (),
    teams=[TeamWorkspace(team, teams[team.name], team_volumes[team.name]) for team in spec.teams],
)

pulumi.export("namespace", namespace.name)
pulumi.export("volumeClaims", {"data": volumes.data_claim, "output": volumes.output_claim})
pulumi.export("tensorboard", monitoring.tensorboard_command)
pulumi.export("teamTensorboards", monitoring.team_tensorboard_commands)
pulumi.export("datasetImports", {imp.job_name: imp.namespace for imp in datasets})
pulumi.export("jobs", {job.job_name: {"namespace": job.namespace, "commands": job.commands} for job in jobs})


def defaults_in(where: TrainingNamespace, storage: SharedVolumes) -> dict:
    """What `ack-jobs submit` builds a job with in ``where``: the context the stack's own jobs get."""
    return job_defaults(
        platform_context(namespace=where, storage=storage, pool=pool, registry=registry, trainer_v2=trainer_v2),
        backend=spec.training.backend,
        registry=registry.repository_url if registry is not None else None,
    )


pulumi.export("jobDefaults", defaults_in(namespace, volumes))
pulumi.export("teamJobDefaults", {name: defaults_in(ns, team_volumes[name]) for name, ns in teams.items()})

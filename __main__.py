"""The ack-training-platform program: validate the stack, compose, export."""

import pulumi

from components import (
    AckCluster,
    ContainerRegistry,
    GpuNodePool,
    Monitoring,
    NasStorage,
    Network,
    SharedVolumes,
    TrainerV2,
    TrainingJob,
    TrainingNamespace,
    TrainingOperator,
    local_providers,
    platform_context,
)
from components.manifests import (
    cluster_addons,
    job_defaults,
    kueue_objects,
    kueue_queue_name,
    mirrored_namespaces,
    system_node_selector,
    v2_fabrics,
)
from components.preflight import check_cloud
from components.stack import stack_secret, stack_spec

spec = stack_spec()
check_cloud(spec)
pool = registry = cluster = None
if spec.cluster.local is not None:
    provider, kept_provider = local_providers(spec.cluster.local)
    namespace = TrainingNamespace("training", spec.training, provider=provider)
    volumes = SharedVolumes("shared", spec.storage, namespace=namespace, provider=kept_provider)
else:
    network = Network(spec.cluster.name, spec.network)
    cluster = AckCluster(
        spec.cluster.name,
        spec.cluster,
        network,
        spec.network,
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
            autoscaler=cluster.autoscaler,
            addons=cluster.addons,
            keep_addons=cluster.adopted,
        )
    namespace = TrainingNamespace("training", spec.training, provider=provider)
    storage = NasStorage(
        "nas",
        spec.storage,
        network=network,
        provider=provider,
        zone_id=spec.nas_zone,
        mount_vswitch_index=spec.nas_vswitch,
    )
    oss_credentials = (stack_secret("ossAccessKeyId"), stack_secret("ossAccessKeySecret")) if spec.storage.oss else None
    volumes = SharedVolumes(
        "shared",
        spec.storage,
        namespace=namespace,
        provider=cluster.kept_provider,
        nas_server=storage.server,
        depends_on=storage.ready,
        region=spec.region,
        oss_credentials=oss_credentials,
    )
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
            # With a mirror, what the stack installs pulls from the registry too.
            pulling_namespaces=mirrored_namespaces(spec),
            keep_addons=cluster.adopted,
            password=stack_secret("registryPassword"),
        )
    pulumi.export("clusterId", cluster.cluster_id)
    access = cluster.api_server_access
    pulumi.export("apiServerAccess", {"aclId": access.acl_id, "aclStatus": access.acl_status} if access else None)
    pulumi.export("nasServer", storage.server)
    pulumi.export("registry", {"pushUrl": registry.push_url, "pullUrl": registry.repository_url} if registry else None)

operator = TrainingOperator(
    "training-operator",
    spec.operator,
    provider=provider,
    image_mirror=spec.image_mirror,
    node_selector=system_node_selector(spec.cluster),
    pulls_after=registry.ready if registry is not None and spec.image_mirror else None,
)
queued = spec.trainer_v2.kueue.enabled
trainer_v2 = (
    TrainerV2(
        "trainer-v2",
        spec.trainer_v2,
        provider=provider,
        fabrics=v2_fabrics(spec),
        queue_objects=kueue_objects(spec) if queued else (),
        queue=kueue_queue_name(spec) if queued else None,
        image_mirror=spec.image_mirror,
        node_selector=system_node_selector(spec.cluster),
    )
    if spec.uses_trainer_v2
    else None
)
jobs = [
    TrainingJob(
        job.name,
        job,
        namespace=namespace,
        storage=volumes,
        pool=pool,
        registry=registry,
        operator=operator,
        trainer_v2=trainer_v2,
        backend=spec.job_backend(job),
        provider=provider,
    )
    for job in spec.jobs
]

monitoring = Monitoring(
    "monitoring",
    spec,
    namespace=namespace,
    storage=volumes,
    provider=provider,
    node_selector=system_node_selector(spec.cluster),
    registry=registry,
    cluster_id=cluster.cluster_id if cluster is not None else None,
    arms_after=cluster.addons if cluster is not None else None,
)

pulumi.export("namespace", namespace.name)
pulumi.export("volumeClaims", {"data": volumes.data_claim, "output": volumes.output_claim})
pulumi.export("tensorboard", monitoring.tensorboard_command)
pulumi.export("jobs", {job.job_name: {"namespace": job.namespace, "commands": job.commands} for job in jobs})
# What `ack-jobs submit` builds a job with: the context the stack's own jobs get.
pulumi.export(
    "jobDefaults",
    job_defaults(
        platform_context(namespace=namespace, storage=volumes, pool=pool, registry=registry, trainer_v2=trainer_v2),
        backend=spec.training.backend,
        registry=registry.repository_url if registry is not None else None,
    ),
)

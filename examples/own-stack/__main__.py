"""A team's own stack: an existing ACK cluster gets a spot GPU pool, shared volumes and
one fine-tuning job, composed from the platform's components; the same job runs again on
Kubeflow Trainer v2, which the cluster already runs.

    pulumi config set clusterId c-xxxxxxxx
    pulumi config set --secret kubeconfig "$(cat ~/.kube/ack)"
    pulumi config set --path 'vswitchIds[0]' vsw-xxxxxxxx
    pulumi up
"""

import pulumi
import pulumi_kubernetes as k8s

from ack_training_platform.components import GpuNodePool, SharedVolumes, TrainerV2, TrainingJob, TrainingNamespace
from ack_training_platform.components.config import (
    GpuPoolSpec,
    StorageSpec,
    TrainerV2Spec,
    TrainingJobSpec,
    TrainingNamespaceSpec,
)

config = pulumi.Config()
cluster_id = config.get("clusterId") or "c-example"
provider = k8s.Provider("ack", kubeconfig=config.get_secret("kubeconfig"), cluster_identifier=cluster_id)

pool = GpuNodePool(
    "a10",
    GpuPoolSpec(
        name="a10",
        instance_types=["ecs.gn7i-c8g1.2xlarge", "ecs.gn7i-c16g1.4xlarge"],
        gpus_per_node=1,
        spot_strategy="SpotAsPriceGo",
        max_size=4,
    ),
    cluster_id=cluster_id,
    vswitch_ids=config.get_object("vswitchIds") or ["vsw-example"],
    worker_role=f"{pulumi.get_stack()}-a10-nodes",
)
namespace = TrainingNamespace("team-a", TrainingNamespaceSpec(namespace="team-a", gpu_quota=4), provider=provider)
# The cluster already has a NAS StorageClass; claims are made in it and kept on destroy.
volumes = SharedVolumes(
    "team-a",
    StorageSpec(storage_class_name="alibabacloud-cnfs-nas", create_storage_class=False),
    namespace=namespace,
    provider=provider,
)
finetune = TrainingJobSpec(
    name="finetune",
    image="registry-vpc.cn-hangzhou.aliyuncs.com/team-a/trainer:v1.4.2",
    cpu="6",
    memory="24Gi",
    trainer={"model": "gpt", "max_steps": 20000, "batch_size": 16},
)
job = TrainingJob("finetune", finetune, namespace=namespace, storage=volumes, pool=pool, provider=provider)
pulumi.export("commands", job.commands)

# Trainer v2 runs in the cluster already: only the platform's runtime is created.
trainer_v2 = TrainerV2("trainer-v2", TrainerV2Spec(install=False), provider=provider, gpu_placement=pool.placement)
job_v2 = TrainingJob(
    "finetune-v2",
    finetune.model_copy(update={"name": "finetune-v2", "backend": "v2"}),
    namespace=namespace,
    storage=volumes,
    pool=pool,
    trainer_v2=trainer_v2,
    provider=provider,
)
pulumi.export("commandsV2", job_v2.commands)

"""A team's own stack: an existing ACK cluster gets a spot GPU pool, shared volumes and
one fine-tuning job, composed from the platform's components.

    pulumi config set clusterId c-xxxxxxxx
    pulumi config set --secret kubeconfig "$(cat ~/.kube/ack)"
    pulumi config set --path 'vswitchIds[0]' vsw-xxxxxxxx
    pulumi up
"""

import pulumi
import pulumi_kubernetes as k8s

from components import GpuNodePool, SharedVolumes, TrainingJob, TrainingNamespace
from components.config import GpuPoolSpec, StorageSpec, TrainingJobSpec, TrainingNamespaceSpec

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
)
namespace = TrainingNamespace("team-a", TrainingNamespaceSpec(namespace="team-a", gpu_quota=4), provider=provider)
# The cluster already has a NAS StorageClass; claims are made in it and kept on destroy.
volumes = SharedVolumes(
    "team-a",
    StorageSpec(storage_class_name="alibabacloud-cnfs-nas", create_storage_class=False),
    namespace=namespace,
    provider=provider,
)
job = TrainingJob(
    "finetune",
    TrainingJobSpec(
        name="finetune",
        image="registry-vpc.cn-hangzhou.aliyuncs.com/team-a/trainer:v1.4.2",
        cpu="6",
        memory="24Gi",
        trainer={"model": "gpt", "max_steps": 20000, "batch_size": 16},
    ),
    namespace=namespace,
    storage=volumes,
    pool=pool,
    provider=provider,
)
pulumi.export("commands", job.commands)

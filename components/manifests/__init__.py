"""Pure builders: validated specs in, Kubernetes manifest dicts out.

Nothing here imports Pulumi. The components wrap these functions (through ``apply``
where an input is only known after deployment), and the offline plan and the golden
tests read the very same dicts.
"""

from .base import BASELINE, MANAGED_BY, POOL_LABEL, SYSTEM_POOL, Manifest, pod_spec
from .fabrics import ERDMA, FABRICS, FabricProfile
from .jobs.datasets import (
    DATASET_LABEL,
    IMPORT_CONTAINER,
    SOURCE_MOUNT,
    import_job,
    import_job_name,
    oss_source_objects,
    source_claim_name,
)
from .jobs.defaults import context_from_defaults, job_defaults
from .jobs.env import (
    CHECKPOINT_KEY_FILE,
    DATA_MOUNT,
    GENERATED_KEY,
    OUTPUT_MOUNT,
    TERMINATION_GRACE_S,
    generated_key_secret,
)
from .jobs.mpi_runtime import mpi_training_runtime
from .jobs.names import KINDS, JobKind
from .jobs.pod import (
    MASTER_PORT,
    REPLACED_ON_CHANGE,
    JobContext,
    job_command,
    kubectl_commands,
    pytorch_job,
)
from .jobs.trainjob import (
    REPLACED_ON_CHANGE_V2,
    runtime_name,
    train_job,
    training_runtime,
    trainjob_kubectl_commands,
)
from .jobs.v1_kinds import kubeflow_job, v1_replaced_on_change
from .placement import (
    CPU_PLACEMENT,
    GPU_RESOURCE,
    Placement,
    pool_node_labels,
    pool_placement,
    pool_tags,
)
from .platform.cluster import (
    ACR_HELPER_ADDON,
    CREATION_ADDONS,
    NODE_REPAIR_ADDON,
    acr_helper_config,
    cluster_addons,
    creation_addons,
)
from .platform.image_refs import mirrored, pulled, repository_and_tag
from .platform.kueue import kueue_objects, kueue_queue_name, v2_fabrics
from .platform.operator import (
    OPERATOR_NAMESPACE,
    customize_operator_object,
    customized_operator_objects,
    operator_customization,
    operator_images,
    system_node_selector,
)
from .platform.ram import ecs_trust_policy, node_policy, oss_read_policy, service_account_trust_policy
from .platform.storage import (
    NAS_PROVISIONER,
    NFS_MOUNT_OPTIONS,
    OSS_RRSA_SERVICE_ACCOUNT,
    claim_ref,
    nas_persistent_volume,
    nas_storage_class,
    oss_persistent_volume,
    persistent_volume_claim,
    shared_volume_path,
)
from .platform.trainer_v2 import (
    KUEUE_NAMESPACE,
    TRAINER_V2_NAMESPACE,
    kueue_values,
    trainer_v2_images,
    trainer_v2_values,
)
from .platform.volcano import (
    VOLCANO_NAMESPACE,
    VOLCANO_SCHEDULER_CONF,
    customized_volcano_objects,
    is_admission,
    volcano_images,
    waits_for_admission,
)
from .tenancy.admission import team_admission
from .tenancy.boundary import TeamBoundary
from .tenancy.namespace import docker_config_json, training_namespace
from .tenancy.stack_boundary import team_boundary
from .tenancy.teams import (
    directory_owner_job,
    job_network_policy,
    run_as,
    team_access,
    team_namespace,
    team_network_policies,
)

__all__ = [
    "TeamBoundary",
    "team_admission",
    "team_boundary",
    "DATASET_LABEL",
    "IMPORT_CONTAINER",
    "SOURCE_MOUNT",
    "import_job",
    "import_job_name",
    "oss_source_objects",
    "source_claim_name",
    "CHECKPOINT_KEY_FILE",
    "GENERATED_KEY",
    "generated_key_secret",
    "ACR_HELPER_ADDON",
    "CPU_PLACEMENT",
    "CREATION_ADDONS",
    "creation_addons",
    "DATA_MOUNT",
    "ERDMA",
    "FABRICS",
    "FabricProfile",
    "GPU_RESOURCE",
    "JobContext",
    "context_from_defaults",
    "ecs_trust_policy",
    "node_policy",
    "oss_read_policy",
    "service_account_trust_policy",
    "job_defaults",
    "KUEUE_NAMESPACE",
    "MANAGED_BY",
    "MASTER_PORT",
    "Manifest",
    "NAS_PROVISIONER",
    "NFS_MOUNT_OPTIONS",
    "OSS_RRSA_SERVICE_ACCOUNT",
    "NODE_REPAIR_ADDON",
    "OPERATOR_NAMESPACE",
    "OUTPUT_MOUNT",
    "POOL_LABEL",
    "Placement",
    "REPLACED_ON_CHANGE",
    "REPLACED_ON_CHANGE_V2",
    "SYSTEM_POOL",
    "TERMINATION_GRACE_S",
    "TRAINER_V2_NAMESPACE",
    "VOLCANO_NAMESPACE",
    "VOLCANO_SCHEDULER_CONF",
    "acr_helper_config",
    "claim_ref",
    "cluster_addons",
    "customize_operator_object",
    "docker_config_json",
    "job_command",
    "kueue_objects",
    "kueue_queue_name",
    "kueue_values",
    "kubectl_commands",
    "kubeflow_job",
    "mpi_training_runtime",
    "v1_replaced_on_change",
    "KINDS",
    "JobKind",
    "mirrored",
    "pulled",
    "repository_and_tag",
    "nas_persistent_volume",
    "nas_storage_class",
    "operator_customization",
    "customized_operator_objects",
    "pod_spec",
    "system_node_selector",
    "oss_persistent_volume",
    "persistent_volume_claim",
    "pool_node_labels",
    "pool_placement",
    "pool_tags",
    "pytorch_job",
    "runtime_name",
    "shared_volume_path",
    "operator_images",
    "train_job",
    "training_namespace",
    "BASELINE",
    "directory_owner_job",
    "job_network_policy",
    "run_as",
    "team_access",
    "team_namespace",
    "team_network_policies",
    "training_runtime",
    "trainer_v2_images",
    "trainer_v2_values",
    "trainjob_kubectl_commands",
    "v2_fabrics",
    "volcano_images",
    "customized_volcano_objects",
    "is_admission",
    "waits_for_admission",
]

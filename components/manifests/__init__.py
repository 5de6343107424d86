"""Pure builders: validated specs in, Kubernetes manifest dicts out.

Nothing here imports Pulumi. The components wrap these functions (through ``apply``
where an input is only known after deployment), and the offline plan and the golden
tests read the very same dicts.
"""

from .base import MANAGED_BY, POOL_LABEL, SYSTEM_POOL, Manifest
from .cluster import (
    ACR_HELPER_ADDON,
    CREATION_ADDONS,
    NODE_REPAIR_ADDON,
    acr_helper_config,
    api_server_acl_command,
    cluster_addons,
)
from .jobs import (
    DATA_MOUNT,
    MASTER_PORT,
    OUTPUT_MOUNT,
    REPLACED_ON_CHANGE,
    TERMINATION_GRACE_S,
    JobContext,
    job_command,
    kubectl_commands,
    pytorch_job,
)
from .namespace import docker_config_json, training_namespace
from .operator import (
    OPERATOR_NAMESPACE,
    VOLCANO_NAMESPACE,
    VOLCANO_REPOSITORY,
    VOLCANO_SCHEDULER_CONF,
    customize_operator_object,
    mirrored,
    operator_customization,
    operator_source,
    system_node_selector,
    third_party_images,
    volcano_values,
)
from .placement import (
    CPU_PLACEMENT,
    ERDMA,
    FABRICS,
    GPU_RESOURCE,
    FabricProfile,
    Placement,
    pool_node_labels,
    pool_placement,
    pool_tags,
)
from .storage import (
    NAS_PROVISIONER,
    NFS_MOUNT_OPTIONS,
    claim_ref,
    nas_persistent_volume,
    nas_storage_class,
    oss_persistent_volume,
    persistent_volume_claim,
    shared_volume_path,
)

__all__ = [
    "ACR_HELPER_ADDON",
    "CPU_PLACEMENT",
    "CREATION_ADDONS",
    "DATA_MOUNT",
    "ERDMA",
    "FABRICS",
    "FabricProfile",
    "GPU_RESOURCE",
    "JobContext",
    "MANAGED_BY",
    "MASTER_PORT",
    "Manifest",
    "NAS_PROVISIONER",
    "NFS_MOUNT_OPTIONS",
    "NODE_REPAIR_ADDON",
    "OPERATOR_NAMESPACE",
    "OUTPUT_MOUNT",
    "POOL_LABEL",
    "Placement",
    "REPLACED_ON_CHANGE",
    "SYSTEM_POOL",
    "TERMINATION_GRACE_S",
    "VOLCANO_NAMESPACE",
    "VOLCANO_REPOSITORY",
    "VOLCANO_SCHEDULER_CONF",
    "acr_helper_config",
    "api_server_acl_command",
    "claim_ref",
    "cluster_addons",
    "customize_operator_object",
    "docker_config_json",
    "job_command",
    "kubectl_commands",
    "mirrored",
    "nas_persistent_volume",
    "nas_storage_class",
    "operator_customization",
    "operator_source",
    "system_node_selector",
    "oss_persistent_volume",
    "persistent_volume_claim",
    "pool_node_labels",
    "pool_placement",
    "pool_tags",
    "pytorch_job",
    "shared_volume_path",
    "third_party_images",
    "training_namespace",
    "volcano_values",
]

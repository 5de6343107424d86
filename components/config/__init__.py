"""The one validated description of a training platform.

A stack file (``stacks/Pulumi.<stack>.yaml``) is turned into a :class:`PlatformSpec`
here, and nowhere else. Every top-level model field is one stack config key under the
``ack-training-platform:`` namespace, spelled in camelCase in the stack file. Loading
either returns a fully validated spec or raises :class:`ConfigError` whose messages
name the stack key path (``ack-training-platform:gpuPool.max_size``), the bad value and
what would be valid.

This module is pure: it imports neither Pulumi nor torch, so the offline plan, the
tests and the docs' config reference (docs/configuration.md) all read the same models.
"""

from .base import (
    DEFAULT_CPU_SHM_GIB,
    DEFAULT_GPU_TAINT_KEY,
    DEFAULT_KUEUE_VERSION,
    DEFAULT_OPERATOR_VERSION,
    DEFAULT_POD_CIDR,
    DEFAULT_SERVICE_CIDR,
    DEFAULT_SHM_PER_GPU_GIB,
    DEFAULT_TRAINER_V2_VERSION,
    DEFAULT_VOLCANO_VERSION,
    DEFAULT_VPC_CIDR,
    JOB_NAME_MAX,
    POOL_LABEL,
    PROJECT,
    REGION_KEY,
    SECRET_KEYS,
    SYSTEM_POOL_NAME,
    TRAINER_V2_MIN_KUBERNETES,
    Cidr,
    ConfigError,
    Cpu,
    DnsLabel,
    Quantity,
    Spec,
    SpecError,
    field_error,
    quantity_bytes,
)
from .cluster import (
    ApiServerSpec,
    AutoscalerSpec,
    ClusterSpec,
    LocalClusterSpec,
    NetworkSpec,
    SystemPoolSpec,
    VSwitchSpec,
)
from .costs import BudgetSpec, CostsSpec, InstancePriceSpec
from .datasets import DatasetImportSpec, oss_location
from .fit import job_gpus, job_shm_size, nodes_needed
from .job_settings import (
    RESERVED_PRIORITY_PREFIX,
    CheckpointKeySpec,
    ElasticSpec,
    RunPolicySpec,
    SchedulingSpec,
    SecretEnv,
    SecretKeySelector,
    TrainerArgs,
    topology_problem,
)
from .loading import load_spec, missing_credentials, stack_schema
from .monitoring import AlertThresholds, MonitoringScope, MonitoringSpec, PrometheusMode, TensorBoardSpec
from .node_health import NodeHealthSpec
from .operator import KueueSpec, KueueTopologySpec, OperatorSpec, TrainerV2Spec, TrainingNamespaceSpec, VolcanoSpec
from .platform import PlatformSpec
from .pools import ERDMA_INSTANCE_FAMILIES, Fabric, GpuPoolSpec, TaintSpec
from .registry import RegistrySpec
from .storage import EXTREME_ROOT, NasSpec, OssSpec, StorageSpec, VolumeSpec
from .teams import TeamMemberSpec, TeamQuotaSpec, TeamSpec
from .training_job import Backend, TrainingJobSpec, v2_conflict

__all__ = [
    "AlertThresholds",
    "ApiServerSpec",
    "AutoscalerSpec",
    "Backend",
    "BudgetSpec",
    "CheckpointKeySpec",
    "SecretEnv",
    "SecretKeySelector",
    "Cidr",
    "ClusterSpec",
    "ConfigError",
    "CostsSpec",
    "InstancePriceSpec",
    "SpecError",
    "Cpu",
    "DEFAULT_CPU_SHM_GIB",
    "DEFAULT_GPU_TAINT_KEY",
    "DEFAULT_KUEUE_VERSION",
    "DEFAULT_OPERATOR_VERSION",
    "DEFAULT_POD_CIDR",
    "DEFAULT_SERVICE_CIDR",
    "DEFAULT_SHM_PER_GPU_GIB",
    "DEFAULT_TRAINER_V2_VERSION",
    "DEFAULT_VOLCANO_VERSION",
    "DEFAULT_VPC_CIDR",
    "DnsLabel",
    "ERDMA_INSTANCE_FAMILIES",
    "EXTREME_ROOT",
    "ElasticSpec",
    "Fabric",
    "GpuPoolSpec",
    "JOB_NAME_MAX",
    "KueueSpec",
    "KueueTopologySpec",
    "LocalClusterSpec",
    "MonitoringSpec",
    "NodeHealthSpec",
    "NasSpec",
    "NetworkSpec",
    "OperatorSpec",
    "OssSpec",
    "POOL_LABEL",
    "PROJECT",
    "PlatformSpec",
    "MonitoringScope",
    "PrometheusMode",
    "Quantity",
    "REGION_KEY",
    "RESERVED_PRIORITY_PREFIX",
    "RegistrySpec",
    "RunPolicySpec",
    "SECRET_KEYS",
    "SYSTEM_POOL_NAME",
    "SchedulingSpec",
    "Spec",
    "StorageSpec",
    "DatasetImportSpec",
    "oss_location",
    "SystemPoolSpec",
    "TRAINER_V2_MIN_KUBERNETES",
    "TaintSpec",
    "TeamMemberSpec",
    "TeamQuotaSpec",
    "TeamSpec",
    "TensorBoardSpec",
    "TrainerArgs",
    "TrainerV2Spec",
    "TrainingJobSpec",
    "TrainingNamespaceSpec",
    "VSwitchSpec",
    "VolcanoSpec",
    "VolumeSpec",
    "field_error",
    "job_gpus",
    "job_shm_size",
    "load_spec",
    "topology_problem",
    "missing_credentials",
    "nodes_needed",
    "quantity_bytes",
    "stack_schema",
    "v2_conflict",
]

"""Pulumi components for distributed PyTorch training on Alibaba Cloud ACK.

Import them into your own stack::

    from components import GpuNodePool, NasStorage, TrainingJob

Specs (``components.config``) and manifest builders (``components.manifests``) are
pure and import no Pulumi; nothing here imports torch.
"""

from .cluster import AckCluster, local_providers
from .config import ConfigError, PlatformSpec, TrainingJobSpec, load_spec
from .dataset_import import DatasetImport
from .gpu_pool import GpuNodePool
from .identity import node_role_name, oss_reader
from .manifests import Placement
from .monitoring import Monitoring
from .namespace import TrainingNamespace
from .network import Network
from .operator import TrainingOperator
from .registry import ContainerRegistry
from .storage import NasStorage, SharedVolumes
from .trainer_v2 import TrainerV2
from .training_job import TrainingJob, platform_context

__all__ = [
    "AckCluster",
    "ConfigError",
    "ContainerRegistry",
    "DatasetImport",
    "GpuNodePool",
    "Monitoring",
    "NasStorage",
    "Network",
    "Placement",
    "PlatformSpec",
    "SharedVolumes",
    "TrainerV2",
    "TrainingJob",
    "TrainingJobSpec",
    "TrainingNamespace",
    "TrainingOperator",
    "load_spec",
    "local_providers",
    "node_role_name",
    "oss_reader",
    "platform_context",
]

"""Pulumi components for distributed PyTorch training on Alibaba Cloud ACK.

Import them into your own stack (installed, they live under ``ack_training_platform``)::

    from ack_training_platform.components import GpuNodePool, NasStorage, TrainingJob

Specs (``components.config``) and manifest builders (``components.manifests``) are
pure and import no Pulumi; nothing here imports torch.
"""

import importlib
from typing import TYPE_CHECKING, Any

# Each name is imported when first used (PEP 562): the pure specs, builders and ack-jobs
# import without loading the Pulumi SDKs, which take seconds.
_HOMES = {
    "AckCluster": "cluster",
    "local_providers": "cluster",
    "ConfigError": "config",
    "DatasetImport": "datasets",
    "PlatformSpec": "config",
    "TrainingJobSpec": "config",
    "load_spec": "config",
    "GpuNodePool": "gpu_pool",
    "node_role_name": "identity",
    "oss_reader": "identity",
    "Placement": "manifests",
    "Monitoring": "monitoring",
    "TeamWorkspace": "monitoring",
    "TrainingNamespace": "namespace",
    "Network": "network",
    "TrainingOperator": "operator",
    "TrainingPlatform": "platform",
    "ContainerRegistry": "registry",
    "NasStorage": "storage",
    "SharedVolumes": "storage",
    "TrainerV2": "trainer_v2",
    "TrainingJob": "training_job",
    "platform_context": "training_job",
}

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
    "TeamWorkspace",
    "TrainerV2",
    "TrainingJob",
    "TrainingJobSpec",
    "TrainingNamespace",
    "TrainingOperator",
    "TrainingPlatform",
    "load_spec",
    "local_providers",
    "node_role_name",
    "oss_reader",
    "platform_context",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)


if TYPE_CHECKING:
    from .cluster import AckCluster, local_providers
    from .config import ConfigError, PlatformSpec, TrainingJobSpec, load_spec
    from .datasets import DatasetImport
    from .gpu_pool import GpuNodePool
    from .identity import node_role_name, oss_reader
    from .manifests import Placement
    from .monitoring import Monitoring, TeamWorkspace
    from .namespace import TrainingNamespace
    from .network import Network
    from .operator import TrainingOperator
    from .platform import TrainingPlatform
    from .registry import ContainerRegistry
    from .storage import NasStorage, SharedVolumes
    from .trainer_v2 import TrainerV2
    from .training_job import TrainingJob, platform_context

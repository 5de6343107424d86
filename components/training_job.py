"""TrainingJob: one typed job in, one kubeflow.org/v1 PyTorchJob out."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from ._k8s import TOKEN, resource_args
from .config import TrainingJobSpec
from .gpu_pool import GpuNodePool
from .manifests import CPU_PLACEMENT, JobContext, kubectl_commands, pytorch_job
from .namespace import TrainingNamespace
from .operator import TrainingOperator
from .registry import ContainerRegistry
from .storage import SharedVolumes


def job_image(spec: TrainingJobSpec, registry: ContainerRegistry | None) -> str:
    """The job's pinned image: its own reference, or its tag in the platform registry."""
    if spec.image is not None:
        return spec.image
    if registry is None:
        raise ValueError(f"job {spec.name!r} gives imageTag but no registry was passed")
    return f"{registry.repository_url}:{spec.image_tag}"


class TrainingJob(pulumi.ComponentResource):
    """A PyTorchJob whose placement, volumes, image and pull secret come from the
    platform's objects.

    Args:
        name: Pulumi resource name.
        spec: the validated job.
        namespace: where it runs (its service account is used).
        storage: the shared data/output volumes.
        pool: the GPU pool; ``None`` for CPU jobs.
        registry: the registry (image and pull secret); ``None`` for a full ``image``.
        operator: the Training Operator; the job waits for its CRDs.
        provider: the cluster's kubernetes provider.

    Attributes:
        manifest: the emitted PyTorchJob.
        commands: ``kubectl`` commands to follow the job.
    """

    def __init__(
        self,
        name: str,
        spec: TrainingJobSpec,
        *,
        namespace: TrainingNamespace,
        storage: SharedVolumes,
        pool: GpuNodePool | None = None,
        registry: ContainerRegistry | None = None,
        operator: TrainingOperator | None = None,
        provider: k8s.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:TrainingJob", name, None, opts)
        placement = pool.placement if pool is not None else CPU_PLACEMENT
        gpus = spec.gpus_per_node if spec.gpus_per_node is not None else placement.gpus_per_node
        job_namespace = spec.namespace or namespace.name
        self.manifest = pytorch_job(
            spec,
            JobContext(
                namespace=job_namespace,
                image=job_image(spec, registry),
                gpus=gpus,
                placement=placement,
                data_claim=storage.data_claim,
                output_claim=storage.output_claim,
                service_account=namespace.service_account if job_namespace == namespace.name else None,
                image_pull_secret=registry.pull_secret if registry is not None else None,
            ),
        )
        depends_on: list[pulumi.Resource] = [
            namespace.namespace,
            *storage.claims,
            *(operator.ready if operator else []),
        ]
        self.job = k8s.apiextensions.CustomResource(
            spec.name,
            **resource_args(self.manifest),
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends_on),
        )
        self.job_name = spec.name
        self.namespace = job_namespace
        self.commands = kubectl_commands(spec.name, job_namespace)
        self.register_outputs({"name": self.job_name, "namespace": self.namespace, "commands": self.commands})

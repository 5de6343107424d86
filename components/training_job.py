"""TrainingJob: one typed job in, one kubeflow.org/v1 PyTorchJob out."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from ._k8s import TOKEN, resource_args
from .config import TrainingJobSpec, job_gpus
from .gpu_pool import GpuNodePool
from .manifests import CPU_PLACEMENT, REPLACED_ON_CHANGE, JobContext, kubectl_commands, pytorch_job
from .namespace import TrainingNamespace
from .operator import TrainingOperator
from .registry import ContainerRegistry
from .storage import SharedVolumes

IMAGE_PLACEHOLDER = "<image>"


def job_image(spec: TrainingJobSpec, registry: ContainerRegistry | None) -> pulumi.Output[str]:
    """The job's pinned image: its own reference, or its tag in the platform registry."""
    if spec.image is not None:
        return pulumi.Output.from_input(spec.image)
    if registry is None:
        raise ValueError(f"job {spec.name!r} gives imageTag but no registry was passed")
    return pulumi.Output.concat(registry.repository_url, ":", spec.image_tag)


class TrainingJob(pulumi.ComponentResource):
    """A PyTorchJob whose placement, volumes, image and pull secret come from the
    platform's objects.

    Lifecycle: the v1 operator reads a job's replicas, command and policies only when it
    starts the job, so a change to any of them replaces the job (the old one is deleted
    first; the new one resumes from the job's last checkpoint). ``runPolicy.suspend`` and
    labels change in place. A finished job stays finished: it is deleted only by removing
    it from the stack.

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
        manifest: the emitted PyTorchJob; its image is an output, which may be known only
            after deployment.
        commands: ``kubectl`` commands to follow the job.

    Raises:
        ValueError: the job names another namespace than ``namespace``, whose claims and
            pull secret its pods need.
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
        if spec.namespace not in (None, namespace.name):
            raise ValueError(
                f"job {spec.name!r} names namespace {spec.namespace!r}, but its volumes and pull secret are in "
                f"{namespace.name!r}"
            )
        placement = pool.placement if pool is not None else CPU_PLACEMENT
        gpus = job_gpus(spec, placement.gpus_per_node)

        self.manifest = pytorch_job(
            spec,
            JobContext(
                namespace=namespace.name,
                image=IMAGE_PLACEHOLDER,
                gpus=gpus,
                placement=placement,
                data_claim=storage.data_claim,
                output_claim=storage.output_claim,
                service_account=namespace.service_account,
                image_pull_secret=registry.pull_secret if registry is not None else None,
            ),
        )
        # The registry's URL may be known only after deployment; everything else is known now.
        image = job_image(spec, registry)
        for replica in self.manifest["spec"]["pytorchReplicaSpecs"].values():
            for container in replica["template"]["spec"]["containers"]:
                container["image"] = image
        depends_on = pulumi.Output.from_input(operator.ready if operator else []).apply(
            lambda ready: [
                namespace.namespace,
                *storage.claims,
                *(pool.ready if pool else []),
                *(registry.ready if registry else []),
                *ready,
            ]
        )
        self.job = k8s.apiextensions.CustomResource(
            spec.name,
            **resource_args(self.manifest),
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=provider,
                depends_on=depends_on,
                replace_on_changes=list(REPLACED_ON_CHANGE),
                delete_before_replace=True,
            ),
        )
        self.job_name = spec.name
        self.namespace = namespace.name
        self.commands = kubectl_commands(spec.name, namespace.name)
        self.register_outputs({"name": self.job_name, "namespace": self.namespace, "commands": self.commands})

"""TrainingJob: one typed job in, one kubeflow.org/v1 PyTorchJob (backend v1) or one
trainer.kubeflow.org/v1alpha1 TrainJob (backend v2) out."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
from pydantic.alias_generators import to_camel

from ._k8s import IMAGE_PLACEHOLDER, TOKEN, TRAINER_IMAGE_PLACEHOLDER, resource_args, with_image, with_values
from .config import Backend, TrainingJobSpec, job_gpus
from .config.fit import pool_problem, quota_problem
from .config.teams import team_quota_owner
from .gpu_pool import GpuNodePool
from .manifests import (
    CPU_PLACEMENT,
    GENERATED_KEY,
    REPLACED_ON_CHANGE_V2,
    JobContext,
    Placement,
    generated_key_secret,
    job_network_policy,
    kubectl_commands,
    kubeflow_job,
    mpi_training_runtime,
    train_job,
    trainjob_kubectl_commands,
    v1_replaced_on_change,
)
from .manifests.jobs.pod import job_fabric
from .namespace import TrainingNamespace
from .operator import TrainingOperator
from .registry import ContainerRegistry, pinned_image
from .storage import SharedVolumes
from .trainer_v2 import TrainerV2
from .upstream.crd_schema import CrdMismatch, check_against_crd


class JobArgumentError(pulumi.RunError, ValueError):
    """A TrainingJob's spec conflicts with the pool or namespace it is given (the same rules
    as a stack file's jobs, named by argument), or its job does not fit the operator's CRD. As a ``RunError`` Pulumi reports the message
    alone, without a traceback (pulumi/errors.py, pulumi 3.272)."""


def check_job(
    name: str,
    spec: TrainingJobSpec,
    namespace: TrainingNamespace,
    pool: GpuNodePool | Placement | None,
    trainer_image: pulumi.Input[str] | None = None,
) -> None:
    """The stack file's cross-object rules for one job built through the component: its
    namespace holds its claims, it fits the pool's nodes, and the namespace's quota admits it.

    Raises:
        JobArgumentError: one line naming the argument and what would be valid.
    """

    def refuse(key: str, message: str) -> JobArgumentError:
        return JobArgumentError(f"TrainingJob {name!r}: {key}: {message}")

    if spec.namespace not in (None, namespace.name):
        raise refuse(
            "spec.namespace",
            f"{spec.namespace!r}, but its volumes and pull secret are in namespace {namespace.name!r} "
            "(the namespace argument): drop spec.namespace or give that namespace",
        )
    if spec.node_check is not None and spec.command is not None and trainer_image is None:
        raise refuse(
            "spec.nodeCheck",
            "the check runs the platform's trainer package, and the job's own command may run an image without it: "
            "pass trainer_image= (an image built from trainer/Dockerfile), or drop nodeCheck",
        )
    placement = pool if isinstance(pool, Placement) or pool is None else pool.placement
    gpus = job_gpus(spec, placement.gpus_per_node if placement is not None else 0)
    if gpus and pool is None:
        raise refuse(
            "spec.gpusPerNode",
            f"the job asks for {gpus} GPUs per node but no pool is given: pass pool=, or set gpus_per_node=0 for a "
            "CPU job",
        )
    # A pool created elsewhere is known by its placement only: its sizes are not checked here.
    problem = pool_problem(spec, pool.spec) if isinstance(pool, GpuNodePool) else None
    if problem is not None:
        raise refuse(f"spec.{to_camel(problem[0])}", f"{problem[1]} (the pool argument)")
    team = namespace.team
    if team is not None:
        too_big = quota_problem(spec, gpus, team.quota.model_dump(), team_quota_owner(team))
    elif namespace.gpu_quota is not None:
        too_big = quota_problem(spec, gpus, {"gpus": namespace.gpu_quota}, f"namespace {namespace.name!r}'s gpuQuota")
    else:
        too_big = None
    if too_big is not None:
        raise refuse("spec.nodes", f"{too_big} (the namespace argument)")


def platform_context(
    *,
    namespace: TrainingNamespace,
    storage: SharedVolumes,
    pool: GpuNodePool | Placement | None = None,
    registry: ContainerRegistry | None = None,
    trainer_v2: TrainerV2 | None = None,
) -> JobContext:
    """What every job takes from the platform's objects, for a job using the pool's whole node.

    Args:
        namespace: where jobs run (its service account, and a team's uid and gid, are used).
        storage: the shared data/output volumes.
        pool: the GPU pool, or the placement of one created elsewhere; ``None`` for CPU jobs.
        registry: the registry, whose pull secret jobs use; ``None`` for public images.
        trainer_v2: Trainer v2, whose queue v2 jobs join; ``None`` without it.

    Returns:
        A context whose image is a placeholder and whose GPUs are the pool's per node.
    """
    placement = CPU_PLACEMENT if pool is None else pool if isinstance(pool, Placement) else pool.placement
    return JobContext(
        namespace=namespace.name,
        image=IMAGE_PLACEHOLDER,
        gpus=placement.gpus_per_node,
        placement=placement,
        data_claim=storage.data_claim,
        output_claim=storage.output_claim,
        service_account=namespace.service_account,
        image_pull_secret=registry.pull_secret if registry is not None else None,
        queue=trainer_v2.queue if trainer_v2 is not None else None,
        security_context=namespace.security_context,
        topology_levels=trainer_v2.topology_levels if trainer_v2 is not None else (),
    )


GENERATED_KEY_LENGTH = 64
"""Characters of a generated checkpoint key: letters and digits, about 380 bits."""


def generated_key(
    spec: TrainingJobSpec,
    namespace: str,
    provider: k8s.Provider,
    depends_on: list[pulumi.Resource],
    parent: pulumi.Resource,
) -> list[pulumi.Resource]:
    """The Secret of a job's generated checkpoint key, when the job asks for one without naming a Secret.

    The key is generated once and kept in the stack's state, so a resumed or re-created job
    checks its earlier checkpoints with the same key. ``RandomPassword.result`` is a Pulumi
    secret in the state (pulumi-random 4.21.4 ``random_password.py``, ``additional_secret_outputs``),
    and so is the Secret's ``stringData`` (pulumi-kubernetes 4.34.2 ``core/v1/Secret.py`` wraps it
    in ``Output.secret``).
    """
    if spec.checkpoint_key is None or spec.checkpoint_key.secret_key_ref is not None:
        return []
    password = random.RandomPassword(
        f"{spec.name}-checkpoint-key",
        length=GENERATED_KEY_LENGTH,
        special=False,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    secret = k8s.core.v1.Secret(
        f"{spec.name}-checkpoint-key",
        metadata={"name": generated_key_secret(spec.name), "namespace": namespace},
        string_data={GENERATED_KEY: password.result},
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=depends_on),
    )
    return [secret]


class TrainingJob(pulumi.ComponentResource):
    """A PyTorchJob (backend v1) or a TrainJob (backend v2) whose placement, volumes, image
    and pull secret come from the platform's objects.

    Lifecycle, the same on both backends: the v1 operator reads a job's replicas, command
    and policies only when it starts the job, and Trainer v2 keeps a TrainJob's trainer,
    runtime and patches immutable, so a change to any of them replaces the job (the old one
    is deleted first; the new one resumes from the job's last checkpoint).
    ``runPolicy.suspend`` and labels change in place. A finished job stays finished: it is
    deleted only by removing it from the stack.

    Args:
        name: Pulumi resource name.
        spec: the validated job.
        namespace: where it runs (its service account is used).
        storage: the shared data/output volumes.
        pool: the GPU pool; or the placement of a pool created elsewhere (another stack or
            language), which the job then does not wait for; ``None`` for CPU jobs.
        registry: the registry (image and pull secret); ``None`` for a full ``image``.
        operator: the Training Operator; a v1 job waits for its CRDs.
        trainer_v2: Trainer v2; a v2 job waits for it and its runtimes, and joins its queue.
        backend: ``v1`` or ``v2``; the spec's own ``backend`` (else ``v1``) when unset.
        provider: the cluster's kubernetes provider.
        network_policy: let the job's pods reach each other through their namespace's
            default-deny NetworkPolicy.
        secret: the spec comes from an encrypted stack key: the job object's spec (image,
            command, env, ...) is a Pulumi secret; its metadata is not.
        deferred: texts in ``spec`` that stand for outputs of other resources, each with
            its output, which replaces it in what is applied (:mod:`components.package.outputs`).
        trainer_image: the platform's image with the ``trainer`` package, pinned, that the pre-job node
            check (``nodeCheck``) runs from; ``None``: the job's own image, which must then run the
            bundled trainer (no ``command``).

    Attributes:
        manifest: the emitted PyTorchJob or TrainJob; its image is an output, which may be
            known only after deployment.
        commands: ``kubectl`` commands to follow the job.
        runtime: an MPI job's own TrainingRuntime on backend v2 (only there), which the
            TrainJob waits for (:func:`~components.manifests.mpi_training_runtime`).

    Raises:
        JobArgumentError: (a ``ValueError``) the job names another namespace than
            ``namespace``, whose claims and pull secret its pods need; it does not fit the
            pool's nodes or ``maxSize``; it could never start within the namespace's quota; or
            (backend v1) it does not fit its kind's CRD in the operator's verified rendering,
            named by JSON path (:func:`~components.upstream.crd_schema.check_against_crd`).
    """

    def __init__(
        self,
        name: str,
        spec: TrainingJobSpec,
        *,
        namespace: TrainingNamespace,
        storage: SharedVolumes,
        pool: GpuNodePool | Placement | None = None,
        registry: ContainerRegistry | None = None,
        operator: TrainingOperator | None = None,
        trainer_v2: TrainerV2 | None = None,
        backend: Backend | None = None,
        provider: k8s.Provider,
        network_policy: bool = False,
        secret: bool = False,
        deferred: Mapping[str, pulumi.Input[Any]] | None = None,
        trainer_image: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        # Everything is checked before anything is registered.
        check_job(name, spec, namespace, pool, trainer_image)
        backend = backend or spec.backend or "v1"
        ctx = platform_context(
            namespace=namespace, storage=storage, pool=pool, registry=registry, trainer_v2=trainer_v2
        )
        ctx = dataclasses.replace(
            ctx,
            gpus=job_gpus(spec, ctx.placement.gpus_per_node),
            trainer_image=TRAINER_IMAGE_PLACEHOLDER if trainer_image is not None else None,
        )
        built = train_job(spec, ctx) if backend == "v2" else kubeflow_job(spec, ctx)
        if backend == "v1" and operator is not None:
            try:
                check_against_crd(built, operator.crd_schemas)
            except CrdMismatch as err:
                raise JobArgumentError(f"TrainingJob {name!r}: {err}") from None
        super().__init__(f"{TOKEN}:TrainingJob", name, None, opts)
        # The registry's URL may be known only after deployment; everything else is known now.
        deferred = deferred or {}
        image = deferred.get(spec.image) or pinned_image(spec.image, spec.image_tag, registry, f"job {spec.name!r}")
        trainer = {TRAINER_IMAGE_PLACEHOLDER: trainer_image} if trainer_image is not None else {}
        self.manifest = with_values(with_image(built, image), {**deferred, **trainer})
        if backend == "v2":
            controller: pulumi.Input[list[pulumi.Resource]] = trainer_v2.ready if trainer_v2 else []
            replaced_on_change = REPLACED_ON_CHANGE_V2
            self.commands = trainjob_kubectl_commands(spec.name, namespace.name)
        else:
            controller = operator.ready if operator else []
            replaced_on_change = v1_replaced_on_change(spec.framework)
            self.commands = kubectl_commands(spec.name, namespace.name, self.manifest["kind"])
        key = generated_key(spec, namespace.name, provider, [namespace.namespace], self)
        depends_on = pulumi.Output.from_input(controller).apply(
            lambda ready: [
                namespace.namespace,
                *key,
                *storage.claims,
                *(pool.ready if isinstance(pool, GpuNodePool) else []),
                *(registry.ready if registry else []),
                *ready,
            ]
        )
        if backend == "v2" and spec.framework == "mpi":
            # The job's own runtime (its image and command line): registered before the TrainJob
            # that names it, and deleted after it, with the job.
            runtime = with_values(with_image(mpi_training_runtime(spec, ctx, job_fabric(spec, ctx)), image), deferred)
            runtime_args = resource_args(runtime)
            if secret:
                runtime_args["spec"] = pulumi.Output.secret(runtime_args["spec"])
            self.runtime = k8s.apiextensions.CustomResource(
                f"{spec.name}-runtime",
                **runtime_args,
                opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends_on),
            )
            depends_on = depends_on.apply(lambda ready: [*ready, self.runtime])
        args = resource_args(self.manifest)
        if secret:
            # Its metadata (name, labels, annotations) is how the cluster finds and selects
            # the job, and stays readable.
            args["spec"] = pulumi.Output.secret(args["spec"])
        self.job = k8s.apiextensions.CustomResource(
            spec.name,
            **args,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=provider,
                depends_on=depends_on,
                replace_on_changes=list(replaced_on_change),
                delete_before_replace=True,
            ),
        )
        if network_policy:
            k8s.networking.v1.NetworkPolicy(
                f"{spec.name}-network",
                **resource_args(job_network_policy(spec.name, namespace.name)),
                opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[namespace.namespace]),
            )
        self.job_name = spec.name
        self.namespace = namespace.name
        self.register_outputs({"name": self.job_name, "namespace": self.namespace, "commands": self.commands})

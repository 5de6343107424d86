"""The whole platform of one validated stack as one component: :class:`TrainingPlatform`:
network, cluster, pools, storage, registry, namespaces, operator, Trainer v2, monitoring,
datasets and jobs, each a child of the platform (docs/components.md shows a program)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cached_property
from typing import Any

import pulumi

from ._k8s import TOKEN
from .config import PlatformSpec
from .config.costs import price_table
from .config.node_health import trainer_image
from .datasets import DatasetImport
from .foundation import cloud_foundation, hand_team_directories, local_foundation
from .manifests import (
    job_defaults,
    kueue_objects,
    kueue_queue_name,
    system_node_selector,
    team_boundary,
    v2_fabrics,
)
from .manifests.platform.images import filled_copies
from .monitoring import Monitoring, TeamWorkspace
from .namespace import TrainingNamespace
from .operator import TrainingOperator
from .preflight import check_cloud
from .registry import image_pushed, pinned_image
from .storage import SharedVolumes
from .trainer_v2 import TrainerV2
from .training_job import TrainingJob, platform_context
from .upstream.local_sources import LocalSources


class TrainingPlatform(pulumi.ComponentResource):
    """A distributed-training platform on ACK, or on a local cluster, from one validated spec.

    Every part is a child of the platform. A stack whose parts were created as children of the
    stack itself (before this component existed) keeps them with ``moved_from_stack=True``:
    each part then carries an alias to its old place, and the engine derives its children's
    old URNs from it, so nothing is replaced.

    Args:
        name: the platform's resource name.
        spec: the validated stack (:func:`components.config.load_spec`).
        sources: the verified upstream copies the operators are rendered from
            (:func:`components.stack.local_sources`).
        image_digests: digests by image as pulled (the stack's image lock); empty pulls by tag.
        registry_password: the registry login password, kept secret; ``None`` without one.
        secret_jobs: whether the stack's ``jobs`` are encrypted, so that what is built from
            them stays secret.
        moved_from_stack: alias each part to the stack's own children, where an earlier
            program put them.
        deferred: texts in the jobs' specs that stand for outputs, for :class:`TrainingJob`.
        opts: resource options of the platform.

    Attributes:
        provider: the Kubernetes provider of the cluster (Python stacks only: not an output).
        cluster_id: the ACK cluster id; ``None`` on a local cluster.
        api_server_access: the API server's access list (``aclId``, ``aclStatus``), or ``None``.
        nas_server: the NAS mount target's domain; ``None`` on a local cluster.
        registry: the :class:`ContainerRegistry`, or ``None`` (its URLs are the ``registry`` stack output).
        namespace: the training namespace.
        volume_claims: the training namespace's ``data`` and ``output`` claim names.
        tensorboard: the TensorBoard ``kubectl port-forward`` command, or ``None``.
        team_tensorboards: each team's TensorBoard command, by team.
        dataset_imports: each dataset import Job's namespace, by Job name.
        jobs: each job's ``namespace`` and ``commands``, by job name.
        job_defaults: what ``ack-jobs submit`` builds a job with in the training namespace.
        team_job_defaults: the same in each team's namespace, by team.
        dashboard: the Grafana dashboard as JSON when the stack has one, or ``None``.
    """

    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        *,
        sources: LocalSources,
        image_digests: Mapping[str, str] | None = None,
        registry_password: pulumi.Input[str] | None = None,
        secret_jobs: bool = False,
        moved_from_stack: bool = False,
        deferred: Mapping[str, pulumi.Input[Any]] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        check_cloud(spec)  # before anything is registered
        mirror_fill = filled_copies(spec)
        super().__init__(f"{TOKEN}:TrainingPlatform", name, None, opts)
        self._spec = spec
        self._digests = dict(image_digests or {})
        self._deferred = dict(deferred or {})
        moved = [pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)] if moved_from_stack else None
        self._part = pulumi.ResourceOptions(parent=self, aliases=moved)
        if spec.cluster.local is not None:
            base = local_foundation(spec, self._part)
        else:
            base = cloud_foundation(
                spec,
                registry_password=registry_password,
                mirror_fill=mirror_fill,
                image_digests=self._digests,
                opts=self._part,
            )
        self.provider, self.cluster, self.pool, self.registry = base.provider, base.cluster, base.pool, base.registry
        self.training, self.volumes = base.training, base.volumes
        self.teams, self.team_volumes = base.teams, base.team_volumes
        self.cluster_id, self.nas_server = base.cluster_id, base.nas_server
        self.api_server_access = base.api_server_access
        hand_team_directories(spec, base)
        self._operators(sources)
        self._workloads(secret_jobs)
        self.register_outputs(self.stack_outputs())

    def _operators(self, sources: LocalSources) -> None:
        spec, registry = self._spec, self.registry
        # With a mirror, the third-party images come from it. It is public: their pulls need the
        # registry reachable, no credentials.
        mirror_pulls = registry.reachable if registry is not None and spec.image_mirror else ()
        common = {
            "provider": self.provider,
            "sources": sources,
            "image_mirror": spec.image_mirror,
            "image_digests": self._digests,
            "node_selector": system_node_selector(spec.cluster),
            "depends_on": mirror_pulls,
            "opts": self._part,
        }
        self.operator = TrainingOperator("training-operator", spec.operator, **common)
        self.trainer_v2 = None
        if not spec.uses_trainer_v2:
            return
        queued = spec.trainer_v2.kueue.enabled
        self.trainer_v2 = TrainerV2(
            "trainer-v2",
            spec.trainer_v2,
            fabrics=v2_fabrics(spec),
            queue_objects=kueue_objects(spec) if queued else (),
            queue=kueue_queue_name(spec) if queued else None,
            runtime_image=(
                pinned_image(*spec.runtime_image(), registry, "trainerV2's runtimes")
                if any(spec.runtime_image())
                else None
            ),
            gpu_placement=self.pool.placement if self.pool is not None else None,
            namespaces=[
                (platform_context(namespace=ns, storage=shared, registry=registry), [ns.namespace, *shared.claims])
                for ns, shared in self._workspaces()
            ],
            **common,
        )

    def _workspaces(self) -> list[tuple[TrainingNamespace, SharedVolumes]]:
        """The training namespace's and each team's namespace with its volumes."""
        return [(self.training, self.volumes), *((self.teams[n], self.team_volumes[n]) for n in self.teams)]

    def _where(self, team: str | None) -> tuple[TrainingNamespace, SharedVolumes]:
        return (self.teams[team], self.team_volumes[team]) if team else (self.training, self.volumes)

    def _workloads(self, secret_jobs: bool) -> None:
        spec, registry = self._spec, self.registry
        jobs = []
        checker, checker_tag = trainer_image(spec.monitoring.node_health, spec.jobs)
        for job in spec.jobs:
            if not image_pushed(registry, job.image_tag if job.image is None else None, f"job {job.name!r}"):
                continue
            check = f"job {job.name!r}'s node check"
            if job.node_check is not None and not image_pushed(registry, None if checker else checker_tag, check):
                continue
            check_image = pinned_image(checker, checker_tag, registry, check) if job.node_check is not None else None
            namespace, storage = self._where(job.team)
            jobs.append(
                TrainingJob(
                    job.name,
                    job,
                    namespace=namespace,
                    storage=storage,
                    pool=self.pool,
                    registry=registry,
                    operator=self.operator,
                    trainer_v2=self.trainer_v2,
                    backend=spec.job_backend(job),
                    provider=self.provider,
                    network_policy=spec.network_policies,
                    secret=secret_jobs,
                    deferred=self._deferred,
                    trainer_image=check_image,
                    opts=self._part,
                )
            )
        imports = []
        for dataset in spec.datasets:
            owner = f"dataset {dataset.name!r}"
            if not image_pushed(registry, dataset.image_tag if dataset.image is None else None, owner):
                continue
            namespace, storage = self._where(dataset.team)
            imports.append(
                DatasetImport(
                    dataset.name,
                    dataset,
                    namespace=namespace,
                    storage=storage,
                    provider=self.provider,
                    registry=registry,
                    region=spec.region,
                    security_context=namespace.security_context if dataset.team else None,
                    node_selector=system_node_selector(spec.cluster),
                    opts=self._part,
                )
            )
        cluster = self.cluster
        self.monitoring = Monitoring(
            "monitoring",
            spec.monitoring_scope(),
            namespace=self.training,
            storage=self.volumes,
            provider=self.provider,
            node_selector=system_node_selector(spec.cluster),
            registry=registry,
            cluster_id=cluster.cluster_id if cluster is not None else None,
            depends_on=cluster.addons if cluster is not None else (),
            teams=[TeamWorkspace(team, *self._where(team.name)) for team in spec.teams],
            opts=self._part,
        )
        self.namespace = self.training.name
        self.volume_claims = {"data": self.volumes.data_claim, "output": self.volumes.output_claim}
        self.tensorboard = self.monitoring.tensorboard_command
        self.team_tensorboards = self.monitoring.team_tensorboard_commands
        self.dataset_imports = {imp.job_name: imp.namespace for imp in imports}
        self.jobs = {job.job_name: {"namespace": job.namespace, "commands": job.commands} for job in jobs}
        self.job_defaults = self._defaults_in(self.training, self.volumes)
        # A team's namespace admits pods that mount its own claims only: submit checks --data against them.
        self.team_job_defaults = {
            team.name: {**self._defaults_in(*self._where(team.name)), "claims": list(team_boundary(spec, team).claims)}
            for team in spec.teams
        }

    @cached_property
    def dashboard(self) -> str | None:
        """The Grafana dashboard as JSON when the stack has one, or ``None``: built when first
        read, so a program that never reads it loads no Grafana SDK (about 30 ms)."""
        return _dashboard(self._spec)

    def _defaults_in(self, where: TrainingNamespace, storage: SharedVolumes) -> dict[str, Any]:
        """What ``ack-jobs submit`` builds a job with in ``where``: the context the stack's own jobs get."""
        registry = self.registry
        context = platform_context(
            namespace=where, storage=storage, pool=self.pool, registry=registry, trainer_v2=self.trainer_v2
        )
        return job_defaults(
            context,
            backend=self._spec.training.backend,
            registry=registry.repository_url if registry is not None else None,
        )

    def stack_outputs(self) -> dict[str, Any]:
        """The platform's outputs by the stack output names ``__main__.py`` exports: the
        cluster's, NAS's and the registry's only on ACK."""
        cloud = (
            {
                "clusterId": self.cluster_id,
                "apiServerAccess": self.api_server_access,
                "nasServer": self.nas_server,
                "registry": {"pushUrl": self.registry.push_url, "pullUrl": self.registry.repository_url}
                if self.registry
                else None,
            }
            if self.cluster is not None
            else {}
        )
        return {
            **cloud,
            "namespace": self.namespace,
            "volumeClaims": self.volume_claims,
            "tensorboard": self.tensorboard,
            "teamTensorboards": self.team_tensorboards,
            "datasetImports": self.dataset_imports,
            "jobs": self.jobs,
            "jobDefaults": self.job_defaults,
            "teamJobDefaults": self.team_job_defaults,
            # The stack's prices, which `ack-jobs cost` reads; a stack without them exports none.
            **(
                {"prices": prices} if (prices := price_table(self._spec.costs, self._spec.gpu_pool)) is not None else {}
            ),
            # How the exporters' series are labelled, which `ack-jobs cost` and `top` select by; none unless given.
            **(
                {"exporters": exporters}
                if (exporters := self._spec.monitoring.exporters.model_dump(by_alias=True, exclude_none=True))
                else {}
            ),
        }


def _dashboard(spec: PlatformSpec) -> str | None:
    if not spec.monitoring.dashboard:
        return None
    from .manifests.monitoring.dashboard import training_dashboard

    scope = spec.monitoring_scope()
    return json.dumps(
        training_dashboard(scope.namespaces, cost_currency=scope.cost_currency, exporters=scope.monitoring.exporters),
        sort_keys=True,
    )

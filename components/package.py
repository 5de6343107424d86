"""The components as a Pulumi component package, for stacks in every Pulumi language.

``pulumi package add`` on the ``package/`` directory (a source-based plugin package:
``PulumiPlugin.yaml`` with ``runtime: python``, https://www.pulumi.com/docs/reference/pulumiplugin-yaml/)
runs :func:`serve`, whose schema Pulumi's analyzer infers from the type annotations here
(``pulumi.provider.experimental``, Pulumi 3.272). Every input type is derived from the
pydantic spec the Python components take, so a spec field is an input of the package too;
the types are generated (:mod:`components.package_codegen`) and kept in step by a test.

A package component cannot take another component object as an input (the analyzer only
references resources of other, installed packages), so where the Python components pass
objects, these take what the objects carry: the pool's spec for the jobs' placement, a
kubeconfig for the cluster.
"""

# No ``from __future__ import annotations``: the analyzer reads the annotations as objects.
import json
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

from .config import DatasetImportSpec, GpuPoolSpec, StorageSpec, TrainingJobSpec, TrainingNamespaceSpec
from .config.datasets import check_dataset
from .dataset_import import DatasetImport
from .gpu_pool import GpuNodePool as PythonGpuNodePool
from .manifests import pool_placement
from .namespace import TrainingNamespace
from .package_types import DatasetImportSpec as DatasetImportInput
from .package_types import GpuPoolSpec as GpuPoolInput
from .package_types import StorageSpec as StorageInput
from .package_types import TrainingJobSpec as TrainingJobInput
from .package_types import TrainingNamespaceSpec as TrainingNamespaceInput
from .storage import SharedVolumes
from .training_job import TrainingJob

PACKAGE = "ack-training-platform"
VERSION = "0.1.0"


class InvalidArguments(ValueError):
    """A package component's arguments do not make a valid spec; each problem names its argument."""


def _spec(model: type[BaseModel], value: Any, argument: str) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as err:
        problems = []
        for error in err.errors():
            path = argument + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
            problems.append(f"{path}: {error['msg'].removeprefix('Value error, ')}")
        raise InvalidArguments("; ".join(problems)) from None


def _unique(names: list[str], argument: str) -> None:
    """Each name once: two objects of one name would be one Pulumi resource twice."""
    for i, name in enumerate(names):
        if name in names[:i]:
            raise InvalidArguments(f"{argument}[{i}].name: {name!r} is used twice")


class GpuNodePoolArgs(TypedDict):
    pool: GpuPoolInput
    """The pool, as ``gpuPool`` in a stack file."""
    cluster_id: pulumi.Input[str]
    """The ACK cluster the pool joins."""
    vswitch_ids: pulumi.Input[list[str]]
    """The vSwitches its nodes are placed in, cheapest zone first for spot pools."""
    worker_role: str
    """The name of the RAM role its nodes get: only what nodes need."""


class GpuNodePool(pulumi.ComponentResource):
    """A GPU node pool that scales from zero, tainted so that only training jobs land on it."""

    node_pool_id: pulumi.Output[str]
    """The ACK node pool id."""

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"{PACKAGE}:index:GpuNodePool", name, None, opts)
        pool = PythonGpuNodePool(
            name,
            _spec(GpuPoolSpec, args["pool"], "pool"),
            cluster_id=args["cluster_id"],
            vswitch_ids=args["vswitch_ids"],
            worker_role=args["worker_role"],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.node_pool_id = pool.node_pool_id
        self.register_outputs({"nodePoolId": self.node_pool_id})


class TeamTrainingArgs(TypedDict):
    kubeconfig: pulumi.Input[str]
    """A kubeconfig of the cluster (pass it as a secret)."""
    namespace: TrainingNamespaceInput
    """The namespace the team's jobs run in, as ``training`` in a stack file."""
    storage: NotRequired[StorageInput]
    """The shared data and output claims, as ``storage`` in a stack file; kept on destroy."""
    pool: NotRequired[GpuPoolInput]
    """The spec of the GPU pool the jobs run on (the one given to GpuNodePool); CPU jobs without it."""
    jobs: NotRequired[list[TrainingJobInput]]
    """The team's jobs, as ``jobs`` in a stack file."""
    datasets: NotRequired[list[DatasetImportInput]]
    """Datasets copied into the data claim, as ``datasets`` in a stack file (without ``team``: they go to this
    namespace); an ``oss://`` source names its ``ossRoleName``."""
    region: NotRequired[str]
    """The cluster's region (e.g. ``cn-hangzhou``): an ``oss://`` dataset without ``ossEndpoint`` reads the region's
    internal endpoint."""


class TeamTraining(pulumi.ComponentResource):
    """A team's training on an existing ACK cluster: its namespace, shared volumes, datasets and jobs."""

    namespace: pulumi.Output[str]
    """The namespace the jobs run in."""
    data_claim: pulumi.Output[str]
    """The claim holding datasets, mounted read-only by jobs."""
    output_claim: pulumi.Output[str]
    """The claim jobs write checkpoints and metrics to."""
    jobs: pulumi.Output[list[str]]
    """The jobs' names."""
    dataset_imports: pulumi.Output[list[str]]
    """The import Jobs' names (``import-<dataset>``): ``kubectl logs job/<name> -f`` follows one."""

    def __init__(self, name: str, args: TeamTrainingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"{PACKAGE}:index:TeamTraining", name, None, opts)
        namespace_spec = _spec(TrainingNamespaceSpec, args["namespace"], "namespace")
        storage_spec = _spec(StorageSpec, args.get("storage") or {}, "storage")
        pool_spec = _spec(GpuPoolSpec, args["pool"], "pool") if args.get("pool") else None
        job_specs = [_spec(TrainingJobSpec, job, f"jobs[{i}]") for i, job in enumerate(args.get("jobs") or [])]
        dataset_specs = [
            _spec(DatasetImportSpec, dataset, f"datasets[{i}]") for i, dataset in enumerate(args.get("datasets") or [])
        ]
        _unique([job.name for job in job_specs], "jobs")
        _unique([dataset.name for dataset in dataset_specs], "datasets")
        for i, dataset in enumerate(dataset_specs):
            if dataset.team is not None:
                raise InvalidArguments(
                    f"datasets[{i}].team: a stack file's key; TeamTraining's datasets go to its own namespace's "
                    "data claim, so drop team"
                )
            if dataset.oss is not None and dataset.oss_endpoint is None and not args.get("region"):
                raise InvalidArguments(
                    f"datasets[{i}].ossEndpoint: an oss:// source needs its endpoint, or region for the region's "
                    "internal one"
                )
            try:
                check_dataset(dataset, f"datasets[{i}]", storage=storage_spec, registry=False, local=False)
            except PydanticCustomError as err:
                raise InvalidArguments(f"{err.context['key']}: {err.message()}") from None
        provider = k8s.Provider(
            f"{name}-cluster", kubeconfig=args["kubeconfig"], opts=pulumi.ResourceOptions(parent=self)
        )
        inside = pulumi.ResourceOptions(parent=self)
        namespace = TrainingNamespace(name, namespace_spec, provider=provider, opts=inside)
        volumes = SharedVolumes(name, storage_spec, namespace=namespace, provider=provider, opts=inside)
        placement = pool_placement(pool_spec) if pool_spec is not None else None
        jobs = [
            TrainingJob(
                job.name, job, namespace=namespace, storage=volumes, pool=placement, provider=provider, opts=inside
            )
            for job in job_specs
        ]
        imports = [
            DatasetImport(
                dataset.name,
                dataset,
                namespace=namespace,
                storage=volumes,
                provider=provider,
                region=args.get("region"),
                opts=inside,
            )
            for dataset in dataset_specs
        ]
        self.namespace = pulumi.Output.from_input(namespace.name)
        self.data_claim = pulumi.Output.from_input(volumes.data_claim)
        self.output_claim = pulumi.Output.from_input(volumes.output_claim)
        self.jobs = pulumi.Output.from_input([job.job_name for job in jobs])
        self.dataset_imports = pulumi.Output.from_input([imported.job_name for imported in imports])
        self.register_outputs(
            {
                "namespace": self.namespace,
                "dataClaim": self.data_claim,
                "outputClaim": self.output_claim,
                "jobs": self.jobs,
                "datasetImports": self.dataset_imports,
            }
        )


COMPONENTS = [GpuNodePool, TeamTraining]


def schema() -> dict[str, Any]:
    """The package schema Pulumi's analyzer infers, as ``pulumi package get-schema`` would print it."""
    from pulumi.provider.experimental.component import ComponentProvider

    return json.loads(ComponentProvider(COMPONENTS, PACKAGE, version=VERSION).schema)


def serve() -> None:
    """Run as the package's plugin (``package/__main__.py``)."""
    from pulumi.provider.experimental import component_provider_host

    component_provider_host(COMPONENTS, PACKAGE, version=VERSION)

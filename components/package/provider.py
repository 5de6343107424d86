"""The components as a Pulumi component package, for stacks in every Pulumi language.

``pulumi package add`` on the ``package/`` directory (a source-based plugin package:
``PulumiPlugin.yaml`` with ``runtime: python``, https://www.pulumi.com/docs/reference/pulumiplugin-yaml/)
runs :func:`serve`, whose schema Pulumi's analyzer infers from the type annotations here
(``pulumi.provider.experimental``, Pulumi 3.272). Every input type is derived from the
pydantic spec the Python components take, so a spec field is an input of the package too;
the types are generated (:mod:`components.package.codegen`) and kept in step by a test.

A package component cannot take another component object as an input (the analyzer only
references resources of other, installed packages), so where the Python components pass
objects, these take what the objects carry: the pool's spec for the jobs' placement, a
kubeconfig for the cluster.
"""

# No ``from __future__ import annotations``: the analyzer reads the annotations as objects.
import json
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pulumi.provider.experimental.component import ComponentProvider
from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from ..config import DatasetImportSpec, GpuPoolSpec, PlatformSpec, StorageSpec, TrainingJobSpec, TrainingNamespaceSpec
from ..config.datasets import check_dataset
from ..config.fit import pool_problem
from ..datasets import DatasetImport
from ..gpu_pool import GpuNodePool as PythonGpuNodePool
from ..manifests import job_defaults, pool_placement
from ..namespace import TrainingNamespace
from ..platform import TrainingPlatform as PythonTrainingPlatform
from ..stack import image_lock, local_sources
from ..storage import SharedVolumes
from ..training_job import TrainingJob, platform_context
from .codegen import with_defaults
from .input_types import DatasetImportSpec as DatasetImportInput
from .input_types import GpuPoolSpec as GpuPoolInput
from .input_types import PlatformSpec as PlatformInput
from .input_types import StorageSpec as StorageInput
from .input_types import TrainingJobSpec as TrainingJobInput
from .input_types import TrainingNamespaceSpec as TrainingNamespaceInput
from .outputs import DeferredOutputs

PACKAGE = "ack-training-platform"
VERSION = "0.1.0"
PROJECT_DIR = Path(__file__).resolve().parents[2]
"""Where the package's upstream copies (``.upstream/``) and image locks (``stacks/``) are read: the
checkout or installed package the plugin runs from."""


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


def _known(args: Any, deferred: DeferredOutputs, *, keep: tuple[str, ...]) -> dict[str, Any]:
    """``args`` with each output of another resource replaced by its stand-in, except in ``keep``
    (inputs taken as outputs as they are).

    Raises:
        InvalidArguments: an output where the platform needs a value known when the program runs.
    """
    try:
        return {key: value if key in keep else deferred.known(value, _camel(key)) for key, value in args.items()}
    except ValueError as err:
        raise InvalidArguments(str(err)) from None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _unique(names: list[str], argument: str) -> None:
    """Each name once: two objects of one name would be one Pulumi resource twice."""
    for i, name in enumerate(names):
        if name in names[:i]:
            raise InvalidArguments(f"{argument}[{i}].name: {name!r} is used twice")


class GpuNodePoolArgs(TypedDict):
    pool: pulumi.Input[GpuPoolInput]
    """The pool, as `gpuPool` in a stack file."""
    cluster_id: pulumi.Input[str]
    """The ACK cluster the pool joins."""
    vswitch_ids: pulumi.Input[list[pulumi.Input[str]]]
    """The vSwitches its nodes are placed in, cheapest zone first for spot pools."""
    worker_role: pulumi.Input[str]
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
    provider: NotRequired[pulumi.Input[k8s.Provider]]
    """The cluster's Kubernetes provider (a `kubernetes.Provider` resource of your program)."""
    kubeconfig: NotRequired[pulumi.Input[str]]
    """Deprecated, kept for this release: a kubeconfig of the cluster (pass it as a secret), for which the
    component makes its own provider. Give `provider` instead."""
    namespace: pulumi.Input[TrainingNamespaceInput]
    """The namespace the team's jobs run in, as `training` in a stack file."""
    storage: NotRequired[pulumi.Input[StorageInput]]
    """The shared data and output claims, as `storage` in a stack file; kept on destroy."""
    pool: NotRequired[pulumi.Input[GpuPoolInput]]
    """The spec of the GPU pool the jobs run on (the one given to GpuNodePool); CPU jobs without it."""
    jobs: NotRequired[pulumi.Input[list[pulumi.Input[TrainingJobInput]]]]
    """The team's jobs, as `jobs` in a stack file."""
    datasets: NotRequired[pulumi.Input[list[pulumi.Input[DatasetImportInput]]]]
    """Datasets copied into the data claim, as `datasets` in a stack file (without `team`: they go to this
    namespace); an `oss://` source names its `ossRoleName`."""
    region: NotRequired[pulumi.Input[str]]
    """The cluster's region (e.g. `cn-hangzhou`): an `oss://` dataset without `ossEndpoint` reads the region's
    internal endpoint."""


def _team_provider(name: str, args: TeamTrainingArgs, team: pulumi.Resource) -> k8s.Provider:
    provider, kubeconfig = args.get("provider"), args.get("kubeconfig")
    if (provider is None) == (kubeconfig is None):
        raise InvalidArguments(
            "provider: give the cluster's Kubernetes provider (or, deprecated, kubeconfig), one of them"
        )
    if provider is not None:
        return provider
    pulumi.log.warn("TeamTraining: kubeconfig is deprecated and goes in the next release; pass provider", team)
    # The resource name a kubeconfig's provider always had: stacks that passed one keep it.
    return k8s.Provider(f"{name}-cluster", kubeconfig=kubeconfig, opts=pulumi.ResourceOptions(parent=team))


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
    """The import Jobs' names (`import-<dataset>`): `kubectl logs job/<name> -f` follows one."""
    job_commands: pulumi.Output[dict[str, Any]]
    """Each job's `kubectl` commands (`status`, `describe`, `pods`, logs), by job name."""
    job_defaults: pulumi.Output[dict[str, Any]]
    """What `ack-jobs submit` builds a job with in the namespace: image pull secret, claims, placement."""

    def __init__(self, name: str, args: TeamTrainingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"{PACKAGE}:index:TeamTraining", name, None, opts)
        deferred = DeferredOutputs(
            {r"^jobs\[\d+\]\.image$": "jobs[].image", r"^jobs\[\d+\]\.env\.[^.]+$": "jobs[].env"}
        )
        args = _known(args, deferred, keep=("provider", "kubeconfig"))
        namespace_spec = _spec(TrainingNamespaceSpec, args["namespace"], "namespace")
        storage_spec = _spec(StorageSpec, args.get("storage") or {}, "storage")
        pool_spec = _spec(GpuPoolSpec, args["pool"], "pool") if args.get("pool") else None
        job_specs = [_spec(TrainingJobSpec, job, f"jobs[{i}]") for i, job in enumerate(args.get("jobs") or [])]
        dataset_specs = [
            _spec(DatasetImportSpec, dataset, f"datasets[{i}]") for i, dataset in enumerate(args.get("datasets") or [])
        ]
        _unique([job.name for job in job_specs], "jobs")
        for i, job in enumerate(job_specs):
            # The pool's spec is what TrainingJob's check of a GpuNodePool reads: the placement TrainingJob is
            # given here carries no instance types, and its jobs would take the default cpu and memory on any node.
            problem = pool_problem(job, pool_spec) if pool_spec is not None else None
            if problem is not None:
                raise InvalidArguments(f"jobs[{i}].{to_camel(problem[0])}: {problem[1]} (the pool input)")
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
        provider = _team_provider(name, args, self)
        inside = pulumi.ResourceOptions(parent=self)
        namespace = TrainingNamespace(name, namespace_spec, provider=provider, opts=inside)
        volumes = SharedVolumes(name, storage_spec, namespace=namespace, provider=provider, opts=inside)
        placement = pool_placement(pool_spec) if pool_spec is not None else None
        jobs = [
            TrainingJob(
                job.name,
                job,
                namespace=namespace,
                storage=volumes,
                pool=placement,
                provider=provider,
                deferred=deferred.values,
                opts=inside,
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
        self.job_commands = pulumi.Output.from_input({job.job_name: job.commands for job in jobs})
        context = platform_context(namespace=namespace, storage=volumes, pool=placement)
        self.job_defaults = pulumi.Output.from_input(
            job_defaults(context, backend=namespace_spec.backend, registry=None)
        )
        self.register_outputs(
            {
                "jobCommands": self.job_commands,
                "jobDefaults": self.job_defaults,
                "namespace": self.namespace,
                "dataClaim": self.data_claim,
                "outputClaim": self.output_claim,
                "jobs": self.jobs,
                "datasetImports": self.dataset_imports,
            }
        )


class TrainingPlatformArgs(TypedDict):
    platform: pulumi.Input[PlatformInput]
    """The whole platform: the keys a stack file of this project sets under `ack-training-platform:`
    (`cluster`, `gpuPool`, `storage`, `teams`, `jobs`, ...), with `region` the cloud region."""
    registry_password: NotRequired[pulumi.Input[str]]
    """The registry login's password (pass it as a secret), when `registry.username` is set."""


class TrainingPlatform(pulumi.ComponentResource):
    """A whole training platform on ACK, or on a local cluster: network, cluster, GPU pool, storage,
    registry, namespaces, the Kubeflow controllers, monitoring, datasets and jobs."""

    cluster_id: pulumi.Output[str]
    """The ACK cluster id; empty on a local cluster."""
    nas_server: pulumi.Output[str]
    """The NAS mount target's domain; empty on a local cluster."""
    registry_url: pulumi.Output[str]
    """Where nodes pull the training image from (`<host>/<namespace>/<repository>`); empty without a registry."""
    namespace: pulumi.Output[str]
    """The training namespace."""
    data_claim: pulumi.Output[str]
    """The training namespace's data claim, mounted read-only by jobs."""
    output_claim: pulumi.Output[str]
    """The training namespace's output claim, where jobs write checkpoints and metrics."""
    team_namespaces: pulumi.Output[list[str]]
    """Each team's namespace."""
    jobs: pulumi.Output[list[str]]
    """The jobs' names."""
    dataset_imports: pulumi.Output[list[str]]
    """The dataset import Jobs' names."""
    tensorboard: pulumi.Output[str]
    """The `kubectl port-forward` command to the training namespace's TensorBoard; empty without one."""
    dashboard: pulumi.Output[str]
    """The Grafana dashboard as JSON, for Grafana's import; empty without one."""
    job_commands: pulumi.Output[dict[str, Any]]
    """Each job's `kubectl` commands, by job name."""
    job_defaults: pulumi.Output[dict[str, Any]]
    """What `ack-jobs submit` builds a job with in the training namespace."""
    team_job_defaults: pulumi.Output[dict[str, Any]]
    """The same in each team's namespace, by team."""

    def __init__(self, name: str, args: TrainingPlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"{PACKAGE}:index:TrainingPlatform", name, None, opts)
        # A job's image may also be TensorBoard's and the runtimes': only its env is applied alone.
        deferred = DeferredOutputs({r"^platform\.jobs\[\d+\]\.env\.[^.]+$": "platform.jobs[].env"})
        args = _known(args, deferred, keep=("registry_password",))
        spec = _spec(PlatformSpec, args["platform"], "platform")
        if spec.registry is not None and spec.registry.username and not args.get("registry_password"):
            raise InvalidArguments("registryPassword: platform.registry.username is set, so its password is needed")
        home = PROJECT_DIR
        platform = PythonTrainingPlatform(
            name,
            spec,
            sources=local_sources(home, spec),
            image_digests=image_lock(home, spec),
            registry_password=args.get("registry_password"),
            deferred=deferred.values,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.cluster_id = pulumi.Output.from_input(platform.cluster_id or "")
        self.nas_server = pulumi.Output.from_input(platform.nas_server or "")
        self.registry_url = pulumi.Output.from_input(platform.registry.repository_url if platform.registry else "")
        self.namespace = pulumi.Output.from_input(platform.namespace)
        self.data_claim = pulumi.Output.from_input(platform.volume_claims["data"])
        self.output_claim = pulumi.Output.from_input(platform.volume_claims["output"])
        self.team_namespaces = pulumi.Output.from_input([ns.name for ns in platform.teams.values()])
        self.jobs = pulumi.Output.from_input(list(platform.jobs))
        self.dataset_imports = pulumi.Output.from_input(list(platform.dataset_imports))
        self.tensorboard = pulumi.Output.from_input(platform.tensorboard or "")
        self.dashboard = pulumi.Output.from_input(platform.dashboard or "")
        self.job_commands = pulumi.Output.from_input({job: seen["commands"] for job, seen in platform.jobs.items()})
        self.job_defaults = pulumi.Output.from_input(platform.job_defaults)
        self.team_job_defaults = pulumi.Output.from_input(platform.team_job_defaults)
        self.register_outputs(
            {
                "clusterId": self.cluster_id,
                "nasServer": self.nas_server,
                "registryUrl": self.registry_url,
                "namespace": self.namespace,
                "dataClaim": self.data_claim,
                "outputClaim": self.output_claim,
                "teamNamespaces": self.team_namespaces,
                "jobs": self.jobs,
                "datasetImports": self.dataset_imports,
                "tensorboard": self.tensorboard,
                "dashboard": self.dashboard,
                "jobCommands": self.job_commands,
                "jobDefaults": self.job_defaults,
                "teamJobDefaults": self.team_job_defaults,
            }
        )


COMPONENTS = [GpuNodePool, TeamTraining, TrainingPlatform]


SECRET_INPUTS = {"TeamTraining": ("kubeconfig",), "TrainingPlatform": ("registryPassword",)}
"""Inputs marked ``secret`` in the schema, which the analyzer cannot mark: the generated SDKs
make them secrets whatever a program passes (pulumi/pulumi pkg/codegen/nodejs/gen.go wraps such an
input in ``pulumi.secret``, pkg/codegen/go/gen.go in ``pulumi.ToSecret``), so that neither lies in
plain in the component's state."""


class PackageProvider(ComponentProvider):
    """The components' provider, its schema with the specs' defaults (:func:`with_defaults`)
    and its secret inputs (:data:`SECRET_INPUTS`)."""

    def __init__(self) -> None:
        super().__init__(COMPONENTS, PACKAGE, version=VERSION)
        package = with_defaults(json.loads(self.schema))
        for component, names in SECRET_INPUTS.items():
            for name in names:
                package["resources"][f"{PACKAGE}:index:{component}"]["inputProperties"][name]["secret"] = True
        # The SDKs mark a deprecated input so that a program using it is warned where it is written.
        team = package["resources"][f"{PACKAGE}:index:TeamTraining"]["inputProperties"]
        team["kubeconfig"]["deprecationMessage"] = "kubeconfig goes in the next release: give provider instead."
        self.schema = json.dumps(package)


def schema() -> dict[str, Any]:
    """The package schema, as ``pulumi package get-schema`` would print it."""
    return json.loads(PackageProvider().schema)


def serve() -> None:
    """Run as the package's plugin (``package/__main__.py``): the engine's address is the argument."""
    import sys

    from pulumi.provider import main

    main(PackageProvider(), sys.argv[1:])

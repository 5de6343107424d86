"""The whole platform spec, cross-area rules, and loading a stack's config into it."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from .base import PROJECT, REGION_KEY, SECRET_KEYS, Spec, field_error
from .cluster import ClusterSpec, GpuPoolSpec, NetworkSpec
from .jobs import TrainingJobSpec
from .operator import OperatorSpec, TrainingNamespaceSpec
from .registry import RegistrySpec
from .storage import StorageSpec

# --- the platform --------------------------------------------------------------------


class PlatformSpec(Spec):
    """Everything one stack deploys. Each field is a stack config key."""

    region: str | None = None
    """Alibaba Cloud region, read from the provider's own key ``alicloud:region``."""
    network: NetworkSpec | None = None
    """VPC and vSwitches (ACK stacks; adopt with ``vpcId``)."""
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    gpu_pool: GpuPoolSpec | None = Field(default=None)
    """GPU node pool; CPU-only when unset."""
    storage: StorageSpec = Field(default_factory=StorageSpec)
    registry: RegistrySpec | None = None
    """Container registry for the training image; jobs must then give full image references."""
    operator: OperatorSpec = Field(default_factory=OperatorSpec)
    training: TrainingNamespaceSpec = Field(default_factory=TrainingNamespaceSpec)
    jobs: list[TrainingJobSpec] = Field(default_factory=list)
    """Training jobs to run; each becomes a PyTorchJob."""

    @property
    def is_local(self) -> bool:
        return self.cluster.local is not None

    @model_validator(mode="after")
    def _check(self) -> PlatformSpec:
        if self.is_local:
            for key, value in (
                ("network", self.network),
                ("gpuPool", self.gpu_pool),
                ("registry", self.registry),
                ("storage.nas", self.storage.nas),
                ("storage.oss", self.storage.oss),
            ):
                if value is not None:
                    raise field_error(key, f"a local cluster (cluster.local) creates no cloud resources: remove {key}")
        else:
            if self.region is None:
                raise PydanticCustomError(
                    "platform",
                    "ACK stacks need the region: pulumi config set alicloud:region cn-hangzhou",
                    {"key": "<region>"},
                )
            if self.network is None:
                raise field_error(
                    "network",
                    "ACK stacks need a network for nodes and NAS: give network.vswitches, "
                    "or adopt a VPC with network.vpcId and network.vswitchIds",
                )
            if self.storage.nas is None:
                raise field_error(
                    "storage.nas", "ACK stacks keep data on NAS: add storage.nas (may be {} for the defaults)"
                )
            nas = self.storage.nas
            if nas.access_cidr is not None and not nas.access_cidr.subnet_of(self.network.vpc_cidr):
                raise field_error(
                    "storage.nas.accessCidr",
                    f"{nas.access_cidr} is wider than the VPC ({self.network.vpc_cidr}): NAS access is limited to the VPC",
                )
        names = [job.name for job in self.jobs]
        for i, job in enumerate(self.jobs):
            if job.name in names[:i]:
                raise field_error(f"jobs[{i}].name", f"job name {job.name!r} is used twice")
            if job.image_tag is not None and self.registry is None:
                raise field_error(
                    f"jobs[{i}].image_tag",
                    "imageTag needs a registry; without one give a full image reference in image",
                )
            gpus = self.job_gpus(job)
            if gpus and self.gpu_pool is None:
                raise field_error(
                    f"jobs[{i}].gpus_per_node",
                    f"the job asks for {gpus} GPUs per node but the stack has no gpuPool; set gpusPerNode: 0 for a CPU job",
                )
            if self.gpu_pool is not None and gpus > self.gpu_pool.gpus_per_node:
                raise field_error(
                    f"jobs[{i}].gpus_per_node",
                    f"{gpus} GPUs per pod do not fit on a {self.gpu_pool.gpus_per_node}-GPU node of pool {self.gpu_pool.name!r}",
                )
            if job.network == "rdma" and not (self.gpu_pool and self.gpu_pool.rdma):
                raise field_error(f"jobs[{i}].network", "rdma networking needs a gpuPool with rdma: true")
            if (job.scheduling.queue or job.scheduling.min_available) and not self.operator.volcano.enabled:
                raise field_error(
                    f"jobs[{i}].scheduling",
                    "queues and gang scheduling need Volcano: set operator.volcano.enabled: true",
                )
        return self

    def job_gpus(self, job: TrainingJobSpec) -> int:
        """GPUs per pod of ``job``: its own setting, else the whole node of the GPU pool."""
        if job.gpus_per_node is not None:
            return job.gpus_per_node
        return self.gpu_pool.gpus_per_node if self.gpu_pool is not None else 0


# --- loading -------------------------------------------------------------------------


class ConfigError(Exception):
    """A stack's configuration is invalid; ``problems`` holds one message per bad key."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems

    def __str__(self) -> str:
        return "invalid stack configuration:\n" + "\n".join(f"  {p}" for p in self.problems)


def load_spec(raw: Mapping[str, Any]) -> PlatformSpec:
    """Validate a stack's config.

    Args:
        raw: namespaced config keys to values, as in a stack file's ``config:`` section
            (``{"ack-training-platform:gpuPool": {...}, "alicloud:region": "cn-hangzhou"}``).

    Returns:
        The validated spec.

    Raises:
        ConfigError: with one message per problem, each naming its stack key.
    """
    prefix = PROJECT + ":"
    ours = {k[len(prefix) :]: v for k, v in raw.items() if k.startswith(prefix)}
    data = {k: v for k, v in ours.items() if k not in SECRET_KEYS}
    if REGION_KEY in raw:
        if "region" in data:
            raise ConfigError([f"{prefix}region: the region is the provider's key; set {REGION_KEY} instead"])
        data["region"] = raw[REGION_KEY]
    try:
        spec = PlatformSpec.model_validate(data)
    except ValidationError as err:
        raise ConfigError([_describe(e) for e in err.errors()]) from None
    needed = {"registryPassword": "registry.username"} if spec.registry and spec.registry.username else {}
    if spec.storage.oss is not None:
        needed.update(ossAccessKeyId="storage.oss", ossAccessKeySecret="storage.oss")
    missing = [
        f"{prefix}{key}: {user} is set but this credential is missing; run: pulumi config set --secret {key} <value>"
        for key, user in needed.items()
        if key not in ours
    ]
    if missing:
        raise ConfigError(missing)
    return spec


def _describe(error: Mapping[str, Any]) -> str:
    loc = list(error["loc"])
    kind = error["type"]
    key_in_ctx = (error.get("ctx") or {}).get("key")
    if key_in_ctx == "<region>":
        return f"{REGION_KEY}: {error['msg']}"
    if key_in_ctx:
        loc += _split_key(key_in_ctx)
    path = _key_path(loc)
    if kind == "extra_forbidden":
        valid = _valid_keys(loc[:-1])
        hint = difflib.get_close_matches(str(loc[-1]), valid, n=1)
        suggestion = f"did you mean {hint[0]!r}? " if hint else ""
        return f"{path}: unknown key; {suggestion}valid keys: {', '.join(valid)}"
    if kind == "missing":
        return f"{path}: required key is missing"
    message = error["msg"].removeprefix("Value error, ")
    if kind in ("platform", "value_error"):
        return f"{path}: {message}"
    return f"{path}: {message} (got {error['input']!r})"


def _split_key(key: str) -> list[str | int]:
    parts: list[str | int] = []
    for part in key.split("."):
        name, *indexes = part.split("[")
        parts.append(to_camel(name))
        parts += [int(i.rstrip("]")) for i in indexes]
    return parts


def _key_path(loc: list[Any]) -> str:
    path = PROJECT + ":"
    for i, part in enumerate(loc):
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if i else "") + str(part)
    return path


def _valid_keys(loc: list[Any]) -> list[str]:
    """The camelCase keys allowed at ``loc`` (a path into PlatformSpec)."""
    model: Any = PlatformSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = next(f for name, f in model.model_fields.items() if part in (name, f.alias))
        model = _model_of(field.annotation)
    # `region` is read from the provider's alicloud:region, never from our namespace.
    return (
        sorted(
            (f.alias or name)
            for name, f in model.model_fields.items()
            if not (model is PlatformSpec and name == "region")
        )
        if model
        else []
    )


def _model_of(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def stack_schema() -> dict[str, Any]:
    """JSON schema of the stack keys under the ``ack-training-platform:`` namespace."""
    schema = PlatformSpec.model_json_schema(by_alias=True)
    schema["properties"].pop("region", None)
    schema["title"] = f"{PROJECT} stack configuration"
    schema["description"] = (
        f"Keys under the '{PROJECT}:' namespace of a stack file. The region is the provider's "
        f"own key, {REGION_KEY}; credentials are the secret keys {', '.join(SECRET_KEYS)}."
    )
    return schema

"""Shared pieces of every stack-config model: the base class, value types such as
sizes and CPU amounts, the error that names a stack key, and :class:`ConfigError`, which an
invalid stack raises."""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationError,
)
from pydantic.alias_generators import to_camel, to_snake
from pydantic_core import PydanticCustomError

PROJECT = "ack-training-platform"
POOL_LABEL = f"{PROJECT}/pool"
SYSTEM_POOL_NAME = "system"
"""The untainted pool for the cluster's own workloads (``cluster.systemPool``)."""
"""The node label naming a node's pool."""
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
"""Kubernetes well-known node labels (kubernetes.io, "Well-Known Labels, Annotations and Taints"),
on every node: ACK sets them like any other cluster."""

SECRET_KEYS = ("registryPassword",)
"""Stack keys that hold credentials. They never enter a spec: components read them as
Pulumi secrets so they stay encrypted end to end (``pulumi config set --secret``)."""

SECRET_SECTIONS = ("jobs",)
"""Stack keys that may be encrypted besides the credentials, e.g. a token in a job's env
(``pulumi config set --secret --path 'jobs[0].env.TOKEN'``, which makes Pulumi treat the
whole key as secret): the job objects built from them are Pulumi secrets. Every other
setting becomes names and arguments that ACK, ECS and the cluster show in plain."""

REGION_KEY = "alicloud:region"

DATA_MOUNT = "/mnt/data"
"""Where every training pod mounts the data volume, read-only."""
OUTPUT_MOUNT = "/mnt/output"
"""Where every training pod mounts the output volume, the only place it writes to that outlives it."""
CODE_MOUNT = "/mnt/code"
"""Where a job's code cloned from git lives, in every container of the pod."""

DEFAULT_GPU_TAINT_KEY = "nvidia.com/gpu"
DEFAULT_OPERATOR_VERSION = "v1.9.4"
DEFAULT_VOLCANO_VERSION = "1.12.1"
DEFAULT_TRAINER_V2_VERSION = "v2.3.0"
DEFAULT_KUEUE_VERSION = "0.19.2"
TRAINER_V2_MIN_KUBERNETES = (1, 31)
"""Trainer v2 needs Kubernetes 1.31 or later (kubeflow/trainer v2.3.0
``docs/operator-guides/installation.md`` and ``charts/kubeflow-trainer/README.md``)."""
ADMISSION_POLICY_MIN_KUBERNETES = (1, 30)
"""A team's admission boundary, and the bound on the GPU node health controller's node patches, are
ValidatingAdmissionPolicies, ``admissionregistration.k8s.io/v1`` from Kubernetes 1.30 (Kubernetes
docs, "Validating Admission Policy": stable in v1.30)."""
METADATA_TOKENS_MIN_KUBERNETES = (1, 28)
"""Node pools that require instance metadata tokens need ACK 1.28 or later (pulumi-alicloud
4.0.0 ``cs.NodePoolInstanceMetadataOptionsArgs.http_tokens``)."""
DEFAULT_VPC_CIDR = "192.168.0.0/16"
DEFAULT_POD_CIDR = "172.20.0.0/16"
DEFAULT_SERVICE_CIDR = "172.21.0.0/20"
DEFAULT_SHM_PER_GPU_GIB = 16
DEFAULT_CPU_SHM_GIB = 2
JOB_NAME_MAX = 40
"""Derived names such as ``<job>-worker-15`` and their Services must stay DNS labels
(at most 63 characters); 40 leaves room for every suffix the operator appends."""

_DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUANTITY = re.compile(r"^(?P<num>\d+(\.\d+)?)(?P<unit>Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$")
_UNITS = {
    None: 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
}
_VERSION_TAG = re.compile(r"^v\d+\.\d+\.\d+$")


def _dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_1123_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a valid Kubernetes name: use at most 63 lowercase letters, "
            "digits and '-', starting and ending with a letter or digit"
        )
    return value


def quantity_bytes(value: str) -> int:
    """Bytes in a Kubernetes quantity such as ``500Gi``.

    Raises:
        ValueError: ``value`` is not a plain quantity.
    """
    match = _QUANTITY.match(value)
    if not match:
        raise ValueError(
            f"{value!r} is not a size: write a number with an optional unit "
            "(Ki, Mi, Gi, Ti, Pi, k, M, G, T, P), e.g. '500Gi'"
        )
    return int(float(match["num"]) * _UNITS[match["unit"]])


_SMALLEST_BARE_SIZE = 2**20
"""A size written without a unit is bytes, so ``memory: 24`` would be a 24-byte limit that
kills the container at start. Every size here is memory or storage, where less than a MiB
is never meant; a bare number of bytes at least this large is accepted as written."""


def _quantity(value: str) -> str:
    size = quantity_bytes(value)
    if _QUANTITY.match(value)["unit"] is None and size < _SMALLEST_BARE_SIZE:
        raise ValueError(f"{value!r} has no unit, so it means {value} bytes: write '{value}Gi' or '{value}Mi'")
    return value


def _cpu(value: str) -> str:
    if not re.match(r"^(\d+(\.\d+)?|\d+m)$", value):
        raise ValueError(f"{value!r} is not a CPU amount: write cores ('8', '0.5') or millicores ('500m')")
    return value


def _number_as_text(value: Any) -> Any:
    """Kubernetes YAML writes ``cpu: 6`` and ``memory: 24``, and ``pulumi config set --path``
    stores such values as numbers: read them as the quantities they are."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return value


def _cidr_with_prefix(value: Any) -> Any:
    # ip_network("10.0.0.0") is a /32: a NAS rule or vSwitch of one address is never meant.
    if isinstance(value, str) and "/" not in value:
        raise ValueError(f"{value!r} has no prefix length: write a CIDR block such as '{value}/16'")
    return value


_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


def _label_key(value: str) -> str:
    prefix, _, name = value.rpartition("/")
    if (
        len(name) > 63
        or not _LABEL_NAME.match(name)
        or (prefix and (len(prefix) > 253 or not all(_DNS_1123_LABEL.match(p) for p in prefix.split("."))))
    ):
        raise ValueError(
            f"{value!r} is not a valid Kubernetes label or taint key: an optional DNS prefix and '/', then at most "
            "63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (e.g. 'example.com/team')"
        )
    return value


def _label_value(value: str) -> str:
    if value and (len(value) > 63 or not _LABEL_NAME.match(value)):
        raise ValueError(
            f"{value!r} is not a valid Kubernetes label value: at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return value


def _env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise ValueError(
            f"{value!r} is not a valid environment variable name: letters, digits, '_', '-' and '.', "
            "not starting with a digit"
        )
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
Quantity = Annotated[str, BeforeValidator(_number_as_text), AfterValidator(_quantity)]
Cpu = Annotated[str, BeforeValidator(_number_as_text), AfterValidator(_cpu)]
Cidr = Annotated[ipaddress.IPv4Network, BeforeValidator(_cidr_with_prefix)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, BeforeValidator(_number_as_text), AfterValidator(_label_value)]
EnvName = Annotated[str, AfterValidator(_env_name)]
EnvValue = Annotated[str, BeforeValidator(_number_as_text)]
Labels = dict[LabelKey, LabelValue]


UNION_TAGS = ("<value>", "<secret>")
"""Names of the branches of a tagged union (a job's env entry); they appear in error
locations but are no stack keys."""


def field_error(key: str, message: str) -> PydanticCustomError:
    """A cross-field error attributed to ``key``, a (dotted) key below the model raising it."""
    return PydanticCustomError("platform", message, {"key": key})


class SpecError(ValueError):
    """A spec built in Python (``GpuPoolSpec(...)``) is invalid; ``problems`` holds one message per
    bad argument, each naming it as Python does (``gpus_per_node``, ``trainer.model``)."""

    def __init__(self, model: str, problems: list[str]):
        super().__init__(f"invalid {model}:\n" + "\n".join(f"  {p}" for p in problems))
        self.problems = problems


class Spec(BaseModel):
    """Base of every stack-config model: camelCase keys, no unknown keys, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        use_attribute_docstrings=True,
    )

    def __init__(self, /, **data: Any) -> None:
        """Build the spec from Python arguments.

        Raises:
            SpecError: naming each bad argument, with the one meant where a name is misspelt.
        """
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise SpecError(type(self).__name__, python_problems(type(self), err)) from None

    # Pydantic calls a model's own __init__ when validating it inside another (a stack's
    # jobs[0]) unless marked as its base one; the stack path names stack keys itself.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


def model_of(annotation: Any) -> Any:
    """The model class in a field's annotation (``GpuPoolSpec | None``, ``list[JobSpec]``), or ``None``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = model_of(arg)
        if found is not None:
            return found
    return None


def python_problems(model: type[BaseModel], err: ValidationError) -> list[str]:
    """One message per error of ``err``, raised building ``model``, with its argument path in
    Python's names."""
    problems = []
    for error in err.errors():
        loc = [part for part in error["loc"] if part not in UNION_TAGS]
        if loc[-1:] == ["[key]"]:
            loc = loc[:-2]  # a bad key of a mapping (an env name): the message quotes it
        key = (error.get("ctx") or {}).get("key")
        if key:
            loc += [int(p) if p.isdigit() else p for p in key.replace("[", ".").replace("]", "").split(".")]
        path, inner = _python_path(model, loc[:-1] if error["type"] == "extra_forbidden" else loc)
        kind = error["type"]
        if kind == "extra_forbidden":
            valid = sorted(inner.model_fields) if inner is not None else []
            hint = difflib.get_close_matches(to_snake(str(loc[-1])), valid, n=1)
            suggestion = f"did you mean {hint[0]!r}? " if hint else ""
            where = f"{path}.{loc[-1]}" if path else str(loc[-1])
            problems.append(f"{where}: unknown argument; {suggestion}valid: {', '.join(valid)}")
        elif kind == "missing":
            problems.append(f"{path}: required argument is missing")
        else:
            message = error["msg"].removeprefix("Value error, ")
            shown = "" if kind in ("platform", "value_error") else f" (got {error['input']!r})"
            problems.append(f"{path or model.__name__}: {message}{shown}")
    return problems


def _python_path(model: Any, loc: list[Any]) -> tuple[str, Any]:
    """``loc`` written with Python's field names (mapping keys and indexes as given), and the
    model it ends in."""
    path = ""
    for part in loc:
        field = None
        if model is not None and not isinstance(part, int):
            field = next((n for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        if field is not None:
            path += f".{field}" if path else field
            model = model_of(model.model_fields[field].annotation)
        else:
            path += f"[{part!r}]" if not isinstance(part, int) else f"[{part}]"
    return path, model


def set_but_unused(model: BaseModel, fields: Iterable[str], where: str, *, under: str = "") -> None:
    """Refuse a setting that would be silently ignored: the first of ``fields`` given
    explicitly in the stack although it has no effect ``where``. ``under`` is the key of
    ``model`` below the model that validates."""
    for name in fields:
        if name in model.model_fields_set:
            key = model.__class__.model_fields[name].alias or name
            raise field_error(f"{under}{key}", f"{key} has no effect {where}: drop it")


def check_pinned_tag(image_tag: str, key: str) -> None:
    """Refuse a tag that is no pinned version (``latest``) or no tag at all."""
    if image_tag == "latest" or not re.match(r"^[\w][\w.-]{0,127}$", image_tag):
        raise field_error(
            key,
            f"{image_tag!r} is not a pinned tag: use a version such as 'v1.2.0' or a commit id, not 'latest'",
        )


def check_pinned(image: str, key: str) -> None:
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.partition(":")[2]
    if digest:
        if not re.match(r"^sha256:[0-9a-f]{64}$", digest):
            raise field_error(key, f"{image!r} has a malformed digest: expected '@sha256:' and 64 hex digits")
    elif not tag or tag == "latest":
        raise field_error(
            key,
            f"{image!r} is not pinned: add a version tag other than 'latest' (e.g. ':v1.2.0') or a digest (@sha256:...)",
        )


class ConfigError(Exception):
    """A stack's configuration is invalid; ``problems`` holds one message per bad key."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems

    def __str__(self) -> str:
        return "invalid stack configuration:\n" + "\n".join(f"  {p}" for p in self.problems)

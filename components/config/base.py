"""Shared pieces of every stack-config model: the base class, value types such as
sizes and CPU amounts, and the error that names a stack key."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

PROJECT = "ack-training-platform"

SECRET_KEYS = ("registryPassword", "ossAccessKeyId", "ossAccessKeySecret")
"""Stack keys that hold credentials. They never enter a spec: components read them as
Pulumi secrets so they stay encrypted end to end (``pulumi config set --secret``)."""

REGION_KEY = "alicloud:region"

DEFAULT_GPU_TAINT_KEY = "nvidia.com/gpu"
DEFAULT_OPERATOR_VERSION = "v1.9.4"
DEFAULT_VOLCANO_VERSION = "1.12.1"
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


def _quantity(value: str) -> str:
    quantity_bytes(value)
    return value


def _cpu(value: str) -> str:
    if not re.match(r"^(\d+(\.\d+)?|\d+m)$", value):
        raise ValueError(f"{value!r} is not a CPU amount: write cores ('8', '0.5') or millicores ('500m')")
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
Quantity = Annotated[str, AfterValidator(_quantity)]
Cpu = Annotated[str, AfterValidator(_cpu)]
Cidr = ipaddress.IPv4Network


def field_error(key: str, message: str) -> PydanticCustomError:
    """A cross-field error attributed to ``key``, a (dotted) key below the model raising it."""
    return PydanticCustomError("platform", message, {"key": key})


class Spec(BaseModel):
    """Base of every stack-config model: camelCase keys, no unknown keys, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        use_attribute_docstrings=True,
    )

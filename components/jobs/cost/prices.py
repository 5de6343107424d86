"""A dated price table, as the user supplies it (``ack-jobs cost --prices FILE``).

ECS prices depend on the region, the billing method and the day, and spot prices move with the
market; the platform ships none. The table says where its figures come from and when they were
read, and every report repeats that, so a figure is never shown without its source::

    date: 2026-11-01
    source: ECS console price calculator, cn-hangzhou, pay-as-you-go and spot, USD
    currency: USD
    instances:
      ecs.gn7i-c32g1.8xlarge: {gpus: 1, vcpus: 32, onDemand: 2.50, spot: 0.90}
    spotPools: [gpu-spot]

``spotPools`` names the platform's pools (the ``ack-training-platform/pool`` node label) whose
nodes are spot instances; every other pool's are billed on demand.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class PriceError(ValueError):
    """The table is unusable; the message names the file and the key."""


@dataclass(frozen=True)
class InstancePrice:
    """One instance type's hourly prices.

    Args:
        gpus: GPUs the instance has (0 for a CPU instance).
        vcpus: its vCPUs, to share a CPU instance among pods.
        on_demand: pay-as-you-go price per hour.
        spot: spot price per hour (``None``: not known).
    """

    gpus: int
    vcpus: int
    on_demand: float
    spot: float | None


@dataclass(frozen=True)
class PriceTable:
    """Prices per instance type, with their date and source."""

    date: dt.date
    source: str
    currency: str
    instances: dict[str, InstancePrice]
    spot_pools: frozenset[str]


def _number(where: str, value: Any, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise PriceError(f"{where}: give a number, 0 or more (got {value!r})")
    return float(value)


def parse_table(data: Any, name: str) -> PriceTable:
    """A price table from its parsed YAML or JSON.

    Raises:
        PriceError: a key is missing or has the wrong type, named as ``FILE: key``.
    """
    if not isinstance(data, dict):
        raise PriceError(f"{name}: a price table is a mapping with date, source, currency and instances")
    for key in ("date", "source", "currency", "instances"):
        if not data.get(key):
            raise PriceError(f"{name}: {key} is missing (a table says when and where its prices were read)")
    date = data["date"]
    if not isinstance(date, dt.date):
        try:
            date = dt.date.fromisoformat(str(date))
        except ValueError:
            raise PriceError(f"{name}: date {date!r}: write it as YYYY-MM-DD") from None
    instances: dict[str, InstancePrice] = {}
    for kind, entry in (data["instances"] or {}).items():
        where = f"{name}: instances.{kind}"
        if not isinstance(entry, dict):
            raise PriceError(f"{where}: give gpus, vcpus, onDemand and spot")
        instances[kind] = InstancePrice(
            gpus=int(_number(f"{where}.gpus", entry.get("gpus", 0))),
            vcpus=int(_number(f"{where}.vcpus", entry.get("vcpus"))),
            on_demand=_number(f"{where}.onDemand", entry.get("onDemand")),
            spot=_number(f"{where}.spot", entry.get("spot"), allow_none=True),
        )
    return PriceTable(
        date, str(data["source"]), str(data["currency"]), instances, frozenset(data.get("spotPools") or ())
    )


def load_table(path: str) -> PriceTable:
    """The table in ``path`` (YAML or JSON).

    Raises:
        PriceError: the file is missing, not YAML, or not a price table.
    """
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise PriceError(f"{path}: {err}") from None
    return parse_table(data, path)

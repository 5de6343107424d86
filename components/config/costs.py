"""What GPU time costs: the stack's dated, sourced price table (``costs``) and each team's budget
(``teams[].budget``), which the cost recording rules, the budget alerts and ``ack-jobs cost`` read.

ECS prices depend on the region, the billing method and the day, and spot prices move with the
market; the platform ships none. The table says where its figures come from and when they were
read, so a figure is never shown without its source.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import Field

from .base import Spec, field_error

if TYPE_CHECKING:
    from collections.abc import Sequence


class PricedPool(Protocol):
    """What the prices read of a GPU pool (:class:`.pools.GpuPoolSpec`); a protocol, so that the prices,
    which the monitoring scope carries, stay below the pools' specs."""

    name: str
    spot_strategy: str
    instance_types: list[str]
    gpus_per_node: int


INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
"""A node's ECS instance type, the key of its price (Kubernetes well-known labels)."""
IDLE_BELOW = 1.0
"""A GPU whose utilisation sample (``DCGM_FI_DEV_GPU_UTIL``, percent) is under 1 % ran practically no kernel:
idle, as both ``ack-jobs cost`` and the cost rules count it."""
BudgetPeriod = Literal["day", "week", "month"]
PERIOD_WINDOWS: dict[str, str] = {"day": "1d", "week": "7d", "month": "30d"}
"""What a budget's period means: the spend over the last day, 7 days or 30 days, a rolling window
(Prometheus has no calendar month)."""


class InstancePriceSpec(Spec):
    """One ECS instance type's hourly prices, in the table's currency."""

    gpus: int = Field(ge=0, le=16)
    """GPUs the instance has (0 for a CPU instance): a pod pays its GPUs' share of the instance."""
    vcpus: int = Field(ge=1)
    """vCPUs the instance has: a pod without GPUs pays its CPU's share of the instance."""
    on_demand: float = Field(gt=0)
    """Pay-as-you-go price per hour."""
    spot: float | None = Field(default=None, gt=0)
    """Spot price per hour when it was read; required for the instance types of a spot pool."""


class CostsSpec(Spec):
    """The prices the platform's cost figures use, with the date and the source they were read from::

        costs:
          date: 2026-11-01
          source: ECS console price calculator, cn-hangzhou, pay-as-you-go and spot
          currency: USD
          instances:
            ecs.gn7i-c32g1.8xlarge: {gpus: 1, vcpus: 32, onDemand: 2.5, spot: 0.9}

    A node of a spot pool (``gpuPool.spotStrategy`` other than ``NoSpot``) is priced at ``spot``, every
    other node at ``onDemand``."""

    date: dt.date
    """When the prices were read (``YYYY-MM-DD``); every cost report repeats it."""
    source: str = Field(min_length=1, max_length=500)
    """Where they were read: the ECS price calculator, ``DescribePrice``, a bill, with the region."""
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    """ISO 4217 code of the prices, e.g. ``USD`` or ``CNY``."""
    instances: dict[str, InstancePriceSpec] = Field(min_length=1)
    """Prices per ECS instance type (the nodes' ``node.kubernetes.io/instance-type`` label)."""


class BudgetSpec(Spec):
    """What a team may spend per period before its budget alert fires (in ``costs.currency``)."""

    amount: float = Field(gt=0)
    """Spend allowed in one period, in ``costs.currency``."""
    period: BudgetPeriod = "month"
    """``day``, ``week`` or ``month``: the last 1, 7 or 30 days, a rolling window, which Prometheus must retain
    (a prometheus-operator's ``Prometheus`` keeps 24 h unless its ``spec.retention`` says more)."""
    warn_at: float | None = Field(default=0.8, gt=0, lt=1)
    """Share of ``amount`` at which a warning fires first; unset (``null``) for none."""


def spot_pools(pool: PricedPool | None) -> tuple[str, ...]:
    """The pools whose nodes are spot instances: the GPU pool when its ``spotStrategy`` is not ``NoSpot``."""
    return (pool.name,) if pool is not None and pool.spot_strategy != "NoSpot" else ()


def price_table(costs: CostsSpec | None, pool: PricedPool | None) -> dict[str, object] | None:
    """The stack's price table (``costs``) as ``ack-jobs cost`` reads it (the stack output ``prices``), or
    ``None``; ``pool`` is the stack's GPU pool."""
    if costs is None:
        return None
    return {
        "date": costs.date.isoformat(),
        "source": costs.source,
        "currency": costs.currency,
        "instances": {kind: price.model_dump(by_alias=True) for kind, price in costs.instances.items()},
        "spotPools": list(spot_pools(pool)),
    }


def check_costs(
    costs: CostsSpec | None, *, pool: PricedPool | None, budgets: Sequence[BudgetSpec | None], prometheus: str
) -> None:
    """The rules between ``costs``, the GPU pool and the teams' budgets.

    Args:
        costs: the stack's ``costs``.
        pool: the stack's GPU pool.
        budgets: each team's ``budget``, in the order of ``teams``.
        prometheus: the Prometheus that watches the jobs, defaults applied.

    Raises:
        PydanticCustomError: a rule is broken; the message names the stack key.
    """
    for i, budget in enumerate(budgets):
        if budget is not None and costs is None:
            raise field_error(
                f"teams[{i}].budget",
                "a budget is counted in the stack's prices, and it has none: add costs (date, source, currency, "
                "instances), or drop budget",
            )
        if budget is not None and prometheus != "operator":
            # The budget alerts read the cost recording rules, which the platform creates only as a
            # PrometheusRule: under ARMS or without Prometheus nothing would ever alert.
            raise field_error(
                f"teams[{i}].budget",
                f"a budget alert reads the cost recording rules, which run only with monitoring.prometheus: "
                f"operator (here {prometheus!r}): set it, or drop budget and read spend with ack-jobs cost",
            )
    if costs is None or pool is None:
        return
    missing = [kind for kind in pool.instance_types if kind not in costs.instances]
    if missing:
        raise field_error(
            "costs.instances",
            f"no price for the GPU pool's instance types {missing}: add them, so its nodes' time is priced",
        )
    # Instance types hold dots, which a key path would split: the message names the type.
    for kind in pool.instance_types:
        price = costs.instances[kind]
        if price.gpus != pool.gpus_per_node:
            raise field_error(
                "costs.instances",
                f"{kind}: gpus is {price.gpus}, but gpuPool.gpusPerNode is {pool.gpus_per_node}: a pod pays its "
                "GPUs' share of the node, so give the instance's GPU count",
            )
        if pool.name in spot_pools(pool) and price.spot is None:
            raise field_error(
                "costs.instances",
                f"{kind}: no spot price, and gpuPool {pool.name!r} runs spot instances ({pool.spot_strategy}): give "
                "spot, the price it was read at",
            )

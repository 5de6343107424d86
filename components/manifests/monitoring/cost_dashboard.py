"""The training dashboard's Cost row: what the jobs of the chosen namespace cost, per hour and over the
dashboard's time range, their GPU-hours and idle GPU-hours, and what each pool's GPU time costs. Every query reads the cost recording rules
(:mod:`.cost_rules`), so the row is there only where those rules are evaluated."""

from __future__ import annotations

from grafana_foundation_sdk.builders import common, prometheus, stat, timeseries
from grafana_foundation_sdk.models.dashboard import DataSourceRef

from . import cost_series as c
from .scraping import JOB_LABEL

RANGE = "$__range"
"""Grafana's dashboard time range, as a PromQL duration."""


def _series(name: str, namespace: str) -> str:
    return c.recorded(name, f'namespace="{namespace}"')


def cost_panels(namespace: str, currency: str, datasource: DataSourceRef) -> list[object]:
    """The Cost row's panels for the jobs of ``namespace`` (a dashboard variable such as ``$namespace``).

    Args:
        namespace: the namespace matcher's value.
        currency: the prices' currency (``costs.currency``), shown in the titles.
        datasource: the Prometheus the dashboard reads.

    Returns:
        Panel builders, in their order on the row.
    """
    job = f"{{{{{JOB_LABEL}}}}}"

    def totals(title: str, unit: str, description: str, *queries: tuple[str, str]) -> stat.Panel:
        panel = (
            stat.Panel()
            .title(title)
            .unit(unit)
            .datasource(datasource)
            .description(description)
            .span(12)
            .height(6)
            .reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"]))
        )
        for ref, (expr, legend) in zip("ABCDEFGH", queries, strict=False):
            panel = panel.with_target(prometheus.Dataquery().expr(expr).legend_format(legend).instant().ref_id(ref))
        return panel

    hourly = (
        timeseries.Panel()
        .title(f"Cost per hour by job ({currency})")
        .unit("short")
        .datasource(datasource)
        .span(12)
        .height(8)
        .description(
            "GPUs each running job holds, priced at its nodes' instance type and billing (the stack's costs, "
            "with their date and source); the namespace's total beside."
        )
        .with_target(prometheus.Dataquery().expr(_series(c.JOB_COST, namespace)).legend_format(job).ref_id("A"))
        .with_target(prometheus.Dataquery().expr(_series(c.TEAM_COST, namespace)).legend_format("total").ref_id("B"))
    )
    spent = totals(
        f"Cost per job over the time range ({currency})",
        "short",
        "What each job's GPUs cost within the dashboard's time range, and what spot saved against on demand.",
        (c.over(_series(c.JOB_COST, namespace), RANGE), f"{job} cost"),
        (
            f"{c.over(_series(c.JOB_ON_DEMAND_COST, namespace), RANGE)} - {c.over(_series(c.JOB_COST, namespace), RANGE)}",
            f"{job} spot savings",
        ),
    )
    gpu_hours = totals(
        "GPU-hours and idle GPU-hours over the time range",
        "short",
        "GPU-hours each job held, and those in which its GPUs ran no kernel (utilisation under 1 %): paid for, unused.",
        (c.over(_series(c.JOB_GPUS, namespace), RANGE), f"{job} GPU-hours"),
        (c.over(_series(c.JOB_IDLE_GPUS, namespace), RANGE), f"{job} idle GPU-hours"),
    )
    pool = f"{{{{{c.POOL_LABEL_NAME}}}}}"
    pools = totals(
        f"Cost per pool over the time range ({currency})",
        "short",
        "What the GPUs of each pool's nodes cost within the dashboard's time range, and their GPU-hours, over "
        "the jobs of every namespace: a pool serves them all.",
        (c.over(c.recorded(c.POOL_COST), RANGE), f"{pool} cost"),
        (c.over(c.recorded(c.POOL_GPUS), RANGE), f"{pool} GPU-hours"),
    )
    return [hourly, spent, gpu_hours, pools]

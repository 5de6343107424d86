"""``cost``: GPU-hours, cost, spot savings and idle GPU time of a job, or of a team's jobs.

Prices come from the stack's ``costs`` key (its ``prices`` output), or from ``--prices FILE``, which
overrides them. The pods are read as they are now: a pod the controller already deleted (``cleanPodPolicy``,
``ttlSecondsAfterFinished``) is not counted. Idle time needs ``--prometheus-url``: a Prometheus
that scrapes the GPU exporter, asked through its range query API (``GET /api/v1/query_range``;
Prometheus docs, "HTTP API").
"""

from __future__ import annotations

import argparse
import json
import urllib.parse
import urllib.request
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes.client.rest import ApiException

from ...manifests.monitoring.gpu_metrics import EXPORTED_PREFIX, GPU_UTIL, NAMESPACE_LABEL, POD_LABEL, from_exporter
from ..client import JobsClient
from ..cost import PodRun, PriceError, PriceTable, cost, idle_gpu_hours, load_table, parse_table, pod_runs
from .base import Failure, Out, UsageError, dcgm_namespace, table

STEP_S = 60
"""Seconds between the utilisation samples asked for."""
MAX_STEPS = 10_000
"""Steps asked for in one range query: Prometheus refuses a query of more than 11,000 points a
series (``web/api/v1/api.go``: ``end.Sub(start)/step > 11000``), a week at one a minute."""


def team_namespace(outputs: dict[str, Any], team: str) -> str:
    """The namespace of ``team``, from the stack's ``teamJobDefaults``.

    Raises:
        UsageError: the stack has no such team.
    """
    teams = outputs.get("teamJobDefaults") or {}
    if team not in teams:
        known = ", ".join(teams) or "none (pass --stack or --outputs)"
        raise UsageError(f"--team {team}: the stack's teams are {known}")
    return teams[team]["namespace"]


STACK_PRICES = "the stack's costs"


def price_table(args: argparse.Namespace, outputs: dict[str, Any]) -> PriceTable:
    """The prices in ``--prices``, else the stack's (its ``prices`` output, from the ``costs`` key).

    Raises:
        UsageError: neither has a table, or the one given is unusable.
    """
    if args.prices is not None:
        try:
            return load_table(args.prices)
        except PriceError as err:
            raise UsageError(f"--prices {err}") from None
    if not outputs.get("prices"):
        raise UsageError(
            "the stack has no prices (its costs key, docs/monitoring.md): set costs, or give --prices FILE, "
            "a dated price table with its source"
        )
    try:
        return parse_table(outputs["prices"], STACK_PRICES)
    except PriceError as err:
        raise UsageError(f"{err} (the stack's prices output)") from None


def utilisation(base_url: str, namespace: str, runs: list[PodRun], dcgm: str | None = None) -> list[list[float]]:
    """Per GPU, its ``DCGM_FI_DEV_GPU_UTIL`` samples over the runs' time, one per :data:`STEP_S`: only the DCGM
    exporter's in namespace ``dcgm``, which name the GPU's pod as ``exported_namespace`` and ``exported_pod``;
    without it, series under either exporter's labels from any namespace.

    Raises:
        OSError: Prometheus is unreachable or refused the query.
    """
    pods = "|".join(run.pod for run in runs)

    def matchers(prefix: str) -> tuple[str, str]:
        return f'{prefix}{NAMESPACE_LABEL}="{namespace}"', f'{prefix}{POD_LABEL}=~"{pods}"'

    if dcgm is not None:
        query = from_exporter(GPU_UTIL, dcgm, *matchers(EXPORTED_PREFIX))
    else:
        query = " or ".join(f"{GPU_UTIL}{{{','.join(matchers(prefix))}}}" for prefix in ("", EXPORTED_PREFIX))
    start = min(run.start for run in runs).timestamp()
    end = max(run.end for run in runs).timestamp()
    samples: list[list[float]] = []
    # A long job is asked for in windows that do not share a step, each within Prometheus's limit.
    while start <= end:
        until = min(start + MAX_STEPS * STEP_S, end)
        params = {"query": query, "start": start, "end": until, "step": STEP_S}
        url = f"{base_url.rstrip('/')}/api/v1/query_range?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as response:
            answer = json.load(response)
        if answer.get("status") != "success":
            raise OSError(f"Prometheus refused {query!r}: {answer.get('error', answer)}")
        samples += [[float(value) for _, value in series["values"]] for series in answer["data"]["result"]]
        start = until + STEP_S
    return samples


def cmd_cost(jobs: JobsClient, args: argparse.Namespace, out: Out, outputs: dict[str, Any]) -> None:
    if (args.name is None) == (args.team is None):
        raise UsageError("give a job's NAME or --team TEAM")
    prices = price_table(args, outputs)
    now = datetime.now(UTC)
    refused: int | None = None
    try:
        nodes = jobs.nodes()
    except ApiException as err:
        # A team's members may not list nodes (its Role is namespaced): no instance type, no price.
        nodes, refused = [], err.status
    if args.name is not None:
        pods = jobs.pods(jobs.get_job(args.name))
    else:
        since = now - timedelta(seconds=args.since)
        pods = [p for p in jobs.namespace_pods() if (p.get("status") or {}).get("startTime")]
    runs = pod_runs(pods, nodes, now)
    if args.team is not None:
        # The team's cost in the window: a pod that started before it pays from its start on.
        runs = [replace(run, start=max(run.start, since)) for run in runs if run.end >= since]
    by_job: dict[str, list[PodRun]] = {}
    for run in runs:
        by_job.setdefault(run.job, []).append(run)
    out(f"Prices: {prices.source}, read {prices.date.isoformat()} ({prices.currency})")
    if not by_job:
        out("No pods ran in that time." if args.team else f"{args.name}: no pod has started.")
        return
    rows = [("JOB", "GPU-HOURS", "COST", "SPOT SAVINGS", "IDLE GPU-HOURS")]
    dcgm = dcgm_namespace(outputs, "cost") if args.prometheus_url else None
    unpriced: set[str] = set()
    for job, job_runs in sorted(by_job.items()):
        found = cost(job_runs, prices)
        unpriced |= set(found.unpriced)
        idle = "-"
        if args.prometheus_url and found.gpu_hours:
            try:
                samples = utilisation(args.prometheus_url, jobs.namespace, job_runs, dcgm)
            except OSError as err:
                raise Failure(f"--prometheus-url {args.prometheus_url}: {err}") from None
            idle = f"{idle_gpu_hours(samples, STEP_S):.2f}"
        priced = bool(found.on_demand) or not found.unpriced
        money = (f"{found.cost:.2f}", f"{found.spot_savings:.2f}") if priced else ("-", "-")
        rows.append((job, f"{found.gpu_hours:.2f}", *money, idle))
    table(rows, out)
    if refused is not None:
        out(f"Not priced: the nodes could not be read (HTTP {refused}), so their instance types are unknown")
    elif unpriced:
        where = args.prices or f"{STACK_PRICES}, costs.instances"
        out(f"Not priced (add them to {where}): {', '.join(sorted(unpriced))}")

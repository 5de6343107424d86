"""What a job's pods cost: GPU-hours, money, spot savings and idle GPU time. Pure arithmetic.

- A pod runs from ``status.startTime`` until its last container finished (``state.terminated
  .finishedAt``; for a finished pod without one, its last condition change), or until now
  while it runs.
- A pod pays for its share of the node it ran on: its GPUs over the instance's GPUs, or, for a
  pod without GPUs, its CPU over the instance's vCPUs, times the instance's hourly price (spot
  when its pool is one of the table's ``spotPools``, else on demand). A node whose GPUs sit
  unrequested is not charged to any job.
- The node's instance type is its ``node.kubernetes.io/instance-type`` label (Kubernetes
  well-known labels), its pool the platform's ``ack-training-platform/pool``.
- Idle GPU time: ``DCGM_FI_DEV_GPU_UTIL`` is a gauge, the percent of the sample period in which
  a kernel ran (dcgm-exporter ``etc/default-counters.csv`` at 4.5.3-4.8.2 lists it among the
  default counters as ``gauge, GPU utilization (in %)``). A range query returns one sample per
  step per GPU; a sample under :data:`IDLE_BELOW` percent counts its step as idle.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...config.base import POOL_LABEL
from ...config.costs import IDLE_BELOW, INSTANCE_TYPE_LABEL
from ..status import parse_time
from ..why.resources import GPU, pod_job, pod_requests
from .prices import PriceTable


@dataclass(frozen=True)
class PodRun:
    """One pod's time on one node.

    Args:
        pod: its name.
        job: the job it belongs to.
        instance_type: the node's instance type ('' when not known).
        pool: the node's pool ('' when not the platform's).
        gpus: GPUs it requested.
        cpu: CPU cores it requested.
        start: when it started.
        end: when its last container finished, or now.
    """

    pod: str
    job: str
    instance_type: str
    pool: str
    gpus: float
    cpu: float
    start: datetime
    end: datetime

    @property
    def hours(self) -> float:
        return max((self.end - self.start).total_seconds(), 0.0) / 3600


def pod_runs(pods: list[dict[str, Any]], nodes: list[dict[str, Any]], now: datetime) -> list[PodRun]:
    """The runs of ``pods`` (those that never started are left out).

    Args:
        pods: pods as the API server returns them.
        nodes: the nodes they ran on.
        now: the end of a pod still running.
    """
    labels = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}) for n in nodes}
    runs = []
    for pod in pods:
        status = pod.get("status") or {}
        if not status.get("startTime"):
            continue
        finished = [
            parse_time(t)
            for c in status.get("containerStatuses") or []
            if (t := ((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        ]
        if status.get("phase") in ("Succeeded", "Failed") and not finished:
            # A pod failed with its node (pod GC marks it Failed, its containers never report an
            # end): it ended no later than its last condition changed.
            finished = [parse_time(t) for c in status.get("conditions") or [] if (t := c.get("lastTransitionTime"))]
        done = status.get("phase") in ("Succeeded", "Failed") and finished
        node = labels.get((pod.get("spec") or {}).get("nodeName") or "", {})
        asks = pod_requests(pod.get("spec") or {})
        runs.append(
            PodRun(
                pod=pod["metadata"]["name"],
                job=pod_job(pod) or pod["metadata"]["name"],
                instance_type=node.get(INSTANCE_TYPE_LABEL, ""),
                pool=node.get(POOL_LABEL, ""),
                gpus=asks.get(GPU, 0.0),
                cpu=asks.get("cpu", 0.0),
                start=parse_time(status["startTime"]),
                end=max(finished) if done else now,
            )
        )
    return runs


@dataclass(frozen=True)
class Cost:
    """What runs cost.

    Args:
        gpu_hours: GPUs × hours.
        cost: what was paid, in the table's currency.
        on_demand: what the same time would have cost on demand.
        unpriced: instance types the table lacks (their runs are not in ``cost``).
    """

    gpu_hours: float
    cost: float
    on_demand: float
    unpriced: tuple[str, ...] = ()

    @property
    def spot_savings(self) -> float:
        return self.on_demand - self.cost


def cost(runs: Iterable[PodRun], table: PriceTable) -> Cost:
    """GPU-hours, cost and on-demand cost of ``runs`` at ``table``'s prices."""
    gpu_hours = paid = on_demand = 0.0
    unpriced: set[str] = set()
    for run in runs:
        gpu_hours += run.gpus * run.hours
        price = table.instances.get(run.instance_type)
        if price is None:
            unpriced.add(run.instance_type or "unknown")
            continue
        share = run.gpus / price.gpus if price.gpus and run.gpus else (run.cpu / price.vcpus if price.vcpus else 0.0)
        spot = run.pool in table.spot_pools and price.spot is not None
        paid += run.hours * share * (price.spot if spot else price.on_demand)
        on_demand += run.hours * share * price.on_demand
    return Cost(gpu_hours, paid, on_demand, tuple(sorted(unpriced)))


def idle_gpu_hours(series: Iterable[Iterable[float]], step_s: float, below: float = IDLE_BELOW) -> float:
    """GPU-hours in which the GPUs ran no kernel.

    Args:
        series: per GPU, its ``DCGM_FI_DEV_GPU_UTIL`` samples (percent), one per step.
        step_s: the range query's step, seconds.
        below: a sample under this percent is idle.
    """
    return sum(1 for values in series for value in values if value < below) * step_s / 3600

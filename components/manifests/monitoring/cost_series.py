"""The names of the series the cost rules record (:mod:`.cost_rules`), which the cost dashboard's
panels read too, and how a period's total is read from an hourly one."""

from __future__ import annotations

PREFIX = "ack_training_platform"
POD_GPUS = f"{PREFIX}:pod_gpus:running"
POD_CPU = f"{PREFIX}:pod_cpu_cores:running"
POD_MEMORY = f"{PREFIX}:pod_memory_bytes:running"
POD_JOB = f"{PREFIX}:pod_job:info"
NODE_POOL = f"{PREFIX}:node_pool:info"
NODE_GPU_PRICE = f"{PREFIX}:node_gpu_price:hourly"
NODE_GPU_ON_DEMAND_PRICE = f"{PREFIX}:node_gpu_on_demand_price:hourly"
POD_COST = f"{PREFIX}:pod_cost:hourly"
POD_ON_DEMAND_COST = f"{PREFIX}:pod_on_demand_cost:hourly"
POD_IDLE_GPUS = f"{PREFIX}:pod_gpus:idle"
JOB_GPUS = f"{PREFIX}:job_gpus:allocated"
JOB_COST = f"{PREFIX}:job_cost:hourly"
JOB_ON_DEMAND_COST = f"{PREFIX}:job_on_demand_cost:hourly"
JOB_IDLE_GPUS = f"{PREFIX}:job_gpus:idle"
JOB_CPU = f"{PREFIX}:job_cpu_cores:requested"
JOB_MEMORY = f"{PREFIX}:job_memory_bytes:requested"
TEAM_GPUS = f"{PREFIX}:namespace_gpus:allocated"
TEAM_COST = f"{PREFIX}:namespace_cost:hourly"
TEAM_CPU = f"{PREFIX}:namespace_cpu_cores:requested"
TEAM_MEMORY = f"{PREFIX}:namespace_memory_bytes:requested"
POOL_LABEL_NAME = "pool"
POOL_GPUS = f"{PREFIX}:pool_gpus:allocated"
POOL_COST = f"{PREFIX}:pool_cost:hourly"
POOL_CPU = f"{PREFIX}:pool_cpu_cores:requested"
POOL_MEMORY = f"{PREFIX}:pool_memory_bytes:requested"

RECORDED = 'job=""'
"""The cost rules' own series carry no ``job`` label (each keeps only the labels it aggregates by), while
Prometheus gives every scraped series its target's (Prometheus docs, "Jobs and instances"): a team's pod
serving series of these names, say a node's price or a pod's cost, is not read."""

RESAMPLE = "1m"
STEPS_PER_HOUR = 60
"""A period's total is the hourly series read once a minute and summed, over 60: the same figure whatever
interval Prometheus evaluates the rules at. A series that ended (its pod stopped) is stale, so not read."""


def recorded(name: str, *matchers: str) -> str:
    """A selector of the cost rules' own series ``name`` (:data:`RECORDED`), with more label ``matchers``."""
    return f"{name}{{{','.join([*matchers, RECORDED])}}}"


def over(series: str, window: str) -> str:
    """PromQL: what an hourly ``series`` (cost per hour, or GPUs) adds up to over ``window`` (GPU-hours, money)."""
    return f"sum_over_time({series}[{window}:{RESAMPLE}]) / {STEPS_PER_HOUR}"

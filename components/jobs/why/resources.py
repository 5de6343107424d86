"""What a job and its pods ask for, what the pool's node offers, and what a namespace's
ResourceQuota counts: pure arithmetic on the objects' resource lists.

- A container's request defaults to its limit when only the limit is set, as the API server
  defaults it (Kubernetes docs, "Resource Management for Pods and Containers"). A pod asks for
  what the scheduler and the quota charge it (k8s.io/component-helpers ``resource/helpers.go``
  ``PodRequests``/``PodLimits``): the sum of its containers and its sidecars (init containers
  with ``restartPolicy: Always``), or more if an init container, with the sidecars started
  before it, asks for more; plus ``spec.overhead``.
- A ResourceQuota's ``status.hard``/``status.used`` name ``requests.<resource>`` (a bare ``cpu``
  or ``memory`` means the same), ``limits.<resource>`` and ``pods``; an extended resource such
  as ``nvidia.com/gpu`` is quota'd only as ``requests.nvidia.com/gpu`` (Kubernetes docs,
  "Resource Quotas").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..status import JOBSET_NAME_LABEL, TRAINJOB, V1_JOB_LABEL, v1_replica_specs
from .observed import TERMINAL

GPU = "nvidia.com/gpu"
QUANTITY = re.compile(
    r"(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<binary>[KMGTPE]i)|[eE](?P<exp>[+-]?\d+)|(?P<decimal>[numkMGTPE]))?"
)
"""The whole grammar of a Kubernetes quantity (apimachinery ``pkg/api/resource/quantity.go``,
suffixes in ``suffix.go``): a signed number, then a binary suffix, a decimal exponent such as
``129e6`` or a decimal suffix (``n``, ``u`` and ``m`` included). The API server keeps the form it
was given (``1e9`` stays ``1e9``), so any of them comes back in a pod or a quota."""
DECIMAL_POWERS = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def quantity(value: Any) -> float:
    """A Kubernetes quantity as a number: cores for ``500m``, bytes for ``64Gi``, a count for ``8``."""
    text = str(value).strip()
    match = QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    number = float(match["num"])
    if match["binary"]:
        return number * 1024 ** ("KMGTPE".index(match["binary"][0]) + 1)
    if match["exp"]:
        power = int(match["exp"])
        return number * 10**power if power >= 0 else number / 10**-power
    power = DECIMAL_POWERS.get(match["decimal"] or "", 0)
    return number * 10**power if power >= 0 else number / 10**-power


def container_requests(container: dict[str, Any]) -> dict[str, float]:
    """What one container asks for: its requests, each missing one taken from its limits."""
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: quantity(value) for name, value in merged.items()}


def container_limits(container: dict[str, Any]) -> dict[str, float]:
    return {name: quantity(v) for name, v in ((container.get("resources") or {}).get("limits") or {}).items()}


def pod_requests(spec: dict[str, Any]) -> dict[str, float]:
    """What a pod spec (or template spec) asks for (see the module's note)."""
    return _effective(spec, container_requests)


def _pod_limits(spec: dict[str, Any]) -> dict[str, float]:
    return _effective(spec, container_limits)


def _effective(spec: dict[str, Any], amounts: Callable[[dict[str, Any]], dict[str, float]]) -> dict[str, float]:
    total: dict[str, float] = {}
    sidecars: dict[str, float] = {}
    init_peak: dict[str, float] = {}

    def add(into: dict[str, float], more: dict[str, float]) -> None:
        for name, amount in more.items():
            into[name] = into.get(name, 0.0) + amount

    for container in spec.get("containers") or []:
        add(total, amounts(container))
    for container in spec.get("initContainers") or []:
        own = amounts(container)
        if container.get("restartPolicy") == "Always":
            add(total, own)
            add(sidecars, own)
            own = dict(sidecars)
        else:
            add(own, sidecars)
        for name, amount in own.items():
            init_peak[name] = max(init_peak.get(name, 0.0), amount)
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, 0.0), amount)
    add(total, {name: quantity(v) for name, v in (spec.get("overhead") or {}).items()})
    return total


def job_pods(job: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """``(count, pod spec)`` for each kind of pod the job makes: a v1 job's replica templates, a
    TrainJob's ``numNodes`` nodes with ``trainer.resourcesPerNode``."""
    if job.get("kind") == TRAINJOB:
        trainer = (job.get("spec") or {}).get("trainer") or {}
        spec = {"containers": [{"resources": trainer.get("resourcesPerNode") or {}}]}
        return [(int(trainer.get("numNodes") or 1), spec)]
    return [
        (int(replica.get("replicas", 1)), ((replica.get("template") or {}).get("spec") or {}))
        for replica in v1_replica_specs(job).values()
    ]


def expected_pods(job: dict[str, Any]) -> int:
    """How many pods the job runs when it is whole."""
    return sum(count for count, _ in job_pods(job))


def quota_charge(spec: dict[str, Any], name: str) -> float:
    """What one pod is charged against the quota key ``name``."""
    if name == "pods":
        return 1.0
    if name.startswith("limits."):
        return _pod_limits(spec).get(name.removeprefix("limits."), 0.0)
    return pod_requests(spec).get(name.removeprefix("requests."), 0.0)


def pod_job(pod: dict[str, Any]) -> str | None:
    """The job a pod belongs to, from the label its controller sets."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(V1_JOB_LABEL) or labels.get(JOBSET_NAME_LABEL)


def usage_by_job(pods: list[dict[str, Any]], name: str) -> dict[str, float]:
    """Job (or pod, outside any job) → its live pods' charge against quota key ``name``."""
    used: dict[str, float] = {}
    for pod in pods:
        if ((pod.get("status") or {}).get("phase")) in TERMINAL:
            continue
        charge = quota_charge(pod.get("spec") or {}, name)
        if charge:
            owner = pod_job(pod) or f"pod {pod['metadata']['name']}"
            used[owner] = used.get(owner, 0.0) + charge
    return used


def node_offer(placement: dict[str, Any] | None) -> dict[str, float]:
    """What one node of the pool offers pods (``jobDefaults.placement``): CPU cores, memory
    bytes, GPUs; a figure the stack does not know is left out."""
    placement = placement or {}
    offer: dict[str, float] = {}
    if placement.get("gpusPerNode"):
        offer[GPU] = float(placement["gpusPerNode"])
    node = placement.get("node") or {}
    if node.get("millicpu"):
        offer["cpu"] = node["millicpu"] / 1000
    if node.get("memory"):
        offer["memory"] = float(node["memory"])
    return offer


def show(name: str, amount: float) -> str:
    """An amount as a person reads it: ``64Gi`` of memory, ``7.5`` cores, ``8`` GPUs."""
    if "memory" in name or "storage" in name:
        return f"{amount / 2**30:g}Gi"
    return f"{amount:g}"


def unschedulable_message(pods: list[dict[str, Any]]) -> str:
    """The scheduler's fit error as it also writes it on a pod's ``PodScheduled`` condition
    (``False``, reason ``Unschedulable``; kubernetes ``pkg/scheduler/schedule_one.go``
    ``handleSchedulingFailure``): it outlives the event and needs no right to read events."""
    return next(
        (
            c.get("message") or ""
            for pod in pods
            for c in (pod.get("status") or {}).get("conditions") or []
            if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        ),
        "",
    )

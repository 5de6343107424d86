"""What :func:`.cause.why` reads and what it says: the job and what surrounds it, the causes, and
the readings of conditions and pods that more than one cause needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RUNNING = "running"
STARTING = "starting"
IMAGE_PULL = "image-pull-failing"
QUOTA = "namespace-quota-exhausted"
KUEUE = "kueue-not-admitted"
GANG = "gang-not-satisfiable"
VOLCANO_QUEUE = "volcano-queue-full"
NO_FIT = "no-node-fits"
POOL_MAX = "pool-at-maximum"
NO_SCALE_UP = "autoscaler-cannot-scale-up"
FINISHED = "finished"
SUSPENDED = "suspended"
TERMINAL = ("Succeeded", "Failed")
"""The phases of a pod, or a job, that has finished."""
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName")
"""Waiting reasons of a container whose image cannot be pulled (kubelet ``pkg/kubelet/images/types.go``)."""


@dataclass(frozen=True)
class Observed:
    """What the cluster shows about one job; everything but ``job`` may be missing.

    Args:
        job: the PyTorchJob (or other v1 kind) or TrainJob, ``kind`` set.
        pods: the job's pods.
        events: events of the namespace (and the autoscaler's); those about other objects are ignored.
        podgroup: the job's Volcano PodGroup.
        workload: the job's Kueue Workload.
        workloads: every Workload of the namespace (to find those preempted for this one).
        local_queue: the Workload's LocalQueue.
        position: the Workload's entry in Kueue's visibility API (``positionInLocalQueue``...).
        quotas: the namespace's ResourceQuotas.
        namespace_pods: every pod of the namespace (to say which jobs use a quota).
        nodes: the cluster's nodes.
        placement: the stack's ``jobDefaults.placement`` (pool selector, GPUs, node share, maximum).
    """

    job: dict[str, Any]
    pods: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    podgroup: dict[str, Any] | None = None
    workload: dict[str, Any] | None = None
    workloads: list[dict[str, Any]] = field(default_factory=list)
    local_queue: dict[str, Any] | None = None
    position: dict[str, Any] | None = None
    quotas: list[dict[str, Any]] = field(default_factory=list)
    namespace_pods: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    placement: dict[str, Any] | None = None


@dataclass(frozen=True)
class Why:
    """A cause (one of the constants above) and the sentence that says it with its specifics."""

    cause: str
    sentence: str


def true_condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """``obj``'s condition of type ``kind`` when its status is True, else ``None``."""
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind and c.get("status") == "True"), None)


def live(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods that have not finished."""
    return [p for p in pods if (p.get("status") or {}).get("phase") not in TERMINAL]


def pool_nodes(nodes: list[dict[str, Any]], placement: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The nodes whose labels match the pool's node selector (every node without one)."""
    selector = (placement or {}).get("nodeSelector") or {}
    return [n for n in nodes if selector.items() <= ((n.get("metadata") or {}).get("labels") or {}).items()]

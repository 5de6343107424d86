"""GPUs per node: allocatable against what running pods request, and whose pods those are: pure.

A pod's request of an extended resource such as ``nvidia.com/gpu`` is its limit when only the
limit is given (Kubernetes defaults the request to the limit, and an extended resource's two
must be equal); the pod needs the larger of its containers' sum and its largest init container
(Kubernetes docs, "Resource sharing within containers" of init containers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..manifests import GPU_RESOURCE, POOL_LABEL
from .replicas import pod_job


@dataclass(frozen=True)
class NodeGpus:
    """One GPU node as ``top nodes`` shows it.

    Args:
        name: the node's name.
        pool: its ``ack-training-platform/pool`` label ('' when it has none).
        allocatable: GPUs the node offers to pods.
        requested: GPUs requested by its running pods.
        jobs: ``namespace/job`` of each training job with a pod there.
    """

    name: str
    pool: str
    allocatable: int
    requested: int
    jobs: tuple[str, ...]


def _gpus(container: dict[str, Any]) -> int:
    resources = container.get("resources") or {}
    value = (resources.get("requests") or {}).get(GPU_RESOURCE) or (resources.get("limits") or {}).get(GPU_RESOURCE)
    return int(value or 0)


def pod_gpus(pod: dict[str, Any]) -> int:
    """GPUs a pod holds while it runs."""
    spec = pod.get("spec") or {}
    running = sum(_gpus(c) for c in spec.get("containers") or [])
    return max([running, *(_gpus(c) for c in spec.get("initContainers") or [])])


def node_gpus(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[NodeGpus]:
    """Each node with GPUs, by name.

    Args:
        nodes: the cluster's nodes.
        pods: its running pods (any namespace).
    """
    requested: dict[str, int] = {}
    jobs: dict[str, set[str]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            continue
        requested[node] = requested.get(node, 0) + pod_gpus(pod)
        if (job := pod_job(pod)) is not None:
            jobs.setdefault(node, set()).add(f"{pod['metadata'].get('namespace', '')}/{job}")
    rows = []
    for node in nodes:
        name = node["metadata"]["name"]
        allocatable = int(((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE) or 0)
        if allocatable:
            pool = (node["metadata"].get("labels") or {}).get(POOL_LABEL, "")
            rows.append(NodeGpus(name, pool, allocatable, requested.get(name, 0), tuple(sorted(jobs.get(name, ())))))
    return sorted(rows, key=lambda row: row.name)

"""``why``: one sentence on why a job waits (or that it runs), from what the cluster shows.

Everything beyond the job and its pods is read softly: a team member may not be allowed to list
nodes, Kueue's or Volcano's objects may not exist, the autoscaler's events live in
``kube-system``; what cannot be read is left out and the sentence says what the rest shows.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes.client.rest import ApiException

from ..client import KUEUE_GROUP_VERSION, JobsClient
from ..why import Observed, Why, why
from .base import Out
from .queue import VOLCANO

T = TypeVar("T")
AUTOSCALER_NAMESPACE = "kube-system"
"""Where cluster-autoscaler records ``ScaleUpFailed``: on its status ConfigMap
(``cluster-autoscaler-1.34.5`` ``clusterstate/utils/status.go`` ``NewStatusMapRecorder``)."""


def _soft(read: Callable[[], T], default: T) -> T:
    try:
        return read()
    except ApiException:
        return default


def placement(outputs: dict[str, Any], namespace: str) -> dict[str, Any] | None:
    """The pool's placement the stack exports for ``namespace`` (``jobDefaults`` or a team's), if any."""
    every = [outputs.get("jobDefaults") or {}, *(outputs.get("teamJobDefaults") or {}).values()]
    return next((d.get("placement") for d in every if d.get("namespace") == namespace), None)


def observe(
    jobs: JobsClient, job: dict[str, Any], pool: dict[str, Any] | None, pods: list[dict[str, Any]] | None = None
) -> Observed:
    """Read what :func:`~components.jobs.why.why` looks at for ``job`` (its ``pods`` if already read)."""
    name = job["metadata"]["name"]
    podgroup = next(
        (g for g in _soft(lambda: jobs.objects(VOLCANO, "podgroups", namespaced=True), None) or [] if _named(g, name)),
        None,
    )
    workload = next(iter(_soft(lambda: jobs.workloads(job), []) if job["metadata"].get("uid") else []), None)
    local_queue = position = None
    workloads: list[dict[str, Any]] = []
    if workload is not None:
        queue = (workload.get("spec") or {}).get("queueName") or ""
        local_queue = next(
            (
                q
                for q in _soft(lambda: jobs.objects(KUEUE_GROUP_VERSION, "localqueues", namespaced=True), None) or []
                if _named(q, queue)
            ),
            None,
        )
        position = _soft(lambda: jobs.pending_position(queue, workload["metadata"]["name"]), None)
        workloads = _soft(lambda: jobs.objects(KUEUE_GROUP_VERSION, "workloads", namespaced=True), None) or []
    events = _soft(jobs.events, []) + _soft(lambda: jobs.events(AUTOSCALER_NAMESPACE, "ScaleUpFailed"), [])
    return Observed(
        job=job,
        pods=jobs.pods(job) if pods is None else pods,
        events=events,
        podgroup=podgroup,
        workload=workload,
        workloads=workloads,
        local_queue=local_queue,
        position=position,
        quotas=_soft(jobs.resource_quotas, []),
        namespace_pods=_soft(jobs.namespace_pods, []),
        nodes=_soft(jobs.nodes, []),
        placement=pool,
    )


def _named(obj: dict[str, Any], name: str) -> bool:
    return (obj.get("metadata") or {}).get("name") == name


def explain_job(
    jobs: JobsClient, job: dict[str, Any], outputs: dict[str, Any], pods: list[dict[str, Any]] | None = None
) -> Why:
    """The job's cause and sentence, read through ``jobs``."""
    return why(observe(jobs, job, placement(outputs, jobs.namespace), pods))


def cmd_why(jobs: JobsClient, args: argparse.Namespace, out: Out, outputs: dict[str, Any]) -> None:
    found = explain_job(jobs, jobs.get_job(args.name), outputs)
    out(f"{args.name}: {found.sentence}")

"""``queue``: Volcano queues (v1 jobs) and Kueue queues (v2 jobs), and why each waiting job waits."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from ..client import KUEUE_GROUP_VERSION, WORKLOADS, JobsClient
from ..queues import (
    cluster_queue_row,
    local_queue_row,
    podgroup_wait,
    volcano_queue_row,
    workload_job,
    workload_wait,
)
from .base import Failure, Out, table

VOLCANO = ("scheduling.volcano.sh", "v1beta1")


def cmd_queue(jobs: JobsClient, args: argparse.Namespace, out: Out) -> None:
    name = args.name
    shown = False
    volcano = jobs.objects(VOLCANO, "queues", namespaced=False)
    if volcano is not None:
        queues = [q for q in volcano if name in (None, q["metadata"]["name"])]
        if queues:
            shown = True
            out("Volcano queues:")
            table([("  NAME", "STATE", "PENDING", "INQUEUE", "RUNNING"), *_indent(map(volcano_queue_row, queues))], out)
            names = {q["metadata"]["name"] for q in queues}
            groups = [g for g in jobs.objects(VOLCANO, "podgroups", namespaced=True) or [] if _queue_of(g) in names]
            waiting = [(w, _queue_of(g)) for g in groups if (w := podgroup_wait(g)) is not None]
            if waiting:
                out(f"Waiting jobs in {jobs.namespace}:")
                rows = [(f"  {job}", queue, phase, why) for (job, phase, why), queue in waiting]
                table([("  JOB", "QUEUE", "PHASE", "WHY"), *rows], out)
    local = jobs.objects(KUEUE_GROUP_VERSION, "localqueues", namespaced=True)
    if local is not None:
        cluster = jobs.objects(KUEUE_GROUP_VERSION, "clusterqueues", namespaced=False) or []
        local = [q for q in local if name in (None, q["metadata"]["name"], (q.get("spec") or {}).get("clusterQueue"))]
        wanted = {(q.get("spec") or {}).get("clusterQueue") for q in local} | {name}
        cluster = [q for q in cluster if name is None or q["metadata"]["name"] in wanted]
        if local:
            shown = True
            out(f"Kueue LocalQueues in {jobs.namespace}:")
            table([("  NAME", "CLUSTERQUEUE", "PENDING", "ADMITTED"), *_indent(map(local_queue_row, local))], out)
        if cluster:
            shown = True
            out("Kueue ClusterQueues:")
            table([("  NAME", "PENDING", "ADMITTED", "USAGE/NOMINAL"), *_indent(map(cluster_queue_row, cluster))], out)
        names = {q["metadata"]["name"] for q in local}
        workloads = [
            w
            for w in jobs.objects(KUEUE_GROUP_VERSION, WORKLOADS, namespaced=True) or []
            if (w.get("spec") or {}).get("queueName") in names
        ]
        waiting = [(w, why) for w in workloads if (why := workload_wait(w)) is not None]
        if waiting:
            out(f"Pending workloads in {jobs.namespace}:")
            rows = [(f"  {workload_job(w)}", w["spec"]["queueName"], why) for w, why in waiting]
            table([("  JOB", "QUEUE", "WHY"), *rows], out)
    if not shown:
        if name is not None:
            raise Failure(f"no Volcano queue or Kueue LocalQueue or ClusterQueue named {name!r}")
        out("No Volcano or Kueue queues found.")


def _queue_of(podgroup: dict[str, Any]) -> str:
    return (podgroup.get("spec") or {}).get("queue") or ""


def _indent(rows: Iterable[tuple[str, ...]]) -> list[tuple[str, ...]]:
    return [("  " + row[0], *row[1:]) for row in rows]

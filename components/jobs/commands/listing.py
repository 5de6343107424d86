"""``list`` and ``get``: jobs as tables, or as the API server returns them (``-o``)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from kubernetes.client.rest import ApiException

from ..client import JobsClient, explain
from ..network_report import network_summary
from ..replicas import NODE_INDEX_LABEL
from ..status import format_age, job_priority, job_queue, last_metrics, pod_nodes, summarize
from .base import Out, as_list, dump, resource_name, table
from .why import explain_job

RANK0_LABELS = {
    # v1: the Master's pod (kubeflow.training constants JOB_ROLE_LABEL); v2: node 0 of the trainer.
    "training.kubeflow.org/job-role": "master",
    NODE_INDEX_LABEL: "0",
}


def cmd_list(jobs: JobsClient, args: argparse.Namespace, out: Out) -> None:
    found = jobs.list_jobs(all_namespaces=args.all_namespaces)
    if args.output in ("json", "yaml"):
        dump(as_list(found), args.output, out)
        return
    if args.output == "name":
        for job in found:
            out(resource_name(job))
        return
    if not found:
        out("No jobs found." if args.all_namespaces else f"No jobs in namespace {jobs.namespace}.")
        return
    now = datetime.now(UTC)
    wide = args.output == "wide"
    header = ["NAME", "KIND", "PHASE", "REPLICAS", "RESTARTS", "AGE"]
    rows = [(["NAMESPACE"] if args.all_namespaces else []) + header + (["QUEUE", "PRIORITY", "NODES"] if wide else [])]
    for job in found:
        pods = jobs.pods(job)
        s = summarize(job, pods, now)
        row = [s.name, s.kind, s.phase, s.replicas_text, str(s.restarts), format_age(s.age_s)]
        if args.all_namespaces:
            row.insert(0, job["metadata"].get("namespace", ""))
        if wide:
            row += [job_queue(job) or "-", job_priority(job) or "-", ",".join(pod_nodes(pods)) or "-"]
        rows.append(row)
    table(rows, out)


def cmd_get(jobs: JobsClient, args: argparse.Namespace, out: Out, outputs: dict[str, Any]) -> None:
    job = jobs.get_job(args.name)
    if args.output in ("json", "yaml"):
        dump(job, args.output, out)
        return
    if args.output == "name":
        out(resource_name(job))
        return
    pods = jobs.pods(job)
    s = summarize(job, pods, datetime.now(UTC))
    out(f"Name:      {s.name}")
    out(f"Kind:      {s.kind}")
    out(f"Phase:     {s.phase}")
    if s.phase == "Failed":
        out(f"Failure:   {s.reason}: {s.message}")
    out(f"Age:       {format_age(s.age_s)}")
    out(f"Restarts:  {s.restarts}")
    out(f"Replicas:  {s.replicas_text}")
    out(f"Why:       {explain_job(jobs, job, outputs, pods).sentence}")
    if args.output == "wide":
        out(f"Queue:     {job_queue(job) or '-'}")
        out(f"Priority:  {job_priority(job) or '-'}")
    if s.conditions:
        out("Conditions:")
        table([("  TYPE", "STATUS", "REASON", "MESSAGE"), *(("  " + c[0], *c[1:]) for c in s.conditions)], out)
    if args.output == "wide" and pods:
        out("Pods:")
        table([("  NAME", "PHASE", "NODE"), *(_pod_row(pod) for pod in pods)], out)
    _show_metrics(jobs, pods, out)


def _pod_row(pod: dict[str, Any]) -> tuple[str, str, str]:
    return (
        "  " + pod["metadata"]["name"],
        (pod.get("status") or {}).get("phase") or "Pending",
        (pod.get("spec") or {}).get("nodeName") or "-",
    )


def _show_metrics(jobs: JobsClient, pods: list[dict[str, Any]], out: Out) -> None:
    candidates = _rank0_candidates(pods)
    if not candidates:
        out("Metrics:   no rank 0 pod yet")
        return
    for pod in candidates:
        try:
            text = jobs.metrics_text(pod)
            values = last_metrics(text)
        except (ApiException, OSError, ValueError) as err:
            if pod == candidates[-1]:
                out(f"Metrics:   rank 0's /metrics unreachable ({pod}): {explain(err)}")
            continue
        if values or pod == candidates[-1]:
            shown = "  ".join(f"{k} {v:g}" for k, v in values.items()) or "none served yet"
            out(f"Metrics:   {shown}  (from {pod})")
            network = network_summary(text)
            if network:
                out(f"Network:   {network}")
            return


def _rank0_candidates(pods: list[dict[str, Any]]) -> list[str]:
    """The pods that may serve rank 0's metrics, to ask in turn: the Master (v1) or node 0
    (v2); else, for an elastic PyTorchJob, whose rendezvous may put rank 0 on any worker,
    every pod (the others serve only their restarts, ``trainer.telemetry.metric_names.POD``)."""
    names = [pod["metadata"]["name"] for pod in pods]
    labelled = [
        pod["metadata"]["name"]
        for pod in pods
        if any((pod["metadata"].get("labels") or {}).get(key) == value for key, value in RANK0_LABELS.items())
    ]
    return labelled or names

"""``top``: GPU use per job pod (from Prometheus) or per GPU node (from the Kubernetes API),
once or every ``--watch`` seconds until interrupted."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from components.manifests.monitoring.gpu_metrics import GPU_MEMORY_USED, GPU_UTIL, POD_LABEL, per_pod

from ..client import JobsClient, prometheus_query
from ..usage import node_gpus
from .base import Failure, Out, UsageError, dcgm_namespace, table


def cmd_top(
    jobs: JobsClient, args: argparse.Namespace, out: Out, sleep: Callable[[float], None], outputs: dict[str, Any]
) -> None:
    def show(jobs: JobsClient, args: argparse.Namespace, out: Out) -> None:
        if args.what == "nodes":
            _nodes(jobs, args, out)
        else:
            _jobs(jobs, args, out, dcgm)

    if args.what == "jobs" and not args.prometheus_url:
        raise UsageError(
            "--prometheus-url: give the address of a Prometheus that scrapes the GPU exporter, e.g. "
            "kubectl port-forward to its service and --prometheus-url http://localhost:9090"
        )
    # Read once, so --watch says once that the stack names no exporter.
    dcgm = dcgm_namespace(outputs, "top") if args.what == "jobs" else None
    show(jobs, args, out)
    if args.watch is None:
        return
    try:
        while True:
            sleep(args.watch)
            out("")
            show(jobs, args, out)
    except KeyboardInterrupt:
        return


def _jobs(jobs: JobsClient, args: argparse.Namespace, out: Out, dcgm: str | None) -> None:
    url = args.prometheus_url
    found = jobs.list_jobs(all_namespaces=args.all_namespaces)
    namespaces = sorted({job["metadata"].get("namespace") or jobs.namespace for job in found}) or [jobs.namespace]
    util_of: dict[tuple[str, str], float] = {}
    memory_of: dict[tuple[str, str], float] = {}
    try:
        for namespace in namespaces:
            for labels, value in prometheus_query(url, per_pod("avg", GPU_UTIL, namespace, dcgm_namespace=dcgm)):
                util_of[namespace, labels.get(POD_LABEL, "")] = value
            for labels, value in prometheus_query(url, per_pod("sum", GPU_MEMORY_USED, namespace, dcgm_namespace=dcgm)):
                memory_of[namespace, labels.get(POD_LABEL, "")] = value
    except OSError as err:
        raise Failure(f"--prometheus-url {url}: {err}") from None
    rows = [(["NAMESPACE"] if args.all_namespaces else []) + ["JOB", "POD", "GPU-UTIL", "GPU-MEM-USED"]]
    for job in found:
        namespace = job["metadata"].get("namespace") or jobs.namespace
        for pod in jobs.pods(job):
            key = (namespace, pod["metadata"]["name"])
            if key in util_of or key in memory_of:
                used = memory_of.get(key)
                row = [
                    job["metadata"]["name"],
                    key[1],
                    f"{util_of[key]:.0f}%" if key in util_of else "-",
                    f"{used:.0f} MiB" if used is not None else "-",
                ]
                rows.append(([namespace] if args.all_namespaces else []) + row)
    if len(rows) == 1:
        where = "any namespace" if args.all_namespaces else f"namespace {jobs.namespace}"
        out(f"No GPU metrics for the jobs' pods in {where} (is GPU monitoring on?).")
        return
    table(rows, out)


def _nodes(jobs: JobsClient, args: argparse.Namespace, out: Out) -> None:
    rows = [("NODE", "POOL", "GPUS", "REQUESTED", "JOBS")]
    for node in node_gpus(jobs.nodes(), jobs.running_pods()):
        rows.append(
            (node.name, node.pool or "-", str(node.allocatable), str(node.requested), ",".join(node.jobs) or "-")
        )
    if len(rows) == 1:
        out("No nodes with GPUs.")
        return
    table(rows, out)

"""``ack-jobs``: the platform's training jobs from a terminal, named as people think of them.

    ack-jobs --stack dev list
    ack-jobs --stack dev get mnist
    ack-jobs --stack dev logs mnist -f --replica worker-0
    ack-jobs --stack dev top --prometheus-url http://localhost:9090
    ack-jobs --stack dev wait mnist --for succeeded --timeout 3600
    ack-jobs --stack dev delete mnist
    ack-jobs --stack dev submit gpt-small --nodes 2 --model gpt --max-steps 2000 --image-tag v1.4.0
    ack-jobs --outputs outputs.json submit gpt-small --image-tag v1.4.0 --dry-run -- --grad-accum 4

Exit statuses: 0 done, 1 the cluster said no (job missing, failed, timed out), 2 bad flags.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import yaml
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError as TransportError

from components.manifests.gpu_metrics import GPU_MEMORY_USED, GPU_UTIL, POD_LABEL, per_pod

from . import connect, submit
from .client import NODE_INDEX_LABEL, JobNotFound, JobsClient, WaitEnded, explain, prometheus_query
from .status import PYTORCHJOB, format_age, last_metrics, summarize

WAIT_PHASES = ("created", "running", "restarting", "succeeded", "failed")
RANK0_LABELS = {
    # v1: the Master's pod (kubeflow.training constants JOB_ROLE_LABEL); v2: node 0 of the trainer.
    "training.kubeflow.org/job-role": "master",
    NODE_INDEX_LABEL: "0",
}


class UsageError(Exception):
    """Bad flags: printed with the flag's name, exit 2."""


class Failure(Exception):
    """The cluster's answer is a failure (missing job, failed job, timeout): exit 1."""


def _seconds(text: str) -> float:
    """A ``--timeout``/``--interval`` value; argparse names the flag in the error."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0")
    return value


def parser() -> argparse.ArgumentParser:
    """The command line of every command."""
    top = argparse.ArgumentParser(prog="ack-jobs", description=__doc__.split("\n")[0].replace("``", ""))
    where = top.add_argument_group("where to connect")
    where.add_argument("--stack", help="read the namespace and job defaults from this Pulumi stack's outputs")
    where.add_argument("--outputs", metavar="FILE", help="the same outputs as a JSON file (pulumi stack output --json)")
    where.add_argument("--kubeconfig", help="your kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    where.add_argument("--context", help="the kubeconfig context to use (default: the current one)")
    where.add_argument("--namespace", help="training namespace (default: the stack's, else training)")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("list", help="jobs with phase, replicas, restarts and age")
    get = commands.add_parser("get", help="one job: phase, conditions, replicas, restarts, age, last metrics")
    get.add_argument("name")
    logs = commands.add_parser("logs", help="a replica's log")
    logs.add_argument("name")
    logs.add_argument("-f", "--follow", action="store_true", help="stream until the pod ends")
    logs.add_argument("--replica", help="master (default), worker-N on v1; node-N (default node-0) on v2")
    top_cmd = commands.add_parser("top", help="GPU use per job, from Prometheus")
    top_cmd.add_argument("--prometheus-url", help="Prometheus that scrapes ACK's GPU exporter")
    wait = commands.add_parser("wait", help="block until a job reaches a phase")
    wait.add_argument("name")
    wait.add_argument("--for", dest="phase", default="succeeded", choices=WAIT_PHASES, help="default succeeded")
    wait.add_argument("--timeout", type=_seconds, default=600.0, help="seconds (default 600)")
    wait.add_argument("--interval", type=_seconds, default=15.0, help="seconds between polls (default 15)")
    delete = commands.add_parser("delete", help="delete a job and its pods")
    delete.add_argument("name")
    sub = commands.add_parser("submit", help="build a job from flags with the stack's builder and create it")
    sub.add_argument("--dry-run", action="store_true", help="print the manifest as YAML, create nothing")
    submit.add_flags(sub)
    return top


def cmd_list(jobs: JobsClient, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    now = datetime.now(UTC)
    rows = [("NAME", "KIND", "PHASE", "REPLICAS", "RESTARTS", "AGE")]
    for job in jobs.list_jobs():
        s = summarize(job, jobs.pods(job), now)
        rows.append((s.name, s.kind, s.phase, s.replicas_text, str(s.restarts), format_age(s.age_s)))
    if len(rows) == 1:
        out(f"No jobs in namespace {jobs.namespace}.")
        return
    _table(rows, out)


def cmd_get(jobs: JobsClient, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    job = jobs.get_job(args.name)
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
    if s.conditions:
        out("Conditions:")
        _table([("  TYPE", "STATUS", "REASON", "MESSAGE"), *(("  " + c[0], *c[1:]) for c in s.conditions)], out)
    candidates = _rank0_candidates(pods)
    if not candidates:
        out("Metrics:   no rank 0 pod yet")
        return
    for pod in candidates:
        try:
            values = last_metrics(jobs.metrics_text(pod))
        except (ApiException, OSError, ValueError) as err:
            if pod == candidates[-1]:
                out(f"Metrics:   rank 0's /metrics unreachable ({pod}): {explain(err)}")
            continue
        if values or pod == candidates[-1]:
            shown = "  ".join(f"{k} {v:g}" for k, v in values.items()) or "none served yet"
            out(f"Metrics:   {shown}  (from {pod})")
            return


def _rank0_candidates(pods: list[dict[str, Any]]) -> list[str]:
    """The pods that may serve rank 0's metrics, to ask in turn: the Master (v1) or node 0
    (v2); else, for an elastic PyTorchJob, whose rendezvous may put rank 0 on any worker,
    every pod (the others serve only their restarts, ``trainer.metric_names.POD``)."""
    names = [pod["metadata"]["name"] for pod in pods]
    labelled = [
        pod["metadata"]["name"]
        for pod in pods
        if any((pod["metadata"].get("labels") or {}).get(key) == value for key, value in RANK0_LABELS.items())
    ]
    return labelled or names


def cmd_logs(jobs: JobsClient, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    job = jobs.get_job(args.name)
    replica = args.replica or ("master" if job["kind"] == PYTORCHJOB else "node-0")
    try:
        jobs.logs(job, replica, args.follow, out)
    except ValueError as err:
        raise UsageError(str(err)) from None


def cmd_top(jobs: JobsClient, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    url = args.prometheus_url
    if not url:
        raise UsageError(
            "--prometheus-url: give the address of a Prometheus that scrapes ACK's GPU exporter, e.g. "
            "kubectl port-forward to its service and --prometheus-url http://localhost:9090"
        )
    try:
        util = prometheus_query(url, per_pod("avg", GPU_UTIL, jobs.namespace))
        memory = prometheus_query(url, per_pod("sum", GPU_MEMORY_USED, jobs.namespace))
    except OSError as err:
        raise Failure(f"--prometheus-url {url}: {err}") from None
    util_of = {labels.get(POD_LABEL): value for labels, value in util}
    memory_of = {labels.get(POD_LABEL): value for labels, value in memory}
    rows = [("JOB", "POD", "GPU-UTIL", "GPU-MEM-USED")]
    for job in jobs.list_jobs():
        for pod in jobs.pods(job):
            name = pod["metadata"]["name"]
            if name in util_of or name in memory_of:
                used = memory_of.get(name)
                rows.append(
                    (
                        job["metadata"]["name"],
                        name,
                        f"{util_of[name]:.0f}%" if name in util_of else "-",
                        f"{used:.0f} MiB" if used is not None else "-",
                    )
                )
    if len(rows) == 1:
        out(f"No GPU metrics for the jobs' pods in namespace {jobs.namespace} (is ACK's GPU monitoring on?).")
        return
    _table(rows, out)


def cmd_wait(jobs: JobsClient, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    job = jobs.get_job(args.name)
    try:
        jobs.wait(job, args.phase, timeout=args.timeout, interval=args.interval)
    except ValueError as err:
        raise UsageError(str(err)) from None
    except TimeoutError:
        s = summarize(jobs.get_job(args.name), [], datetime.now(UTC))
        raise Failure(
            f"timed out after {args.timeout:g}s waiting for {args.name} to be {args.phase}; it is {s.phase}"
        ) from None
    except WaitEnded:
        s = summarize(jobs.get_job(args.name), [], datetime.now(UTC))
        if s.phase == "Failed":
            raise Failure(f"{args.name} failed: {s.reason}: {s.message}") from None
        raise Failure(f"{args.name} is {s.phase} and will not be {args.phase}") from None
    out(f"{args.name} is {args.phase}")


def cmd_delete(jobs: JobsClient, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    job = jobs.get_job(args.name)
    jobs.delete(job)
    out(f"{job['kind']} {args.name} deleted")


def _table(rows: Sequence[Sequence[str]], out: Callable[[str], None]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        out("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


COMMANDS = {
    "list": cmd_list,
    "get": cmd_get,
    "logs": cmd_logs,
    "top": cmd_top,
    "wait": cmd_wait,
    "delete": cmd_delete,
}


def run(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    """Run one command.

    Args:
        argv: the arguments after the program name (``sys.argv[1:]`` when ``None``).
        out: where output lines go.

    Returns:
        The exit status: 0 done, 1 failure reported by the cluster, 2 bad flags.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after `--` goes to the trainer; argparse would read flags there as its own.
    cut = argv.index("--") if "--" in argv else len(argv)
    args, extra = parser().parse_args(argv[:cut]), argv[cut + 1 :]
    try:
        outputs = connect.stack_outputs(args.stack, args.outputs)
        if args.command == "submit":
            return _submit(args, extra, outputs, out)
        jobs = JobsClient(
            connect.configuration(args.kubeconfig, args.context), connect.namespace(outputs, args.namespace)
        )
        COMMANDS[args.command](jobs, args, out)
    except (UsageError, connect.TargetError, submit.FlagError) as err:
        print(f"ack-jobs {args.command}: {err}", file=sys.stderr)
        return 2
    except (Failure, JobNotFound) as err:
        print(f"ack-jobs {args.command}: {err}", file=sys.stderr)
        return 1
    except (RuntimeError, ApiException, TransportError) as err:
        print(f"ack-jobs {args.command}: {explain(err)}", file=sys.stderr)
        return 1
    return 0


def _submit(args: argparse.Namespace, extra: list[str], outputs: dict[str, Any], out: Callable[[str], None]) -> int:
    defaults = outputs.get("jobDefaults")
    if not defaults:
        raise UsageError("--stack/--outputs: submit needs the stack's jobDefaults output (pulumi up exports it)")
    if args.namespace and args.namespace != defaults["namespace"]:
        # The claims, service account and pull secret of jobDefaults exist only there.
        raise UsageError(
            f"--namespace {args.namespace}: the stack's jobDefaults (claims, service account, pull secret) "
            f"are in namespace {defaults['namespace']}; leave --namespace out or give {defaults['namespace']}"
        )
    spec = submit.job_spec(args, defaults, extra)
    manifest = submit.manifest(spec, defaults)
    if args.dry_run:
        out(yaml.safe_dump(manifest, sort_keys=False).rstrip("\n"))
        return 0
    jobs = JobsClient(connect.configuration(args.kubeconfig, args.context), defaults["namespace"])
    jobs.create(manifest)
    out(f"{manifest['kind']} {spec.name} created in {defaults['namespace']}")
    return 0

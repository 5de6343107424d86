"""``logs``: a replica's log read straight from the pod (``CoreV1Api.read_namespaced_pod_log``),
for both kinds of job, with kubectl's ``--follow``, ``--tail``, ``--since``, ``--timestamps``,
``--previous`` and ``--prefix`` (``--all-replicas`` prefixes each line as kubectl does)."""

from __future__ import annotations

import argparse
import contextlib
import threading
from typing import Any

from ..client import JobNotFound, JobsClient
from ..replicas import container_of, default_replica, rank_replica, replica_selector
from .base import Out


def cmd_logs(jobs: JobsClient, args: argparse.Namespace, out: Out) -> None:
    job = jobs.get_job(args.name)
    options = _options(args)
    container = container_of(job)
    if args.all_replicas:
        pods = [pod["metadata"]["name"] for pod in _started(jobs.pods(job))]
        if not pods:
            raise JobNotFound(f"no started pod of {job['kind']} {args.name} yet")
        _prefixed(jobs, pods, container, options, args.follow, out)
        return
    replica = rank_replica(job, args.rank) if args.rank is not None else args.replica or default_replica(job)
    selector, container = replica_selector(job, replica)
    started = _started(jobs.pods(job, selector))
    if not started:
        raise JobNotFound(f"no started pod for {replica} of {job['kind']} {args.name} yet")
    pod = started[0]["metadata"]["name"]
    if args.follow:
        # Ctrl-C ends a followed log, as it ends kubectl's.
        with contextlib.suppress(KeyboardInterrupt):
            for line in jobs.follow_log(pod, container, options):
                out(line)
        return
    text = jobs.log(pod, container, options)
    if text:
        out(text.rstrip("\n"))


def _options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if args.tail is not None:
        options["tail_lines"] = args.tail
    if args.since is not None:
        options["since_seconds"] = args.since
    if args.timestamps:
        options["timestamps"] = True
    if args.previous:
        options["previous"] = True
    return options


def _started(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # A Pending pod's container has not started, so it has no log to read yet.
    return [pod for pod in pods if (pod.get("status") or {}).get("phase") not in (None, "Pending")]


def _prefixed(
    jobs: JobsClient, pods: list[str], container: str, options: dict[str, Any], follow: bool, out: Out
) -> None:
    if not follow:
        for pod in pods:
            for line in jobs.log(pod, container, options).splitlines():
                out(f"[pod/{pod}/{container}] {line}")
        return
    lock = threading.Lock()
    errors: list[BaseException] = []

    def stream(pod: str) -> None:
        try:
            for line in jobs.follow_log(pod, container, options):
                with lock:
                    out(f"[pod/{pod}/{container}] {line}")
        except Exception as err:  # noqa: BLE001 - re-raised in the calling thread below
            errors.append(err)

    threads = [threading.Thread(target=stream, args=(pod,), daemon=True) for pod in pods]
    for thread in threads:
        thread.start()
    with contextlib.suppress(KeyboardInterrupt):
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]

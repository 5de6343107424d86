"""``wait``, ``delete``, ``suspend`` and ``resume``."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from kubernetes.client.rest import ApiException

from ..client import JobNotFound, JobsClient, WaitEnded, explain
from ..status import is_v1, job_queue, summarize
from .base import Failure, Out, UsageError


def cmd_wait(jobs: JobsClient, args: argparse.Namespace, out: Out) -> None:
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


def cmd_delete(jobs: JobsClient, args: argparse.Namespace, out: Out) -> int:
    """Delete each job named, reporting each; 1 if any could not be deleted, once all were tried."""
    failed = False
    for name in args.names:
        try:
            job = jobs.get_job(name)
            jobs.delete(job)
        except (JobNotFound, RuntimeError, ApiException) as err:
            failed = True
            print(f"ack-jobs delete: {err if isinstance(err, JobNotFound) else explain(err)}", file=sys.stderr)
            continue
        out(f"{job['kind']} {name} deleted")
    return 1 if failed else 0


def cmd_suspend(jobs: JobsClient, args: argparse.Namespace, out: Out) -> None:
    _set_suspended(jobs, jobs.get_job(args.name), True, out)


def cmd_resume(jobs: JobsClient, args: argparse.Namespace, out: Out) -> None:
    _set_suspended(jobs, jobs.get_job(args.name), False, out)


def _set_suspended(jobs: JobsClient, job: dict[str, Any], suspend: bool, out: Out) -> None:
    """Stop a job's pods and keep the job, or let it run again.

    A v1 job of any kind suspends with ``spec.runPolicy.suspend`` (Training Operator v1.9.4
    ``RunPolicy.Suspend``), a TrainJob with ``spec.suspend`` (Trainer v2.3.0
    ``TrainJobSpec.Suspend``), except one Kueue queues: Kueue unsuspends a suspended job whose
    Workload is admitted and suspends a running one whose Workload is not (kueue v0.19.2
    ``pkg/controller/jobframework/reconciler.go``, steps 7 and 8 of the job reconciler), so the
    job's Workload is deactivated instead: ``spec.active: false`` evicts a running workload and
    keeps it from being admitted (``apis/kueue/v1beta2/workload_types.go`` ``WorkloadSpec.Active``).
    """
    name, kind = job["metadata"]["name"], job["kind"]
    done = "suspended" if suspend else "resumed"
    if is_v1(job):
        jobs.patch_job(job, {"spec": {"runPolicy": {"suspend": suspend}}})
        out(f"{kind} {name} {done}")
        return
    if not job_queue(job):
        jobs.patch_job(job, {"spec": {"suspend": suspend}})
        out(f"{kind} {name} {done}")
        return
    workloads = jobs.workloads(job)
    if not workloads:
        raise Failure(f"{kind} {name} is queued by Kueue but has no Workload yet; try again once Kueue has made one")
    for workload in workloads:
        jobs.patch_workload(workload["metadata"]["name"], {"spec": {"active": not suspend}})
    names = ", ".join(w["metadata"]["name"] for w in workloads)
    out(f"{kind} {name} {done} (Kueue Workload {names} {'deactivated' if suspend else 'activated'})")

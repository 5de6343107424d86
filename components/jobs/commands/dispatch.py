"""Running one parsed command: connecting, dispatching, and turning errors into exit statuses."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import yaml
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError as TransportError

from .. import connect, submit
from ..client import JobNotFound, JobsClient, explain
from ..replicas import ReplicaError
from . import cost, data, lifecycle, listing, logs, queue, top, why
from .base import Failure, Out, UsageError, job_defaults

COMMANDS: dict[str, Callable[[JobsClient, argparse.Namespace, Out], int | None]] = {
    "list": listing.cmd_list,
    "logs": logs.cmd_logs,
    "wait": lifecycle.cmd_wait,
    "delete": lifecycle.cmd_delete,
    "suspend": lifecycle.cmd_suspend,
    "resume": lifecycle.cmd_resume,
    "queue": queue.cmd_queue,
}
WITH_OUTPUTS: dict[str, Callable[[JobsClient, argparse.Namespace, Out, dict[str, Any]], None]] = {
    "get": listing.cmd_get,
    "why": why.cmd_why,
    "cost": cost.cmd_cost,
}
"""Commands that also read the stack's outputs (the pool's placement, for why a job waits)."""


def run(
    args: argparse.Namespace, extra: list[str], out: Out = print, sleep: Callable[[float], None] = time.sleep
) -> int:
    """Run one command.

    Args:
        args: its flags, as :func:`.flags.parse` gives them.
        extra: the arguments after ``--``, for the trainer.
        out: where output lines go.
        sleep: how ``top --watch`` waits between refreshes.

    Returns:
        The exit status: 0 done, 1 failure reported by the cluster, 2 bad flags.
    """
    try:
        outputs = connect.stack_outputs(args.stack, args.outputs)
        if args.command == "submit":
            return _submit(args, extra, outputs, out)
        if args.command == "data":
            return data.cmd_data(args, outputs, out)
        configuration = connect.configuration(args.kubeconfig, args.context)
        where = connect.namespace(outputs, args.namespace)
        if args.command == "cost" and args.team is not None:
            where = cost.team_namespace(outputs, args.team)
        jobs = JobsClient(configuration, where)
        if args.command == "top":
            top.cmd_top(jobs, args, out, sleep, outputs)
            return 0
        if args.command in WITH_OUTPUTS:
            WITH_OUTPUTS[args.command](jobs, args, out, outputs)
            return 0
        return COMMANDS[args.command](jobs, args, out) or 0
    except (UsageError, connect.TargetError, submit.FlagError, ReplicaError) as err:
        print(f"ack-jobs {args.command}: {err}", file=sys.stderr)
        return 2
    except (Failure, JobNotFound) as err:
        print(f"ack-jobs {args.command}: {err}", file=sys.stderr)
        return 1
    except (RuntimeError, ApiException, TransportError) as err:
        print(f"ack-jobs {args.command}: {explain(err)}", file=sys.stderr)
        return 1


def _submit(args: argparse.Namespace, extra: list[str], outputs: dict[str, Any], out: Out) -> int:
    defaults = job_defaults(outputs, args.namespace, "submit")
    if outputs.get(connect.PLANNED) and not args.dry_run:
        raise UsageError(
            "--outputs: an offline plan's outputs hold placeholders (the registry host) where a deployment has "
            "values: use them with --dry-run, or pass pulumi stack output --json of the deployed stack"
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

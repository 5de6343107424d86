"""``ack-jobs``: the platform's training jobs from a terminal, named as people think of them.

    ack-jobs --stack dev list -o wide
    ack-jobs get mnist -n training --context prod -o yaml
    ack-jobs logs mnist -f --tail 100 --rank 1
    ack-jobs top nodes --watch 5
    ack-jobs wait mnist --for succeeded --timeout 3600
    ack-jobs suspend gpt && ack-jobs resume gpt
    ack-jobs delete mnist gpt
    ack-jobs queue
    ack-jobs --stack dev submit gpt-small --nodes 2 --model gpt --max-steps 2000 --image-tag v1.4.0
    ack-jobs --outputs outputs.json submit gpt-small --image-tag v1.4.0 --dry-run -- --grad-accum 4

The connection flags go before or after the command. Exit statuses: 0 done, 1 the cluster
said no (job missing, failed, timed out), 2 bad flags.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import yaml
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError as TransportError

from .. import connect, submit
from ..client import JobNotFound, JobsClient, explain
from ..replicas import ReplicaError
from . import inspect, lifecycle, logs, queue, top
from .base import Failure, Out, UsageError, seconds

WAIT_PHASES = ("created", "running", "restarting", "succeeded", "failed")


class Parser(argparse.ArgumentParser):
    """Bad flags as one line, ``ack-jobs <command>: ...``, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}\n")


def _connection(suppress: bool) -> Parser:
    """The flags saying where to connect. The commands' copies default to SUPPRESS, so a
    flag given before the command is kept unless given again after it."""
    default = {"default": argparse.SUPPRESS} if suppress else {}
    flags = Parser(add_help=False)
    where = flags.add_argument_group("where to connect")
    where.add_argument(
        "--stack", help="read kubeconfig, namespace and job defaults from this Pulumi stack's outputs", **default
    )
    where.add_argument(
        "--outputs",
        metavar="FILE",
        help="the same outputs as a JSON file (pulumi stack output --json --show-secrets)",
        **default,
    )
    where.add_argument("--kubeconfig", help="kubeconfig file (instead of the stack's)", **default)
    where.add_argument("--context", help="the kubeconfig context to use (default: its current context)", **default)
    where.add_argument("-n", "--namespace", help="training namespace (default: the stack's, else training)", **default)
    return flags


def parser() -> argparse.ArgumentParser:
    """The command line of every command."""
    top_parser = Parser(
        prog="ack-jobs", description=__doc__.split("\n")[0].replace("``", ""), parents=[_connection(False)]
    )
    commands = top_parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    common = [_connection(True)]

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help_text, description=help_text, parents=common)

    listing = command("list", "jobs with phase, replicas, restarts and age")
    listing.add_argument("-A", "--all-namespaces", action="store_true", help="jobs of every namespace")
    inspect.add_output_flag(listing)
    get = command("get", "one job: phase, conditions, replicas, restarts, age, last metrics")
    get.add_argument("name")
    inspect.add_output_flag(get)
    logs.add_flags(command("logs", "a replica's log, read from its pod"))
    top.add_flags(command("top", "GPU use per job pod (Prometheus) or per GPU node"))
    wait = command("wait", "block until a job reaches a phase")
    wait.add_argument("name")
    wait.add_argument("--for", dest="phase", default="succeeded", choices=WAIT_PHASES, help="default succeeded")
    wait.add_argument("--timeout", type=seconds, default=600.0, help="seconds (default 600)")
    wait.add_argument("--interval", type=seconds, default=15.0, help="seconds between polls (default 15)")
    command("delete", "delete jobs and their pods").add_argument("names", nargs="+", metavar="NAME")
    command("suspend", "stop a job's pods and keep the job").add_argument("name")
    command("resume", "let a suspended job run again").add_argument("name")
    command("queue", "Volcano and Kueue queues, and why waiting jobs wait").add_argument("name", nargs="?")
    sub = command("submit", "build a job from flags with the stack's builder and create it")
    sub.add_argument("--dry-run", action="store_true", help="print the manifest as YAML, create nothing")
    submit.add_flags(sub)
    return top_parser


COMMANDS: dict[str, Callable[[JobsClient, argparse.Namespace, Out], int | None]] = {
    "list": inspect.cmd_list,
    "get": inspect.cmd_get,
    "logs": logs.cmd_logs,
    "wait": lifecycle.cmd_wait,
    "delete": lifecycle.cmd_delete,
    "suspend": lifecycle.cmd_suspend,
    "resume": lifecycle.cmd_resume,
    "queue": queue.cmd_queue,
}


def run(argv: Sequence[str] | None = None, out: Out = print, sleep: Callable[[float], None] = time.sleep) -> int:
    """Run one command.

    Args:
        argv: the arguments after the program name (``sys.argv[1:]`` when ``None``).
        out: where output lines go.
        sleep: how ``top --watch`` waits between refreshes.

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
        configuration = connect.configuration(outputs, args.kubeconfig, args.context)
        jobs = JobsClient(configuration, connect.namespace(outputs, args.namespace))
        if args.command == "top":
            top.cmd_top(jobs, args, out, sleep)
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
    jobs = JobsClient(connect.configuration(outputs, args.kubeconfig, args.context), defaults["namespace"])
    jobs.create(manifest)
    out(f"{manifest['kind']} {spec.name} created in {defaults['namespace']}")
    return 0

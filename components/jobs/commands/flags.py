"""``ack-jobs``: the platform's training jobs from a terminal, named as people think of them.

    ack-jobs --stack dev list -o wide
    ack-jobs get mnist -n training --context prod -o yaml
    ack-jobs logs mnist -f --tail 100 --rank 1
    ack-jobs top nodes --watch 5
    ack-jobs wait mnist --for succeeded --timeout 3600
    ack-jobs suspend gpt && ack-jobs resume gpt
    ack-jobs delete mnist gpt
    ack-jobs queue
    ack-jobs why gpt
    ack-jobs --stack dev cost --team nlp --since 24h --prices prices.yaml
    ack-jobs --stack dev submit gpt-small --nodes 2 --model gpt --max-steps 2000 --image-tag v1.4.0
    ack-jobs --outputs outputs.json submit gpt-small --image-tag v1.4.0 --dry-run -- --grad-accum 4
    ack-jobs --stack dev data import wiki --from https://data.example.com/wiki/ --image-tag v1.4.0

The connection flags go before or after the command. Exit statuses: 0 done, 1 the cluster
said no (job missing, failed, timed out), 2 bad flags.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from .. import submit
from . import data
from .base import count, duration, seconds

OUTPUTS = ("json", "yaml", "wide", "name")
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
        "--stack", help="read the namespace and job defaults from this Pulumi stack's outputs", **default
    )
    where.add_argument(
        "--outputs",
        metavar="FILE",
        help="the same outputs as a JSON file (pulumi stack output --json); for submit --dry-run also an "
        "offline plan's python -m components.plan --stack S --json",
        **default,
    )
    where.add_argument(
        "--kubeconfig", help="your kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)", **default
    )
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
    _output_flag(listing)
    get = command("get", "one job: phase, conditions, replicas, restarts, age, last metrics")
    get.add_argument("name")
    _output_flag(get)
    _logs_flags(command("logs", "a replica's log, read from its pod"))
    _top_flags(command("top", "GPU use per job pod (Prometheus) or per GPU node"))
    wait = command("wait", "block until a job reaches a phase")
    wait.add_argument("name")
    wait.add_argument("--for", dest="phase", default="succeeded", choices=WAIT_PHASES, help="default succeeded")
    wait.add_argument("--timeout", type=seconds, default=600.0, help="seconds (default 600)")
    wait.add_argument("--interval", type=seconds, default=15.0, help="seconds between polls (default 15)")
    command("delete", "delete jobs and their pods").add_argument("names", nargs="+", metavar="NAME")
    command("suspend", "stop a job's pods and keep the job").add_argument("name")
    command("resume", "let a suspended job run again").add_argument("name")
    command("queue", "Volcano and Kueue queues, and why waiting jobs wait").add_argument("name", nargs="?")
    command("why", "one sentence on why a job waits, or that it runs").add_argument("name")
    price = command("cost", "GPU-hours, cost, spot savings and idle GPU time of a job or a team's jobs")
    price.add_argument("name", nargs="?")
    price.add_argument("--team", help="every job of this team (its namespace from the stack) instead of one")
    price.add_argument(
        "--since", type=duration, default=86400, metavar="DURATION", help="--team: pods running since (default 24h)"
    )
    price.add_argument(
        "--prices",
        metavar="FILE",
        help="a dated price table with its source, instead of the stack's costs (docs/jobs.md)",
    )
    price.add_argument("--prometheus-url", help="a Prometheus that scrapes the GPU exporter, for idle GPU time")
    sub = command("submit", "build a job from flags with the stack's builder and create it")
    sub.add_argument("--dry-run", action="store_true", help="print the manifest as YAML, create nothing")
    submit.add_flags(sub)
    data.add_flags(commands, common)
    return top_parser


def parse(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The flags of one command, and the arguments after ``--`` (for the trainer).

    Raises:
        SystemExit: bad flags (status 2, one line naming the flag), or ``--help`` (status 0).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after `--` goes to the trainer; argparse would read flags there as its own.
    cut = argv.index("--") if "--" in argv else len(argv)
    return parser().parse_args(argv[:cut]), argv[cut + 1 :]


def _output_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o", "--output", choices=OUTPUTS, help="json or yaml: the objects as the API returns them; wide: more columns"
    )


def _logs_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")
    parser.add_argument("-f", "--follow", action="store_true", help="stream until the container ends")
    parser.add_argument("--tail", type=count, metavar="N", help="only the last N lines")
    parser.add_argument("--since", type=duration, metavar="DURATION", help="only lines newer than 30s, 10m, 1h...")
    parser.add_argument("--timestamps", action="store_true", help="prefix each line with its RFC 3339 time")
    parser.add_argument("-p", "--previous", action="store_true", help="the container's previous run (after a restart)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--replica", help="master (default) or worker-N of a PyTorchJob, node-N (default node-0) of a TrainJob"
    )
    which.add_argument(
        "--rank", type=count, metavar="N", help="node rank N: a PyTorchJob's master (0) or worker-(N-1); node-N"
    )
    which.add_argument("--all-replicas", action="store_true", help="every pod, each line prefixed with its pod")


def _top_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", nargs="?", choices=("jobs", "nodes"), default="jobs", help="jobs (default) or nodes")
    parser.add_argument("--prometheus-url", help="jobs: a Prometheus that scrapes the GPU exporter")
    parser.add_argument("-A", "--all-namespaces", action="store_true", help="jobs of every namespace")
    parser.add_argument("-w", "--watch", type=seconds, metavar="SECONDS", help="refresh every SECONDS until Ctrl-C")

"""What every command shares: its errors, how it prints tables and objects."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

import yaml

Out = Callable[[str], None]
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class UsageError(Exception):
    """Bad flags: printed with the flag's name, exit 2."""


class Failure(Exception):
    """The cluster's answer is a failure (missing job, failed job, timeout): exit 1."""


def dcgm_namespace(outputs: dict[str, Any], command: str) -> str | None:
    """The namespace of the DCGM exporter's pods, from the stack's ``exporters`` output
    (``monitoring.exporters.dcgmNamespace``): GPU series are read only from there, since Prometheus also scrapes
    the teams' pods, which can serve series of the same names naming another team's pod. Without it, ``None``,
    said once on stderr: the GPU series are read from any namespace, as before the stack named it.

    Raises:
        UsageError: the output is not a namespace's name.
    """
    found = (outputs.get("exporters") or {}).get("dcgmNamespace")
    if found is None:
        print(
            f"ack-jobs {command}: the stack names no DCGM exporter namespace (monitoring.exporters.dcgmNamespace): "
            "GPU series are read from any namespace, where a team's pod could serve some naming other pods",
            file=sys.stderr,
        )
        return None
    if not isinstance(found, str) or not DNS_LABEL.match(found):
        raise UsageError(f"--stack/--outputs: exporters.dcgmNamespace {found!r} is not a namespace's name")
    return found


def job_defaults(outputs: dict[str, Any], flag: str | None, command: str) -> dict[str, Any]:
    """What a job created in ``--namespace`` is built with: the stack's ``jobDefaults`` for its
    training namespace (the default), or a team's ``teamJobDefaults`` for the team's namespace
    (its claims, uid, service account and queue exist only there).

    Raises:
        UsageError: the stack exports no ``jobDefaults``, or ``flag`` is neither namespace.
    """
    defaults = outputs.get("jobDefaults")
    if not defaults:
        raise UsageError(f"--stack/--outputs: {command} needs the stack's jobDefaults output (pulumi up exports it)")
    by_namespace = {defaults["namespace"]: defaults}
    by_namespace |= {team["namespace"]: team for team in (outputs.get("teamJobDefaults") or {}).values()}
    if flag is None or flag in by_namespace:
        return by_namespace[flag or defaults["namespace"]]
    raise UsageError(
        f"--namespace {flag}: the stack's job defaults (claims, service account, pull secret) exist in "
        f"{', '.join(by_namespace)}; give one of them, or leave --namespace out for {defaults['namespace']}"
    )


def seconds(text: str) -> float:
    """A ``--timeout``/``--interval``/``--watch`` value; argparse names the flag in the error."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0")
    return value


DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def duration(text: str) -> int:
    """A ``--since`` value as kubectl takes one (``30s``, ``10m``, ``1h``, ``1h30m``), in seconds."""
    match = DURATION.match(text)
    total = sum(int(n or 0) * unit for n, unit in zip(match.groups(), (3600, 60, 1), strict=True)) if match else 0
    if total <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a duration above 0 such as 30s, 10m, 1h or 1h30m")
    return total


def count(text: str) -> int:
    """A ``--tail``/``--rank`` value: a whole number, 0 or more."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number, 0 or more")
    return int(text)


def table(rows: Sequence[Sequence[str]], out: Out) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        out("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def dump(value: Any, output: str, out: Out) -> None:
    """An object (or a ``List`` of them) as ``-o json`` or ``-o yaml`` prints it."""
    if output == "json":
        out(json.dumps(value, indent=4))
    else:
        out(yaml.safe_dump(value, sort_keys=False).rstrip("\n"))


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Objects of several kinds in one ``v1`` ``List``, as ``kubectl get -o json`` wraps them."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def resource_name(job: dict[str, Any]) -> str:
    """``-o name``: ``<kind>.<group>/<name>`` in lower case, as kubectl names a custom object."""
    group = job.get("apiVersion", "").partition("/")[0]
    return f"{job['kind'].lower()}.{group}/{job['metadata']['name']}"

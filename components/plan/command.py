"""Offline plan: run the real program under Pulumi's in-process mock engine.

No Pulumi CLI, no credentials, no network. The real SDK classes of pulumi-alicloud and
pulumi-kubernetes still check every argument, and every registered resource is
recorded with its inputs and options::

    python -m components.plan --stack dev                  # resource tree and counts
    python -m components.plan --stack dev --out /tmp/dev   # + Kubernetes YAML
    python -m components.plan --stack-file my.yaml --json  # machine-readable
    python -m components.plan --schema                     # JSON schema of the config
    python -m components.plan --program ../my-stack --stack-file ../my-stack/Pulumi.dev.yaml
                                                           # your own program that uses the components

Values only known after deployment appear as ``(known after deploy)`` (a registry host as
``<registry host, known after deploy>``); each secret value as ``[secret]``, in an object of
the same shape. Exit status: 0 planned, 2 invalid configuration or arguments.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pulumi
import yaml

from ..config import PROJECT, ConfigError, PlatformSpec, load_spec, missing_credentials, stack_schema
from ..config.cluster import ALLOWED_CIDRS_KEY, set_allowed_cidr
from ..manifests.platform.deploy_policy import MissingApis
from ..upstream.yamlio import StackFileError, find_project_dir, read_stack_file, stack_path
from .records import SECRET, Plan, apply_rank
from .runner import ProgramError, holds_secure, redacted_config, run_program


def with_unset_credentials(config: Mapping[str, Any]) -> tuple[dict[str, Any], list[str], PlatformSpec]:
    """``config`` with each credential the stack needs but its file lacks set to a
    placeholder secret, those keys, and the validated spec. Credentials are per user (each
    stack file holds its own ciphertext), so the offline plan does without them; so are the
    ranges a public API server admits, planned as the VPC alone (which the whitelist holds
    anyway).

    Raises:
        ConfigError: the config is invalid.
    """
    spec = offline_spec(config)
    unset = [f"{PROJECT}:{key}" for key in missing_credentials(spec, config)]
    planned = {**config, **{key: {"secure": SECRET} for key in unset}}
    if spec.cluster.needs_allowed_cidrs:
        cluster = copy.deepcopy(planned[f"{PROJECT}:cluster"])
        cluster["apiServer"]["allowedCidrs"] = [str(spec.network.vpc_cidr)]
        planned[f"{PROJECT}:cluster"] = cluster
        unset.append(f"{PROJECT}:{ALLOWED_CIDRS_KEY}")
    return planned, unset, spec


def offline_spec(config: Mapping[str, Any]) -> PlatformSpec:
    """The validated spec of a stack's ``config:`` section, credentials or not.

    Raises:
        ConfigError: the config is invalid.
    """
    plain = {k: redacted_config(v) for k, v in config.items()}
    return load_spec(plain, [k for k, v in config.items() if holds_secure(v)], credentials=False)


def plan_stack(config: Mapping[str, Any], *, stack: str, project_dir: Path) -> tuple[Plan, list[str], PlatformSpec]:
    """Validate, then run; also return the credentials planned without and the validated spec
    (see :func:`with_unset_credentials`). Raises :class:`ConfigError` before anything is
    registered."""
    config, unset, spec = with_unset_credentials(config)
    return run_program(config, stack=stack, project_dir=project_dir), unset, spec


def write_manifests(plan: Plan, out: Path) -> list[Path]:
    """Write each Kubernetes object to ``out/<rank>-<kind>-<name>.yaml`` (the rank
    orders a plain ``kubectl apply -f out/``), or ``<rank>-<kind>-<namespace>-<name>.yaml``
    where objects of one kind and name live in several namespaces (the teams'); return the
    paths."""
    out.mkdir(parents=True, exist_ok=True)
    objects = plan.kubernetes_objects()
    names = Counter((obj["kind"], obj["metadata"]["name"]) for obj in objects)
    written = []
    for obj in objects:
        kind, meta = obj["kind"], obj["metadata"]
        name = meta["name"] if names[kind, meta["name"]] == 1 else f"{meta.get('namespace')}-{meta['name']}"
        path = out / f"{apply_rank(kind)}-{kind.lower()}-{name}.yaml"
        path.write_text(yaml.safe_dump(obj, sort_keys=False))
        written.append(path)
    return written


def write_dashboard(spec: PlatformSpec, out: Path) -> Path | None:
    """Write the training dashboard to ``out/dashboards/``, for Grafana's import (ARMS Grafana
    included), when the stack has one; return its path."""
    if not spec.monitoring.dashboard:
        return None
    from ..manifests.monitoring.dashboard import DASHBOARD_FILE, training_dashboard

    path = out / "dashboards" / DASHBOARD_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    scope = spec.monitoring_scope()
    board = training_dashboard(
        scope.namespaces, cost_currency=scope.cost_currency, exporters=scope.monitoring.exporters
    )
    path.write_text(json.dumps(board, indent=2, sort_keys=True) + "\n")
    return path


def write_job_state_metrics(spec: PlatformSpec, out: Path) -> Path | None:
    """Write what kube-state-metrics needs for the alerts on jobs' conditions to
    ``out/kube-state-metrics/``, when the stack has alerts, with the flags the cost rules need where they
    run (``args``); return its path."""
    scope = spec.monitoring_scope()
    if scope.prometheus == "none":
        return None
    from ..manifests.monitoring.alerts import job_state_metrics
    from ..manifests.monitoring.cost_rules import NODE_LABELS_ALLOWLIST

    needs = job_state_metrics(scope)
    if scope.cost_currency is not None:
        needs["args"] = [f"--metric-labels-allowlist={NODE_LABELS_ALLOWLIST}"]
    path = out / "kube-state-metrics" / "training-jobs.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(needs, sort_keys=False))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.plan", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--stack", help="stack name: plans stacks/Pulumi.<stack>.yaml")
    source.add_argument("--stack-file", type=Path, help="plan this stack file")
    source.add_argument("--schema", action="store_true", help="print the stack config's JSON schema")
    parser.add_argument(
        "--program",
        type=Path,
        metavar="DIR",
        help="plan the Pulumi Python program in DIR (its Pulumi.yaml names the project its config keys belong "
        "to) instead of this platform's; with --stack, reads DIR/Pulumi.<stack>.yaml",
    )
    parser.add_argument("--out", type=Path, help="write the Kubernetes objects as YAML here")
    parser.add_argument("--json", action="store_true", help="print every resource with inputs and options as JSON")
    parser.add_argument(
        "--ram-policy",
        action="store_true",
        help="print the RAM policy the identity running pulumi up, refresh and destroy needs for this plan",
    )
    args = parser.parse_args(argv)
    if args.schema:
        print(json.dumps(stack_schema(), indent=2))
        return 0
    if not (args.stack or args.stack_file):
        parser.error("one of --stack, --stack-file or --schema is required")
    started = time.perf_counter()
    spec: PlatformSpec | None = None
    unset: list[str] = []
    try:
        if args.program:
            path = args.stack_file or args.program / f"Pulumi.{args.stack}.yaml"
            stack = args.stack or path.name.removeprefix("Pulumi.").removesuffix(".yaml")
            plan = run_program(read_stack_file(path), stack=stack, project_dir=args.program.resolve())
        else:
            project_dir = find_project_dir()
            path = args.stack_file or stack_path(project_dir, args.stack)
            stack = args.stack or path.name.removeprefix("Pulumi.").removesuffix(".yaml")
            plan, unset, spec = plan_stack(read_stack_file(path), stack=stack, project_dir=project_dir)
    except (ConfigError, StackFileError, ProgramError, pulumi.RunError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    written = write_manifests(plan, args.out) if args.out else []
    dashboard = write_dashboard(spec, args.out) if args.out and spec else None
    state_metrics = write_job_state_metrics(spec, args.out) if args.out and spec else None
    if args.json:
        print(json.dumps(plan.as_json(), indent=2, default=str))
        return 0
    if args.ram_policy:
        try:
            print(json.dumps(plan.deploy_policy(), indent=2))
        except MissingApis as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0
    print(f"stack {stack}: {len(plan.resources)} resources\n")
    print(plan.tree())
    print("\nresources by type:")
    for type_, count in sorted(plan.counts().items()):
        print(f"  {count:3d}  {type_}")
    for line in plan.not_shown():
        print(f"\nnot shown: {line}")
    for key in unset:
        name = key.split(":", 1)[1]
        how = set_allowed_cidr() if name == ALLOWED_CIDRS_KEY else f"pulumi config set --secret {name} <value>"
        print(f"\nplanned without {key}: set it with {how}")
    if written:
        print(f"\nwrote {len(written)} Kubernetes objects to {args.out}")
    if dashboard:
        print(f"wrote the Grafana dashboard to {dashboard}")
    if state_metrics:
        print(f"wrote kube-state-metrics' configuration for the job alerts and cost rules to {state_metrics}")
    print(f"\nplanned in {time.perf_counter() - started:.2f}s")
    return 0

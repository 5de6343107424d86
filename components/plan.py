"""Offline plan: run the real program under Pulumi's in-process mock engine.

No Pulumi CLI, no credentials, no network. The real SDK classes of pulumi-alicloud and
pulumi-kubernetes still check every argument, and every registered resource is
recorded with its inputs and options::

    python -m components.plan --stack dev                  # resource tree and counts
    python -m components.plan --stack dev --out /tmp/dev   # + Kubernetes YAML
    python -m components.plan --stack-file my.yaml --json  # machine-readable
    python -m components.plan --schema                     # JSON schema of the config

Values only known after deployment appear as ``(known after deploy)``; secrets as
``[secret]``. Exit status: 0 planned, 2 invalid configuration or arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import runpy
import sys
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .config import PROJECT, ConfigError, PlatformSpec, load_spec, missing_credentials, stack_schema

SECRET = "[secret]"
UNKNOWN = "(known after deploy)"
REMOTE = {
    "kubernetes:helm.sh/v3:Release": lambda inputs: f"Helm chart {inputs.get('chart')} {inputs.get('version')}",
    "ack-training-platform:components:TrainingOperator": lambda inputs: f"kustomize overlay {inputs.get('source')}",
}
"""What the kubernetes provider renders at deploy time (a chart, a remote overlay);
offline it stays a reference."""
KUSTOMIZE_INVOKE = "kubernetes:kustomize:directory"


class PlanError(Exception):
    """The stack could not be read (missing file, bad YAML); exit status 2."""


@dataclass
class Recorded:
    """One registered resource: what the engine would be asked to create."""

    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    inputs: dict[str, Any]
    protect: bool
    retain_on_delete: bool
    dependencies: list[str]
    provider: str
    replace_on_changes: list[str] = field(default_factory=list)
    delete_before_replace: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "parent": self.parent or None,
            "custom": self.custom,
            "inputs": self.inputs,
            "options": {
                "protect": self.protect,
                "retainOnDelete": self.retain_on_delete,
                "dependencies": self.dependencies,
                "provider": self.provider or None,
                "replaceOnChanges": self.replace_on_changes,
                "deleteBeforeReplace": self.delete_before_replace,
            },
        }


@dataclass
class Plan:
    """Everything one run of the program registered, in registration order."""

    stack: str
    resources: list[Recorded]
    outputs: dict[str, Any] = field(default_factory=dict)
    secret_outputs: set[str] = field(default_factory=set)

    def of_type(self, type_: str) -> list[Recorded]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: str | None = None) -> Recorded:
        found = [r for r in self.of_type(type_) if name is None or r.name == name]
        if len(found) != 1:
            raise LookupError(f"expected one {type_} {name or ''}, found {len(found)}")
        return found[0]

    def kubernetes_objects(self) -> list[dict[str, Any]]:
        """Every Kubernetes object the stack would apply, as complete manifests, in the
        order ``kubectl apply`` needs them (namespaces first, jobs last)."""
        objects = [
            _manifest_order(r.inputs)
            for r in self.resources
            if r.custom and r.type.startswith("kubernetes:") and r.type not in REMOTE
        ]
        return sorted(objects, key=lambda o: (_apply_rank(o["kind"]), o["kind"], o["metadata"].get("name", "")))

    def counts(self) -> Counter[str]:
        return Counter(r.type for r in self.resources)

    def tree(self) -> str:
        children: dict[str, list[Recorded]] = {}
        for r in self.resources:
            children.setdefault(r.parent, []).append(r)
        roots = [r for r in self.resources if r.parent not in {x.urn for x in self.resources}]
        lines: list[str] = []

        def walk(node: Recorded, depth: int) -> None:
            flags = [f for f, on in (("protect", node.protect), ("retain-on-delete", node.retain_on_delete)) if on]
            lines.append(f"{'  ' * depth}{node.type}  {node.name}" + (f"  [{', '.join(flags)}]" if flags else ""))
            for child in children.get(node.urn, []):
                walk(child, depth + 1)

        for siblings in children.values():
            siblings.sort(key=lambda r: (r.type, r.name))
        for root in sorted(roots, key=lambda r: (r.type, r.name)):
            walk(root, 0)
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {"stack": self.stack, "resources": [r.as_json() for r in self.resources], "outputs": self.outputs}


def _clean(value: Any) -> Any:
    """Recorded inputs with secrets redacted and unknowns made explicit."""
    from pulumi.output import Unknown
    from pulumi.runtime import rpc

    if rpc.is_rpc_secret(value):
        return SECRET
    if isinstance(value, Unknown):
        return UNKNOWN
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        # The engine carries every number as a float.
        return int(value)
    return value


_APPLY_ORDER = ("Namespace", "StorageClass", "ServiceAccount", "ResourceQuota", "Secret", "PersistentVolumeClaim")


def _apply_rank(kind: str) -> int:
    return _APPLY_ORDER.index(kind) if kind in _APPLY_ORDER else len(_APPLY_ORDER)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _manifest_order(obj: dict[str, Any]) -> dict[str, Any]:
    """Stable key order (the engine returns maps unordered), apiVersion/kind/metadata first."""
    head = {k: _sorted(obj[k]) for k in ("apiVersion", "kind", "metadata") if k in obj}
    return {**head, **{k: _sorted(v) for k, v in sorted(obj.items()) if k not in head}}


def _config_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _is_secure(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secure"}


def run_program(
    config: Mapping[str, Any], *, stack: str, project_dir: Path, invokes: Mapping[str, Any] | None = None
) -> Plan:
    """Run ``project_dir/__main__.py`` under mocks and record what it registers.

    Args:
        config: the stack's ``config:`` section (namespaced keys; ``{secure: ...}``
            values become secrets whose plaintext is ``[secret]``).
        stack: stack name the program sees.
        project_dir: the directory holding ``Pulumi.yaml`` and ``__main__.py``.
        invokes: answers to provider functions by token, e.g. what the kubernetes
            provider's ``kubernetes:kustomize:directory`` renders. Offline, with none,
            every function answers nothing.

    Returns:
        The recorded plan.
    """
    import pulumi
    from pulumi.runtime import mocks, rpc, settings
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

    recorded: dict[str, Recorded] = {}
    order: list[str] = []

    class EchoMocks(mocks.Mocks):
        """Resources get back their inputs and no id: a preview, where ids are unknown."""

        def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str | None, dict]:
            outputs = dict(args.inputs)
            if args.typ.startswith("kubernetes:") and isinstance(outputs.get("metadata"), dict):
                # The API server assigns every object a uid; it is unknown until the object exists.
                outputs["metadata"] = {**outputs["metadata"], "uid": rpc.UNKNOWN}
            return None, outputs

        def call(self, args: mocks.MockCallArgs) -> dict:
            return dict((invokes or {}).get(args.token, {}))

    worker_loops: set[asyncio.AbstractEventLoop] = set()

    class RecordingMonitor(mocks.MockMonitor):
        """Records registrations, and the event loop the engine opens in each worker
        thread so that they can be closed cleanly after the run."""

        def Invoke(self, request: Any) -> Any:  # noqa: N802 (gRPC method names)
            response = super().Invoke(request)
            worker_loops.add(_ensure_event_loop())
            return response

        def RegisterResource(self, request: Any) -> Any:  # noqa: N802
            response = super().RegisterResource(request)
            worker_loops.add(_ensure_event_loop())
            if request.type != "pulumi:pulumi:Stack":
                urn = response.urn
                order.append(urn)
                recorded[urn] = Recorded(
                    urn=urn,
                    type=request.type,
                    name=request.name,
                    parent=request.parent,
                    custom=request.custom,
                    inputs=_clean(rpc.deserialize_properties(request.object, keep_unknowns=True)),
                    protect=bool(request.protect),
                    retain_on_delete=bool(request.retainOnDelete),
                    dependencies=list(request.dependencies),
                    provider=request.provider.rsplit("::", 1)[0] if request.provider else "",
                    replace_on_changes=list(request.replaceOnChanges),
                    delete_before_replace=bool(request.deleteBeforeReplace),
                )
            return response

    values = {k: SECRET if _is_secure(v) else _config_value(v) for k, v in config.items()}
    secret_keys = [k for k, v in config.items() if _is_secure(v)]
    pulumi.runtime.set_all_config(values, secret_keys)
    settings.set_root_resource(None)  # type: ignore[arg-type]  # a fresh Stack per run
    monitor = RecordingMonitor(EchoMocks())
    pulumi.runtime.set_mocks(monitor.mocks, project=PROJECT, stack=stack, preview=True, monitor=monitor)
    if str(project_dir) not in sys.path:
        sys.path.insert(0, str(project_dir))
    program = str(project_dir / "__main__.py")
    plan = Plan(stack=stack, resources=[])
    try:
        _sync_await(run_pulumi_func(lambda: runpy.run_path(program, run_name="__main__")))
        plan.resources = [recorded[urn] for urn in order]
        root = settings.get_root_resource()
        for key, output in getattr(root, "outputs", {}).items():
            out = pulumi.Output.from_input(output)
            if _sync_await(out.is_secret()):
                plan.secret_outputs.add(key)
                plan.outputs[key] = SECRET
            else:
                plan.outputs[key] = _clean(_sync_await(out.future(with_unknowns=True)))
    finally:
        # Close every loop the run opened now, while the interpreter is intact, rather
        # than as "Invalid file descriptor" noise when they are collected; the next run
        # gets a fresh loop with a live executor.
        loop = asyncio.get_event_loop()
        loop.run_until_complete(loop.shutdown_default_executor())
        for opened in worker_loops - {loop}:
            opened.close()
        loop.close()
        asyncio.set_event_loop(asyncio.new_event_loop())
    return plan


def find_project_dir(start: Path | None = None) -> Path:
    """The nearest directory at or above ``start`` holding ``Pulumi.yaml``."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if (directory / "Pulumi.yaml").is_file():
            return directory
    raise PlanError(f"no Pulumi.yaml in {here} or above: run from the project directory")


def read_stack_file(path: Path) -> dict[str, Any]:
    """The ``config:`` section of a stack file.

    Raises:
        PlanError: missing file, bad YAML or a section that is not a mapping.
    """
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise PlanError(f"{path}: no such stack file") from None
    except yaml.YAMLError as err:
        raise PlanError(f"{path}: not valid YAML: {err}") from None
    config = document.get("config", {}) if isinstance(document, dict) else None
    if not isinstance(config, dict):
        raise PlanError(f"{path}: 'config' must be a mapping of stack keys")
    return config


def stack_path(project_dir: Path, stack: str) -> Path:
    return project_dir / "stacks" / f"Pulumi.{stack}.yaml"


def with_unset_credentials(config: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``config`` with each credential the stack needs but its file lacks set to a
    placeholder secret, and those keys. Credentials are per user (each stack file holds its
    own ciphertext), so the offline plan does without them.

    Raises:
        ConfigError: the config is invalid.
    """
    spec = offline_spec(config)
    unset = [f"{PROJECT}:{key}" for key in missing_credentials(spec, config)]
    return {**config, **{key: {"secure": SECRET} for key in unset}}, unset


def offline_spec(config: Mapping[str, Any]) -> PlatformSpec:
    """The validated spec of a stack's ``config:`` section, credentials or not.

    Raises:
        ConfigError: the config is invalid.
    """
    plain = {k: SECRET if _is_secure(v) else v for k, v in config.items()}
    return load_spec(plain, [k for k, v in config.items() if _is_secure(v)], credentials=False)


def plan_stack(config: Mapping[str, Any], *, stack: str, project_dir: Path) -> tuple[Plan, list[str]]:
    """Validate, then run; also return the credentials planned without (see
    :func:`with_unset_credentials`). Raises :class:`ConfigError` before anything is registered."""
    config, unset = with_unset_credentials(config)
    return run_program(config, stack=stack, project_dir=project_dir), unset


def write_manifests(plan: Plan, out: Path) -> list[Path]:
    """Write each Kubernetes object to ``out/<rank>-<kind>-<name>.yaml`` (the rank
    orders a plain ``kubectl apply -f out/``); return the paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for obj in plan.kubernetes_objects():
        path = out / f"{_apply_rank(obj['kind'])}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(obj, sort_keys=False))
        written.append(path)
    return written


def write_dashboard(spec: PlatformSpec, out: Path) -> Path | None:
    """Write the training dashboard to ``out/dashboards/``, for Grafana's import (ARMS Grafana
    included), when the stack has one; return its path."""
    if not spec.monitoring.dashboard:
        return None
    from .manifests.dashboard import DASHBOARD_FILE, training_dashboard

    path = out / "dashboards" / DASHBOARD_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(training_dashboard(spec.training.namespace), indent=2, sort_keys=True) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.plan", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--stack", help="stack name: plans stacks/Pulumi.<stack>.yaml")
    source.add_argument("--stack-file", type=Path, help="plan this stack file")
    source.add_argument("--schema", action="store_true", help="print the stack config's JSON schema")
    parser.add_argument("--out", type=Path, help="write the Kubernetes objects as YAML here")
    parser.add_argument("--json", action="store_true", help="print every resource with inputs and options as JSON")
    args = parser.parse_args(argv)
    if args.schema:
        print(json.dumps(stack_schema(), indent=2))
        return 0
    if not (args.stack or args.stack_file):
        parser.error("one of --stack, --stack-file or --schema is required")
    started = time.perf_counter()
    try:
        project_dir = find_project_dir()
        path = args.stack_file or stack_path(project_dir, args.stack)
        stack = args.stack or path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        config = read_stack_file(path)
        plan, unset = plan_stack(config, stack=stack, project_dir=project_dir)
    except (ConfigError, PlanError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    written = write_manifests(plan, args.out) if args.out else []
    dashboard = write_dashboard(offline_spec(config), args.out) if args.out else None
    if args.json:
        print(json.dumps(plan.as_json(), indent=2, default=str))
        return 0
    print(f"stack {stack}: {len(plan.resources)} resources\n")
    print(plan.tree())
    print("\nresources by type:")
    for type_, count in sorted(plan.counts().items()):
        print(f"  {count:3d}  {type_}")
    for r in plan.resources:
        if r.type in REMOTE and (r.custom or r.inputs.get("source")):
            print(f"\nrendered by the kubernetes provider at deploy time: {r.name} ({REMOTE[r.type](r.inputs)})")
    for key in unset:
        print(f"\nplanned without {key}: set it with pulumi config set --secret {key.split(':', 1)[1]} <value>")
    if written:
        print(f"\nwrote {len(written)} Kubernetes objects to {args.out}")
    if dashboard:
        print(f"wrote the Grafana dashboard to {dashboard}")
    print(f"\nplanned in {time.perf_counter() - started:.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``submit``: command-line flags → :class:`TrainingJobSpec` → the builder's manifest.

The flags fill the same spec a stack's ``jobs`` entry does, validated by the same pydantic
model, and the manifest comes from the same pure builders (``pytorch_job`` on v1,
``train_job`` on v2) with the context the stack exports as ``jobDefaults``. Each flag takes
its type, choices, default and help from the spec field it sets, so ``--help`` says what the
spec says.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, NamedTuple, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from ..config import TrainerArgs, TrainingJobSpec, job_gpus
from ..config.base import POOL_LABEL, model_of
from ..config.fit import pods_per_node, pool_problem, unset_sizes
from ..config.gpus.capacity import NodeShare, pod_share
from ..manifests import context_from_defaults, kubeflow_job, train_job
from .arena import ALIASES, REFUSED, TailError, tail_command

FLAGS: dict[str, tuple[str, ...]] = {
    "--nodes": ("nodes",),
    "--gpus": ("gpusPerNode",),
    "--procs-per-node": ("procsPerNode",),
    "--cpu": ("cpu",),
    "--memory": ("memory",),
    "--preset": ("preset",),
    # Every trainer setting, named as its field: one added to TrainerArgs is a flag here by itself.
    **{"--" + name.replace("_", "-"): ("trainer", field.alias) for name, field in TrainerArgs.model_fields.items()},
    "--image": ("image",),
    "--image-tag": ("imageTag",),
    "--network": ("network",),
    "--backend": ("backend",),
    "--framework": ("framework",),
    "--launcher": ("launcher",),
    "--code-path": ("code", "path"),
    "--git-url": ("code", "gitUrl"),
    "--commit": ("code", "commit"),
    "--env": ("env",),
    "--suspend": ("runPolicy", "suspend"),
    "--label": ("labels",),
    "--node-selector": ("nodeSelector",),
    "--toleration": ("tolerations",),
    "--ttl": ("runPolicy", "ttlSecondsAfterFinished"),
    "--priority-class": ("scheduling", "priorityClass"),
    "--backoff-limit": ("runPolicy", "backoffLimit"),
    "--data": ("volumes",),
}
"""Each flag and the spec key it sets (camelCase, as in a stack's ``jobs`` entry); but for the
``REPEATED`` ones, the field's type, choices, default and docstring make the flag."""


class FlagError(ValueError):
    """A flag's value is not valid; the message names the flag."""


def _pairs(flag: str, pairs: list[str]) -> dict[str, str]:
    found = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise FlagError(f"{flag} {pair!r}: give {'NAME' if flag == '--env' else 'KEY'}=VALUE")
        found[name] = value
    return found


def _tolerations(flag: str, items: list[str]) -> list[dict[str, str]]:
    tolerations = []
    for item in items:
        taint, sep, effect = item.rpartition(":")
        if not sep:
            raise FlagError(f"{flag} {item!r}: give KEY[=VALUE]:EFFECT, e.g. spot=true:NoSchedule")
        key, has_value, value = taint.partition("=")
        tolerations.append({"key": key, "effect": effect, **({"value": value} if has_value else {})})
    return tolerations


def _volumes(flag: str, items: list[str]) -> list[dict[str, str]]:
    volumes = []
    for item in items:
        claim, sep, path = item.partition(":")
        if not sep or not claim or not path:
            raise FlagError(f"{flag} {item!r}: give CLAIM:PATH, e.g. {flag} imagenet:/mnt/imagenet")
        volumes.append({"claim": claim, "mountPath": path})
    return volumes


REPEATED: dict[str, tuple[Callable[[str, list[str]], Any], str, str]] = {
    "--env": (_pairs, "NAME=VALUE", "environment variable (repeatable)"),
    "--label": (_pairs, "KEY=VALUE", "label on the job and its pods (repeatable)"),
    "--node-selector": (_pairs, "KEY=VALUE", "node label the pods need (repeatable)"),
    "--toleration": (
        _tolerations,
        "KEY[=VALUE]:EFFECT",
        "taint the pods tolerate, e.g. spot=true:NoSchedule; any value without =VALUE (repeatable)",
    ),
    "--data": (_volumes, "CLAIM:PATH", "another claim of the namespace, mounted at PATH in every pod (repeatable)"),
}
"""Flags given once per entry of a mapping or list, in a syntax of the command line's own: the
parser that makes their values one spec value, the metavar and the help."""

_SENTENCE_END = re.compile(r"(?<=\.)\s+(?=[A-Z`])")
"""Where a docstring's first sentence ends: a full stop before a capital or a code name, so
that ``e.g. on ...`` does not end it."""


def _spec_field(path: tuple[str, ...]) -> FieldInfo:
    """The field of :class:`TrainingJobSpec` at ``path`` (camelCase keys, as in ``FLAGS``)."""
    model: type[BaseModel] = TrainingJobSpec
    for key in path:
        field = {f.alias or name: f for name, f in model.model_fields.items()}[key]
        model = model_of(field.annotation)
    return field


def _flag_arguments(field: FieldInfo) -> dict[str, Any]:
    """``add_argument``'s keywords for the flag that sets ``field``: its type, or its ``Literal``'s
    choices, or a switch for a bool; the help is its docstring's first sentence and its default.
    The flag's own default stays ``None``, so that the spec's default applies when it is not given.

    Raises:
        TypeError: the field is no single value a flag can give.
    """
    kind = field.annotation
    if get_origin(kind) in (Union, UnionType):
        kinds = [arg for arg in get_args(kind) if arg is not NoneType]
        kind = kinds[0] if len(kinds) == 1 else None
    if get_origin(kind) is Annotated:
        kind = get_args(kind)[0]
    if get_origin(kind) is Literal:
        arguments: dict[str, Any] = {"choices": get_args(kind)}
    elif kind is bool:
        arguments = {"action": "store_true", "default": None}
    elif kind in (int, float, str):
        arguments = {"type": kind}
    else:
        raise TypeError(f"{field.annotation} is no single value a flag can give")
    summary = _SENTENCE_END.split(" ".join((field.description or "").split()), maxsplit=1)[0]
    help_text = summary.replace("``", "").removesuffix(".")
    first_word = help_text.partition(" ")[0]
    if first_word[1:] == first_word[1:].lower():
        # Lowercase, as argparse's own help reads; "GPUs" and "CPU" keep their capitals.
        help_text = help_text[:1].lower() + help_text[1:]
    shown = not field.is_required() and field.default_factory is None and field.default is not None
    if shown and not isinstance(field.default, bool):
        help_text += f" (default {field.default})"
    return {**arguments, "help": help_text}


def _dest(flag: str) -> str:
    return flag[2:].replace("-", "_")


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The job flags of ``submit``; values stay ``None`` unless given, so the spec's defaults apply.
    arena's names for them are accepted too; its flags the platform has no equivalent for are
    read only to be refused naming what to do instead."""
    # arena names the job with --name; NAME may then be left out.
    parser.add_argument("name", nargs="?", **_flag_arguments(TrainingJobSpec.model_fields["name"]))
    parser.add_argument("--name", dest="name_flag", metavar="NAME", help="the job's name as arena gives it (NAME)")
    aliases: dict[str, list[str]] = {}
    for arena_flag, flag in ALIASES.items():
        aliases.setdefault(flag, []).append(arena_flag)
    for flag, path in FLAGS.items():
        names = [flag, *aliases.get(flag, [])]
        if flag in REPEATED:
            _, metavar, help_text = REPEATED[flag]
            parser.add_argument(*names, dest=_dest(flag), action="append", metavar=metavar, help=help_text)
        else:
            parser.add_argument(*names, dest=_dest(flag), **_flag_arguments(_spec_field(path)))
    for flag in REFUSED:
        parser.add_argument(flag, dest="arena_" + _dest(flag), nargs="?", const="", help=argparse.SUPPRESS)


def job_spec(args: argparse.Namespace, defaults: dict[str, Any], extra: list[str]) -> TrainingJobSpec:
    """The validated job the flags describe.

    Args:
        args: the parsed ``submit`` flags.
        defaults: the stack's ``jobDefaults`` (its backend applies when ``--backend`` is not given).
        extra: the arguments after ``--``: your command (:func:`~components.jobs.arena.tail_command`
            says under which launcher), as given for a non-PyTorch ``--framework``, or flags
            appended to the trainer's command.

    Returns:
        The job spec.

    Raises:
        FlagError: a flag's value is invalid; the message names the flag and what is valid.
    """
    refused = [flag for flag in REFUSED if getattr(args, "arena_" + _dest(flag), None) is not None]
    if refused:
        raise FlagError("; ".join(f"{flag}: {REFUSED[flag]}" for flag in refused))
    name = args.name if args.name is not None else getattr(args, "name_flag", None)
    if args.name is not None and getattr(args, "name_flag", None) not in (None, args.name):
        raise FlagError(f"--name: the job is named {args.name!r} already (NAME): give its name once")
    if name is None:
        raise FlagError("NAME: the job needs a name: submit NAME (or arena's --name NAME)")
    raw: dict[str, Any] = {"name": name, "namespace": defaults["namespace"]}
    given = []
    for flag, path in FLAGS.items():
        value = getattr(args, _dest(flag))
        if value is None:
            continue
        given.append(flag)
        if flag in REPEATED:
            value = REPEATED[flag][0](flag, value)
        target = raw
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value
    raw.setdefault("backend", defaults["backend"])
    own_code = args.launcher is not None or args.framework not in (None, "pytorch")
    if extra and args.framework in (None, "pytorch"):
        try:
            command = tail_command(extra, args.launcher)
        except TailError as err:
            raise FlagError(str(err)) from None
        if command is not None:
            raw["launcher"], extra = command
            own_code = True
    if extra:
        raw["command" if own_code else "args"] = extra
    spec = _validated(raw, given)
    admitted = defaults.get("claims")
    refused = [v.claim for v in spec.volumes if admitted is not None and v.claim not in admitted]
    if refused:
        raise FlagError(
            f"--data: {', '.join(refused)}: the namespace admits pods that mount only its own claims "
            f"({', '.join(admitted)}): mount one of them, or add the claim as a dataset of the team in the stack"
        )
    if spec.backend == "v2" and spec.scheduling.priority_class is not None and not defaults.get("queue"):
        # The TrainJob builder carries a priority only as Kueue's label, on a queued job.
        raise FlagError(
            f"--priority-class: {spec.scheduling.priority_class!r}: a TrainJob's priority is a Kueue "
            "WorkloadPriorityClass, and the stack queues no v2 job (trainerV2.kueue.enabled): drop it, or "
            "use --backend v1, whose pods take a PriorityClass"
        )
    pool = _pool(defaults)
    gpus = job_gpus(spec, defaults["placement"]["gpusPerNode"])
    # The pool's GPUs per node set the processes of a job that gives neither --gpus nor --procs-per-node.
    mesh = spec.trainer.mesh_problem(spec.procs_per_node or gpus or 1, spec.pod_counts)
    if mesh is not None:
        raise FlagError(f"--{mesh[0]}: {mesh[1]}")
    if pool is None or not gpus:
        return spec
    if pool.node_share is None:
        unset = unset_sizes(spec)
        if unset:
            raise FlagError(
                f"{', '.join('--' + key for key in unset)}: the stack does not say what a node of GPU pool "
                f"{pool.name!r} offers (its instance types are not in the platform's table and it gives no "
                "gpuPool.nodeCapacity), so no default can follow one: give --cpu and --memory per pod, which "
                "nothing checks before the scheduler, or give gpuPool.nodeCapacity in the stack"
            )
    else:
        share = pod_share(pool.node_share, _sharing(spec, pool, gpus))
        unset = {key: value for key, value in zip(("cpu", "memory"), share, strict=True) if key not in raw}
        if unset:
            spec = _validated({**raw, **unset}, given)
    problem = pool_problem(spec, pool)
    if problem is not None:
        key, message = problem
        flag = POOL_FLAGS.get(key, "--" + key)
        raise FlagError(f"{flag}: {message}")
    return spec


POOL_FLAGS = {"gpus_per_node": "--gpus", "procsPerNode": "--procs-per-node", "gpusPerNode": "--gpus"}
"""The flag for each job key :func:`~components.config.gpus.capacity.pool_problem` names that is not
``--`` and the key itself."""


class PoolFacts(NamedTuple):
    """The GPU pool as the stack's ``jobDefaults`` describe it: what
    :func:`~components.config.gpus.capacity.pool_problem` checks a job against, as a stack's jobs are."""

    name: str
    gpus_per_node: int
    node_share: NodeShare | None
    max_size: int


def _pool(defaults: dict[str, Any]) -> PoolFacts | None:
    """The GPU pool a submitted GPU job lands on; its ``node_share`` is ``None`` when the stack
    says nothing describes its nodes (``node: null``: instance types outside the platform's
    table, no ``gpuPool.nodeCapacity``). ``None`` for ``jobDefaults`` exported before they had a
    ``node``, which give nothing to check against."""
    placement = defaults["placement"]
    if not placement["gpusPerNode"] or "node" not in placement:
        return None
    return PoolFacts(
        name=placement["nodeSelector"].get(POOL_LABEL, "gpu"),
        gpus_per_node=placement["gpusPerNode"],
        node_share=NodeShare(**placement["node"]) if placement.get("node") else None,
        max_size=placement["maxNodes"] if placement["maxNodes"] is not None else 2**31,
    )


def _sharing(spec: TrainingJobSpec, pool: PoolFacts, gpus: int) -> int:
    return pods_per_node(spec, gpus, pool.gpus_per_node) if gpus <= pool.gpus_per_node else 1


def _validated(raw: dict[str, Any], given: list[str]) -> TrainingJobSpec:
    try:
        return TrainingJobSpec.model_validate(raw)
    except ValidationError as err:
        raise FlagError("; ".join(_describe(error, given) for error in err.errors())) from None


def _describe(error: dict[str, Any], given: list[str]) -> str:
    loc = [str(part) for part in error["loc"]]
    key = (error.get("ctx") or {}).get("key")
    if key:
        # A key into a list (``volumes[1].mountPath``) belongs to the flag that fills the list.
        loc += [part.split("[", 1)[0] for part in key.split(".")]
    flag = next((f for f, path in FLAGS.items() if tuple(loc[: len(path)]) == path), None)
    if flag is None and loc:
        # A whole section refused (``trainer`` for a non-PyTorch job): the flag that filled it.
        flag = next((f for f in given if FLAGS[f][: len(loc)] == tuple(loc)), None)
    if flag is None and loc[:1] == ["name"]:
        flag = "NAME"
    where = flag or ".".join(loc) or "job"
    return f"{where}: {error['msg'].removeprefix('Value error, ')}"


def manifest(spec: TrainingJobSpec, defaults: dict[str, Any]) -> dict[str, Any]:
    """The v1 job of ``spec``'s framework, or the TrainJob, the stack's builder emits for ``spec``.

    Args:
        spec: the validated job.
        defaults: the stack's ``jobDefaults``; an ``imageTag`` is looked up in its registry.

    Returns:
        The manifest, exactly as the builder returns it.

    Raises:
        FlagError: the job does not fit the stack (no registry for ``--image-tag``, more GPUs
            or nodes than the pool has, RDMA without a fabric).
    """
    if spec.image is not None:
        image = spec.image
    elif defaults.get("registry"):
        image = f"{defaults['registry']}:{spec.image_tag}"
    else:
        raise FlagError("--image-tag: the stack has no registry; give --image with a full, pinned reference")
    if spec.backend == "v2" and spec.framework == "mpi":
        raise FlagError(
            "--framework mpi --backend v2: an MPI TrainJob runs on a TrainingRuntime of its own, which submit "
            "does not create: declare the job in the stack, or submit it on backend v1"
        )
    gpus = job_gpus(spec, defaults["placement"]["gpusPerNode"])
    ctx = context_from_defaults(defaults, image=image, gpus=gpus, backend=spec.backend)
    try:
        return train_job(spec, ctx) if spec.backend == "v2" else kubeflow_job(spec, ctx)
    except ValueError as err:
        raise FlagError(f"--gpus, --nodes or --network: {err}") from None

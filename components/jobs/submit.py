"""``submit``: command-line flags → :class:`TrainingJobSpec` → the builder's manifest.

The flags fill the same spec a stack's ``jobs`` entry does, validated by the same pydantic
model, and the manifest comes from the same pure builders (``pytorch_job`` on v1,
``train_job`` on v2) with the context the stack exports as ``jobDefaults``.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import ValidationError

from ..config import TrainingJobSpec, job_gpus
from ..manifests import context_from_defaults, kubeflow_job, train_job

FLAGS: dict[str, tuple[str, ...]] = {
    "--nodes": ("nodes",),
    "--gpus": ("gpusPerNode",),
    "--procs-per-node": ("procsPerNode",),
    "--cpu": ("cpu",),
    "--memory": ("memory",),
    "--preset": ("preset",),
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
    "--model": ("trainer", "model"),
    "--max-steps": ("trainer", "maxSteps"),
    "--epochs": ("trainer", "epochs"),
    "--batch-size": ("trainer", "batchSize"),
    "--lr": ("trainer", "lr"),
    "--checkpoint-every": ("trainer", "checkpointEvery"),
    "--synthetic-data": ("trainer", "syntheticData"),
    "--init-from": ("trainer", "initFrom"),
    "--suspend": ("runPolicy", "suspend"),
    "--ttl": ("runPolicy", "ttlSecondsAfterFinished"),
    "--label": ("labels",),
    "--node-selector": ("nodeSelector",),
    "--toleration": ("tolerations",),
}
"""Each flag and the spec key it sets (camelCase, as in a stack's ``jobs`` entry)."""


class FlagError(ValueError):
    """A flag's value is not valid; the message names the flag."""


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The job flags of ``submit``; values stay ``None`` unless given, so the spec's defaults apply."""
    parser.add_argument("name", help="job name (DNS-1035 label, at most 40 characters)")
    parser.add_argument("--nodes", type=int, help="pods, one per node (default 1)")
    parser.add_argument("--gpus", type=int, help="GPUs per pod (default: the pool's per node; 0 for a CPU job)")
    parser.add_argument("--procs-per-node", type=int, help="processes per pod (CPU jobs; GPU jobs use one per GPU)")
    parser.add_argument("--cpu", help="CPU per pod (default 8)")
    parser.add_argument("--memory", help="memory per pod (default 64Gi)")
    parser.add_argument("--preset", choices=["train", "netbench"], help="train (default) or netbench")
    parser.add_argument("--model", choices=["cnn", "gpt"], help="the trainer's model (default cnn)")
    parser.add_argument("--max-steps", type=int, help="optimizer steps")
    parser.add_argument("--epochs", type=int, help="passes over the data")
    parser.add_argument("--batch-size", type=int, help="per process (default 64)")
    parser.add_argument("--lr", type=float, help="learning rate")
    parser.add_argument("--checkpoint-every", type=int, help="steps between checkpoints (default 200)")
    parser.add_argument("--synthetic-data", action="store_true", default=None, help="train on generated data")
    parser.add_argument("--init-from", help="pretrained weights to start from (absolute path)")
    parser.add_argument("--image", help="full image reference, pinned by tag or digest")
    parser.add_argument("--image-tag", help="tag in the platform's registry repository")
    parser.add_argument("--network", choices=["tcp", "rdma"], help="tcp (default) or rdma")
    parser.add_argument("--backend", choices=["v1", "v2"], help="v1 PyTorchJob or v2 TrainJob (default: the stack's)")
    parser.add_argument(
        "--framework",
        choices=["pytorch", "tensorflow", "xgboost", "mpi", "jax", "paddle"],
        help="the job kind (default pytorch); every kind but pytorch runs the command after --",
    )
    parser.add_argument(
        "--launcher",
        choices=["torchrun", "accelerate", "deepspeed", "python"],
        help="start the command after -- with this launcher, the world set from the operator",
    )
    parser.add_argument("--code-path", help="run the command in this directory of the data volume (/mnt/data/...)")
    parser.add_argument("--git-url", help="clone this https repository into /mnt/code and run the command there")
    parser.add_argument("--commit", help="the full 40-hex-digit commit of --git-url to check out")
    parser.add_argument("--env", action="append", metavar="NAME=VALUE", help="environment variable (repeatable)")
    parser.add_argument("--suspend", action="store_true", default=None, help="create the job suspended")
    parser.add_argument(
        "--label", action="append", metavar="KEY=VALUE", help="label on the job and its pods (repeatable)"
    )
    parser.add_argument(
        "--node-selector", action="append", metavar="KEY=VALUE", help="node label the pods need (repeatable)"
    )
    parser.add_argument(
        "--toleration",
        action="append",
        metavar="KEY[=VALUE]:EFFECT",
        help="taint the pods tolerate, e.g. spot=true:NoSchedule; any value without =VALUE (repeatable)",
    )
    # A stack refuses a TTL: its next refresh would create the deleted job again. A submitted
    # job is no stack's resource, so the operator may delete it once it ends.
    parser.add_argument("--ttl", type=int, metavar="SECONDS", help="v1: delete the job SECONDS after it ends")


def job_spec(args: argparse.Namespace, defaults: dict[str, Any], extra: list[str]) -> TrainingJobSpec:
    """The validated job the flags describe.

    Args:
        args: the parsed ``submit`` flags.
        defaults: the stack's ``jobDefaults`` (its backend applies when ``--backend`` is not given).
        extra: the arguments after ``--``: your command under ``--launcher`` or for a
            non-PyTorch ``--framework``, else appended to the trainer's command.

    Returns:
        The job spec.

    Raises:
        FlagError: a flag's value is invalid; the message names the flag and what is valid.
    """
    raw: dict[str, Any] = {"name": args.name, "namespace": defaults["namespace"]}
    given = []
    for flag, path in FLAGS.items():
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is None:
            continue
        given.append(flag)
        if flag in PARSERS:
            value = PARSERS[flag](flag, value)
        target = raw
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value
    raw.setdefault("backend", defaults["backend"])
    own_code = args.launcher is not None or args.framework not in (None, "pytorch")
    if extra:
        raw["command" if own_code else "args"] = extra
    try:
        return TrainingJobSpec.model_validate(raw)
    except ValidationError as err:
        raise FlagError("; ".join(_describe(error, given) for error in err.errors())) from None


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


PARSERS = {"--env": _pairs, "--label": _pairs, "--node-selector": _pairs, "--toleration": _tolerations}
"""Flags whose repeated values make one spec value."""


def _describe(error: dict[str, Any], given: list[str]) -> str:
    loc = [str(part) for part in error["loc"]]
    key = (error.get("ctx") or {}).get("key")
    if key:
        loc += key.split(".")
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
    gpus = job_gpus(spec, defaults["placement"]["gpusPerNode"])
    ctx = context_from_defaults(defaults, image=image, gpus=gpus, backend=spec.backend)
    try:
        return train_job(spec, ctx) if spec.backend == "v2" else kubeflow_job(spec, ctx)
    except ValueError as err:
        raise FlagError(f"--gpus, --nodes or --network: {err}") from None

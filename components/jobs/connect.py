"""Where the commands connect: a stack's outputs or flags.

``--stack NAME`` runs ``pulumi stack output --json --show-secrets --stack NAME``; ``--outputs
FILE`` reads the same JSON from a file, which must have been written with ``--show-secrets``
too: without it pulumi writes each secret output as the string ``[secret]`` (pulumi/pulumi
``pkg/backend/display`` ``massagePropertyValue``). The ``kubeconfig`` output is a secret: it is written
to a file only this user can read (``tempfile.mkstemp`` creates it 0600), read by the
kubernetes client, and deleted at once; it is never printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

MASKED = "[secret]"


class TargetError(ValueError):
    """The stack's outputs or the connection flags are unusable; the message names the flag."""


def stack_outputs(stack: str | None, outputs_file: str | None) -> dict[str, Any]:
    """The stack outputs from ``--stack`` or ``--outputs`` (empty without either).

    Raises:
        TargetError: pulumi failed, or the file is missing or not JSON.
    """
    if outputs_file:
        try:
            return json.loads(Path(outputs_file).read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise TargetError(f"--outputs {outputs_file}: {err}") from None
    if not stack:
        return {}
    command = ["pulumi", "stack", "output", "--json", "--show-secrets", "--stack", stack]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise TargetError("--stack: the pulumi CLI is not on PATH; pass --outputs FILE or --kubeconfig") from None
    if done.returncode != 0:
        raise TargetError(f"--stack {stack}: pulumi stack output failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def configuration(outputs: dict[str, Any], kubeconfig: str | None, context: str | None = None) -> k8s.Configuration:
    """The kubernetes client configuration: ``--kubeconfig``, else the stack's ``kubeconfig``
    output, else ``$KUBECONFIG``/``~/.kube/config``; in ``context`` (``--context``) when given,
    else the kubeconfig's current context.

    Raises:
        TargetError: the kubeconfig is masked or cannot be loaded.
    """
    configuration = k8s.Configuration()
    secret = outputs.get("kubeconfig") if kubeconfig is None else None
    if secret == MASKED:
        raise TargetError(
            f"--outputs: the kubeconfig output is masked as {MASKED!r}: write the file with "
            "`pulumi stack output --json --show-secrets`, or pass --kubeconfig"
        )
    path = kubeconfig
    if secret:
        fd, path = tempfile.mkstemp(prefix="ack-jobs-", suffix=".kubeconfig")
        with os.fdopen(fd, "w") as handle:
            handle.write(secret)
    try:
        k8s_config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
    # A file that is YAML but not a kubeconfig fails inside the loader with TypeError or
    # ValueError. Only the error's type is shown: its text may quote the secret file.
    except (OSError, TypeError, ValueError, yaml.YAMLError, k8s_config.ConfigException) as err:
        if context is not None and isinstance(err, k8s_config.ConfigException):
            contexts, _ = k8s_config.list_kube_config_contexts(config_file=path)
            names = [c["name"] for c in contexts]
            if context not in names:
                raise TargetError(
                    f"--context {context}: the kubeconfig has no such context; it has {', '.join(names)}"
                ) from None
        flag = "--kubeconfig" if kubeconfig else "--stack/--outputs (kubeconfig)" if secret else "--kubeconfig"
        raise TargetError(
            f"{flag}: cannot load the kubeconfig: {type(err).__name__}; is it a kubeconfig file?"
        ) from None
    finally:
        if secret:
            os.unlink(path)
    return configuration


def namespace(outputs: dict[str, Any], flag: str | None) -> str:
    """The training namespace: ``--namespace``, else the stack's, else ``training``."""
    return flag or outputs.get("namespace") or (outputs.get("jobDefaults") or {}).get("namespace") or "training"

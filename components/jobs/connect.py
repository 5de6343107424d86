"""Where the commands connect: the user's own kubeconfig, and the stack's outputs.

The cluster is reached with the user's kubeconfig (``--kubeconfig``, ``$KUBECONFIG`` or
``~/.kube/config``, ``--context``): the stack exports no kubeconfig, so a job user needs none
of the stack's secrets and acts with their own permissions in the cluster. ``--stack NAME`` runs ``pulumi stack output
--json --stack NAME`` for the namespace and the job defaults, none of them secret; ``--outputs
FILE`` reads the same JSON from a file.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

GET_KUBECONFIG = (
    "Get your kubeconfig for the cluster (the stack's clusterId output) from the ACK console or from ACK's "
    "DescribeClusterUserKubeconfig API (aliyun cs GET /k8s/<clusterId>/user_config), "
    "then pass --kubeconfig FILE or set KUBECONFIG"
)


PLANNED = "<planned offline>"
"""Marks outputs read from ``python -m components.plan --json``: good for ``submit --dry-run``,
whose manifest then shows the plan's placeholders (the registry host), never for a real job."""


class TargetError(ValueError):
    """The stack's outputs or the connection flags are unusable; the message names the flag."""


def stack_outputs(stack: str | None, outputs_file: str | None) -> dict[str, Any]:
    """The stack outputs from ``--stack`` or ``--outputs`` (empty without either). ``--outputs`` takes
    ``pulumi stack output --json``, or the offline plan's ``--json`` (its ``outputs``).

    Raises:
        TargetError: pulumi failed, or the file is missing or not JSON.
    """
    if outputs_file:
        try:
            found = json.loads(Path(outputs_file).read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise TargetError(f"--outputs {outputs_file}: {err}") from None
        if isinstance(found, dict) and {"stack", "resources", "outputs"} <= found.keys():
            # The offline plan's --json: its outputs, with what only a deployment knows as placeholders.
            return {**found["outputs"], PLANNED: True}
        return found
    if not stack:
        return {}
    command = ["pulumi", "stack", "output", "--json", "--stack", stack]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise TargetError("--stack: the pulumi CLI is not on PATH; pass --outputs FILE or --kubeconfig") from None
    if done.returncode != 0:
        raise TargetError(f"--stack {stack}: pulumi stack output failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def configuration(kubeconfig: str | None, context: str | None) -> k8s.Configuration:
    """The kubernetes client configuration from the user's own kubeconfig: ``--kubeconfig``,
    else ``$KUBECONFIG``/``~/.kube/config``, at ``--context`` or the current context.

    Raises:
        TargetError: there is no kubeconfig, or it cannot be loaded.
    """
    configuration = k8s.Configuration()
    try:
        # The client reads $KUBECONFIG once, when imported; read it now, as kubectl does.
        path = kubeconfig or os.environ.get("KUBECONFIG")
        k8s_config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
    # A file that is YAML but not a kubeconfig fails inside the loader with TypeError or
    # ValueError. Only the error's type is shown: its text may quote the credentials.
    except (OSError, TypeError, ValueError, yaml.YAMLError, k8s_config.ConfigException) as err:
        if context is not None and isinstance(err, k8s_config.ConfigException):
            names = _context_names(path)
            if names is not None and context not in names:
                raise TargetError(
                    f"--context {context}: the kubeconfig has no such context; it has {', '.join(names)}"
                ) from None
        flag = "--kubeconfig" if kubeconfig else "$KUBECONFIG or ~/.kube/config"
        where = f" (context {context})" if context else ""
        raise TargetError(f"{flag}{where}: cannot load a kubeconfig: {type(err).__name__}. {GET_KUBECONFIG}") from None
    return configuration


def _context_names(path: str | None) -> list[str] | None:
    """The contexts of the kubeconfig at ``path``, or ``None`` when it cannot be read."""
    try:
        contexts, _ = k8s_config.list_kube_config_contexts(config_file=path)
    except (OSError, TypeError, ValueError, yaml.YAMLError, k8s_config.ConfigException):
        return None
    return [c["name"] for c in contexts]


def namespace(outputs: dict[str, Any], flag: str | None) -> str:
    """The training namespace: ``--namespace``, else the stack's, else ``training``."""
    return flag or outputs.get("namespace") or (outputs.get("jobDefaults") or {}).get("namespace") or "training"

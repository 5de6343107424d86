"""The namespace jobs run in, and its pull secret's payload."""

from __future__ import annotations

import base64
import json

from ...config import TrainingNamespaceSpec
from ..base import BASELINE, MANAGED_BY, Manifest, pod_security_labels
from ..placement import GPU_RESOURCE


def training_namespace(spec: TrainingNamespaceSpec) -> list[Manifest]:
    """The jobs' Namespace, ServiceAccount and, when configured, a GPU ResourceQuota.

    Jobs name the image pull secret themselves, so the ServiceAccount carries none.

    Args:
        spec: the namespace's settings.
    """
    labels = {**MANAGED_BY, **pod_security_labels(BASELINE)}
    objects: list[Manifest] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": spec.namespace, "labels": labels}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": spec.service_account, "namespace": spec.namespace, "labels": dict(MANAGED_BY)},
            # The trainer never calls the Kubernetes API: its pods get no token to steal.
            "automountServiceAccountToken": False,
        },
    ]
    if spec.gpu_quota is not None:
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "gpu-quota", "namespace": spec.namespace, "labels": dict(MANAGED_BY)},
                "spec": {"hard": {f"requests.{GPU_RESOURCE}": str(spec.gpu_quota)}},
            }
        )
    return objects


def docker_config_json(server: str, username: str, password: str) -> str:
    """The ``.dockerconfigjson`` payload of an image pull secret."""
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    return json.dumps({"auths": {server: {"username": username, "password": password, "auth": auth}}})

"""The namespace training jobs run in."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from ._k8s import TOKEN, resource_args
from .config import TrainingNamespaceSpec
from .manifests import training_namespace

_KINDS = {
    "Namespace": k8s.core.v1.Namespace,
    "ServiceAccount": k8s.core.v1.ServiceAccount,
    "ResourceQuota": k8s.core.v1.ResourceQuota,
}


class TrainingNamespace(pulumi.ComponentResource):
    """Namespace, service account and optional GPU quota for jobs.

    Attributes:
        name: the namespace name.
        service_account: the jobs' service account name.
        namespace: the Namespace resource (depend on it before creating objects inside).
    """

    def __init__(
        self,
        name: str,
        spec: TrainingNamespaceSpec,
        *,
        provider: k8s.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:TrainingNamespace", name, None, opts)
        self.name = spec.namespace
        self.service_account = spec.service_account
        first, *rest = training_namespace(spec)
        self.namespace = k8s.core.v1.Namespace(
            spec.namespace, **resource_args(first), opts=pulumi.ResourceOptions(parent=self, provider=provider)
        )
        inside = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[self.namespace])
        for manifest in rest:
            _KINDS[manifest["kind"]](
                f"{spec.namespace}-{manifest['metadata']['name']}", **resource_args(manifest), opts=inside
            )
        self.register_outputs({"name": self.name})

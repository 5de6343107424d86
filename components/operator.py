"""The Kubeflow Training Operator (v1), optionally with Volcano for gang scheduling."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from ._k8s import TOKEN
from .config import OperatorSpec
from .manifests import (
    VOLCANO_NAMESPACE,
    VOLCANO_REPOSITORY,
    operator_customization,
    operator_source,
    volcano_values,
)

RELEASE_TIMEOUT_S = 900
"""Volcano's pods may wait for a system node and for their images."""


class TrainingOperator(pulumi.ComponentResource):
    """Installs the Training Operator at a pinned release from its standalone kustomize
    overlay (namespace ``kubeflow``), and Volcano from its Helm chart when gang scheduling
    is on.

    The overlay is rendered by the kubernetes provider at deploy time (it fetches the
    pinned tag with ``git``); each rendered object passes through
    :func:`~components.manifests.customize_operator_object` before it is applied (``python -m
    components.upstream operator`` shows the result for a stack), so no
    overlay is written to disk and the inputs are the same on every machine. Volcano is a
    Helm release, not a ``helm.v4.Chart``: its admission secret comes from a pre-install
    hook, which only a release runs.

    Args:
        name: Pulumi resource name.
        spec: the operator's spec.
        provider: the cluster's kubernetes provider.
        image_mirror: registry path the third-party images were copied to.
        node_selector: labels of the nodes for the operator and Volcano (the system pool).
        pulls_after: what must exist before their images can be pulled (the mirror
            registry's VPC link and credential helper).

    Attributes:
        ready: what a PyTorchJob must wait for (the operator's objects and CRDs, Volcano);
            empty when the cluster already runs an operator.
        gang_scheduling: whether Volcano gang scheduling is available.
    """

    def __init__(
        self,
        name: str,
        spec: OperatorSpec,
        *,
        provider: k8s.Provider,
        image_mirror: str | None = None,
        node_selector: dict[str, str] | None = None,
        pulls_after: list[pulumi.Resource] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        source = operator_source(spec.version) if spec.install else None
        super().__init__(f"{TOKEN}:TrainingOperator", name, {"source": source}, opts)
        self.gang_scheduling = spec.volcano.enabled
        self.ready: pulumi.Input[list[pulumi.Resource]] = []
        if not spec.install:
            self.register_outputs({})
            return
        volcano: list[pulumi.Resource] = []
        wait = list(pulls_after or [])
        if spec.volcano.enabled:
            volcano.append(
                k8s.helm.v3.Release(
                    "volcano",
                    name="volcano",
                    chart="volcano",
                    version=spec.volcano.version,
                    repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=VOLCANO_REPOSITORY),
                    namespace=VOLCANO_NAMESPACE,
                    create_namespace=True,
                    values=volcano_values(mirror=image_mirror, node_selector=node_selector),
                    timeout=RELEASE_TIMEOUT_S,
                    opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=wait),
                )
            )

        # Started with --gang-scheduler-name=volcano, the operator exits unless Volcano's
        # PodGroup CRD exists (v1.9.4 cmd/training-operator.v1/main.go).
        overlay = k8s.kustomize.Directory(
            name,
            directory=source,
            transformations=[operator_customization(spec, mirror=image_mirror, node_selector=node_selector)],
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[*wait, *volcano]),
        )
        self.ready = overlay.resources.apply(lambda rendered: [*volcano, *rendered.values()])
        self.register_outputs({})

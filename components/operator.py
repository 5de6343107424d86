"""The Kubeflow Training Operator (v1), optionally with Volcano for gang scheduling."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import yaml

from ._k8s import TOKEN
from .config import OperatorSpec
from .manifests import operator_kustomization, operator_source

OPERATOR_NAMESPACE = "kubeflow"
VOLCANO_NAMESPACE = "volcano-system"
VOLCANO_REPO = "https://volcano-sh.github.io/helm-charts"
OVERLAY_DIR = ".kustomize"
"""Where the gang-scheduling overlay is written, relative to the project directory
(Pulumi runs programs there); the kubernetes provider reads it on every ``pulumi up``."""


def write_overlay(version: str, root: Path) -> Path:
    """Write the kustomization that adds ``--gang-scheduler-name=volcano`` and return its
    directory. The content depends only on ``version``, so reruns change nothing."""
    directory = root / OVERLAY_DIR / f"training-operator-{version}-volcano"
    directory.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(operator_kustomization(version, "volcano"), sort_keys=False)
    target = directory / "kustomization.yaml"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)
    return directory


class TrainingOperator(pulumi.ComponentResource):
    """Installs the Training Operator at a pinned release from its standalone kustomize
    overlay into namespace ``kubeflow``.

    Attributes:
        ready: resources a PyTorchJob must wait for (the operator and its CRDs); empty
            when the cluster already runs an operator.
        gang_scheduling: whether Volcano gang scheduling is available.
    """

    def __init__(
        self,
        name: str,
        spec: OperatorSpec,
        *,
        provider: k8s.Provider,
        project_dir: Path | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:TrainingOperator", name, None, opts)
        self.ready: list[pulumi.Resource] = []
        self.gang_scheduling = spec.volcano.enabled
        if spec.install:
            options = pulumi.ResourceOptions(parent=self, provider=provider)
            directory = operator_source(spec.version)
            if spec.volcano.enabled:
                volcano_ns = k8s.core.v1.Namespace(
                    VOLCANO_NAMESPACE, metadata={"name": VOLCANO_NAMESPACE}, opts=options
                )
                self.ready.append(
                    k8s.helm.v4.Chart(
                        "volcano",
                        chart="volcano",
                        version=spec.volcano.version,
                        namespace=VOLCANO_NAMESPACE,
                        repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=VOLCANO_REPO),
                        opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[volcano_ns]),
                    )
                )
                directory = str(write_overlay(spec.version, project_dir or Path.cwd()))
            self.ready.append(
                k8s.kustomize.v2.Directory(name, directory=directory, namespace=OPERATOR_NAMESPACE, opts=options)
            )
        self.register_outputs({})

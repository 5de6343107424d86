"""The Training Operator, Volcano and the namespace jobs run in."""

from __future__ import annotations

from pydantic import Field, model_validator

from .base import _VERSION_TAG, DEFAULT_OPERATOR_VERSION, DEFAULT_VOLCANO_VERSION, DnsLabel, Spec, field_error

# --- operator and namespace ----------------------------------------------------------


class VolcanoSpec(Spec):
    enabled: bool = False
    """Install Volcano and start the operator with ``--gang-scheduler-name=volcano``."""
    version: str = Field(default=DEFAULT_VOLCANO_VERSION, pattern=r"^\d+\.\d+\.\d+$")
    """Volcano Helm chart version (pinned)."""


class OperatorSpec(Spec):
    """The Kubeflow Training Operator (v1) that runs PyTorchJobs."""

    install: bool = True
    """Install it (off: the cluster has one already)."""
    version: str = DEFAULT_OPERATOR_VERSION
    """Release tag of kubeflow/training-operator, pinned."""
    volcano: VolcanoSpec = Field(default_factory=VolcanoSpec)

    @model_validator(mode="after")
    def _check(self) -> OperatorSpec:
        if not _VERSION_TAG.match(self.version):
            raise field_error(
                "version", f"{self.version!r} is not a release tag: pin one such as {DEFAULT_OPERATOR_VERSION!r}"
            )
        if not self.version.startswith("v1."):
            raise field_error(
                "version", f"{self.version!r} is not a v1 release; this platform emits kubeflow.org/v1 PyTorchJobs"
            )
        return self


class TrainingNamespaceSpec(Spec):
    """The namespace jobs run in."""

    namespace: DnsLabel = "training"
    service_account: DnsLabel = Field(default="trainer")
    gpu_quota: int | None = Field(default=None, ge=0)
    """Most GPUs all jobs in the namespace may request together (no quota when unset)."""

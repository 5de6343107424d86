"""Which framework a job runs, how its own code starts, and where that code comes from.

The Training Operator v1.9.4 serves one job kind per framework (kubeflow/trainer v1.9.4
``pkg/apis/kubeflow.org/v1/*_types.go``): PyTorchJob, TFJob, XGBoostJob, MPIJob, JAXJob and
PaddleJob. Trainer v2 runs the frameworks it has an ML policy for, each on its own runtime.
Pure: no Pulumi, no torch.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from .base import Spec, field_error

Framework = Literal["pytorch", "tensorflow", "xgboost", "mpi", "jax", "paddle"]
Launcher = Literal["torchrun", "accelerate", "deepspeed", "python"]
TORCH_LAUNCHERS = ("torchrun", "accelerate", "deepspeed")
"""Launchers that start torch processes from the operator's PyTorchJob settings."""
ML_POLICIES = {"pytorch": "torch", "jax": "jax", "xgboost": "xgboost"}
"""The frameworks the platform has Trainer v2 ClusterTrainingRuntimes for, and each one's ML policy:
those Trainer v2.3.0 has a policy for (``pkg/apis/trainer/v1alpha1/trainingruntime_types.go``
``MLPolicySource``: torch, mpi, flux, jax, xgboost), MPI aside: an MPI job's node pods run the
image written in the runtime, so each MPI job gets a TrainingRuntime of its own
(``components/manifests/jobs/mpi_runtime.py``)."""
V2_FRAMEWORKS = tuple(ML_POLICIES)
_NO_POLICY = (
    "Trainer v2.3.0 has no {} ML policy (MLPolicySource: torch, mpi, flux, jax, xgboost), so nothing would set {}"
)
V2_REFUSED = {
    "tensorflow": _NO_POLICY.format("TensorFlow", "TF_CONFIG"),
    "paddle": _NO_POLICY.format("Paddle", "PADDLE_*"),
}
"""Why each other framework stays on backend v1 (kubeflow/trainer v2.3.0)."""
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


class CodeSource(Spec):
    """Where a job's code comes from when not from its image: a directory on the data volume,
    or a git repository at one commit (cloned by an init container into ``/mnt/code``)."""

    path: str | None = Field(default=None, pattern=r"^/mnt/data(/|$)")
    """A directory on the data volume (``/mnt/data/...``); the command runs there."""
    git_url: str | None = Field(default=None, pattern=r"^https://[^\s]+$")
    """An ``https://`` repository the pods can reach, cloned without credentials."""
    commit: str | None = None
    """The full 40-character commit id to check out: a branch or tag moves under a job that restarts."""
    clone_image: str = "alpine/git:v2.47.2"
    """Image with ``git`` that clones the repository, pinned."""

    @model_validator(mode="after")
    def _check(self) -> CodeSource:
        if (self.path is None) == (self.git_url is None):
            raise field_error("path", "give exactly one of path (on the data volume) or gitUrl (with commit)")
        if self.git_url is not None and (self.commit is None or not _COMMIT.match(self.commit)):
            raise field_error(
                "commit",
                f"{self.commit!r} is not a commit id: give the full 40-hex-digit commit of {self.git_url} "
                "(a branch or tag can move between a job's restarts)",
            )
        if self.path is not None and self.commit is not None:
            raise field_error("commit", "commit is for gitUrl; a path on the data volume has none")
        return self


PYTHON_LAUNCHER_ONE_PROCESS = (
    "launcher python starts one process per pod: use launcher torchrun for several, or procsPerNode: 1"
)

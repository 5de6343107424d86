"""The init container of the pre-job node check (``jobs[].nodeCheck``): an all-reduce across the
pod's GPUs (``python -m trainer.health.check``) that fails the pod on a node below the pool's baseline
before the training container starts."""

from __future__ import annotations

from trainer.health.signals import NODE_CHECK, NODE_NAME_ENV

from ...config import TrainingJobSpec
from ..base import Manifest

NODE_NAME_FROM_SPEC: Manifest = {"name": NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
"""The node's name through the downward API, for the check's one line."""


def node_check_container(
    job: TrainingJobSpec, image: str | None, gpus: int, resources: Manifest, shm: Manifest
) -> Manifest:
    """The check's init container, or an empty dict when the job sets no ``nodeCheck`` or the pod
    has fewer than two GPUs.

    It asks for the training container's resources: the pod's GPUs are the ones it measures (the
    kubelet hands an init container's devices on to the containers that follow), and a pod's
    request is the larger of its init and its app containers', so nothing more is reserved.

    Args:
        job: the validated job spec.
        image: the platform's trainer image (it carries ``trainer.health.check`` and torch), never the job's
            own, which may be a team's code without the ``trainer`` package.
        gpus: GPUs per pod.
        resources: the training container's ``resources``.
        shm: the ``/dev/shm`` mount NCCL's intra-node transport needs.

    Raises:
        ValueError: the job sets ``nodeCheck`` and there is no trainer image.
    """
    check = job.node_check
    # A job's GPU-less pods (the MPI Launcher, TensorFlow's parameter servers) have nothing to
    # measure: torchrun refuses --nproc-per-node=0, which would fail them before they start.
    if check is None or gpus < 2:
        return {}
    if image is None:
        raise ValueError(
            f"jobs[].nodeCheck of job {job.name!r}: the check runs the platform's trainer image, and none was given "
            "(monitoring.nodeHealth.image), and the job's own command may run an image without the trainer package"
        )
    return {
        "name": NODE_CHECK,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        # The image's entrypoint is the platform launcher, which keeps the worker's exit status.
        "command": ["python", "-m", "trainer.launch"],
        "args": [
            "--standalone",
            f"--nproc-per-node={gpus}",
            "-m",
            "trainer.health.check",
            f"--baseline-gbps={check.baseline_gbps:g}",
            f"--min-share={check.min_share:g}",
        ],
        "env": [dict(NODE_NAME_FROM_SPEC)],
        "resources": resources,
        "volumeMounts": [dict(shm)],
        # Its one failing line becomes the container's termination message, which ack-jobs why reads.
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }

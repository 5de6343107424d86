"""TensorBoard over every job's event files, on the system nodes.

The trainer writes TensorBoard events to ``<output dir>/tensorboard`` and each job's output
dir is ``/mnt/output/<job>`` on the output claim (``job_env`` in ``jobs.py``), so one
``--logdir`` over the claim's root shows every job, each run named by its path.
"""

from __future__ import annotations

from ...config import TensorBoardSpec
from ...config.base import OUTPUT_MOUNT
from ..base import MANAGED_BY, TRAINER_UID, Manifest

TENSORBOARD = "tensorboard"
TENSORBOARD_POD = f"{TENSORBOARD}-0"
"""Its one pod's name: a StatefulSet names its pods ``<name>-<ordinal>`` (Kubernetes docs,
"StatefulSets", Pod Identity), which lets a Role grant port-forwarding to this pod alone."""
TENSORBOARD_PORT = 6006
"""TensorBoard's own default port."""
LABELS = {**MANAGED_BY, "app.kubernetes.io/name": TENSORBOARD, "app.kubernetes.io/component": TENSORBOARD}
"""The component label keeps a training job that happens to be named ``tensorboard`` (its pods
carry ``app.kubernetes.io/name: tensorboard`` too) out of the Service's selector."""


def tensorboard_objects(
    spec: TensorBoardSpec,
    *,
    namespace: str,
    image: str,
    output_claim: str,
    node_selector: dict[str, str] | None,
    image_pull_secret: str | None = None,
    run_as: tuple[int, int] = (TRAINER_UID, TRAINER_UID),
) -> list[Manifest]:
    """The StatefulSet and Service of TensorBoard.

    It runs from the training image, which installs ``tensorboard`` for the trainer's own event
    files and is already in a registry the cluster pulls from, so nothing third-party is pulled.
    The output claim is mounted read-only: TensorBoard only reads, and a mistake there cannot
    touch a checkpoint.

    Args:
        spec: TensorBoard's settings.
        namespace: the namespace whose output claim it reads.
        image: the training image, pinned.
        output_claim: the claim holding every job's output directory.
        node_selector: the system pool's labels, or ``None`` where there is no system pool.
        image_pull_secret: pull secret for the image, or ``None``.
        run_as: the (uid, gid) it reads the claim as: the training image's user, or a team's.

    Returns:
        ``[StatefulSet, Service]``.
    """
    resources = {"cpu": spec.cpu, "memory": spec.memory}
    pod: Manifest = {
        # It never calls the Kubernetes API: no token to take from it.
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": run_as[0], "runAsGroup": run_as[1]},
        "containers": [
            {
                "name": TENSORBOARD,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                # The image's entrypoint is the trainer's launcher.
                "command": ["tensorboard"],
                "args": [f"--logdir={OUTPUT_MOUNT}", "--host=0.0.0.0", f"--port={TENSORBOARD_PORT}"],
                "ports": [{"name": "http", "containerPort": TENSORBOARD_PORT}],
                "resources": {"requests": dict(resources), "limits": dict(resources)},
                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 10},
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
                "volumeMounts": [
                    {"name": "output", "mountPath": OUTPUT_MOUNT, "readOnly": True},
                    # TensorBoard keeps its instance info in the temp directory.
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
            }
        ],
        "volumes": [
            {"name": "output", "persistentVolumeClaim": {"claimName": output_claim, "readOnly": True}},
            {"name": "tmp", "emptyDir": {}},
        ],
    }
    if node_selector:
        pod["nodeSelector"] = dict(node_selector)
    if image_pull_secret:
        pod["imagePullSecrets"] = [{"name": image_pull_secret}]
    metadata = {"name": TENSORBOARD, "namespace": namespace, "labels": dict(LABELS)}
    stateful_set = {
        "apiVersion": "apps/v1",
        # A StatefulSet rather than a Deployment for its pod's fixed name (TENSORBOARD_POD).
        "kind": "StatefulSet",
        # Nothing depends on TensorBoard running, and its first pull can wait on the registry's
        # credential helper: `pulumi up` does not wait for its rollout (pulumi-kubernetes
        # provider/pkg/metadata/overrides.go, the pulumi.com/skipAwait annotation).
        "metadata": {**metadata, "annotations": {"pulumi.com/skipAwait": "true"}},
        "spec": {
            "replicas": 1,
            "serviceName": TENSORBOARD,
            "selector": {"matchLabels": dict(LABELS)},
            "template": {"metadata": {"labels": dict(LABELS)}, "spec": pod},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": dict(metadata, labels=dict(LABELS)),
        "spec": {
            "type": "ClusterIP",
            "selector": dict(LABELS),
            "ports": [{"name": "http", "port": TENSORBOARD_PORT, "targetPort": "http"}],
        },
    }
    return [stateful_set, service]


def port_forward_command(namespace: str) -> str:
    """The command that opens TensorBoard on http://localhost:6006."""
    return f"kubectl -n {namespace} port-forward svc/{TENSORBOARD} {TENSORBOARD_PORT}:{TENSORBOARD_PORT}"

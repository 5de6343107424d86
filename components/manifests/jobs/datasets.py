"""The dataset import: a Job that runs ``trainer.dataset_import`` against the data claim,
and for an OSS source the read-only OSS volume it copies from."""

from __future__ import annotations

from ...config import DatasetImportSpec
from ..base import MANAGED_BY, PROJECT, TRAINER_UID, Manifest
from ..platform.storage import oss_persistent_volume, persistent_volume_claim
from .env import DATA_MOUNT

IMPORT_CONTAINER = "import"
SOURCE_MOUNT = "/mnt/source"
DATASET_LABEL = f"{PROJECT}/dataset"
REFUSED_EXIT = 2
"""``trainer.dataset_import``'s status for a refusal (another dataset under the name, a bad
``SHA256SUMS``): retrying cannot help, so the Job fails at once."""
SOURCE_SIZE = "1Ti"
"""Recorded on the OSS source volume; ossfs ignores it (a bucket has no size)."""


def import_job_name(spec: DatasetImportSpec) -> str:
    return f"import-{spec.name}"


def source_claim_name(spec: DatasetImportSpec) -> str:
    return f"import-{spec.name}-source"


def oss_source_objects(spec: DatasetImportSpec, *, namespace: str, endpoint: str, role_name: str) -> list[Manifest]:
    """The read-only OSS volume of an ``oss://`` import and its claim: the OSS CSI plugin
    mounts the bucket path as ``role_name``, assumed through RRSA (see
    :func:`oss_persistent_volume`), so no AccessKey is in any object.

    The volume names its claim by namespace and name only, which reserves it for that
    claim before the claim exists (Kubernetes docs, "Reserving a PersistentVolume":
    kubernetes.io/docs/concepts/storage/persistent-volumes/#reserving-a-persistentvolume).

    Raises:
        ValueError: ``spec.source`` is not an ``oss://`` location.
    """
    oss = spec.oss
    if oss is None:
        raise ValueError(f"dataset {spec.name}: {spec.source} is not an oss:// source")
    claim = source_claim_name(spec)
    volume = f"{namespace}-{claim}"
    ref = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace, "name": claim}
    return [
        oss_persistent_volume(volume, oss, endpoint, SOURCE_SIZE, role_name, ref),
        persistent_volume_claim(claim, namespace, "", SOURCE_SIZE, "ReadOnlyMany", volume_name=volume),
    ]


def import_job(
    spec: DatasetImportSpec,
    *,
    namespace: str,
    data_claim: str,
    image: str,
    security_context: Manifest | None = None,
    node_selector: dict[str, str] | None = None,
    image_pull_secret: str | None = None,
) -> Manifest:
    """The Job that copies ``spec.source`` into ``<data claim>/<spec.name>``.

    It runs ``python -m trainer.dataset_import`` from the training image; an ``oss://``
    source is read from the claim of :func:`oss_source_objects`, mounted read-only. A failed
    attempt is retried up to ``spec.backoffLimit`` times and resumes; a refusal (exit 2)
    fails the Job at once through its pod failure policy, which needs ``restartPolicy:
    Never`` (Kubernetes docs, "Pod failure policy":
    kubernetes.io/docs/concepts/workloads/controllers/job/#pod-failure-policy).

    Args:
        spec: the import.
        namespace: where the data claim is.
        data_claim: the claim the dataset is copied into.
        image: the training image (it holds ``trainer/``).
        security_context: the pods' security context (a team's uid and gid, so the team
            owns the files), or ``None`` for the image's user.
        node_selector: where it runs (the system nodes), or ``None``.
        image_pull_secret: the registry's pull secret, or ``None``.
    """
    source = SOURCE_MOUNT if spec.oss is not None else spec.source
    mounts = [{"name": "data", "mountPath": DATA_MOUNT}]
    volumes: list[Manifest] = [{"name": "data", "persistentVolumeClaim": {"claimName": data_claim}}]
    if spec.oss is not None:
        mounts.append({"name": "source", "mountPath": SOURCE_MOUNT, "readOnly": True})
        volumes.append(
            {"name": "source", "persistentVolumeClaim": {"claimName": source_claim_name(spec), "readOnly": True}}
        )
    resources = {"cpu": spec.cpu, "memory": spec.memory}
    container: Manifest = {
        "name": IMPORT_CONTAINER,
        "image": image,
        "command": ["python", "-m", "trainer.dataset_import"],
        "args": ["--name", spec.name, "--source", source, "--dest", DATA_MOUNT],
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": mounts,
    }
    pod: Manifest = {
        "restartPolicy": "Never",
        # Neither source needs the Kubernetes API: the OSS plugin assumes its role itself.
        "automountServiceAccountToken": False,
        # The image's user is a name (Dockerfile ``USER trainer``), which runAsNonRoot cannot check: give its uid.
        "securityContext": dict(security_context)
        if security_context
        else {"runAsNonRoot": True, "runAsUser": TRAINER_UID, "runAsGroup": TRAINER_UID},
        "containers": [container],
        "volumes": volumes,
    }
    if node_selector:
        pod["nodeSelector"] = dict(node_selector)
    if image_pull_secret:
        pod["imagePullSecrets"] = [{"name": image_pull_secret}]
    labels = {**MANAGED_BY, DATASET_LABEL: spec.name}
    refused = {"containerName": IMPORT_CONTAINER, "operator": "In", "values": [REFUSED_EXIT]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": import_job_name(spec), "namespace": namespace, "labels": labels},
        "spec": {
            "backoffLimit": spec.backoff_limit,
            "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": refused}]},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }

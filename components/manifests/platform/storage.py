"""Shared storage as Kubernetes sees it: the NAS StorageClass and the data and output
volumes, which live at fixed paths so that no deletion in the cluster loses their data."""

from __future__ import annotations

from ...config import OssSpec
from ..base import MANAGED_BY, Manifest

NAS_PROVISIONER = "nasplugin.csi.alibabacloud.com"
OSS_PROVISIONER = "ossplugin.csi.alibabacloud.com"
NFS_MOUNT_OPTIONS = ("nolock,tcp,noresvport", "vers=3")
"""ACK's recommended NFSv3 options: no lock daemon, TCP, and a fresh source port on
reconnect so a NAS failover does not hang the mount."""
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}
"""A claim bound to a named volume is Pending until that volume, which needs the claim's
uid, exists: Pulumi must not wait for it to bind before creating the volume."""


def nas_storage_class(name: str, server: str, *, quota: bool) -> Manifest:
    """A NAS CSI StorageClass whose volumes are subdirectories of one file system, for
    claims beyond the platform's own.

    Args:
        name: StorageClass name.
        server: ``<mount target domain>:/<directory>/``, the directory holding the volumes.
        quota: enforce each claim's size as a directory quota (general-purpose NAS only:
            alibaba-cloud-csi-driver ``pkg/nas/subpath_controller.go`` sets quotas for
            standard file systems alone).
    """
    parameters = {
        "volumeAs": "subpath",
        "server": server,
        # The provisioner creates each volume's directory as root, 755; the trainer image
        # runs as an unprivileged user that must create its job directory there. The CSI
        # plugin chmods only the volume's own directory (modeType non-recursive), so what
        # jobs write keeps its owner's permissions.
        "mode": "777",
        "modeType": "non-recursive",
    }
    if quota:
        parameters["volumeCapacity"] = "true"
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "labels": dict(MANAGED_BY)},
        "provisioner": NAS_PROVISIONER,
        "parameters": parameters,
        "mountOptions": list(NFS_MOUNT_OPTIONS),
        # Retain: deleting a claim leaves its directory and the volume object in place.
        "reclaimPolicy": "Retain",
        "allowVolumeExpansion": quota,
        "volumeBindingMode": "Immediate",
    }


def shared_volume_path(root: str, namespace: str, claim: str) -> str:
    """The fixed NAS directory of a shared volume."""
    return f"{root.rstrip('/')}/{namespace}/{claim}"


def claim_ref(namespace: str, claim: str, uid: str) -> Manifest:
    """A volume's reservation for one claim, by name and uid. Given the uid of the claim as
    it is now, it rebinds the volume to a claim recreated under the same name (after its
    namespace was deleted, say), which Kubernetes never does for a volume still naming the
    old claim's uid: the volume stays Released."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace, "name": claim, "uid": uid}


def _static_volume(
    name: str, size: str, access_mode: str, ref: Manifest, driver: str, csi: Manifest, **spec: object
) -> Manifest:
    """A volume that exists before any claim, reserved for the claim ``ref``, kept on delete."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(MANAGED_BY)},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": [access_mode],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": ref,
            "csi": {"driver": driver, "volumeHandle": name, **csi},
            **spec,
        },
    }


def nas_persistent_volume(name: str, server: str, path: str, size: str, access_mode: str, ref: Manifest) -> Manifest:
    """A static NAS volume at a fixed directory, reserved for one claim and kept on delete.

    The CSI plugin creates the directory on first mount when it is missing
    (alibaba-cloud-csi-driver v1.34.1 and later, ``pkg/nas/utils.go``).
    """
    csi = {"volumeAttributes": {"server": server, "path": path}}
    return _static_volume(name, size, access_mode, ref, NAS_PROVISIONER, csi, mountOptions=list(NFS_MOUNT_OPTIONS))


OSS_RRSA_SERVICE_ACCOUNT = ("ack-csi-fuse", "csi-fuse-ossfs")
"""Namespace and service account of the pods the OSS CSI plugin mounts ossfs in, whose
RRSA token it exchanges for the role named by ``roleName`` (alibaba-cloud-csi-driver
v1.37.1 ``pkg/oss/controllerserver.go`` ``fusePodNamespace``,
``pkg/mounter/fuse_pod_manager/fuse_pod_manager.go`` ``FuseServiceAccountName``)."""


def oss_persistent_volume(name: str, oss: OssSpec, endpoint: str, size: str, role_name: str, ref: Manifest) -> Manifest:
    """A static, read-only OSS volume (ossfs through the OSS CSI plugin), reserved for one
    claim and kept on delete. The plugin reads the bucket as ``role_name``, assumed through
    RRSA (``authType: rrsa``, ``roleName``: alibaba-cloud-csi-driver v1.37.1
    ``pkg/mounter/fuse_pod_manager/oss/oss_fuse_pod_manager.go`` ``Options``,
    ``pkg/mounter/fuse_pod_manager/oss/utils.go`` ``GetRRSAConfig``): no AccessKey exists."""
    csi = {
        "readOnly": True,
        # Metadata caching off: datasets change between runs, stale listings would hide files.
        "volumeAttributes": {
            "bucket": oss.bucket,
            "url": endpoint,
            "path": oss.path,
            "authType": "rrsa",
            "roleName": role_name,
            "otherOpts": "-o umask=022 -o max_stat_cache_size=0 -o allow_other",
        },
    }
    return _static_volume(name, size, "ReadOnlyMany", ref, OSS_PROVISIONER, csi)


def persistent_volume_claim(
    name: str, namespace: str, storage_class: str, size: str, access_mode: str, volume_name: str | None = None
) -> Manifest:
    """A shared volume claim: from ``storage_class``, or bound to the static ``volume_name``."""
    spec: Manifest = {
        "accessModes": [access_mode],
        "storageClassName": storage_class,
        "resources": {"requests": {"storage": size}},
    }
    metadata: Manifest = {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)}
    if volume_name is not None:
        spec["volumeName"] = volume_name
        metadata["annotations"] = dict(SKIP_AWAIT)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}

"""Where datasets and checkpoints live: NAS, an optional OSS dataset, the shared claims."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import Cidr, DnsLabel, Quantity, Spec, field_error, set_but_unused

EXTREME_ROOT = "/share"
"""Extreme NAS exports only ``/share`` and below (alibaba-cloud-csi-driver ``pkg/nas/utils.go``
strips it; ACK docs: an extreme NAS path must have ``/share`` as its parent)."""

# --- storage -------------------------------------------------------------------------


class VolumeSpec(Spec):
    claim_name: DnsLabel
    """PersistentVolumeClaim name."""
    size: Quantity
    """Size recorded on the volume, e.g. ``500Gi``. NAS bills what is used and does not enforce it here:
    the shared volumes are fixed directories, which get no quota."""


class NasSpec(Spec):
    """A NAS file system shared by every training pod over NFSv3."""

    existing_file_system_id: str | None = Field(default=None)
    """Adopt this file system (needs ``existingMountTargetDomain``)."""
    existing_mount_target_domain: str | None = Field(default=None)
    """Mount target domain of the adopted file system, e.g. ``xxxx.cn-hangzhou.nas.aliyuncs.com``."""
    file_system_type: Literal["standard", "extreme"] = Field(default="standard")
    """``standard`` (general purpose) or ``extreme`` (low latency, for many small files)."""
    storage_type: Literal["Performance", "Capacity", "Premium", "standard", "advance"] = Field(default="Performance")
    """Performance/Capacity/Premium for standard; standard/advance for extreme."""
    capacity_gib: int | None = Field(default=None, ge=100)
    """Provisioned capacity, required for extreme file systems."""
    zone_id: str | None = Field(default=None)
    """Zone of an extreme file system; the first vSwitch's zone when unset (required with an adopted VPC)."""
    access_cidr: Cidr | None = Field(default=None)
    """Source range of the NAS access rule; the node vSwitches' blocks when unset (required with an adopted VPC,
    whose vSwitch blocks the stack does not know). Must lie inside the VPC."""
    user_access: Literal["root_squash", "all_squash", "no_squash"] = Field(default="root_squash")
    """How NAS treats the client's uid: ``root_squash`` maps root (uid 0) to the anonymous user, so a pod running
    as root owns nothing on the file system; ``no_squash`` trusts root. Jobs run as their team's uid."""
    base_path: str | None = Field(default=None, pattern=r"^/[A-Za-z0-9/_-]*[A-Za-z0-9_-]$")
    """Directory on the file system that holds the volumes: ``/training``, or ``/share/training`` on extreme NAS."""

    @property
    def volume_root(self) -> str:
        if self.base_path is not None:
            return self.base_path
        return f"{EXTREME_ROOT}/training" if self.file_system_type == "extreme" else "/training"

    @model_validator(mode="after")
    def _check(self) -> NasSpec:
        if (self.existing_file_system_id is None) != (self.existing_mount_target_domain is None):
            raise field_error(
                "existingMountTargetDomain",
                "adopting a file system needs both existingFileSystemId and existingMountTargetDomain",
            )
        if self.existing_file_system_id is not None:
            set_but_unused(self, ("storage_type", "capacity_gib", "zone_id"), "with an adopted file system")
        if self.file_system_type == "extreme":
            if not self.volume_root.startswith(EXTREME_ROOT + "/"):
                raise field_error(
                    "basePath",
                    f"{self.volume_root!r} is outside {EXTREME_ROOT}: extreme NAS exports only {EXTREME_ROOT} and below, "
                    f"e.g. '{EXTREME_ROOT}/training'",
                )
            if self.existing_file_system_id is None and self.storage_type not in ("standard", "advance"):
                raise field_error(
                    "storageType",
                    f"extreme file systems take storageType 'standard' or 'advance', not {self.storage_type!r}",
                )
            if self.capacity_gib is None and self.existing_file_system_id is None:
                raise field_error("capacityGib", "extreme file systems need capacityGib (at least 100)")
        else:
            set_but_unused(self, ("capacity_gib", "zone_id"), "on a standard file system (extreme only)")
        if (
            self.file_system_type == "standard"
            and self.existing_file_system_id is None
            and self.storage_type not in ("Performance", "Capacity", "Premium")
        ):
            raise field_error(
                "storageType",
                f"standard file systems take storageType 'Performance', 'Capacity' or 'Premium', not {self.storage_type!r}",
            )
        return self


class OssSpec(Spec):
    """A read-mostly dataset in an OSS bucket, mounted read-only (ossfs) as the data volume
    instead of a NAS claim. No AccessKey: the OSS CSI plugin reads the bucket as a RAM role
    it assumes through RRSA."""

    bucket: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
    """Bucket name."""
    path: str = Field(default="/", pattern=r"^/[A-Za-z0-9/_.-]*$")
    """Directory in the bucket holding the dataset."""
    endpoint: str | None = None
    """OSS endpoint; the region's internal one (``oss-<region>-internal.aliyuncs.com``) when unset."""
    role_name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9.-]{1,64}$")
    """RAM role the OSS CSI plugin assumes (RRSA) to read the bucket. Created, trusted by this cluster's OIDC
    provider for the plugin's service account and allowed to read only this bucket, when unset; required with an
    adopted cluster (set it up as docs/known-limits.md describes)."""


class StorageSpec(Spec):
    """Where datasets and checkpoints live: NAS on ACK, the cluster's own storage locally."""

    nas: NasSpec | None = None
    """NAS file system settings (ACK stacks)."""
    storage_class_name: DnsLabel = Field(default="nas-training")
    """StorageClass the shared volumes use; created for NAS, must already exist locally."""
    create_storage_class: bool = Field(default=True)
    """Create the NAS StorageClass (off: it exists already, e.g. on a local cluster)."""
    data: VolumeSpec = Field(default_factory=lambda: VolumeSpec(claimName="training-data", size="500Gi"))
    """Training data volume, mounted read-only in jobs."""
    output: VolumeSpec = Field(default_factory=lambda: VolumeSpec(claimName="training-output", size="1Ti"))
    """Checkpoints and final models."""
    access_mode: Literal["ReadWriteMany", "ReadWriteOnce"] = Field(default="ReadWriteMany")
    """NAS volumes are ``ReadWriteMany``; single-node local clusters may only offer ``ReadWriteOnce``."""
    oss: OssSpec | None = None
    """Serve the data volume from an OSS bucket instead of NAS (large read-mostly datasets)."""

    @model_validator(mode="after")
    def _check(self) -> StorageSpec:
        if self.data.claim_name == self.output.claim_name:
            raise field_error(
                "output.claimName",
                f"data and output volumes need different claim names, both are {self.data.claim_name!r}",
            )
        return self

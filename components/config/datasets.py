"""A dataset copied onto the data volume: from an HTTPS URL or an OSS bucket."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import Field, field_validator, model_validator

from .base import Cpu, DnsLabel, Quantity, Spec, field_error, set_but_unused
from .job_settings import check_image_choice
from .storage import OssSpec, StorageSpec

if TYPE_CHECKING:
    from collections.abc import Sequence

IMPORT_NAME_MAX = 50
"""The Job is ``import-<name>``; its pods add a suffix of their own, within 63 characters."""
DEFAULT_IMPORT_BACKOFF = 6
"""Retries of a failed transfer; each resumes where the last stopped."""
_OSS_URL = re.compile(r"^oss://(?P<bucket>[a-z0-9][a-z0-9-]{1,61}[a-z0-9])(?P<path>/[A-Za-z0-9/_.-]*)?$")


def oss_location(source: str) -> OssSpec | None:
    """The bucket and path of an ``oss://bucket/path`` source, or None for a URL."""
    match = _OSS_URL.match(source)
    if match is None:
        return None
    return OssSpec(bucket=match["bucket"], path=(match["path"] or "/").rstrip("/") or "/")


class DatasetImportSpec(Spec):
    """A one-shot copy of a dataset into ``<data volume>/<name>``, verified by the sha256 of
    every file against the ``SHA256SUMS`` at the source, resumed by retries, and refused
    when ``<name>`` already holds a different dataset (``trainer/dataset_import.py``)."""

    name: DnsLabel = Field(max_length=IMPORT_NAME_MAX)
    """The dataset's directory on the data volume; the Job is ``import-<name>``."""
    source: str
    """``https://host/path/`` (a directory holding ``SHA256SUMS``) or ``oss://bucket/path`` (read through the OSS
    CSI plugin as a RAM role assumed with RRSA: no AccessKey)."""
    oss_endpoint: str | None = None
    """OSS endpoint of an ``oss://`` source; the region's internal one when unset."""
    oss_role_name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9.-]{1,64}$")
    """RAM role the OSS CSI plugin reads an ``oss://`` source as; required in the stack's ``datasets``, and the role
    the ``DatasetImport`` component is given when unset."""
    team: DnsLabel | None = None
    """Team whose data volume receives the dataset (in the stack's ``datasets``): its namespace, and its uid owns
    the files. ``training.namespace``'s data volume when unset."""
    image: str | None = None
    """Full reference of an image holding ``trainer/`` (the training image), pinned by tag or digest."""
    image_tag: str | None = None
    """Tag of the training image in the platform's registry repository (instead of ``image``)."""
    backoff_limit: int = Field(default=DEFAULT_IMPORT_BACKOFF, ge=0, le=100)
    """Failed attempts (transfer errors, checksum mismatches) retried before the Job fails."""
    cpu: Cpu = Field(default="1")
    """CPU request and limit (hashing runs at a few hundred MB/s per core)."""
    memory: Quantity = Field(default="1Gi")
    """Memory request and limit; the copy streams in 1 MiB pieces."""

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if value.startswith("https://") and len(value) > len("https://"):
            return value
        if oss_location(value) is not None:
            return value
        raise ValueError(
            f"{value!r} is not an https:// URL or oss://bucket/path (plain http:// is refused: "
            "the checksum list must not be alterable in transit)"
        )

    @model_validator(mode="after")
    def _check(self) -> DatasetImportSpec:
        if self.oss is None:
            set_but_unused(self, ("oss_endpoint", "oss_role_name"), "with an https:// source")
        check_image_choice(self.image, self.image_tag)
        return self

    @property
    def oss(self) -> OssSpec | None:
        """The source bucket and path, with this import's endpoint and role, or None."""
        location = oss_location(self.source)
        if location is None:
            return None
        return location.model_copy(update={"endpoint": self.oss_endpoint, "role_name": self.oss_role_name})


def check_datasets(
    datasets: Sequence[DatasetImportSpec], *, teams: Sequence[str], storage: StorageSpec, registry: bool, local: bool
) -> None:
    """The rules between ``datasets`` and the rest of the platform: unique names, a declared team
    (one of ``teams``' names), and :func:`check_dataset`'s."""
    names = [dataset.name for dataset in datasets]
    teams = list(teams)
    for i, dataset in enumerate(datasets):
        key = f"datasets[{i}]"
        if dataset.name in names[:i]:
            raise field_error(f"{key}.name", f"dataset name {dataset.name!r} is used twice")
        if dataset.team is not None and dataset.team not in teams:
            raise field_error(
                f"{key}.team",
                f"{dataset.team!r} is not a team of this stack: use one of {teams or 'none declared (teams)'}, "
                "or drop team for training.namespace's data volume",
            )
        check_dataset(dataset, key, storage=storage, registry=registry, local=local)


def check_dataset(dataset: DatasetImportSpec, key: str, *, storage: StorageSpec, registry: bool, local: bool) -> None:
    """What an import at ``key`` needs from where it runs: a data volume it can write, a registry
    for ``imageTag``, and for an ``oss://`` source the OSS CSI plugin and a RAM role."""
    if storage.oss is not None:
        raise field_error(
            f"{key}.source",
            "the data volume is the read-only OSS bucket of storage.oss, which an import cannot write: "
            "read the dataset from that bucket, or drop storage.oss",
        )
    if dataset.image_tag is not None and not registry:
        raise field_error(
            f"{key}.imageTag", "imageTag needs a registry; without one give a full image reference in image"
        )
    if dataset.oss is not None and local:
        raise field_error(
            f"{key}.source",
            "a local cluster has no OSS CSI plugin to read an oss:// source: give an https:// source",
        )
    if dataset.oss is not None and dataset.oss_role_name is None:
        raise field_error(
            f"{key}.ossRoleName",
            "an oss:// source is read as a RAM role through RRSA: name the role (trusted for service account "
            "ack-csi-fuse/csi-fuse-ossfs, allowed to read the bucket; components.identity.dataset_reader_role "
            "creates one)",
        )

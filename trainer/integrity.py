"""Loading a checkpoint from shared storage so that nothing in its bytes can run, and
only when its files are the ones that were written.

Whoever can write to the output volume writes the checkpoint, so every byte of it is
treated as hostile:

- DCP's ``.metadata`` is a pickle. It is read by an unpickler that resolves only the exact
  ``(module, name)`` pairs a checkpoint of tensors needs, from objects imported here (no
  lookup by name, so no dotted path such as ``os.system`` reaches anything), and that
  refuses to set attributes on a class, so it cannot change the allowed classes either.
  The result must then be checkpoint metadata whose entries are all tensors, stored in
  files of the checkpoint's own directory.
- DCP stores anything but a tensor as "bytes", which its default planner reads with
  ``torch.load(weights_only=False)`` (torch 2.13 ``distributed/checkpoint/
  default_planner.py``, ``DefaultLoadPlanner.load_bytes``): the metadata, which the
  writer of the checkpoint chooses, decides what is read that way. A checkpoint of this
  trainer holds tensors only, so byte entries are refused in the metadata and again by
  the load planner. Tensors are read with ``weights_only=True`` (``FileSystemReader.
  read_data`` in ``distributed/checkpoint/filesystem.py``).
- The commit record lists the sha256 of every file of the checkpoint; a file that no
  longer matches is refused, naming it, before any of its bytes are used.
- With a key (``--checkpoint-key-file``), the record carries an HMAC-SHA256 of itself
  under that key, and only records signed with it are resumed: then whoever can write the
  volume but not read the key cannot make the job load anything it did not write.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import pathlib
import pickle
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import (
    _MEM_FORMAT_ENCODING,
    ChunkStorageMetadata,
    Metadata,
    MetadataIndex,
    StorageMeta,
    TensorProperties,
    TensorStorageMetadata,
)
from torch.distributed.checkpoint.planner import LoadPlan, LoadPlanner, ReadItem
from torch.serialization import _get_layout

from .config import UsageError

MARKER = "commit.json"
METADATA = ".metadata"
DIGESTS = "files"
"""The commit record's key for ``{file name: sha256}`` of every other file of the checkpoint."""


SIGNATURE = "hmac"
"""The commit record's key for its HMAC-SHA256 (hex) under the job's key, over the rest of
the record as sorted, compact JSON."""


class CheckpointError(ValueError):
    """A checkpoint directory that cannot be resumed (uncommitted, torn, unreadable or
    holding something other than tensors)."""


class IntegrityError(Exception):
    """A file of a committed checkpoint differs from what its commit record says was
    written: corruption or tampering, which no retry and no older view can mend."""


def _allowed(*objects: Any) -> dict[tuple[str, str], Any]:
    return {(obj.__module__, obj.__qualname__): obj for obj in objects}


_ALLOWED = _allowed(
    Metadata,
    MetadataIndex,
    TensorStorageMetadata,
    TensorProperties,
    ChunkStorageMetadata,
    StorageMeta,
    _MEM_FORMAT_ENCODING,
    _StorageInfo,
    torch.Size,
    _get_layout,
    pathlib.PosixPath,
)
_ALLOWED.update({("torch", name): value for name, value in vars(torch).items() if isinstance(value, torch.dtype)})


class _MetadataUnpickler(pickle._Unpickler):
    """Unpickles DCP metadata and nothing else.

    The pure-Python unpickler, like torch's own ``weights_only`` one, because the C one
    offers no hook on BUILD, through which a pickle can set attributes on a class it named.
    """

    dispatch = dict(pickle._Unpickler.dispatch)

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[module, name]
        except KeyError:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in checkpoint metadata") from None

    def _load_build(self) -> None:
        if isinstance(self.stack[-2], type):
            raise pickle.UnpicklingError(f"setting attributes of class {self.stack[-2].__name__}")
        super().load_build()

    dispatch[pickle.BUILD[0]] = _load_build


def _check_entries(metadata: Metadata) -> None:
    """Every entry a tensor, stored in a plain file of the checkpoint's own directory."""
    for fqn, entry in metadata.state_dict_metadata.items():
        if type(entry) is not TensorStorageMetadata:
            raise CheckpointError(f"{METADATA}: {fqn} is a {type(entry).__name__}, not a tensor")
    if not isinstance(metadata.storage_data, dict):
        raise CheckpointError(f"{METADATA}: no storage table")
    for index, info in metadata.storage_data.items():
        if type(index) is not MetadataIndex or type(info) is not _StorageInfo:
            raise CheckpointError(f"{METADATA}: a storage entry of {type(info).__name__}")
        name = info.relative_path
        if not isinstance(name, str) or name != Path(name).name or name in ("", ".", "..", MARKER, METADATA):
            raise CheckpointError(f"{METADATA}: {index.fqn} is stored in {name!r}, outside the checkpoint's files")
        if not all(type(n) is int and n >= 0 for n in (info.offset, info.length)):
            raise CheckpointError(f"{METADATA}: {index.fqn} is at offset {info.offset!r}, length {info.length!r}")
        if info.transform_descriptors:
            raise CheckpointError(f"{METADATA}: {index.fqn} is stored through {info.transform_descriptors!r}")


def read_metadata(path: Path) -> Metadata:
    """DCP's metadata of the checkpoint at ``path``, read so that nothing in it can run.

    Raises:
        CheckpointError: the file is missing or holds anything but the metadata of a
            checkpoint of tensors.
    """
    try:
        raw = (path / METADATA).read_bytes()
    except OSError as err:
        raise CheckpointError(f"{METADATA}: {err.strerror}") from None
    try:
        metadata = _MetadataUnpickler(io.BytesIO(raw)).load()
    except Exception as err:  # noqa: BLE001 - a malformed pickle fails in any of many ways; each is a refusal
        raise CheckpointError(f"{METADATA}: {err}") from None
    if type(metadata) is not Metadata or not isinstance(metadata.state_dict_metadata, dict):
        raise CheckpointError(f"{METADATA} holds a {type(metadata).__name__}, not checkpoint metadata")
    _check_entries(metadata)
    return metadata


def file_digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_digests(path: Path) -> dict[str, str]:
    """The sha256 of every file of the checkpoint at ``path`` but its commit record."""
    return {f.name: file_digest(f) for f in sorted(path.iterdir()) if f.is_file() and f.name != MARKER}


def check_file(path: Path, name: str, digests: dict[str, str]) -> None:
    """Raises IntegrityError unless ``path/name`` is the file the commit record lists."""
    recorded = digests.get(name)
    if recorded is None:
        raise IntegrityError(f"checkpoint {path}: {path.name}/{name} is not among the files {MARKER} lists")
    found = file_digest(path / name)
    if found != recorded:
        raise IntegrityError(
            f"checkpoint {path}: {path.name}/{name} does not match its sha256 in {MARKER} "
            f"(recorded {recorded[:16]}…, found {found[:16]}…): it changed after the checkpoint was "
            "committed; restore the file or remove the checkpoint"
        )


class SafeReader(FileSystemReader):
    """DCP's file reader that checks each file against the commit record before using it,
    and unpickles the metadata with :func:`read_metadata`.

    ``read_metadata`` deliberately takes no ``rank`` keyword: with one, DCP falls back to
    per-rank metadata files when the global one is missing and stops using collectives on
    that rank alone, which leaves the other ranks waiting in a collective.

    Args:
        path: the checkpoint directory.
        digests: the commit record's sha256 of every file (checked by ``verify`` to cover
            every file the metadata names); None for a record of an earlier trainer, which
            has none, whose files are then read unchecked.
    """

    def __init__(self, path: Path, digests: dict[str, str] | None):
        super().__init__(path)
        self.digests = digests

    def _check(self, name: str) -> None:
        if self.digests is not None:
            check_file(Path(self.path), name, self.digests)

    def read_metadata(self) -> Metadata:  # type: ignore[override]
        self._check(METADATA)
        metadata = read_metadata(Path(self.path))
        if metadata.storage_meta is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata

    def read_data(self, plan: LoadPlan, planner: LoadPlanner):  # type: ignore[override]
        for name in sorted({self.storage_data[item.storage_index].relative_path for item in plan.items}):
            self._check(name)
        return super().read_data(plan, planner)


class TensorOnlyLoadPlanner(DefaultLoadPlanner):
    """DCP's default load planner, except that it never unpickles an entry's bytes."""

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        raise CheckpointError(f"{read_item.dest_index.fqn} is stored as bytes, which only a pickle can read")


def read_key(path: str | None) -> bytes | None:
    """The job's checkpoint key: the bytes of the file at ``path``, or None without one.

    Raises:
        UsageError: the file cannot be read or is empty.
    """
    if path is None:
        return None
    try:
        key = Path(path).read_bytes()
    except OSError as err:
        raise UsageError(f"--checkpoint-key-file {path}: {err.strerror}") from None
    if not key.strip():
        raise UsageError(f"--checkpoint-key-file {path}: empty; it must hold the job's secret key")
    return key


def sign(record: dict[str, Any], key: bytes) -> str:
    """The HMAC-SHA256 of ``record`` (its signature left out) under ``key``."""
    unsigned = {k: v for k, v in record.items() if k != SIGNATURE}
    payload = json.dumps(unsigned, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def check_signature(record: dict[str, Any], key: bytes) -> None:
    """Raises CheckpointError unless ``record`` is signed with ``key``."""
    signature = record.get(SIGNATURE)
    if not isinstance(signature, str) or not hmac.compare_digest(signature, sign(record, key)):
        raise CheckpointError(f"{MARKER} is not signed with this job's --checkpoint-key-file")

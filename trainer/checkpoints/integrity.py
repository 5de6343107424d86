"""Loading a checkpoint from shared storage so that nothing in its bytes can run, and
only when its files are the ones that were written.

Whoever can write to the output volume writes the checkpoint, so every byte of it is
treated as hostile:

- DCP's ``.metadata`` is a pickle. It is read by an unpickler that resolves only the exact
  ``(module, name)`` pairs a checkpoint of tensors needs, from objects imported here (no
  lookup by name, so no dotted path such as ``os.system`` reaches anything), and that sets
  the state (``BUILD``) only of an instance it has just created itself: never of a class,
  nor of a shared object an allowed call returns (``_MEM_FORMAT_ENCODING(0)`` is torch's own
  enum member, which a rewritten ``__dict__`` would corrupt for the rest of the process, and
  every checkpoint it then writes). The result must then be checkpoint metadata whose
  entries are all tensors, stored in files of the checkpoint's own directory.
- DCP stores anything but a tensor as "bytes", which its default planner reads with
  ``torch.load(weights_only=False)`` (torch 2.13 ``distributed/checkpoint/
  default_planner.py``, ``DefaultLoadPlanner.load_bytes``): the metadata, which the
  writer of the checkpoint chooses, decides what is read that way. A checkpoint of this
  trainer holds tensors only, so byte entries are refused in the metadata and again by
  the load planner. Tensors are read with ``weights_only=True`` (``FileSystemReader.
  read_data`` in ``distributed/checkpoint/filesystem.py``).
- The commit record lists the sha256 of every file of the checkpoint. Each file is read
  once, into memory, and those bytes are hashed and then parsed: nothing opens a file by
  its path a second time, so a file swapped or rewritten after its check is never what is
  parsed. ``.metadata`` is checked before it is unpickled; every shard file a rank needs
  is checked before any rank parses any of them (in DCP's planning step, whose failures
  every rank sees), so a damaged checkpoint leaves the live tensors untouched.
- Each tensor record of a ``.distcp`` is a ``torch.save`` zip archive; one whose members
  are compressed (which ``torch.load`` would inflate to any size) or hold more bytes than
  the metadata's chunk of that tensor is refused before ``torch.load`` sees it.
- With a key (``--checkpoint-key-file``), the record carries an HMAC-SHA256 of itself
  under that key, and only records signed with it are resumed: then whoever can write the
  volume but not read the key cannot make the job load anything it did not write.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import io
import json
import pathlib
import pickle
from pathlib import Path
from typing import Any

import torch
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
from torch.serialization import _get_layout

from ..config import UsageError

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
    written: corruption, or tampering when the record is signed; no retry mends it."""


TAMPERED = 74
"""The exit status of every rank when a file of a checkpoint whose commit record the job's
key signed does not match it (74, EBADMSG's number: a message that fails its check). Like
every status of 1-127 it fails the job rather than retry (see :mod:`trainer.exit_codes`)."""


class TamperedCheckpoint(Exception):
    """A signed checkpoint whose files are not the ones it lists: someone without the key
    changed them. The run stops rather than fall back to an older checkpoint, which is
    what such a writer could want."""


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
    offers no hook on BUILD. BUILD sets an object's state; it is allowed once on each
    instance that NEWOBJ has just created with ``object.__new__`` (DCP's metadata
    dataclasses: a real ``.metadata`` builds nothing else), and on nothing else: not a class
    it named, and not what a call returned, which can be an object the whole process shares
    (an enum's ``__new__`` returns its existing member).
    """

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file: io.BytesIO):
        super().__init__(file)
        self.unbuilt: dict[int, Any] = {}

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[module, name]
        except KeyError:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in checkpoint metadata") from None

    def _created(self) -> None:
        obj = self.stack[-1]
        if type(obj).__new__ is object.__new__:
            self.unbuilt[id(obj)] = obj

    def _load_newobj(self) -> None:
        super().load_newobj()
        self._created()

    def _load_newobj_ex(self) -> None:
        super().load_newobj_ex()
        self._created()

    def _load_build(self) -> None:
        target, state = self.stack[-2], self.stack[-1]
        what = f"class {target.__name__}" if isinstance(target, type) else f"a {type(target).__name__}"
        if self.unbuilt.pop(id(target), None) is not target:
            raise pickle.UnpicklingError(f"setting the state of {what}, which the metadata did not just create")
        # Without __setstate__ a dict state goes into __dict__; only the dataclass's own fields.
        if getattr(target, "__setstate__", None) is None:
            names = {f.name for f in dataclasses.fields(target)} if dataclasses.is_dataclass(target) else set()
            if not isinstance(state, dict) or not set(state) <= names:
                raise pickle.UnpicklingError(f"a state of {what} other than its fields")
        super().load_build()

    dispatch[pickle.NEWOBJ[0]] = _load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = _load_newobj_ex
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


def read_verified(path: Path, name: str, digests: dict[str, str] | None) -> bytes:
    """The bytes of ``path/name``, read once and checked against the commit record's
    ``digests`` (None: a record of an earlier trainer, which has none). The caller parses
    these bytes, never the file again: whatever replaces it afterwards is not used.

    Raises:
        CheckpointError: the file cannot be read.
        IntegrityError: the file is not the one the record lists.
    """
    if digests is not None and name not in digests:
        raise IntegrityError(f"checkpoint {path}: {path.name}/{name} is not among the files {MARKER} lists")
    try:
        raw = (path / name).read_bytes()
    except OSError as err:
        raise CheckpointError(f"{name}: {err.strerror}") from None
    if digests is not None:
        found = hashlib.sha256(raw).hexdigest()
        if not hmac.compare_digest(found, digests[name]):
            raise IntegrityError(
                f"checkpoint {path}: {path.name}/{name} does not match its sha256 in {MARKER} "
                f"(recorded {digests[name][:16]}…, found {found[:16]}…): it changed after the checkpoint was committed"
            )
    return raw


def read_metadata(path: Path, digests: dict[str, str] | None = None) -> Metadata:
    """DCP's metadata of the checkpoint at ``path``, read so that nothing in it can run, and
    checked against the commit record's ``digests`` (when given) before it is unpickled.

    Raises:
        CheckpointError: the file is missing or holds anything but the metadata of a
            checkpoint of tensors.
        IntegrityError: the file is not the one the commit record lists.
    """
    raw = read_verified(path, METADATA, digests)
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


def check_files(path: Path, digests: dict[str, str]) -> None:
    """Raises IntegrityError unless every file the commit record lists is as it was written."""
    for name, recorded in digests.items():
        try:
            found = file_digest(path / name)
        except OSError as err:
            raise IntegrityError(f"checkpoint {path}: {path.name}/{name}: {err.strerror}") from None
        if found != recorded:
            raise IntegrityError(f"checkpoint {path}: {path.name}/{name} does not match its sha256 in {MARKER}")


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

"""DCP's reader for checkpoints from shared storage: it parses only bytes that were read
once and checked against the commit record, and only tensor records as this trainer
writes them (:mod:`trainer.checkpoints.integrity` says why each check is there)."""

from __future__ import annotations

import io
import math
import os
import zipfile
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import IO, Any

from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.filesystem import FileSystem, _StorageInfo
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
from torch.distributed.checkpoint.planner import LoadPlan, LoadPlanner, ReadItem

from .integrity import METADATA, CheckpointError, IntegrityError, read_metadata, read_verified


def _record_limits(metadata: Metadata) -> dict[int, tuple[str, int]]:
    """For each storage entry (by ``id``): its tensor's name and the bytes its chunk holds."""
    limits = {}
    for index, info in metadata.storage_data.items():
        entry = metadata.state_dict_metadata.get(index.fqn)
        chunk = next((c for c in entry.chunks if c.offsets == index.offset), None) if entry is not None else None
        if chunk is None:
            raise CheckpointError(f"{METADATA}: {index.fqn} has no chunk at offset {tuple(index.offset or ())}")
        limits[id(info)] = (index.fqn, math.prod(chunk.sizes) * entry.properties.dtype.itemsize)
    return limits


def check_records(raw: bytes, where: str, limit: int) -> None:
    """Refuse a tensor record (a ``torch.save`` zip archive) that is not as this trainer
    writes it: members stored as they are, none reaching past the record, and no more
    tensor data than ``limit`` bytes, the size of the tensor's chunk in the metadata.

    Raises:
        CheckpointError: naming the record and what is wrong with it.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            members = archive.infolist()
    except Exception as err:  # noqa: BLE001 - a malformed archive fails in any of many ways; each is a refusal
        raise CheckpointError(f"{where} is not a tensor record ({err})") from None
    data = 0
    for member in members:
        if member.compress_type != zipfile.ZIP_STORED:
            raise CheckpointError(
                f"{where}: {member.filename} is compressed (zip method {member.compress_type}), which loading "
                "would inflate to any size; this trainer stores records as they are"
            )
        if member.file_size != member.compress_size or member.header_offset + member.file_size > len(raw):
            raise CheckpointError(f"{where}: {member.filename} declares {member.file_size} bytes, past its record")
        if PurePosixPath(member.filename).parent.name == "data":
            data += member.file_size
    if data > limit:
        raise CheckpointError(f"{where} holds {data} bytes of tensor data, the metadata's chunk {limit}")


class _VerifiedFiles(FileSystem):
    """DCP's file access for reading, serving only bytes read and checked already: DCP's
    reader opens each file by its path (torch 2.13 ``distributed/checkpoint/filesystem.py``,
    ``FileSystemReader.read_data``), which would read whatever is there by then."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files

    @contextmanager
    def create_stream(self, path: str | os.PathLike, mode: str) -> Generator[io.IOBase, None, None]:
        name = Path(path).name
        if mode != "rb" or name not in self.files:
            raise CheckpointError(f"{name} was not checked before reading")
        yield io.BytesIO(self.files[name])


class SafeReader(FileSystemReader):
    """DCP's file reader that parses only bytes checked against the commit record, and
    unpickles the metadata with :func:`read_metadata`.

    ``read_metadata`` deliberately takes no ``rank`` keyword: with one, DCP falls back to
    per-rank metadata files when the global one is missing and stops using collectives on
    that rank alone, which leaves the other ranks waiting in a collective.

    Every file a rank's plan needs is read, and it and each of its records checked, in
    :meth:`prepare_local_plan`, which DCP runs on every rank before any rank reads data
    (torch 2.13 ``distributed/checkpoint/state_dict_loader.py``, ``_load_state_dict``: the
    local plans are gathered, with every rank's failure, before ``read_data``); the bytes
    are held in memory until :meth:`read_data` has parsed them, so a rank's resume takes
    host memory for the files it reads.

    Args:
        path: the checkpoint directory.
        digests: the commit record's sha256 of every file (checked by ``verify`` to cover
            every file the metadata names); None for a record of an earlier trainer, which
            has none, whose files are then read unchecked.
    """

    def __init__(self, path: Path, digests: dict[str, str] | None):
        super().__init__(path)
        self.digests = digests
        self.verified: dict[str, bytes] = {}
        self.fs = _VerifiedFiles(self.verified)
        self.limits: dict[int, tuple[str, int]] = {}
        self.changed: IntegrityError | None = None

    def read_metadata(self) -> Metadata:  # type: ignore[override]
        try:
            metadata = read_metadata(Path(self.path), self.digests)
        except IntegrityError as err:
            # DCP turns a failure here into an AssertionError that only names it (torch 2.13
            # ``state_dict_loader.py``, ``_load_state_dict``'s ``local_step``), and a changed
            # .metadata would then read as a checkpoint that fails to load, not one that was
            # changed: it is raised as it is from the next step, whose failures DCP keeps.
            self.changed = err
            metadata = Metadata(state_dict_metadata={}, storage_data={})
        if metadata.storage_meta is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        if self.changed is not None:
            raise self.changed
        super().set_up_storage_reader(metadata, is_coordinator, *args, **kwargs)
        self.limits = _record_limits(metadata)

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        for item in plan.items:
            info = self.storage_data[item.storage_index]
            name = info.relative_path
            if name not in self.verified:
                self.verified[name] = read_verified(Path(self.path), name, self.digests)
            fqn, limit = self.limits[id(info)]
            raw = self.verified[name][info.offset : info.offset + info.length]
            where = f"{name}: the record of {fqn}"
            if len(raw) != info.length:
                raise CheckpointError(f"{where} ends {info.length - len(raw)} bytes short")
            check_records(raw, where, limit)
        return plan

    def read_data(self, plan: LoadPlan, planner: LoadPlanner):  # type: ignore[override]
        try:
            return super().read_data(plan, planner)
        finally:
            self.verified.clear()

    def _slice_file(self, file: io.BytesIO, sinfo: _StorageInfo) -> IO[bytes]:
        file.seek(sinfo.offset)
        return io.BytesIO(file.read(sinfo.length))


class TensorOnlyLoadPlanner(DefaultLoadPlanner):
    """DCP's default load planner, except that it never unpickles an entry's bytes."""

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        raise CheckpointError(f"{read_item.dest_index.fqn} is stored as bytes, which only a pickle can read")

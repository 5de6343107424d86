"""DCP's file writer that digests each file as it writes it.

A commit record lists the sha256 of every file of the checkpoint. Hashing them on rank 0
after the save means reading the whole checkpoint back on one core, on the training thread:
at about 1 GB/s, most of a preemption's grace period for a 7B model and more than a
collective's timeout for a 70B one. Instead each rank hashes the bytes of its own files as
they go to storage, and the digests reach rank 0 with DCP's own gathering of the ranks'
write results, which rank 0 needs anyway to write ``.metadata``: a few dozen bytes per file.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.filesystem import FileSystem
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex
from torch.distributed.checkpoint.planner import SavePlan, SavePlanner
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from .integrity import METADATA

DIGEST_ENTRY = "__sha256__/"
"""The name prefix of the write results that carry a file's digest to rank 0; rank 0 takes
them out before DCP records the results in ``.metadata``."""


class _Digesting:
    """A write stream that hashes what it passes on. DCP writes each file front to back
    (torch 2.13 ``distributed/checkpoint/filesystem.py``, ``_write_files_from_queue`` and
    ``_write_item``, through ``torch.save``, which only appends); a seek would make the
    digest wrong, so it fails the save instead."""

    def __init__(self, stream: io.IOBase):
        self.stream = stream
        self.sha256 = hashlib.sha256()

    def write(self, data: Any) -> int:
        self.sha256.update(data)
        return self.stream.write(data)

    def seek(self, *args: Any) -> int:
        raise io.UnsupportedOperation("a checkpoint file is digested as written, front to back")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class _DigestingFiles(FileSystem):
    """DCP's file access, recording the sha256 of each file written, by its final name."""

    def __init__(self) -> None:
        self.digests: dict[str, str] = {}

    @contextmanager
    def create_stream(self, path: str | os.PathLike, mode: str) -> Generator[io.IOBase, None, None]:
        with super().create_stream(path, mode) as stream:
            if "w" not in mode:
                yield stream
                return
            digesting = _Digesting(stream)
            yield digesting  # type: ignore[misc]
            self.digests[Path(path).name] = digesting.sha256.hexdigest()

    def rename(self, path: str | os.PathLike, new_path: str | os.PathLike) -> None:
        super().rename(path, new_path)
        self.digests[Path(new_path).name] = self.digests.pop(Path(path).name)


class DigestingWriter(FileSystemWriter):
    """:class:`FileSystemWriter` whose ranks digest their own files as they write them.

    Attributes:
        digests: on rank 0 once the save has finished, the sha256 of every file of the
            checkpoint, ``.metadata`` included; empty on the other ranks.
    """

    def __init__(self, path: Path):
        super().__init__(path)
        self.fs = _DigestingFiles()
        self.digests: dict[str, str] = {}

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        written = super().write_data(plan, planner).wait()
        carried = [
            WriteResult(index=MetadataIndex(DIGEST_ENTRY + name), size_in_bytes=0, storage_data=digest)
            for name, digest in sorted(self.fs.digests.items())
        ]
        future: Future[list[WriteResult]] = Future()
        future.set_result(written + carried)
        return future

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        def carries(result: WriteResult) -> bool:
            return result.index.fqn.startswith(DIGEST_ENTRY)

        for rank_results in results:
            for result in filter(carries, rank_results):
                self.digests[result.index.fqn.removeprefix(DIGEST_ENTRY)] = result.storage_data
        super().finish(metadata, [[r for r in rank_results if not carries(r)] for rank_results in results])
        self.digests[METADATA] = self.fs.digests[METADATA]

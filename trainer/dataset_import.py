"""Copy a dataset onto the data volume: resumable, verified by sha256, never over another.

Runs in the dataset-import Job (:func:`components.manifests.dataset_import.import_job`) in
the training image, which is why it lives here and imports neither torch nor Pulumi::

    python -m trainer.dataset_import --name wiki --source https://example.com/wiki/ --dest /mnt/data
    python -m trainer.dataset_import --name wiki --source /mnt/source --dest /mnt/data

A dataset is a directory whose ``SHA256SUMS`` (``sha256sum``'s format: ``<hex>  <path>``
per line; ``prepare`` writes one) lists its files. The source is an HTTP(S) base URL or a
mounted directory (an OSS bucket through the OSS CSI plugin). Each file is downloaded to
``.import/<path>.part``, hashed as it streams, and renamed into ``<dest>/<name>/<path>``
only when its sha256 matches; the marker ``<dest>/<name>/.dataset.json`` records the
source, the digest of its ``SHA256SUMS`` and each file done (size and sha256), so a rerun
skips the files done whose size on disk still matches and refuses a directory holding a
different dataset. Progress goes to stdout, a line per file and every 10% of a large one.

Exit statuses: 0 imported, 1 a transfer or checksum failure (the Job retries), 2 a refusal
or bad input (retrying cannot help).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from hashlib import sha256
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from .console import error, log

CHECKSUMS = "SHA256SUMS"
MARKER = ".dataset.json"
PARTIAL = ".import"
CHUNK = 1 << 20
PROGRESS_STEP = 10
"""A large file logs its progress every this many percent."""
LARGE = 64 << 20
"""Files from this size up log their progress inside the file, not only at its end."""
TIMEOUT_S = 60
"""Per read on an HTTP source: a stalled server fails the attempt and the Job retries."""


class Refused(Exception):
    """Bad input, or the destination holds something else: exit 2."""


class TransferError(Exception):
    """A download failed or a file does not match its checksum: exit 1 (retryable)."""


def parse_checksums(text: str, source: str) -> list[tuple[str, str]]:
    """``(sha256, relative path)`` per line of a ``SHA256SUMS``.

    Raises:
        Refused: a malformed line, or a path that leaves the dataset's directory.
    """
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        digest, sep, name = line.partition("  ")
        name = name.removeprefix("*").strip() if sep else ""
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest.lower()) or not name:
            raise Refused(f"{source}{CHECKSUMS} line {number}: expected '<sha256>  <path>', got {line[:80]!r}")
        path = PurePosixPath(name.removeprefix("./"))
        if path.is_absolute() or ".." in path.parts or path.parts[0] in (PARTIAL, MARKER):
            raise Refused(f"{source}{CHECKSUMS} line {number}: {name!r} is not a path inside the dataset")
        entries.append((digest.lower(), str(path)))
    if not entries:
        raise Refused(f"{source}{CHECKSUMS} lists no files")
    return entries


class Source:
    """Where the files come from: an HTTP(S) base URL or a local (mounted) directory."""

    def __init__(self, location: str):
        self.location = location
        self.remote = location.startswith(("https://", "http://"))
        if self.remote and not location.endswith("/"):
            self.location = location + "/"
        if not self.remote and not Path(location).is_dir():
            raise Refused(f"--source {location}: not an http(s):// URL or a directory")

    @contextmanager
    def open(self, name: str) -> Iterator[tuple[BinaryIO, int | None]]:
        """The file ``name`` of the dataset and its size when known."""
        if not self.remote:
            path = Path(self.location) / name
            try:
                with open(path, "rb") as f:
                    yield f, path.stat().st_size
            except FileNotFoundError:
                raise TransferError(f"{path}: no such file in the source") from None
            return
        url = self.location + urllib.parse.quote(name)
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                length = response.headers.get("Content-Length")
                yield response, int(length) if length else None
        except (urllib.error.URLError, OSError) as err:
            raise TransferError(f"{url}: {getattr(err, 'reason', err)}") from None

    def read_text(self, name: str) -> str:
        with self.open(name) as (f, _):
            return f.read().decode("utf-8")


def read_marker(directory: Path) -> dict | None:
    try:
        return json.loads((directory / MARKER).read_text())
    except FileNotFoundError:
        return None
    except ValueError:
        raise Refused(f"{directory / MARKER} is not JSON: delete the directory and import again") from None


def write_marker(directory: Path, marker: dict) -> None:
    tmp = directory / f"{MARKER}.tmp"
    tmp.write_text(json.dumps(marker, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, directory / MARKER)


def claim(directory: Path, source: str, digest: str) -> dict:
    """The marker of ``directory`` for this import: the existing one when it is the same
    dataset (a resume), a new one when the directory is new or empty.

    Raises:
        Refused: the directory holds another dataset, or files no import put there.
    """
    marker = read_marker(directory)
    if marker is not None:
        if (marker.get("source"), marker.get("digest")) != (source, digest):
            raise Refused(
                f"{directory} holds another dataset (from {marker.get('source')}, {CHECKSUMS} sha256 "
                f"{marker.get('digest')}): import under another --name, or delete it first"
            )
        return marker
    if directory.exists() and any(directory.iterdir()):
        raise Refused(f"{directory} exists and holds files that no import wrote: import under another --name")
    directory.mkdir(parents=True, exist_ok=True)
    marker = {"source": source, "digest": digest, "complete": False, "files": {}}
    write_marker(directory, marker)
    return marker


def run(name: str, location: str, dest: Path, out=print) -> int:
    """Import ``location`` as ``dest/name``; the number of files copied (not skipped).

    Raises:
        Refused: bad input, or ``dest/name`` holds another dataset.
        TransferError: a file could not be fetched or failed its checksum.
    """
    source = Source(location)
    text = source.read_text(CHECKSUMS)
    digest = sha256(text.encode()).hexdigest()
    entries = parse_checksums(text, source.location.rstrip("/") + "/")
    directory = dest / name
    marker = claim(directory, source.location, digest)
    total = len(entries)
    copied = 0
    for i, (expected, rel) in enumerate(entries, 1):
        target = directory / rel
        done = marker["files"].get(rel)
        if done and done["sha256"] == expected and target.is_file() and target.stat().st_size == done["size"]:
            out(f"[{i}/{total}] {rel}: already complete ({done['size']} bytes)")
            continue
        size = fetch_file(source, rel, expected, directory, out, f"[{i}/{total}] {rel}")
        marker["files"][rel] = {"size": size, "sha256": expected}
        write_marker(directory, marker)
        copied += 1
    # The list the files were verified against stays with them (and the trainer ignores it).
    (directory / CHECKSUMS).write_text(text)
    marker["complete"] = True
    write_marker(directory, marker)
    shutil.rmtree(directory / PARTIAL, ignore_errors=True)
    return copied


def fetch_file(source: Source, rel: str, expected: str, directory: Path, out, label: str) -> int:
    """Stream ``rel`` into ``directory/.import/<rel>.part``, hash it on the way, and rename
    it into place only when its sha256 is ``expected``; its size.

    Raises:
        TransferError: the transfer failed or the sha256 differs (the ``.part`` is removed).
    """
    partial = directory / PARTIAL / f"{rel}.part"
    target = directory / rel
    partial.parent.mkdir(parents=True, exist_ok=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = sha256()
    size = 0
    shown = 0
    with source.open(rel) as (src, length), open(partial, "wb") as dst:
        try:
            while block := src.read(CHUNK):
                digest.update(block)
                dst.write(block)
                size += len(block)
                if length and length >= LARGE and (percent := size * 100 // length) >= shown + PROGRESS_STEP:
                    shown = percent - percent % PROGRESS_STEP
                    out(f"{label}: {shown}% of {length} bytes")
        except OSError as err:
            partial.unlink(missing_ok=True)
            raise TransferError(f"{label}: {err}") from None
        dst.flush()
        os.fsync(dst.fileno())
    if digest.hexdigest() != expected:
        partial.unlink()
        raise TransferError(
            f"{label}: sha256 {digest.hexdigest()} is not the {expected} that {CHECKSUMS} lists "
            "(corrupt at the source or in transit); nothing was written under its name"
        )
    os.replace(partial, target)
    out(f"{label}: copied {size} bytes, sha256 verified")
    return size


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trainer.dataset_import", description=__doc__.split("\n\n")[0])
    p.add_argument("--name", required=True, help="the dataset's directory under --dest")
    p.add_argument("--source", required=True, help="http(s):// base URL or a directory, holding SHA256SUMS")
    p.add_argument("--dest", required=True, type=Path, help="the data volume's mount point")
    args = p.parse_args(argv)
    if not args.name or "/" in args.name or args.name.startswith("."):
        p.error(f"--name {args.name!r}: give a plain directory name, not a path")
    try:
        copied = run(args.name, args.source, args.dest)
    except Refused as err:
        error(str(err))
        return 2
    except TransferError as err:
        error(str(err))
        return 1
    log(f"dataset {args.name}: complete in {args.dest / args.name} ({copied} files copied now)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

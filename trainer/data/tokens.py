"""The token-file format and sharded corpora.

A token file is a 1 KiB header of 256 int32 values followed by the token ids:

* version 1 and 2 (llm.c's, so its files load): ``[magic, version, count, vocab]``, uint16
  ids for version 1 and uint32 for version 2; the int32 count caps a file at 2³¹−1 tokens.
* version 3 (what :func:`write_tokens` and ``prepare`` write): ``[magic, 3, width, vocab]``
  with ``width`` the bytes per id (2 or 4) and the count as an int64 in bytes 16–24, so a
  file holds up to 2⁶³−1 tokens.

A file without the magic is flat uint16. A corpus is one ``train.bin`` or a directory of
shards, listed in order (with token counts and sha256) by :data:`MANIFEST`, or, without a
manifest, the files matching :data:`SHARD_GLOB` in name order.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

TOKEN_MAGIC = 20240520
"""First int32 of a token file with a header (llm.c's value, so its files load too)."""
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
LEGACY_VERSIONS = {1: np.uint16, 2: np.uint32}
"""llm.c's header versions → token dtype; their count is an int32."""
WIDE_VERSION = 3
"""The header whose count is an int64 and whose token width is a field of its own."""
WIDTHS = {2: np.uint16, 4: np.uint32}
MANIFEST = "manifest.json"
"""Written by ``prepare`` next to its shards: their order, token counts and sha256."""
MANIFEST_FORMAT = "ack-training-platform/tokens"
SHARD_GLOB = "train-*.bin"


class DataError(ValueError):
    """The data directory is missing or malformed (a user error, not a bug)."""


def token_dtype(vocab_size: int) -> type[np.unsignedinteger]:
    """uint16 when every id of ``vocab_size`` fits in it, else uint32."""
    return np.uint16 if vocab_size <= 2**16 else np.uint32


def header(count: int, vocab_size: int, dtype: np.dtype) -> bytes:
    """A version-3 header for ``count`` ids of ``dtype`` from a vocabulary of ``vocab_size``."""
    ints = np.zeros(HEADER_INTS, np.int32)
    ints[:4] = [TOKEN_MAGIC, WIDE_VERSION, np.dtype(dtype).itemsize, vocab_size]
    raw = bytearray(ints.tobytes())
    raw[16:24] = np.int64(count).tobytes()
    return bytes(raw)


def write_tokens(path: Path, tokens: np.ndarray, vocab_size: int) -> None:
    """Write ``tokens`` as a version-3 token file, uint16 when the vocabulary fits in it and
    uint32 otherwise.

    Raises:
        ValueError: a token id is not below ``vocab_size``.
    """
    if len(tokens) and int(tokens.max()) >= vocab_size:
        raise ValueError(f"token id {int(tokens.max())} is not below the vocabulary size {vocab_size}")
    dtype = token_dtype(vocab_size)
    with open(path, "wb") as f:
        f.write(header(len(tokens), vocab_size, dtype))
        f.write(tokens.astype(dtype).tobytes())


def open_tokens(path: Path) -> tuple[np.ndarray, int | None]:
    """Memory-map a token file: with a header (dtype, count and vocabulary read from it)
    or without one (flat uint16, vocabulary unknown). Reads 1 KiB, whatever the size.

    Returns:
        The tokens and the declared vocabulary size (None when the file has no header).

    Raises:
        DataError: the header and the file disagree.
    """
    size = path.stat().st_size
    with open(path, "rb") as f:
        raw = f.read(HEADER_BYTES).ljust(HEADER_BYTES, b"\0")
    ints = np.frombuffer(raw, np.int32)
    if ints[0] != TOKEN_MAGIC:
        if size % 2:
            raise DataError(f"{path.name} has an odd size; without a header it must hold uint16 token ids")
        return np.memmap(path, dtype=np.uint16, mode="r"), None
    version, vocab = int(ints[1]), int(ints[3])
    if version in LEGACY_VERSIONS:
        dtype, count = np.dtype(LEGACY_VERSIONS[version]), int(ints[2])
    elif version == WIDE_VERSION and int(ints[2]) in WIDTHS:
        dtype, count = np.dtype(WIDTHS[int(ints[2])]), int(np.frombuffer(raw[16:24], np.int64)[0])
    else:
        raise DataError(
            f"{path.name}: header version {version} (token width {int(ints[2])}) is unknown "
            "(1: uint16, 2: uint32, 3: width 2 or 4 bytes with a 64-bit count)"
        )
    if count < 0:
        # A count below zero can still add up to the file's size when the file is shorter
        # than its header, and memory-mapping a negative length fails with a traceback.
        raise DataError(f"{path.name}: the header declares {count} tokens, a negative count (a damaged file?)")
    if size != HEADER_BYTES + count * dtype.itemsize:
        raise DataError(
            f"{path.name}: the header declares {count} {dtype.name} tokens, but the file holds "
            f"{(size - HEADER_BYTES) / dtype.itemsize:g} (truncated or still being written?)"
        )
    tokens = np.memmap(path, dtype=dtype, mode="r", offset=HEADER_BYTES, shape=(count,))
    return tokens, vocab or None


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    """The file's sha256, read in 4 MiB pieces."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(directory: Path, shards: list[dict], vocab_size: int) -> None:
    """Write :data:`MANIFEST` atomically (a reader sees the old one or the whole new one).

    Args:
        directory: where the shards are.
        shards: ``{"path", "tokens", "sha256"}`` per shard, in corpus order.
        vocab_size: the tokenizer's vocabulary.
    """
    body = {"format": MANIFEST_FORMAT, "version": 1, "vocab_size": vocab_size, "shards": shards}
    tmp = directory / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(body, indent=1) + "\n")
    os.replace(tmp, directory / MANIFEST)


def shard_paths(directory: Path) -> list[tuple[Path, int | None]]:
    """The shards of a corpus directory in order, with the token count the manifest expects
    (None without a manifest: then :data:`SHARD_GLOB` in name order).

    Raises:
        DataError: the manifest is unreadable, or names a shard outside the directory.
    """
    manifest = directory / MANIFEST
    if not manifest.is_file():
        return [(p, None) for p in sorted(directory.glob(SHARD_GLOB))]
    try:
        body = json.loads(manifest.read_text())
        if body.get("format") != MANIFEST_FORMAT:
            raise DataError(f"{MANIFEST}: format is {body.get('format')!r}, not {MANIFEST_FORMAT!r}")
        listed = [(str(s["path"]), int(s["tokens"])) for s in body["shards"]]
    except (ValueError, KeyError, TypeError) as err:
        raise DataError(f"{MANIFEST} is unreadable ({err})") from None
    shards = []
    for name, count in listed:
        path = (directory / name).resolve()
        if path.parent != directory.resolve():
            raise DataError(f"{MANIFEST} names {name!r}, which is not a file in its own directory")
        shards.append((path, count))
    return shards


def open_corpus(directory: Path) -> tuple[list[np.ndarray], int | None, list[str]]:
    """Memory-map every shard of ``directory`` (``train.bin``, or the manifest's or glob's
    shards) and check each against the manifest's count.

    Returns:
        The shards in order, the vocabulary they declare (None if none does), their names.

    Raises:
        DataError: no shard, a shard that disagrees with the manifest, or shards that
            declare different vocabularies.
    """
    single = directory / "train.bin"
    listed = [(single, None)] if single.is_file() else shard_paths(directory)
    if not listed:
        raise DataError(
            f"no train.bin, {MANIFEST} or {SHARD_GLOB} (expected token ids: flat uint16, or uint16/uint32 after a header)"
        )
    shards, vocabs = [], set()
    for path, expected in listed:
        if not path.is_file():
            raise DataError(f"{MANIFEST} lists {path.name}, which is missing")
        tokens, vocab = open_tokens(path)
        if expected is not None and len(tokens) != expected:
            raise DataError(f"{path.name} holds {len(tokens)} tokens, {MANIFEST} says {expected}")
        shards.append(tokens)
        vocabs.add(vocab)
    if len(vocabs - {None}) > 1:
        raise DataError(f"the shards declare different vocabularies: {sorted(vocabs - {None})}")
    return shards, max(vocabs - {None}, default=None), [p.name for p, _ in listed]

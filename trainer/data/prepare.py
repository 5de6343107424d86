"""``python -m trainer.data prepare``: raw text to the trainer's token shards.

Reads ``.txt`` files (one document each) and ``.jsonl`` files (one document per line, its
text in ``--text-field``), given as files or directories (searched recursively, in name
order), tokenizes them in ``--workers`` processes with the ``tokenizers`` library's
``tokenizer.json``, and writes shards of at most ``--shard-tokens`` tokens with a
version-3 header (:mod:`trainer.data.tokens`), then :data:`trainer.data.tokens.MANIFEST`::

    python -m trainer.data prepare corpus/ --tokenizer tokenizer.json --output /mnt/data/tokens \\
        --eos '<|endoftext|>' --workers 8

Documents keep their input order whatever the number of workers, so the same input gives
the same shards, byte for byte. Progress (bytes of text read) goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..console import error, line, log
from ..dataset_import import CHECKSUMS
from .tokens import MANIFEST, DataError, header, sha256_file, token_dtype, write_manifest

BATCH_BYTES = 1 << 20
"""Text per task handed to a worker: large enough that the pickling is noise."""
DEFAULT_SHARD_TOKENS = 1 << 30
"""Tokens per shard: 2 GiB of uint16, small enough to copy and checksum one at a time."""
SUFFIXES = (".txt", ".jsonl")

_tokenizer = None


def _load_tokenizer(path: str):
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(path)
    except Exception as err:  # the Rust side raises its own exception type for a bad file
        raise DataError(f"--tokenizer {path}: not a tokenizers tokenizer.json ({err})") from None


def _init_worker(path: str) -> None:
    global _tokenizer
    _tokenizer = _load_tokenizer(path)


def _encode(task: tuple[list[str], int | None]) -> tuple[list[np.ndarray], int]:
    texts, eos = task
    encoded = _tokenizer.encode_batch(texts, add_special_tokens=False)
    tail = [eos] if eos is not None else []
    return [np.array([*e.ids, *tail], np.int64) for e in encoded], sum(len(t.encode()) for t in texts)


def input_files(paths: list[Path]) -> list[Path]:
    """The ``.txt``/``.jsonl`` files among ``paths`` and under its directories, in order.

    Raises:
        DataError: a path is missing or has another suffix, or nothing is found.
    """
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file()))
        elif path.is_file() and path.suffix in SUFFIXES:
            found.append(path)
        else:
            raise DataError(f"input {path}: not a directory or a .txt/.jsonl file")
    if not found:
        raise DataError(f"no .txt or .jsonl files under {', '.join(map(str, paths))}")
    return found


def documents(files: list[Path], text_field: str) -> Iterator[str]:
    """Each document's text: a whole ``.txt`` file, or a ``.jsonl`` line's ``text_field``.

    Raises:
        DataError: a ``.jsonl`` line is not JSON or lacks a string ``text_field``.
    """
    for path in files:
        if path.suffix == ".txt":
            yield path.read_text(encoding="utf-8")
            continue
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    text = json.loads(line)[text_field]
                except (ValueError, KeyError, TypeError):
                    text = None
                if not isinstance(text, str):
                    raise DataError(f"{path}:{number}: not a JSON object with a string {text_field!r} (--text-field)")
                yield text


def batches(texts: Iterator[str], eos: int | None) -> Iterator[tuple[list[str], int | None]]:
    batch, size = [], 0
    for text in texts:
        batch.append(text)
        size += len(text)
        if size >= BATCH_BYTES:
            yield batch, eos
            batch, size = [], 0
    if batch:
        yield batch, eos


class ShardWriter:
    """Token shards ``train-00000.bin``, … of at most ``shard_tokens`` tokens each.

    A shard is written as ``.<name>.tmp`` and renamed once its header holds the final
    count, so a shard under its own name is always whole.
    """

    def __init__(self, directory: Path, vocab_size: int, shard_tokens: int):
        self.directory = directory
        self.vocab_size = vocab_size
        self.dtype = np.dtype(token_dtype(vocab_size))
        self.shard_tokens = shard_tokens
        self.done: list[dict] = []
        self._file = None
        self._tmp: Path | None = None
        self._count = 0

    def write(self, tokens: np.ndarray) -> None:
        while len(tokens):
            if self._file is None:
                self._tmp = self.directory / f".train-{len(self.done):05d}.bin.tmp"
                self._file = open(self._tmp, "wb")
                self._file.write(header(0, self.vocab_size, self.dtype))
                self._count = 0
            take = tokens[: self.shard_tokens - self._count]
            self._file.write(take.astype(self.dtype).tobytes())
            self._count += len(take)
            tokens = tokens[len(take) :]
            if self._count == self.shard_tokens:
                self._close()

    def finish(self) -> list[dict]:
        """Close the last shard; the shards' manifest entries, in order."""
        if self._file is not None and self._count:
            self._close()
        return self.done

    def _close(self) -> None:
        self._file.seek(0)
        self._file.write(header(self._count, self.vocab_size, self.dtype))
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None
        final = self.directory / self._tmp.name[1:].removesuffix(".tmp")
        os.replace(self._tmp, final)
        self.done.append({"path": final.name, "tokens": self._count, "sha256": sha256_file(final)})


class Progress:
    """A one-line progress bar on stderr, redrawn when the whole percentage changes."""

    def __init__(self, total: int, width: int = 40):
        self.total, self.width, self.done, self.shown = max(total, 1), width, 0, -1

    def advance(self, amount: int, tokens: int) -> None:
        self.done += amount
        percent = min(100, self.done * 100 // self.total)
        if percent != self.shown:
            self.shown = percent
            filled = self.width * percent // 100
            bar = "#" * filled + "." * (self.width - filled)
            sys.stderr.write(f"\rprepare [{bar}] {percent:3d}% {self.done / 2**20:.1f} MiB, {tokens} tokens")
            sys.stderr.flush()

    def close(self, tokens: int) -> None:
        """Show 100% (the .jsonl syntax around the text counts in the total, not as read)."""
        self.advance(self.total - self.done, tokens)
        sys.stderr.write("\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m trainer.data prepare", description="Tokenize raw text into the trainer's token shards."
    )
    p.add_argument("inputs", nargs="+", type=Path, help=".txt/.jsonl files or directories of them")
    p.add_argument("--tokenizer", required=True, type=Path, help="a tokenizers tokenizer.json")
    p.add_argument("--output", required=True, type=Path, help="directory for the shards and manifest.json")
    p.add_argument("--text-field", default="text", help="the text's key in .jsonl lines (default: text)")
    p.add_argument("--eos", help="token appended to every document, e.g. '<|endoftext|>' (default: none)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="tokenizer processes (default: CPUs)")
    p.add_argument(
        "--shard-tokens",
        type=int,
        default=DEFAULT_SHARD_TOKENS,
        help=f"tokens per shard (default: {DEFAULT_SHARD_TOKENS})",
    )
    args = p.parse_args(argv)
    if args.workers < 1:
        p.error(f"--workers must be at least 1, got {args.workers}")
    if args.shard_tokens < 1:
        p.error(f"--shard-tokens must be at least 1, got {args.shard_tokens}")
    return args


def prepare(args: argparse.Namespace) -> list[dict]:
    """Tokenize ``args.inputs`` into ``args.output``; the manifest's shard entries.

    Raises:
        DataError: bad input, tokenizer or output directory.
    """
    files = input_files(args.inputs)
    if not args.tokenizer.is_file():
        raise DataError(f"--tokenizer {args.tokenizer}: no such file")
    tokenizer = _load_tokenizer(str(args.tokenizer))
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    eos = None
    if args.eos is not None:
        eos = tokenizer.token_to_id(args.eos)
        if eos is None:
            raise DataError(f"--eos {args.eos!r} is not a token of {args.tokenizer.name}")
    args.output.mkdir(parents=True, exist_ok=True)
    if any(args.output.glob("train-*.bin")) or (args.output / "train.bin").exists():
        raise DataError(f"--output {args.output} already holds token files: give an empty directory")
    writer = ShardWriter(args.output, vocab, args.shard_tokens)
    progress = Progress(sum(p.stat().st_size for p in files))
    tokens_written = 0
    # Workers must not inherit a tokenizer that used its own thread pool (tokenizers then
    # disables parallelism with a warning); each loads the file once instead.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    context = multiprocessing.get_context("fork")
    with context.Pool(args.workers, initializer=_init_worker, initargs=(str(args.tokenizer),)) as pool:
        for encoded, size in pool.imap(_encode, batches(documents(files, args.text_field), eos)):
            for ids in encoded:
                writer.write(ids)
                tokens_written += len(ids)
            progress.advance(size, tokens_written)
    progress.close(tokens_written)
    shards = writer.finish()
    write_manifest(args.output, shards, vocab)
    # What a dataset import verifies the shards against (trainer.dataset_import).
    listed = [(s["sha256"], s["path"]) for s in shards] + [(sha256_file(args.output / MANIFEST), MANIFEST)]
    (args.output / CHECKSUMS).write_text("".join(f"{digest}  {name}\n" for digest, name in listed))
    return shards


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m trainer.data``; exit 2 with one line on bad input."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "prepare":
        line("usage: python -m trainer.data prepare INPUT... --tokenizer FILE --output DIR", sys.stderr)
        return 2
    args = parse_args(argv[1:])
    try:
        shards = prepare(args)
    except DataError as err:
        error(str(err))
        return 2
    total = sum(s["tokens"] for s in shards)
    log(f"wrote {total} tokens in {len(shards)} shard{'' if len(shards) == 1 else 's'} to {args.output}")
    return 0

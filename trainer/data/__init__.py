"""Datasets and the per-rank sharding that makes mid-epoch resume a slice.

Datasets live in memory as tensors (MNIST-sized image sets) or as memory-mapped
token files (one ``train.bin`` or a directory of shards, :mod:`trainer.data.tokens`), and are indexed a whole batch at a time: no per-sample Python, no loader
processes. :class:`GlobalOrder` fixes, per epoch, one permutation of every sample that
all ranks agree on; step ``s`` of an epoch is a contiguous slice of it, so a resumed run
(even with another world size) continues from the same global sample position.

Raw text becomes token shards with ``prepare`` (:mod:`trainer.data.prepare`)::

    python -m trainer.data prepare corpus/ --tokenizer tokenizer.json --output /mnt/data/tokens
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
import torch.distributed as dist

from ..config import Config
from ..models.spec import IMAGES, ModelSpec
from .tokens import MANIFEST, DataError, open_corpus

# Where the README has always pointed for writing and reading token files.
from .tokens import open_tokens as open_tokens
from .tokens import write_tokens as write_tokens

T = TypeVar("T")

IMAGE_SHAPE = (1, 28, 28)
NUM_CLASSES = 10


def fingerprint(parts: object) -> str:
    """A short digest of what identifies a dataset (JSON-serialisable ``parts``)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def files_fingerprint(data_dir: Path, names: list[str]) -> str:
    """The fingerprint of a data directory's files, cheap whatever their size: the bytes of
    ``prepare``'s manifest (every shard's token count and sha256) when there is one, else
    each file's name, size and modification time, so that data replaced by other data of
    the same size counts as changed too (a copy that does not keep the times does as well)."""
    manifest = data_dir / MANIFEST
    if manifest.is_file():
        return fingerprint([MANIFEST, hashlib.sha256(manifest.read_bytes()).hexdigest()])
    stats = [(name, (data_dir / name).stat()) for name in names]
    return fingerprint([[name, stat.st_size, stat.st_mtime_ns] for name, stat in stats])


class ImageDataset:
    """Images (uint8 N×C×H×W) and labels, normalised batch by batch."""

    fingerprint = ""
    """What identifies the data (:func:`fingerprint`), recorded in every checkpoint."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor):
        self.images = images
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # MNIST's mean and std, as in the PyTorch example, so the tutorial comparison is fair.
        x = self.images[index].float().div_(255.0).sub_(0.1307).div_(0.3081)
        return x, self.labels[index]


class TokenDataset:
    """Non-overlapping windows of ``seq_len + 1`` tokens from token arrays (shards).

    Window ``i`` of the corpus is the ``i``-th window in shard order: every shard
    contributes ``(len - 1) // seq_len`` windows and no window spans two shards, so the
    same directory indexes the same way on every rank and after every restart.
    ``fingerprint`` identifies the data, as :class:`ImageDataset`'s does.

    Args:
        shards: token ids (uint16 or uint32), typically memory maps, in corpus order.
        seq_len: tokens per training window.
        vocab_size: the vocabulary the files declare, or None when they do not say.
        names: what a data error calls each shard (its file).
    """

    def __init__(
        self, shards: list[np.ndarray], seq_len: int, vocab_size: int | None = None, names: list[str] | None = None
    ):
        self.shards = shards
        self.names = names or [f"shard {i}" for i in range(len(shards))]
        self.seq_len = seq_len
        self.vocab_size = vocab_size
        counts = np.array([max(len(s) - 1, 0) // seq_len for s in shards], np.int64)
        self.first_window = np.concatenate([[0], np.cumsum(counts)])
        """Global index of each shard's first window (and the total, last)."""
        self.fingerprint = ""
        self.limit: int | None = None
        """Token ids must lie below this (the model's vocabulary); checked batch by batch,
        so nothing scans a file of billions of tokens at start-up."""

    def __len__(self) -> int:
        return int(self.first_window[-1])

    def batch(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        windows = index.numpy().astype(np.int64)
        shard_of = np.searchsorted(self.first_window, windows, side="right") - 1
        offsets = np.arange(self.seq_len + 1)
        rows_np = np.empty((len(windows), self.seq_len + 1), np.int64)
        for shard in np.unique(shard_of):
            mine = shard_of == shard
            starts = (windows[mine] - self.first_window[shard])[:, None] * self.seq_len
            rows_np[mine] = self.shards[shard][starts + offsets]
        rows = torch.from_numpy(rows_np)
        if self.limit is not None and len(rows) and int(rows.max()) >= self.limit:
            row, column = np.argwhere(rows_np >= self.limit)[0]
            shard = int(shard_of[row])
            offset = int(windows[row] - self.first_window[shard]) * self.seq_len + int(column)
            raise DataError(
                f"{self.names[shard]}: token id {int(rows_np[row, column])} at token offset {offset} "
                f"(window {int(windows[row])}) is not below the model's vocabulary size {self.limit}: "
                "write the file with a header that declares its vocabulary"
            )
        return rows[:, :-1], rows[:, 1:]


def synthetic_images(n: int, seed: int) -> ImageDataset:
    """Learnable MNIST-shaped data: a random template per class under as much noise,
    so the loss falls over hundreds of steps rather than a handful."""
    g = torch.Generator().manual_seed(seed)
    templates = torch.rand((NUM_CLASSES, *IMAGE_SHAPE), generator=g)
    labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    noise = torch.rand((n, *IMAGE_SHAPE), generator=g)
    images = (0.45 * templates[labels] + 0.55 * noise).mul(255).to(torch.uint8)
    return ImageDataset(images, labels)


SYNTHETIC_VOCAB = 256
"""Distinct tokens in synthetic streams: few enough that the successor table is learnt in
hundreds of steps, not tens of thousands."""


def synthetic_tokens(n_tokens: int, vocab_size: int, seed: int) -> np.ndarray:
    """Learnable token stream: every second token is a fixed function of the one before
    (90% of the time), the others are random."""
    rng = np.random.default_rng(seed)
    active = min(vocab_size, SYNTHETIC_VOCAB)
    successor = rng.permutation(active).astype(np.uint16)
    tokens = rng.integers(0, active, n_tokens, dtype=np.uint16)
    follows = np.arange(1, n_tokens, 2)
    keep = rng.random(len(follows)) < 0.9
    tokens[follows[keep]] = successor[tokens[follows[keep] - 1]]
    return tokens


def load_images(data_dir: Path) -> ImageDataset:
    """``data_dir/train.npz`` with ``images`` (uint8 N×1×28×28) and ``labels``."""
    path = data_dir / "train.npz"
    if not path.is_file():
        raise DataError(f"--data-dir {data_dir}: no train.npz (expected arrays 'images' uint8 N×1×28×28 and 'labels')")
    try:
        with np.load(path) as archive:
            images, labels = archive["images"], archive["labels"]
    except (KeyError, ValueError, OSError) as err:
        raise DataError(f"--data-dir {data_dir}: train.npz is unreadable or lacks 'images'/'labels' ({err})") from None
    if images.dtype != np.uint8 or images.ndim != 4 or tuple(images.shape[1:]) != IMAGE_SHAPE:
        raise DataError(
            f"--data-dir {data_dir}: train.npz 'images' must be uint8 N×1×28×28, got {images.dtype} {images.shape}"
        )
    if labels.shape != (len(images),) or len(images) == 0:
        raise DataError(f"--data-dir {data_dir}: train.npz 'labels' must have one entry per image, got {labels.shape}")
    if labels.min() < 0 or labels.max() >= NUM_CLASSES:
        raise DataError(f"--data-dir {data_dir}: train.npz 'labels' must lie in 0..{NUM_CLASSES - 1}")
    dataset = ImageDataset(torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64)))
    dataset.fingerprint = files_fingerprint(data_dir, [path.name])
    return dataset


def load_tokens(data_dir: Path, seq_len: int) -> TokenDataset:
    """``data_dir``'s token corpus, memory-mapped (see :func:`trainer.data.tokens.open_corpus`)."""
    try:
        shards, vocab, names = open_corpus(data_dir)
    except DataError as err:
        raise DataError(f"--data-dir {data_dir}: {err}") from None
    dataset = TokenDataset(shards, seq_len, vocab, [str(data_dir / name) for name in names])
    if len(dataset) == 0:
        raise DataError(
            f"--data-dir {data_dir}: {', '.join(names)} hold no shard of one window of {seq_len + 1} tokens"
        )
    dataset.fingerprint = files_fingerprint(data_dir, names)
    return dataset


@dataclass(frozen=True)
class GlobalOrder:
    """Which samples each rank trains on at each step.

    Every epoch visits every sample exactly once, in an order reshuffled per epoch from
    the seed. A step starting at position ``p`` consumes samples ``[p, p+G)`` of the
    epoch's permutation (``G`` = global batch); the last step of an epoch takes the
    remainder. Checkpoints store ``p``, not a step index, so a different world size
    resumes at the same sample. Rank ``r``
    takes its contiguous share of each step's slice.

    Args:
        size: samples in the dataset.
        global_batch: samples per optimizer step across all ranks.
        seed: shuffling seed.
    """

    size: int
    global_batch: int
    seed: int

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(self.size / self.global_batch)

    def permutation(self, epoch: int) -> torch.Tensor:
        return torch.randperm(self.size, generator=torch.Generator().manual_seed(self.seed * 1_000_003 + epoch))

    def step_slice(self, position: int) -> tuple[int, int]:
        """The samples of the step that starts at ``position`` in the epoch's permutation."""
        return position, min(position + self.global_batch, self.size)

    @staticmethod
    def rank_share(start: int, stop: int, rank: int, world: int) -> tuple[int, int]:
        """Rank ``rank``'s contiguous part of ``[start, stop)``; sizes differ by at most one."""
        n = stop - start
        base, extra = divmod(n, world)
        lo = start + rank * base + min(rank, extra)
        return lo, lo + base + (rank < extra)


def load_dataset(cfg: Config, spec: ModelSpec) -> ImageDataset | TokenDataset:
    """The run's dataset: ``--data-dir``'s files of the kind ``spec`` reads, or synthetic data
    of ``--synthetic-size`` samples when no directory is given.

    Args:
        cfg: the run's config.
        spec: what ``--model``'s factory returned: its inputs, sample length and vocabulary.

    Raises:
        DataError: the directory is missing or its files are not usable.
    """
    if cfg.data_dir is None:
        if spec.inputs == IMAGES:
            dataset = synthetic_images(cfg.synthetic_size, cfg.seed)
        else:
            dataset = TokenDataset(
                [synthetic_tokens(cfg.synthetic_size * spec.seq_len + 1, spec.vocab_size, cfg.seed)], spec.seq_len
            )
        # The seed, which draws synthetic data too, is recorded and checked on its own.
        dataset.fingerprint = fingerprint(["synthetic", cfg.model, cfg.synthetic_size])
        return dataset
    data_dir = Path(cfg.data_dir)
    if not data_dir.is_dir():
        raise DataError(f"--data-dir {data_dir}: no such directory")
    if spec.inputs == IMAGES:
        return load_images(data_dir)
    return load_tokens(data_dir, spec.seq_len)


def agree_on_data(read: Callable[[], T], rank: int, group: dist.ProcessGroup | None) -> T:
    """``read()``, once every rank of ``group`` has read its share. A collective.

    A data error met by one rank alone would leave the others in the step's collectives: on
    gloo they fail as if a peer were lost (retryable, so the job would loop), on NCCL they
    hang for the collective timeout. Settled before the step instead, every rank raises the
    error of the lowest rank that met one.

    Args:
        read: reads this rank's batches; may raise :class:`DataError`.
        rank: this process's rank in ``group``.
        group: a CPU (gloo) group of every rank, or None for one process.

    Raises:
        DataError: on every rank when any met one, prefixed with that rank.
    """
    try:
        result, error = read(), None
    except DataError as err:
        if group is None:
            raise
        result, error = None, err
    if group is None:
        return result
    world = dist.get_world_size(group)
    first = torch.tensor([rank if error else world])
    dist.all_reduce(first, op=dist.ReduceOp.MIN, group=group)
    if int(first) == world:
        return result
    message = [str(error)]
    dist.broadcast_object_list(message, group_src=int(first), group=group)
    raise DataError(f"rank {int(first)}: {message[0]}")

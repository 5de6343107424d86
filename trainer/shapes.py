"""The token models' named shapes (the small GPTs and the Llama family), and what a shape and
batch can be split by at ``--tp`` and ``--pp``.

Imports nothing, torch or project: the job spec (``components/config/job_settings.py``) checks a
job's sizes, ``tp`` and ``pp`` with the same rules the trainer applies at start, and a leaf keeps
that check from pulling in the rest of the trainer.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPTConfig:
    """Decoder shape. ``GPT_SIZES`` names the presets."""

    vocab_size: int = 4096
    seq_len: int = 128
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128


GPT_SIZES = {
    "tiny": GPTConfig(),
    # GPT-2 small's shape; the vocabulary is padded to a multiple of 64 for tensor cores.
    "124m": GPTConfig(vocab_size=50304, seq_len=1024, n_layer=12, n_head=12, n_embd=768),
}


@dataclass(frozen=True)
class LlamaConfig:
    """A Llama-family decoder (:class:`trainer.models.llama.Llama`). ``LLAMA_SIZES`` names the presets.

    ``ffn_dim`` is SwiGLU's hidden width, which Meta's reference code derives from ``dim``,
    ``ffn_dim_multiplier`` and ``multiple_of``; here it is given as the result.
    """

    vocab_size: int = 4096
    seq_len: int = 128
    dim: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    ffn_dim: int = 384
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    tied_embeddings: bool = False

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


def ffn_dim(dim: int, multiplier: float, multiple_of: int) -> int:
    """SwiGLU's hidden width as Meta's reference code computes it: two thirds of 4·dim, times
    the multiplier, rounded up to a multiple of ``multiple_of``."""
    hidden = int(multiplier * int(2 * 4 * dim / 3))
    return multiple_of * -(-hidden // multiple_of)


LLAMA_VOCAB = 128256
"""Llama 3's tokenizer (``VOCAB_SIZE`` in meta-llama/llama-models ``models/sku_list.py``)."""
LLAMA_SIZES = {
    # CPU-testable, reading the same corpora as the tiny GPT.
    "tiny": LlamaConfig(),
    # The shapes of meta-llama/llama-models models/sku_list.py (llama3_2_base_models and
    # llama3_1_base_models): dim, n_layers, n_heads, n_kv_heads, ffn_dim_multiplier, multiple_of.
    # Llama 3.2 1B ties its output head to the embedding. Trained here at 2048 tokens a sample.
    "1b": LlamaConfig(LLAMA_VOCAB, 2048, 2048, 16, 32, 8, ffn_dim(2048, 1.5, 256), tied_embeddings=True),
    "8b": LlamaConfig(LLAMA_VOCAB, 2048, 4096, 32, 32, 8, ffn_dim(4096, 1.3, 1024)),
    "70b": LlamaConfig(LLAMA_VOCAB, 2048, 8192, 80, 64, 8, ffn_dim(8192, 1.3, 4096)),
}


def check_split(shape: LlamaConfig, size: str, tp: int, pp: int, batch_size: int, microbatches: int) -> str | None:
    """Why the Llama shape ``size`` or the batch cannot be split at ``tp`` and ``pp``; None if it can.

    Tensor parallelism gives each rank ``n_heads / tp`` query heads and ``n_kv_heads / tp``
    key-value heads, a ``1 / tp`` slice of SwiGLU's width, and (sequence parallel norms) a
    ``1 / tp`` slice of the positions. A pipeline needs a block per stage, an untied output head
    (the embedding sits on the first stage, the head on the last), and, under 1F1B, at least as
    many micro-batches as stages, each an equal part of ``batch_size``.
    """
    if tp > 1:
        parts = {
            "query heads": shape.n_heads,
            "key-value heads": shape.n_kv_heads,
            "SwiGLU width": shape.ffn_dim,
            "sequence length": shape.seq_len,
        }
        for what, n in parts.items():
            if n % tp:
                valid = [d for d in range(1, shape.n_kv_heads + 1) if all(v % d == 0 for v in parts.values())]
                return (
                    f"--tp {tp}: --llama-size {size} has {n} {what}, which {tp} ranks cannot split evenly; "
                    f"choose --tp from {', '.join(map(str, valid))}"
                )
    if pp > 1:
        if shape.n_layers < pp:
            return f"--pp {pp}: --llama-size {size} has {shape.n_layers} blocks; choose --pp up to {shape.n_layers}"
        if shape.tied_embeddings:
            return (
                f"--pp {pp}: --llama-size {size} ties its output head to its embedding, which would sit on the "
                "first and last stages at once; use --tp or --parallel fsdp for it"
            )
        if microbatches < pp or batch_size % microbatches:
            return (
                f"--microbatches {microbatches}: the 1F1B schedule needs at least --pp ({pp}) micro-batches, and "
                f"--batch-size {batch_size} must divide into them evenly; e.g. --microbatches {pp} with a "
                f"--batch-size that is a multiple of {pp}"
            )
    return None


def flag_problem(
    model: str, parallel: str, size: str, tp: int, pp: int, batch_size: int, microbatches: int
) -> str | None:
    """Why the flags ``--tp`` and ``--pp`` cannot go with the others, in the trainer's words (the job
    spec renames the flags as its keys); None when they can.

    Args:
        model: ``--model``.
        parallel: ``--parallel``, resolved (``fsdp`` when left out beside ``--tp`` or ``--pp``).
        size: ``--llama-size``.
        tp: ``--tp``.
        pp: ``--pp``.
        batch_size: ``--batch-size``.
        microbatches: ``--microbatches``, resolved.
    """
    if tp * pp == 1:
        return None
    if model != "llama":
        return f"--tp and --pp split the llama model's layers, not --model {model}"
    if parallel != "fsdp":
        return (
            f"--parallel {parallel} with --tp {tp} and --pp {pp}: beside tensor or pipeline parallelism the "
            "data-parallel replicas are FSDP shards (--parallel fsdp, or leave --parallel out); --parallel auto "
            "chooses --tp and --pp itself"
        )
    return check_split(LLAMA_SIZES[size], size, tp, pp, batch_size, microbatches)

"""The token models' named shapes: the small GPTs and the Llama family.

Imports no torch: the job spec (``components/config/job_settings.py``) takes the size names from
here through :mod:`trainer.config`.
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

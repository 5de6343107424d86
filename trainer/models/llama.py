"""A Llama-family decoder: RMSNorm, rotary position embeddings (RoPE), a SwiGLU feed-forward and
grouped-query attention, without biases, as Meta's Llama 3 models are built.

It trains the way the GPT does (:mod:`trainer.parallelism.wrap`): built on the meta device, sharded block
by block with FSDP2, each block compiled on its own under ``--compile`` and recomputed under
``--activation-checkpointing``, initialised by :func:`trainer.models.draw_parameters`.

Differences from Meta's reference code, none of which changes a parameter: the rotation pairs
each head's first half with its second (as Hugging Face's port stores the weights) rather than
adjacent channels, and the frequencies are plain RoPE at ``rope_theta``, without Llama 3.1's
long-context rescaling. Weights published by Meta therefore do not load as they are.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..config import LlamaConfig
from . import draw_parameters, run_blocks, stored_values_per_token, training_flops


def rope_tables(cfg: LlamaConfig, seq_len: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The cosines and sines of each position's rotation angles, shaped to broadcast over
    ``(batch, position, head, head_dim / 2)``. Computed each forward pass rather than held in a
    buffer: a model built on the meta device would otherwise need them filled in after
    ``to_empty``, and they are tiny next to any block."""
    half = cfg.head_dim // 2
    inverse = cfg.rope_theta ** -(torch.arange(half, device=device, dtype=torch.float32) / half)
    angles = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32), inverse)
    return angles.cos()[None, :, None, :], angles.sin()[None, :, None, :]


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x`` (batch, position, head, head_dim) rotated by its position's angles, in fp32."""
    a, b = x.float().chunk(2, dim=-1)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1).type_as(x)


class Attention(nn.Module):
    """Causal self-attention in which ``n_heads / n_kv_heads`` query heads share each key and
    value head."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = rotate(self.wq(x).view(b, t, self.n_heads, self.head_dim), cos, sin)
        k = rotate(self.wk(x).view(b, t, self.n_kv_heads, self.head_dim), cos, sin)
        v = self.wv(x).view(b, t, self.n_kv_heads, self.head_dim)
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True
        )
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    """SwiGLU: ``w2(silu(w1 x) * w3 x)``."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.w2 = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.attention_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


RESIDUAL_PROJECTIONS = ("attention.wo.weight", "feed_forward.w2.weight")
"""The matrices that write into the residual stream, whose initial scale shrinks with depth."""


class Llama(nn.Module):
    """A Llama-family decoder (pre-norm; the output head tied to the embedding when the shape
    says so)."""

    checkpoint_activations = False
    """Recompute each block's activations in the backward pass instead of storing them."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.blocks = nn.ModuleList(LlamaBlock(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        if cfg.tied_embeddings:
            self.output.weight = self.tok_embeddings.weight
        if not self.tok_embeddings.weight.is_meta:
            self.init_weights()

    def init_weights(self, generator: torch.Generator | None = None) -> None:
        """normal(0, 0.02) matrices, the residual projections scaled down by sqrt(2 * layers)
        as GPT-2's are; unit RMSNorm scales (:func:`trainer.models.draw_parameters`)."""
        layers = self.cfg.n_layers
        draw_parameters(
            self,
            generator,
            lambda name: 0.02 / math.sqrt(2 * layers) if name.endswith(RESIDUAL_PROJECTIONS) else 0.02,
            self.whole_model,
        )

    whole_model: list[tuple[str, torch.Size]] | None = None
    """Every parameter's name and shape in the unsplit model, which a pipeline stage
    (:func:`trainer.parallelism.pipeline.split_stage`) keeps so that it draws its weights as the whole model does."""

    sequence_shards = 1
    """Ranks the residual stream's positions are split over between the blocks (tensor
    parallelism's sequence parallel norms, :mod:`trainer.parallelism.tensor_parallel`)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Token ids to logits; a pipeline stage (:mod:`trainer.parallelism.pipeline`) without the embedding
        takes the previous stage's hidden states, and one without the head returns its own."""
        seq_len = x.shape[1] if self.tok_embeddings is not None else x.shape[1] * self.sequence_shards
        cos, sin = rope_tables(self.cfg, seq_len, x.device)
        if self.tok_embeddings is not None:
            x = self.tok_embeddings(x)
        x = run_blocks(self, x, cos, sin)
        return x if self.output is None else self.output(self.norm(x))

    def flops_per_token(self, causal: bool = False) -> float:
        """Training FLOPs per token (:func:`trainer.models.training_flops`). An untied input
        embedding is a lookup, not a matrix product; tied, it is the output head's matrix.
        Grouped-query attention shares keys and values, not scores, so the attention term
        is the full width's."""
        n = sum(p.numel() for p in self.parameters())
        if not self.cfg.tied_embeddings:
            n -= self.tok_embeddings.weight.numel()
        c = self.cfg
        return training_flops(n, c.n_layers, c.n_heads * c.head_dim, c.seq_len, causal)

    def activation_values_per_token(self, checkpointed: bool) -> int:
        """:func:`trainer.models.stored_values_per_token`. A block keeps its two RMSNorms'
        inputs and outputs (4 widths), the rotated queries (1) with the keys and values
        (2 × kv heads × head_dim), the attention output (1), and SwiGLU's w1 and w3 outputs,
        the SiLU and the product (4 × ffn_dim)."""
        c = self.cfg
        per_layer = 6 * c.dim + 2 * c.n_kv_heads * c.head_dim + 4 * c.ffn_dim
        return stored_values_per_token(per_layer, c.n_layers, c.dim, checkpointed)

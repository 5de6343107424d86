"""A small token model of a job's own code, trained by the bundled trainer through
``--model own_models.mixer:factory``: a causal token mixer (a lower-triangular mixing matrix
over positions, no attention) with a per-token feed-forward in each block."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trainer.config import Config
from trainer.models import draw_parameters
from trainer.models.spec import TOKENS, ModelSpec

SEQ_LEN = 32
VOCAB = 512
WIDTH = 64
LAYERS = 2


class MixerBlock(nn.Module):
    def __init__(self, seq_len: int):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.mix = nn.Linear(seq_len, seq_len, bias=False)
        self.up = nn.Linear(WIDTH, 2 * WIDTH)
        self.down = nn.Linear(2 * WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        # Each position mixes only itself and earlier ones: a causal language model.
        mix = torch.tril(self.mix.weight[:t, :t])
        x = x + torch.einsum("st,btc->bsc", mix, self.norm(x))
        return x + self.down(F.gelu(self.up(x)))


class Mixer(nn.Module):
    checkpoint_activations = False
    """Set by the trainer from --activation-checkpointing."""

    def __init__(self, vocab: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, WIDTH)
        self.blocks = nn.ModuleList(MixerBlock(SEQ_LEN) for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, vocab, bias=False)

    def init_weights(self, generator: torch.Generator | None = None) -> None:
        draw_parameters(self, generator, lambda name: 0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)

    def flops_per_token(self, causal: bool = False) -> float:
        return 6.0 * sum(p.numel() for p in self.parameters() if p.dim() == 2)


def factory(cfg: Config) -> ModelSpec:
    def build(vocab: int | None) -> nn.Module:
        with torch.device("meta"):
            return Mixer(vocab or VOCAB)

    return ModelSpec(build=build, inputs=TOKENS, seq_len=SEQ_LEN, vocab_size=VOCAB, lr=1e-3)

"""The tutorials' MNIST convnet and a small GPT, and what the token models share
(:mod:`trainer.models.llama` is the other)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor
from torch.utils.checkpoint import checkpoint

from ..config import GPTConfig


def draw_parameters(
    model: nn.Module,
    generator: torch.Generator | None,
    std: Callable[[str], float],
    whole_model: list[tuple[str, torch.Size]] | None = None,
) -> None:
    """Initialise every parameter of ``model``: matrices normal(0, ``std(name)``), biases zero,
    norm scales one.

    Each parameter is drawn whole from ``generator``, in a fixed order, and a sharded parameter
    (a DTensor of a model built on the meta device and handed to FSDP) keeps its own slice of
    it. Every world size therefore starts from the same weights, no rank ever holds more than
    one whole parameter, and no rank draws numbers for another's shard differently.

    Args:
        model: the model, its parameters on their devices (or sharded).
        generator: where the numbers come from; the default generator of each parameter's
            device when None.
        std: the standard deviation of a matrix, by parameter name.
        whole_model: the names and shapes of every parameter of the model ``model`` is a part
            of (a pipeline stage's), in order: the parts it lacks are drawn too, and dropped, so
            that each stage gets the numbers the whole model would.
    """
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, shape in whole_model or [(name, p.shape) for name, p in params.items()]:
            param = params.get(name)
            device = generator.device if generator is not None else next(iter(params.values())).device
            if len(shape) >= 2:
                whole = torch.empty(shape, device=device).normal_(0.0, std(name), generator=generator)
                if param is None:
                    continue
            elif param is None:
                continue
            elif name.endswith("bias"):
                whole = torch.zeros(shape, device=device)
            else:
                whole = torch.ones(shape, device=device)
            if isinstance(param, DTensor):
                # src_data_rank=None: every rank drew the same whole tensor, so each
                # keeps its slice without a scatter from rank 0.
                whole = distribute_tensor(whole, param.device_mesh, param.placements, src_data_rank=None)
                param, whole = param.to_local(), whole.to_local()
            param.copy_(whole)


def run_blocks(model: nn.Module, x: torch.Tensor, *args: torch.Tensor) -> torch.Tensor:
    """``x`` through ``model.blocks`` in turn (each called as ``block(x, *args)``), each block's
    activations recomputed in the backward pass when ``model.checkpoint_activations`` is set."""
    for block in model.blocks:
        if model.checkpoint_activations and model.training:
            x = checkpoint(block, x, *args, use_reentrant=False)
        else:
            x = block(x, *args)
    return x


def training_flops(matmul_params: int, layers: int, width: int, seq_len: int, causal: bool = False) -> float:
    """Training FLOPs per token: 6 per weight of a matrix product (forward and backward) plus
    attention's scores and weighted sums, 12·layers·width·seq_len (PaLM, appendix B).

    That attention term counts every query against every key, as PaLM and nanoGPT do, so MFU
    figures compare with theirs; a causal model computes only the lower triangle, half of it,
    which ``causal`` counts instead.
    """
    attention = 12 * layers * width * seq_len
    return 6 * matmul_params + (attention / 2 if causal else attention)


def stored_values_per_token(per_layer: int, layers: int, width: int, checkpointed: bool) -> int:
    """Roughly how many values a training forward pass keeps per token for the backward pass in
    its blocks: every block's ``per_layer``, or under activation checkpointing each block's input
    (``width``) and one block's values while it is recomputed. Attention's score matrix is not
    stored: the fused kernels recompute it. The loss is apart (:data:`LOSS_BYTES_PER_LOGIT`).
    """
    return layers * width + per_layer if checkpointed else layers * per_layer


LOSS_BYTES_PER_LOGIT = 12
"""What the loss holds per token and vocabulary entry at its peak, the start of the backward
pass: cross-entropy runs in fp32 whatever the model computes in
(:func:`trainer.models.spec.summed_cross_entropy`), keeping its log-probabilities (4 bytes) and then
making their gradient (4) and the logits' (4). With a large vocabulary this outweighs the blocks:
Llama 3's 128,256 entries are 1.5 MB a token."""


def block_params(model: nn.Module) -> int:
    """Parameters of one block: what FSDP gathers whole at a time."""
    return sum(p.numel() for p in model.blocks[0].parameters())


class ByteDropout(nn.Module):
    """Dropout whose keep-mask comes from random bytes.

    On CPU ``bernoulli_`` draws one random number per element and was 15% of a convnet
    step; this draws one 64-bit word per eight elements, about ten times less work, for
    the same Bernoulli mask whenever ``p`` is a multiple of 1/256 (0.25 and 0.5 are). On
    other devices it is ``F.dropout``. It uses the default generator, so checkpoints that
    restore the RNG state still resume exactly.
    """

    def __init__(self, p: float):
        super().__init__()
        if not (0 <= p < 1 and (p * 256).is_integer()):
            raise ValueError(f"ByteDropout needs p in [0, 1) and a multiple of 1/256, got {p}")
        self.p = p
        self.threshold = int(p * 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, training=True)
        n = x.numel()
        # The full signed range: plain random_() never sets an int64's top bit, which
        # would bias every eighth byte.
        words = torch.empty((n + 7) // 8, dtype=torch.int64).random_(-(2**63), None)
        keep = words.view(torch.uint8)[:n].view(x.shape) >= self.threshold
        return x * keep.to(x.dtype).mul_(1 / (1 - self.p))


class MnistCNN(nn.Module):
    """The convnet of the PyTorch and Kubeflow MNIST examples: the same layers, parameters
    and function, computed with fewer passes over memory.

    ReLU runs after the max-pool rather than before: ReLU is monotonic, so the outputs and
    gradients are bit-identical, and it touches a quarter of the elements and needs no
    memory-layout copies in channels_last. Dropout draws its mask from random bytes
    (:class:`ByteDropout`).
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = ByteDropout(0.25)
        self.dropout2 = ByteDropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return self.fc2(x)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)
        self.n_head = cfg.n_head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A small decoder-only language model (pre-norm, tied embeddings)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos = nn.Embedding(cfg.seq_len, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.tok.weight
        if not self.tok.weight.is_meta:
            self.init_weights()

    def init_weights(self, generator: torch.Generator | None = None) -> None:
        """GPT-2's initialisation: normal(0, 0.02) matrices, with the two projections that
        write into the residual stream in each block (attention and MLP) scaled down by
        sqrt(2 * layers); zero biases; unit LayerNorm scales (:func:`draw_parameters`).

        Args:
            generator: where the numbers come from; the default generator of each
                parameter's device when None.
        """
        layers = self.cfg.n_layer
        draw_parameters(
            self, generator, lambda name: 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
        )

    checkpoint_activations = False
    """Recompute each block's activations in the backward pass instead of storing them:
    about a third more compute for a fraction of the activation memory."""

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = run_blocks(self, self.tok(idx) + self.pos(pos))
        return self.head(self.ln_f(x))

    def flops_per_token(self, causal: bool = False) -> float:
        """Training FLOPs per token (:func:`training_flops`); the position table is a lookup."""
        n = sum(p.numel() for p in self.parameters()) - self.pos.weight.numel()
        c = self.cfg
        return training_flops(n, c.n_layer, c.n_embd, c.seq_len, causal)

    def activation_values_per_token(self, checkpointed: bool) -> int:
        """:func:`stored_values_per_token`. A block keeps its two LayerNorms' inputs and outputs
        (4 widths), q, k and v (3), the attention output (1), and the MLP's hidden layer
        before and after GELU (8): 16 widths."""
        c = self.cfg
        return stored_values_per_token(16 * c.n_embd, c.n_layer, c.n_embd, checkpointed)

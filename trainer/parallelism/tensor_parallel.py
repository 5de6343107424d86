"""Tensor parallelism (``--tp N``) for the Llama model, inside a node.

Megatron-LM's split (Shoeybi et al. 2019), built from ``torch.distributed.tensor.parallel``:
in every block the query, key and value projections and SwiGLU's two input projections are cut
by output column (``ColwiseParallel``), so each rank computes its own heads and its own slice
of the hidden layer with no communication; the attention output projection and SwiGLU's output
projection are cut by input row (``RowwiseParallel``), whose partial sums meet in one
reduce-scatter per projection. Between those, the residual stream and the RMSNorms run
sequence-parallel (``SequenceParallel``, Korthikanti et al. 2022): each rank holds
``seq_len / tp`` positions, and an all-gather before each attention and feed-forward gives them
the whole sequence. The embedding is cut by vocabulary row and the output head by vocabulary
column; the head gathers the logits whole, so the loss is the unsharded model's.

Each rank's attention sees ``n_heads / tp`` query heads and ``n_kv_heads / tp`` key-value
heads, so grouped-query attention needs both to divide by ``tp``
(:func:`trainer.config.check_split`). Every collective here has a gloo implementation, so the same
plan trains on CPU in the tests; on GPUs the rank's group should sit behind NVLink, which
:mod:`trainer.parallelism.strategy` asks of ``--parallel auto``.

The layout follows torchtitan's ``torchtitan/models/llama3/infra/parallelize.py``
(``apply_tp``); torch 2.13's ``torch/distributed/tensor/parallel/style.py`` documents each style.
"""

from __future__ import annotations

from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


def block_plan() -> dict[str, object]:
    """What each of a block's modules becomes. The residual stream arrives and leaves as this
    rank's positions (``Shard(1)``); attention and feed-forward take the whole sequence."""
    return {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(
            input_layouts=(Shard(1), None, None), desired_input_layouts=(Replicate(), None, None)
        ),
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w3": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    }


def apply_tensor_parallel(model: nn.Module, mesh: DeviceMesh) -> None:
    """Split ``model`` (a :class:`trainer.models.llama.Llama`, or a pipeline stage of one, on any device)
    over ``mesh``, a one-dimensional mesh of the ranks that share each sample."""
    tp = mesh.size()
    outer: dict[str, object] = {}
    if model.tok_embeddings is not None:
        outer["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1))
    if model.output is not None:
        outer["norm"] = SequenceParallel()
        outer["output"] = ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())
    parallelize_module(model, mesh, outer)
    for block in model.blocks:
        parallelize_module(block, mesh, block_plan())
        # The projections now hold this rank's heads only; attention reshapes by these counts.
        block.attention.n_heads //= tp
        block.attention.n_kv_heads //= tp
    model.sequence_shards = tp

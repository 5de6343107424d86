"""Pipeline parallelism (``--pp N``) for the Llama model, across nodes.

The layer stack is cut into ``N`` stages of consecutive blocks (:func:`trainer.parallelism.mesh.stage_layers`); the first
stage also holds the token embedding, the last the final norm and the output head. Each rank
keeps only its stage's modules, under the whole model's parameter names (``blocks.7`` stays
``blocks.7`` on the stage that holds it), so a checkpoint written at one pipeline depth loads
at another, or with none. Each rank's batch is cut into ``--microbatches`` micro-batches and run
by torch's ``Schedule1F1B`` (Narayanan et al. 2021): after the pipeline fills, each stage
alternates one micro-batch's forward with an earlier one's backward, so it holds at most
``N`` micro-batches' activations, where GPipe holds all of them. Between stages only the
activations of each micro-batch cross the network (``batch × seq_len × dim`` values), which is
why :mod:`trainer.parallelism.strategy` puts this dimension on slow inter-node links.

Built on ``torch.distributed.pipelining`` (torch 2.13 ``torch/distributed/pipelining/stage.py``,
``schedules.py``); the manual split follows torchtitan's
``torchtitan/distributed/pipeline_parallel.py`` design of deleting the modules a stage does
not run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B

from .mesh import MeshShape, stage_layers


class Layers(nn.ModuleDict):
    """A stage's blocks, keyed by their index in the whole model, iterated in order like the
    ``nn.ModuleList`` they were taken from."""

    def __iter__(self) -> Iterator[nn.Module]:  # type: ignore[override]
        return iter(self.values())


def split_stage(model: nn.Module, stage: int, stages: int) -> None:
    """Keep only ``stage``'s modules of ``model`` (a :class:`trainer.models.llama.Llama`, on any
    device), remembering the whole model's parameters so the stage draws the same initial
    weights (:func:`trainer.models.draw_parameters`)."""
    model.whole_model = [(name, p.shape) for name, p in model.named_parameters()]
    keep = stage_layers(len(model.blocks), stages, stage)
    model.blocks = Layers({str(i): model.blocks[i] for i in keep})
    if stage > 0:
        model.tok_embeddings = None
    if stage < stages - 1:
        model.norm = model.output = None


def stage_of(name: str, n_layers: int, stages: int) -> int:
    """The stage that holds the parameter ``name`` of the whole model."""
    if name.startswith("tok_embeddings."):
        return 0
    if not name.startswith("blocks."):
        return stages - 1
    layer = int(name.split(".")[1])
    return next(s for s in range(stages) if layer in stage_layers(n_layers, stages, s))


class Pipeline:
    """One rank's stage and the schedule that runs it.

    Args:
        model: the stage (:func:`split_stage`), parallelised and given its storage.
        stage: this rank's stage.
        stages: the pipeline depth.
        group: the ranks of this rank's pipeline, one per stage, in stage order.
        device: this rank's device.
        microbatches: micro-batches each rank's batch is cut into.
        loss: the loss of a micro-batch's logits and targets, as a scalar whose gradient is the
            step's (the schedule sums, and does not scale, the micro-batches' gradients).
    """

    def __init__(
        self,
        model: nn.Module,
        stage: int,
        stages: int,
        group: dist.ProcessGroup,
        device: torch.device,
        microbatches: int,
        loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    ):
        self.stage, self.stages = stage, stages
        self.loss = loss
        self.runner = PipelineStage(model, stage, stages, device, group=group)
        self.schedule = Schedule1F1B(self.runner, microbatches, loss_fn=self._loss, scale_grads=False)
        self.scale = 1.0

    def _loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.loss(logits, targets) * self.scale

    def step(self, x: torch.Tensor, y: torch.Tensor, scale: float) -> torch.Tensor:
        """Forward and backward over this rank's batch ``x``, ``y``, each micro-batch's loss
        multiplied by ``scale``.

        Returns:
            This rank's share of the step's loss, such that the sum over every rank of the job
            is the same as without a pipeline: the last stage's sum, times the depth; zero on
            the other stages, which see no loss.
        """
        self.scale = scale
        losses: list[torch.Tensor] = []
        last = self.stage == self.stages - 1
        inputs = (x,) if self.stage == 0 else ()
        self.schedule.step(*inputs, target=y if last else None, losses=losses if last else None, return_outputs=False)
        if not last:
            return torch.zeros((), device=x.device)
        return torch.stack([loss.detach() for loss in losses]).sum() * self.stages


def gather_stages(
    model: nn.Module, state: dict[str, torch.Tensor], shape: MeshShape, rank: int, group: dist.ProcessGroup
) -> dict[str, torch.Tensor] | None:
    """The whole model's weights for rank 0, in the whole model's order, from each stage's whole
    tensors (``state``, as every rank of the stage holds them): the first rank of each later
    stage sends its own, one tensor at a time, on the CPU over ``group`` (every rank of the job).
    None on the other ranks.
    """
    order = model.whole_model
    replica, stage, column = shape.coordinates(rank)
    owner = {name: stage_of(name, model.cfg.n_layers, shape.pp) for name, _ in order}
    if stage > 0 and replica == column == 0:
        for name, _ in order:
            if owner[name] == stage:
                dist.send(state[name].detach().cpu().contiguous(), dst=0, group=group)
        return None
    if rank != 0:
        return None
    whole = {name: tensor.detach().cpu() for name, tensor in state.items()}
    for name, size in order:
        if owner[name] > 0:
            whole[name] = torch.empty(size)
            dist.recv(whole[name], src=shape.stage_leader(owner[name]), group=group)
    return {name: whole[name] for name, _ in order}

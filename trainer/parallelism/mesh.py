"""The device mesh's shape, ``dp × pp × tp``.

Pure (no torch). What a model and batch can be split by is in :mod:`trainer.shapes`, beside the
shapes it checks.

Ranks are laid out with ``tp`` innermost, then ``dp``, then ``pp``: rank
``(p · dp + d) · tp + t``, the order of torchtitan's mesh (``pp`` outermost, in
``torchtitan/distributed/parallel_dims.py``). With ``tp``
dividing a node's processes, a tensor-parallel group is consecutive ranks, which torchrun and
the operators place on one node; the stages of a pipeline are furthest apart, a node or more
each when ``dp · tp`` fills a node, so only activations cross the slowest links.
"""

from __future__ import annotations

from dataclasses import dataclass

MESH_DIMS = ("pp", "dp", "tp")
"""The device mesh's dimension names, outermost first."""


@dataclass(frozen=True)
class MeshShape:
    """How a job's processes are arranged.

    Args:
        dp: data-parallel replicas (each an FSDP shard when ``pp`` or ``tp`` is above one).
        pp: pipeline stages.
        tp: tensor-parallel ranks sharing each sample.
    """

    dp: int
    pp: int
    tp: int

    def coordinates(self, rank: int) -> tuple[int, int, int]:
        """``rank``'s (dp, pp, tp) place."""
        return rank // self.tp % self.dp, rank // (self.dp * self.tp), rank % self.tp

    def stage_leader(self, stage: int) -> int:
        """The first rank of pipeline ``stage``."""
        return stage * self.dp * self.tp

    def describe(self) -> str:
        return f"dp {self.dp} × pp {self.pp} × tp {self.tp}"


def mesh_shape(world: int, tp: int, pp: int) -> MeshShape:
    """The mesh of ``world`` processes at ``tp`` and ``pp``.

    Raises:
        ValueError: ``tp × pp`` does not divide ``world``, said in terms of the flags.
    """
    if world % (tp * pp):
        raise ValueError(
            f"--tp {tp} × --pp {pp} = {tp * pp} does not divide the job's {world} processes: the processes "
            f"are arranged as data-parallel replicas × --pp × --tp; choose --tp and --pp whose product divides {world}"
        )
    return MeshShape(world // (tp * pp), pp, tp)


def stage_layers(n_layers: int, stages: int, stage: int) -> range:
    """The blocks of pipeline ``stage``: consecutive, as even as can be, earlier stages taking the
    extra ones (the last stage also computes the output head and the loss)."""
    per, extra = divmod(n_layers, stages)
    start = stage * per + min(stage, extra)
    return range(start, start + per + (stage < extra))

"""The device mesh's shape, ``dp × pp × tp``.

Pure (no torch). What a model and batch can be split by is in :mod:`trainer.config`, beside the
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


@dataclass(frozen=True)
class CommSettings:
    """The NCCL options one mesh dimension's process groups are created with; None leaves a field
    at NCCL's default (``NCCL_CONFIG_INITIALIZER``).

    Args:
        dim: the mesh dimension (``tp``, ``pp``, ``dp``).
        high_priority: ``ProcessGroupNCCL.Options.is_high_priority_stream``: the group's
            collectives run on a high-priority CUDA stream, scheduled ahead of queued compute.
        reason: why, in one line, for the log.
    """

    dim: str
    high_priority: bool
    reason: str

    def describe(self) -> str:
        priority = "high-priority stream" if self.high_priority else "normal-priority stream"
        return f"{self.dim}: {priority} ({self.reason})"


def link(shape: MeshShape, dim: str, local_world: int) -> str:
    """``inside a node`` when every group of ``dim`` lies within one node's processes, else
    ``across nodes``. A group of ``dim`` spans a block of consecutive ranks the size of ``dim``
    times every dimension inside it (``tp`` innermost, then ``dp``, then ``pp``), which lies in a
    node when it divides the node's processes."""
    inner = {"tp": shape.tp, "dp": shape.dp * shape.tp, "pp": shape.pp * shape.dp * shape.tp}[dim]
    return "inside a node" if local_world % inner == 0 else "across nodes"


def comm_settings(shape: MeshShape, local_world: int) -> tuple[CommSettings, ...]:
    """Each mesh dimension's NCCL options, from its role and its link: the decision, as data.

    A dimension of one rank has no collectives and no entry. The tensor-parallel group's
    all-gathers and reduce-scatters (sequence parallelism) sit between every block's matmuls,
    small and on the critical path; the pipeline's sends carry each micro-batch's activations to
    a stage that idles until they land; both get a high-priority stream, as torch's
    ``new_group(pg_options=...)`` offers for collectives that must not queue behind compute. The
    data-parallel (FSDP) group's all-gathers and reduce-scatters are bandwidth-bound and
    overlap the compute, which keeps the priority. Every group keeps NCCL's own count of thread
    blocks (CTAs): NCCL's documentation gives ``maxCTAs``/``NCCL_MAX_CTAS`` no figure to cap a
    network-bound collective at, and a cap chosen without one could slow FSDP's reduce-scatters.

    Args:
        shape: the mesh.
        local_world: processes per node.
    """
    settings = []
    if shape.tp > 1:
        where = link(shape, "tp", local_world)
        settings.append(
            CommSettings(
                "tp",
                True,
                f"sequence-parallel all-gathers and reduce-scatters between every block's matmuls, {where}: "
                "latency-bound and on the critical path",
            )
        )
    if shape.pp > 1:
        where = link(shape, "pp", local_world)
        settings.append(
            CommSettings("pp", True, f"1F1B's activation sends {where}: the next stage waits on each micro-batch's")
        )
    if shape.dp > 1:
        where = link(shape, "dp", local_world)
        reason = f"FSDP all-gathers and reduce-scatters {where}, bandwidth-bound and overlapping compute"
        settings.append(CommSettings("dp", False, reason))
    return tuple(settings)

"""The device mesh's shape, ``dp × pp × tp``, and what a model and batch can be split by.

Pure (no torch): the job spec (``components/config/``) checks ``tp`` and ``pp`` against the model
with the same rules the trainer applies at start.

Ranks are laid out with ``tp`` innermost, then ``dp``, then ``pp``: rank
``(p · dp + d) · tp + t``, the order of torchtitan's mesh (``pp`` outermost, in
``torchtitan/distributed/parallel_dims.py``). With ``tp``
dividing a node's processes, a tensor-parallel group is consecutive ranks, which torchrun and
the operators place on one node; the stages of a pipeline are furthest apart, a node or more
each when ``dp · tp`` fills a node, so only activations cross the slowest links.
"""

from __future__ import annotations

from dataclasses import dataclass

from .shapes import LLAMA_SIZES, LlamaConfig

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

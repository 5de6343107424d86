"""The ``--parallel auto`` rule: DDP, FSDP or HSDP, the gradient bucket size and whether FSDP
re-gathers parameters in the backward pass, from the model's size, the device memory and the
measured bandwidths. Pure (no torch), so it is tested over tables of inputs; ``docs/network.md``
states the same rule in prose.

The rule, in order:

1. One process: nothing to choose (``single``).
2. Memory: the model state (fp32 weights, fp32 gradients and AdamW's two moments,
   :data:`STATE_BYTES_PER_PARAM` bytes a parameter) divided by the shard group must fit in
   :data:`MEMORY_SHARE` of a device's memory. When the model estimates its activations (the
   token models do, :func:`memory_need`), the whole need must fit in :data:`USABLE_SHARE`
   instead: the sharded state, the activations of one micro-batch, and under sharding the two
   blocks FSDP holds gathered (the one computing and the one prefetched). Candidates, in order
   of preference: DDP (shard group 1), HSDP (shard group = a node's processes, several nodes
   only), FSDP (every process). None fits: :class:`DecisionError`, naming each part.
3. Network: with the bandwidths the candidates need, each candidate's bytes per step over each
   link, divided by that link's bus bandwidth, estimate its communication time; the lowest wins,
   ties going to the earlier candidate, a sharded one's estimate counted twice
   (:data:`SHARDING_MARGIN`) against DDP's. Without them the first candidate that fits wins.
4. FSDP across nodes keeps the gathered parameters from the forward to the backward pass
   (``reshard_after_forward=False``: one all-gather over the slow links per step instead of
   two) when they fit beside the sharded state; otherwise, and under HSDP, whose all-gathers stay
   in the node, parameters are freed after the forward pass (FSDP2's default).
5. DDP's gradient bucket: big enough to keep a measured link busy for :data:`BUCKET_TARGET_S`,
   no smaller than DDP's 25 MB default, no larger than :data:`BUCKET_MAX_MB`, and at most a
   quarter of the gradient so at least four buckets overlap the backward pass.
6. Tensor and pipeline parallelism (:func:`split_mesh`, models that can be split: the Llama),
   when nothing above fits, or when what fits is FSDP whose every all-gather crosses a slow
   inter-node link (under :data:`SLOW_INTER_GBPS`): a pipeline stage per node when the
   inter-node link is slow, so only activations cross it; tensor parallelism inside a node only
   over NVLink-class links (a measured intra-node bus bandwidth of :data:`NVLINK_GBPS` or more),
   as it moves every layer's activations twice per pass; the fewest tensor-parallel ranks that
   fit; FSDP over the remaining data-parallel replicas. No such mesh fits: the refusal of rule 2.
   Over a slow link a mesh without a stage per node is not taken: its replicas' all-gathers would
   still cross it.
"""

from __future__ import annotations

from dataclasses import dataclass

STATE_BYTES_PER_PARAM = 16
"""fp32 weight (4) + fp32 gradient (4) + AdamW's two fp32 moments (8)."""
GRAD_BYTES_PER_PARAM = 4
"""Gradients are reduced in fp32 (DDP's are fp32 under autocast; FSDP's ``reduce_dtype``)."""
MEMORY_SHARE = 0.5
"""Of a device's memory, what model state may take when the activations are not estimated; the
rest holds activations, the all-gathered blocks and the collectives' buffers."""
USABLE_SHARE = 0.9
"""Of a device's memory, what the estimated need may take; the rest is the CUDA context, the
collectives' buffers and the caching allocator's fragmentation."""
GATHERED_BLOCKS = 2
"""Blocks FSDP holds whole at once: the one computing and the next, prefetched."""
DEFAULT_BUCKET_MB = 25.0
"""DDP's own default ``bucket_cap_mb``."""
BUCKET_MAX_MB = 200.0
BUCKET_TARGET_S = 0.0025
"""2.5 ms on the link: 25 MB at 10 GB/s. A bucket much shorter than this is dominated by each
collective's fixed latency (tens of microseconds for NCCL, more over TCP)."""
MIN_BUCKETS = 4
SHARDING_MARGIN = 2.0
"""A sharded strategy replaces DDP only when its estimate is under half of DDP's: the estimate
leaves out what sharding adds (a collective per block, whose latency the backward pass does not
always hide, and the copies in and out of the flat buffers)."""
NVLINK_GBPS = 100.0
"""Intra-node all-reduce bus bandwidth, GB/s, from which tensor parallelism is worth its
per-layer collectives: NVLink-class. nccl-tests' all_reduce_perf reaches a few hundred GB/s over
NVLink and NVSwitch, and at most about 25 GB/s over PCIe 4.0 x16 (32 GB/s a direction)."""
SLOW_INTER_GBPS = 25.0
"""Inter-node all-reduce bus bandwidth, GB/s, under which FSDP's all-gathers across nodes are
replaced by pipeline stages: 200 Gb/s a node, less than one 8-GPU node's share of 8 × 400 Gb/s
InfiniBand or RoCE (about 50 GB/s a GPU), more than TCP or one eRDMA interface."""
STRATEGIES = ("ddp", "fsdp", "hsdp")
"""What ``--parallel`` takes besides ``auto``; ``single`` is what one process runs."""


class DecisionError(ValueError):
    """No strategy fits the model in the devices' memory."""


@dataclass(frozen=True)
class Inputs:
    """What the rule rests on.

    Args:
        params: the model's parameter count.
        world: processes in the job.
        local_world: processes per node.
        device_memory_bytes: one device's memory; None (CPU) when memory is no constraint.
        param_bytes: bytes per parameter of an FSDP all-gather (2 for bf16 on GPUs, 4 for fp32).
        intra_GBps: the intra-node all-reduce bus bandwidth, GB/s; None when not measured.
        inter_GBps: the inter-node all-reduce bus bandwidth, GB/s; None when not measured.
        shardable: whether the model can be sharded (the gpt) or only replicated (the cnn).
        activation_bytes: one micro-batch's activations on one process; None when not estimated.
        block_params: parameters of the model's largest block, gathered whole under sharding.
        root_params: parameters outside the blocks (embedding, final norm, output head), which
            FSDP gathers with the model itself.
        loss_bytes: the part of ``activation_bytes`` that is the loss's, which tensor
            parallelism does not split (the head gathers the logits whole).
        tp_choices: tensor-parallel degrees the model can be split by (:func:`trainer.config.check_split`).
        pp_choices: pipeline depths the model and batch can be split by.
    """

    params: int
    world: int
    local_world: int
    device_memory_bytes: int | None = None
    param_bytes: int = 4
    intra_GBps: float | None = None
    inter_GBps: float | None = None
    shardable: bool = True
    activation_bytes: int | None = None
    block_params: int = 0
    root_params: int = 0
    loss_bytes: int = 0
    tp_choices: tuple[int, ...] = (1,)
    pp_choices: tuple[int, ...] = (1,)

    @property
    def nodes(self) -> int:
        """Nodes with the same number of processes each; 1 for an uneven layout (treated as flat)."""
        return self.world // self.local_world if self.world % self.local_world == 0 else 1


@dataclass(frozen=True)
class Decision:
    """What ``--parallel auto`` chose.

    Args:
        strategy: ``single``, ``ddp``, ``fsdp`` or ``hsdp``.
        shard_group: processes each parameter is sharded over (1: replicated).
        bucket_mb: DDP's ``bucket_cap_mb``.
        reshard_after_forward: FSDP frees the gathered parameters after the forward pass.
        reasons: why, one clause each, for the log.
        tp: tensor-parallel ranks per sample.
        pp: pipeline stages.
    """

    strategy: str
    shard_group: int
    bucket_mb: float
    reshard_after_forward: bool
    reasons: tuple[str, ...]
    tp: int = 1
    pp: int = 1

    def flags(self) -> list[str]:
        """The flags that choose the same by hand."""
        strategy = "ddp" if self.strategy == "single" else self.strategy
        if self.tp * self.pp > 1:
            return ["--parallel", strategy, "--tp", str(self.tp), "--pp", str(self.pp)]
        flags = ["--parallel", strategy, "--bucket-mb", f"{self.bucket_mb:g}"]
        return flags + ([] if self.reshard_after_forward else ["--no-reshard-after-forward"])


def memory_need(inp: Inputs, group: int) -> dict[str, float]:
    """Bytes one process needs, part by part, with the state sharded over ``group`` processes.

    Weights and gradients are fp32 (4 + 4 bytes a parameter) and AdamW keeps two fp32 moments
    (8): :data:`STATE_BYTES_PER_PARAM`, divided by the shard group. The activations are the
    model's estimate; a sharded model also holds :data:`GATHERED_BLOCKS` blocks whole in the
    all-gather's precision, and the parameters outside the blocks whole with their gradients:
    the root ``fully_shard`` (:func:`trainer.parallelism.wrap.parallelize`) gathers them for the whole
    forward pass and again for the whole backward pass, as its inputs (token ids) carry no
    gradient to trigger its reduce-scatter before the backward pass's end (torch 2.13
    ``torch/distributed/fsdp/_fully_shard/_fsdp_state.py``, the root's final callback).
    """
    need = {
        "parameters": inp.params * 4 / group,
        "gradients": inp.params * GRAD_BYTES_PER_PARAM / group,
        "optimizer state": inp.params * 8 / group,
    }
    if inp.activation_bytes is not None:
        need["activations"] = inp.activation_bytes
        if group > 1:
            need["gathered blocks"] = GATHERED_BLOCKS * inp.block_params * inp.param_bytes
            need["embedding and head whole, with gradients"] = 2 * inp.root_params * inp.param_bytes
    return need


def _describe(need: dict[str, float]) -> str:
    return ", ".join(f"{part} {_gib(n)}" for part, n in need.items())


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def _ring(size: float, n: int, factor: int) -> float:
    """Bytes each process moves for a ring collective of ``size`` over ``n`` (nccl-tests' bus factor)."""
    return size * factor * (n - 1) / n


def comm_seconds(strategy: str, inp: Inputs, reshard: bool) -> float | None:
    """Estimated communication seconds per optimizer step; None when a needed bandwidth is missing."""
    grads, params = inp.params * GRAD_BYTES_PER_PARAM, inp.params * inp.param_bytes
    gathers = 2 if reshard else 1
    nodes, local = inp.nodes, inp.local_world if inp.nodes > 1 else inp.world
    # A group that spans nodes runs at the inter-node bandwidth: its ring crosses the network.
    flat_bw = inp.inter_GBps if nodes > 1 else inp.intra_GBps
    if strategy == "ddp":
        return None if flat_bw is None else _ring(grads, inp.world, 2) / (flat_bw * 1e9)
    if strategy == "fsdp":
        moved = gathers * _ring(params, inp.world, 1) + _ring(grads, inp.world, 1)
        return None if flat_bw is None else moved / (flat_bw * 1e9)
    if inp.intra_GBps is None or inp.inter_GBps is None:
        return None
    inside = gathers * _ring(params, local, 1) + _ring(grads, local, 1)
    across = _ring(grads / local, nodes, 2)
    return inside / (inp.intra_GBps * 1e9) + across / (inp.inter_GBps * 1e9)


def bucket_mb(inp: Inputs, strategy: str) -> float:
    """DDP's bucket cap in MB (10^6 bytes), rule 5."""
    bandwidth = inp.inter_GBps if inp.nodes > 1 else inp.intra_GBps
    if strategy != "ddp" or bandwidth is None:
        return DEFAULT_BUCKET_MB
    target = min(max(bandwidth * 1e3 * BUCKET_TARGET_S, DEFAULT_BUCKET_MB), BUCKET_MAX_MB)
    quarter = inp.params * GRAD_BYTES_PER_PARAM / MIN_BUCKETS / 1e6
    return round(max(min(target, quarter), 1.0), 1)


def decide(inp: Inputs) -> Decision:
    """Choose the strategy for ``inp`` by the rule in this module's docstring.

    Raises:
        DecisionError: the model state does not fit even sharded over every process, nor on
            any mesh the model can be split by.
    """
    try:
        flat = decide_flat(inp)
    except DecisionError:
        split = split_mesh(inp, "where no flat strategy does")
        if split is None:
            raise
        return split
    if flat.strategy == "fsdp" and inp.nodes > 1 and slow_inter(inp):
        split = split_mesh(inp, "where flat FSDP would all-gather every block across the slow link")
        # Without a stage per node the data-parallel replicas still span the nodes, and their FSDP
        # all-gathers still cross the slow link: tensor parallelism alone does not avoid that.
        return split if split is not None and split.pp > 1 else flat
    return flat


def slow_inter(inp: Inputs) -> bool:
    return inp.inter_GBps is not None and inp.inter_GBps < SLOW_INTER_GBPS


def mesh_need(inp: Inputs, dp: int, pp: int, tp: int) -> dict[str, float]:
    """Bytes one process needs on a ``dp × pp × tp`` mesh, part by part (:func:`memory_need` for
    one without a split). The state is sharded over every process. The blocks' activations are
    split by ``tp`` (sequence parallel norms, a slice of every projection's outputs) and by
    ``pp``: 1F1B holds at most ``pp`` micro-batches of ``1/pp`` of the batch each, for ``1/pp``
    of the blocks; the loss's only by ``pp``. FSDP over ``dp > 1`` gathers blocks and the
    embedding and head in their ``tp`` slices."""
    need = {
        "parameters": inp.params * 4 / (dp * pp * tp),
        "gradients": inp.params * GRAD_BYTES_PER_PARAM / (dp * pp * tp),
        "optimizer state": inp.params * 8 / (dp * pp * tp),
    }
    if inp.activation_bytes is not None:
        need["activations"] = (inp.activation_bytes - inp.loss_bytes) / (tp * pp) + inp.loss_bytes / pp
        if dp > 1:
            need["gathered blocks"] = GATHERED_BLOCKS * inp.block_params * inp.param_bytes / tp
            need["embedding and head whole, with gradients"] = 2 * inp.root_params * inp.param_bytes / tp
    return need


def split_mesh(inp: Inputs, because: str) -> Decision | None:
    """Rule 6: the mesh with pipeline stages across slow nodes and tensor parallelism over
    NVLink-class links that fits; None when the fabric allows no split or none fits.

    Args:
        inp: what the rule rests on.
        because: why a split is considered, for the reasons.
    """
    nvlink = inp.intra_GBps is not None and inp.intra_GBps >= NVLINK_GBPS
    pp = inp.nodes if inp.nodes > 1 and slow_inter(inp) and inp.nodes in inp.pp_choices else 1
    tps = [t for t in inp.tp_choices if t > 1 and inp.local_world % t == 0] if nvlink else []
    budget = None if inp.device_memory_bytes is None else inp.device_memory_bytes * USABLE_SHARE
    for tp in ([1] if pp > 1 else []) + sorted(tps):
        dp = inp.world // (pp * tp)
        need = sum(mesh_need(inp, dp, pp, tp).values())
        if budget is not None and need > budget:
            continue
        reasons = [f"mesh dp {dp} × pp {pp} × tp {tp}"]
        if budget is not None:
            reasons.append(f"{_gib(need)} per device against {_gib(budget)} fits, {because}")
        else:
            reasons.append(because)
        if pp > 1:
            reasons.append(
                f"a pipeline stage per node: the inter-node link ({inp.inter_GBps:g} GB/s, under "
                f"{SLOW_INTER_GBPS:g}) carries activations, not parameters"
            )
        if tp > 1:
            reasons.append(
                f"tensor parallel over {tp} ranks inside a node on NVLink-class links ({inp.intra_GBps:g} GB/s, at "
                f"least {NVLINK_GBPS:g})"
            )
        if dp > 1:
            reasons.append(f"FSDP over the {dp} data-parallel replicas")
        return Decision("fsdp", dp, DEFAULT_BUCKET_MB, pp == 1, tuple(reasons), tp, pp)
    return None


def decide_flat(inp: Inputs) -> Decision:
    """Rules 1 to 5: DDP, FSDP or HSDP.

    Raises:
        DecisionError: the model state does not fit even sharded over every process.
    """
    if inp.world == 1:
        return Decision("single", 1, DEFAULT_BUCKET_MB, True, ("one process",))
    estimated = inp.activation_bytes is not None
    share = USABLE_SHARE if estimated else MEMORY_SHARE
    budget = None if inp.device_memory_bytes is None else inp.device_memory_bytes * share
    state = inp.params * STATE_BYTES_PER_PARAM
    groups = {"ddp": 1}
    if inp.shardable:
        if inp.nodes > 1 and inp.local_world > 1:
            groups["hsdp"] = inp.local_world
        groups["fsdp"] = inp.world

    def fits(extra: float, group: int) -> bool:
        return budget is None or sum(memory_need(inp, group).values()) + extra <= budget

    reasons = []
    fitting = [s for s, group in groups.items() if fits(0, group)]
    if budget is None:
        reasons.append("device memory is no constraint")
    elif estimated:
        need = sum(memory_need(inp, groups[fitting[0]] if fitting else inp.world).values())
        reasons.append(
            f"model state, activations and gathered parameters {_gib(need)} against {_gib(budget)} per device "
            f"fits {'/'.join(fitting) or 'none'}"
        )
    else:
        reasons.append(
            f"model state {_gib(state)} against {_gib(budget)} per device fits {'/'.join(fitting) or 'none'}"
        )
    if not fitting and estimated:
        need = memory_need(inp, inp.world)
        raise DecisionError(
            f"sharded over all {inp.world} processes, one needs {_gib(sum(need.values()))} ({_describe(need)}), "
            f"more than {_gib(budget)} ({USABLE_SHARE:.0%} of a device's memory): use more GPUs or GPUs with more "
            "memory, a smaller --batch-size (with --grad-accum for the same global batch), or "
            "--activation-checkpointing"
        )
    if not fitting:
        raise DecisionError(
            f"the model's state ({_gib(state)}) does not fit in {_gib(budget)} per device even sharded over all "
            f"{inp.world} processes: use more GPUs or GPUs with more memory"
        )
    cross_node_fsdp = inp.nodes > 1
    reshard = {
        s: not (s == "fsdp" and cross_node_fsdp and fits(inp.params * inp.param_bytes, groups[s])) for s in fitting
    }
    times = {s: comm_seconds(s, inp, reshard[s]) for s in fitting}
    if all(t is not None for t in times.values()) and len(fitting) > 1:
        # min keeps the first of equals
        chosen = min(fitting, key=lambda s: times[s] * (1 if s == "ddp" else SHARDING_MARGIN))
        estimates = ", ".join(f"{s} {t * 1e3:.1f} ms" for s, t in times.items())
        reasons.append(f"estimated communication per step: {estimates}")
    else:
        chosen = fitting[0]
        if len(fitting) > 1:
            reasons.append("no bandwidth measured for every candidate: the first that fits")
    if not reshard[chosen]:
        reasons.append("gathered parameters kept for the backward pass (one all-gather across nodes, not two)")
    bucket = bucket_mb(inp, chosen)
    if chosen == "ddp":
        reasons.append(f"gradient bucket {bucket:g} MB")
    return Decision(chosen, groups[chosen], bucket, reshard[chosen], tuple(reasons))

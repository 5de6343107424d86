"""How the model is spread over the job's processes: DDP, FSDP2, or HSDP across nodes.

- **DDP** (the default, ``--parallel ddp``): every rank holds the model; gradients are
  all-reduced in buckets of ``--bucket-mb``, as views into those buckets.
- **FSDP2** (``--parallel fsdp``): parameters, gradients and optimizer state are sharded over
  every rank, block by block. On CUDA the blocks compute in bf16 and reduce gradients in fp32
  (``MixedPrecisionPolicy``), the way large runs keep both speed and stable sums.
- **HSDP** (``--parallel hsdp``, or ``--fsdp``): a job on several nodes shards within each node
  and replicates across nodes (a 2-D device mesh), so the all-gathers of every layer stay on
  the fast intra-node links and only one gradient all-reduce per step crosses the network; on
  one node it is plain FSDP.
- **TP and PP** (``--tp N``, ``--pp N``, llama only): a ``dp × pp × tp`` device mesh
  (:mod:`trainer.parallelism.mesh`): each sample's layers split over ``tp`` ranks
  (:mod:`trainer.parallelism.tensor_parallel`), the layer stack over ``pp`` stages
  (:mod:`trainer.parallelism.pipeline`), and FSDP shards that over the ``dp`` replicas (over a ``dp`` of 1
  too, so that its mixed-precision policy casts a TP or PP mesh on GPUs).
- ``--parallel auto``: one of these, chosen at start by :mod:`trainer.parallelism.strategy`.

A token model (GPT or Llama) is built on the meta device, with no storage: DDP materialises
it whole on every rank, FSDP only after sharding, so no rank ever holds the whole model, and
both draw the same initial weights (:func:`trainer.models.draw_parameters`).

``--activation-checkpointing`` recomputes each block's activations in the backward pass;
``--compile`` compiles each block on its own under FSDP, leaving the per-block
all-gathers and reduce-scatters to FSDP's hooks.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel

from ..config import Config, UsageError
from ..console import log
from .mesh import MESH_DIMS, CommSettings, MeshShape, comm_settings, mesh_shape
from .pipeline import split_stage
from .tensor_parallel import apply_tensor_parallel
from .topology import Topology


@dataclass
class Parallel:
    """The model as the training loop calls it.

    Args:
        forward: what the loop calls: the DDP wrapper, or the model itself (FSDP, or one
            process).
        ddp: the DDP wrapper, for ``no_sync`` during gradient accumulation; None otherwise.
        sharded: whether the parameters are FSDP shards (DTensors).
    """

    forward: torch.nn.Module
    ddp: DistributedDataParallel | None
    sharded: bool
    kind: str
    """For the start-up log line: DDP, FSDP, HSDP (with its mesh), the TP/PP mesh, or one process."""
    mesh: MeshShape
    """The job as ``dp × pp × tp``; ``dp`` is the world without ``--tp`` or ``--pp``."""
    dp_rank: int
    """Which data-parallel replica this rank belongs to: what share of each batch it reads."""
    fsdp: bool = False
    """Whether the model is wrapped by ``fully_shard`` (its gradient sync can be deferred)."""
    stage: int = 0
    """This rank's pipeline stage."""
    pipeline_group: dist.ProcessGroup | None = None
    """This rank's pipeline, one rank per stage; None without ``--pp``."""


OPTIONS_TYPES: dict[str, Any] = {"nccl": dist.ProcessGroupNCCL.Options} if dist.is_nccl_available() else {}
"""The backends whose process groups take per-group options, and the options' type: NCCL's alone
(gloo's groups are built from the timeout only, ``_new_process_group_helper`` in torch 2.13
``torch/distributed/distributed_c10d.py``)."""


def nccl_options(setting: CommSettings, options: Any, timeout: timedelta) -> Any:
    """``options`` (a fresh ``ProcessGroupNCCL.Options``) filled in from ``setting``, with the
    run's collective ``timeout``: ``DeviceMesh`` hands each dimension's options to ``new_group``
    with ``timeout=options._timeout``, and a group created without one would fall back to torch's
    default rather than ``--timeout-s`` (torch 2.13 ``torch/distributed/device_mesh.py``,
    ``_init_one_process_group``)."""
    options.is_high_priority_stream = setting.high_priority
    options._timeout = timeout
    return options


def mesh_overrides(
    settings: tuple[CommSettings, ...], backend: str, timeout: timedelta
) -> dict[str, tuple[str, Any]] | None:
    """``init_device_mesh``'s ``backend_override``: each dimension's options, by name, on
    ``backend`` (the default group's); None on a backend that takes no options."""
    options_type = OPTIONS_TYPES.get(backend)
    if options_type is None or not settings:
        return None
    return {s.dim: (backend, nccl_options(s, options_type(), timeout)) for s in settings}


def split_mesh(shape: MeshShape, topo: Topology, settings: tuple[CommSettings, ...], timeout: timedelta) -> DeviceMesh:
    """The ``pp × dp × tp`` device mesh, each dimension's groups created with its options."""
    overrides = mesh_overrides(settings, dist.get_backend(), timeout)
    return init_device_mesh(
        topo.device.type, (shape.pp, shape.dp, shape.tp), mesh_dim_names=MESH_DIMS, backend_override=overrides
    )


def fsdp_mesh(topo: Topology) -> DeviceMesh | None:
    """The HSDP mesh (replicate across nodes, shard within a node) for a job on several
    nodes with the same number of processes each; None (plain FSDP over every rank) on
    one node."""
    nodes = topo.world // topo.local_world
    if nodes < 2 or topo.world % topo.local_world:
        return None
    return init_device_mesh(topo.device.type, (nodes, topo.local_world), mesh_dim_names=("replicate", "shard"))


def shard_blocks(model: torch.nn.Module, cfg: Config, topo: Topology, mesh: DeviceMesh | None, reshard: bool) -> None:
    """``fully_shard`` each block (compiled first under ``--compile``), then the model, over
    ``mesh`` (every rank when None)."""
    # bf16 compute, fp32 gradient reduction on GPUs; CPUs here have no fast bf16 and
    # keep fp32, which also keeps CPU runs bit-reproducible.
    cuda = topo.device.type == "cuda"
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if cuda else None
    kwargs = {"mesh": mesh, "reshard_after_forward": reshard, **({"mp_policy": policy} if policy else {})}
    for block in model.blocks:
        if cfg.compile:
            block.compile()
        fully_shard(block, **kwargs)
    fully_shard(model, **kwargs)


FSDP_POLICY, AUTOCAST, FP32 = "FSDP mixed precision", "autocast", "fp32"


def fully_shards(shape: MeshShape, fsdp: bool) -> bool:
    """Whether the model goes under ``fully_shard``: a ``--tp``/``--pp`` mesh always, over its
    ``dp`` dimension even when that has one rank, so that its bf16 comes from FSDP's
    ``MixedPrecisionPolicy`` as in every other sharded run, never from autocast wrapped around a
    pipeline's forward and backward; a flat run under ``--parallel fsdp``/``hsdp`` on more than
    one process.

    torchtitan shards over its ``fsdp`` mesh dimension even at size 1 for the same reason (commit 00b7f56,
    ``_mesh_exist`` in ``torchtitan/distributed/parallel_dims.py``), having found autocast
    wrapped around a pipeline's forward and backward to hang and around TP to lose throughput
    (commit 0b44d4c, ``maybe_enable_amp`` in ``torchtitan/distributed/utils.py``).
    """
    return shape.tp * shape.pp > 1 or (fsdp and shape.dp > 1)


def compute_precision(device_type: str, fsdp: bool) -> str:
    """How the blocks come to compute in bf16 on GPUs, so that every mesh computes as the flat runs do.

    A model under ``fully_shard`` (:func:`fully_shards`; every ``--tp``/``--pp`` mesh) is cast by
    its ``MixedPrecisionPolicy`` (:func:`shard_blocks`); DDP and one process run their forward
    pass and loss, not the backward, under autocast. CPUs keep fp32 (no fast bf16;
    bit-reproducible runs).

    Returns:
        :data:`FSDP_POLICY`, :data:`AUTOCAST` or :data:`FP32`.
    """
    if device_type != "cuda":
        return FP32
    return FSDP_POLICY if fsdp else AUTOCAST


def precision_context(precision: str, device_type: str) -> contextlib.AbstractContextManager:
    """What the forward pass and the loss run under for ``precision``."""
    if precision == AUTOCAST:
        return torch.autocast(device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def materialize(model: torch.nn.Module, cfg: Config, topo: Topology) -> None:
    """Give a model built on the meta device its storage on this rank's device and its
    initial weights, drawn from ``--seed``; a model with storage is left as it is."""
    if not any(p.is_meta for p in model.parameters()):
        return
    # Swapping the tensors into the existing Parameter objects, rather than making new
    # ones module by module, keeps a parameter that two modules share (the GPT's tied
    # embedding) one parameter. FSDP's DTensors are always swapped.
    swapping = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        model.to_empty(device=topo.device)
    finally:
        torch.__future__.set_swap_module_params_on_conversion(swapping)
    model.init_weights(torch.Generator(topo.device).manual_seed(cfg.seed))


def parallelize(model: torch.nn.Module, cfg: Config, topo: Topology) -> Parallel:
    """Wrap ``model`` (on its device, or on the meta device) for data parallelism over the
    job, giving a meta-device model its storage and initial weights.

    Returns:
        How the loop calls the model; ``model`` itself keeps its parameter names.
    """
    if getattr(model, "blocks", None) is not None:
        model.checkpoint_activations = cfg.activation_checkpointing
    if cfg.tp * cfg.pp > 1:
        return split_parallelize(model, cfg, topo)
    flat = MeshShape(topo.world, 1, 1)
    if fully_shards(flat, cfg.fsdp):
        mesh = fsdp_mesh(topo) if cfg.parallel == "hsdp" else None
        shard_blocks(model, cfg, topo, mesh, cfg.reshard_after_forward)
        materialize(model, cfg, topo)
        kind = f"HSDP, {mesh.shape[0]} replicas × {mesh.shape[1]} shards" if mesh is not None else "FSDP"
        return Parallel(model, None, True, kind, flat, topo.rank, fsdp=True)
    materialize(model, cfg, topo)
    forward: torch.nn.Module = model
    ddp = None
    if topo.world > 1:
        # Gradients as views into the all-reduce buckets: one copy fewer per step.
        ddp = DistributedDataParallel(
            model,
            device_ids=[topo.device.index] if topo.device.type == "cuda" else None,
            gradient_as_bucket_view=True,
            bucket_cap_mb=cfg.bucket_mb,
        )
        forward = ddp
    if cfg.compile:
        # Compiling the DDP wrapper is the supported way to keep its bucketed all-reduce
        # overlapping the backward pass.
        forward = torch.compile(forward)
    return Parallel(forward, ddp, False, "DDP" if ddp is not None else "one process", flat, topo.rank)


def split_parallelize(model: torch.nn.Module, cfg: Config, topo: Topology) -> Parallel:
    """Place ``model`` (a Llama on the meta device) on the ``dp × pp × tp`` mesh: keep this rank's
    pipeline stage, split its layers over the tensor-parallel group, shard that over the
    data-parallel replicas, and give it storage and its initial weights.

    Raises:
        UsageError: ``--tp × --pp`` does not divide the world size.
    """
    try:
        shape = mesh_shape(topo.world, cfg.tp, cfg.pp)
    except ValueError as err:
        raise UsageError(str(err)) from None
    settings = comm_settings(shape, topo.local_world)
    if topo.is_main and settings:
        applied = (
            "NCCL options" if dist.get_backend() in OPTIONS_TYPES else f"NCCL options (not on {dist.get_backend()})"
        )
        log(f"mesh {shape.describe()}, {applied} per dimension: " + "; ".join(s.describe() for s in settings))
    mesh = split_mesh(shape, topo, settings, timedelta(seconds=cfg.timeout_s))
    replica, stage, _ = shape.coordinates(topo.rank)
    if shape.pp > 1:
        split_stage(model, stage, shape.pp)
    if shape.tp > 1:
        apply_tensor_parallel(model, mesh["tp"])
    fsdp = fully_shards(shape, cfg.fsdp)
    if fsdp:
        # Under a pipeline every micro-batch runs forward and backward apart: regathering each
        # block's parameters for every one of them would multiply the all-gathers.
        shard_blocks(model, cfg, topo, mesh["dp"], cfg.reshard_after_forward and shape.pp == 1)
    materialize(model, cfg, topo)
    group = mesh["pp"].get_group() if shape.pp > 1 else None
    kind = f"mesh {shape.describe()}" + (f", FSDP over dp {shape.dp}" if fsdp else "")
    return Parallel(model, None, True, kind, shape, replica, fsdp, stage, group)

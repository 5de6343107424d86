"""At start: the fabric probe (``--fabric-probe``) and the ``--parallel auto`` choice.

:func:`resolve` runs before the model is wrapped. It probes the fabric when asked to (or reads a
recorded probe, ``--fabric-record``), writes the probe to ``<output-dir>/fabric-probe.json``,
lets :func:`trainer.parallelism.strategy.decide` choose, logs the choice with the figures it rested on, and
returns the config with the choice filled in; an explicit ``--parallel`` is never overridden.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from ..checkpoints.sharded import write_atomic
from ..config import Config, UsageError, check_split, token_shape
from ..console import log
from ..models import LOSS_BYTES_PER_LOGIT, block_params
from ..telemetry.exporter import Exporter
from ..telemetry.metric_names import MESH_LABELS, PARALLEL_MESH, PARALLEL_STRATEGY, SHARD_GROUP, STRATEGY_LABEL
from .fabric import FORMAT, INTER, INTRA, FabricReport, probe
from .mesh import MeshShape
from .strategy import Decision, DecisionError, Inputs, decide
from .topology import Topology

PROBE_FILE = "fabric-probe.json"


@dataclass
class Network:
    """What :func:`resolve` found: the config to train with, and what it rested on.

    Args:
        cfg: the config, ``parallel`` resolved.
        decision: the ``auto`` choice; None when ``--parallel`` was given.
        fabric: the probe's result; None when none ran or was read.
    """

    cfg: Config
    decision: Decision | None
    fabric: FabricReport | dict | None

    def export(self, exporter: Exporter, topo: Topology, mesh: MeshShape) -> None:
        """Serve the strategy, its shard group, the device mesh and the probe's figures."""
        strategy = self.cfg.parallel if topo.world > 1 else "single"
        exporter.set(PARALLEL_STRATEGY, 1, **{STRATEGY_LABEL: strategy})
        shard = {"ddp": 1, "fsdp": topo.world, "hsdp": hsdp_group(topo)}.get(strategy, 1)
        # Beside tensor or pipeline parallelism FSDP shards over the data-parallel replicas only.
        exporter.set(SHARD_GROUP, mesh.dp if mesh.tp * mesh.pp > 1 and strategy == "fsdp" else shard)
        exporter.set(PARALLEL_MESH, 1, **dict(zip(MESH_LABELS, map(str, (mesh.dp, mesh.pp, mesh.tp)), strict=True)))
        if isinstance(self.fabric, FabricReport):
            self.fabric.export(exporter)


def hsdp_group(topo: Topology) -> int:
    """HSDP's shard group: a node's processes on several even nodes, else every process."""
    nodes = topo.world // topo.local_world
    return topo.local_world if nodes > 1 and topo.world % topo.local_world == 0 else topo.world


def read_record(path: str) -> dict:
    """The summary of a recorded probe, ``{"intra-node/all_reduce": GB/s, ...}``.

    Raises:
        UsageError: the file is missing or is not a fabric probe's JSON.
    """
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise UsageError(f"--fabric-record {path}: cannot read a fabric probe's JSON ({err})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise UsageError(f"--fabric-record {path}: not a fabric probe's JSON (its format must be {FORMAT!r})")
    return document


def device_memory(topo: Topology) -> int | None:
    """One device's memory in bytes; None on CPU, where host memory is taken as no constraint."""
    if topo.device.type != "cuda":
        return None
    return torch.cuda.get_device_properties(topo.device).total_memory


def memory_inputs(model: torch.nn.Module, cfg: Config, cuda: bool) -> dict[str, int]:
    """The model's activation estimate for one micro-batch of ``--batch-size`` and its block size,
    as :class:`trainer.parallelism.strategy.Inputs` takes them; nothing for a model without an estimate (the
    cnn). The blocks' activations are bf16 on GPUs (autocast, or FSDP's mixed precision), fp32 on
    CPUs; the loss's are fp32 on both.
    """
    estimate = getattr(model, "activation_values_per_token", None)
    if estimate is None:
        return {}
    tokens = cfg.batch_size * model.cfg.seq_len
    loss = LOSS_BYTES_PER_LOGIT * model.cfg.vocab_size * tokens
    return {
        "activation_bytes": estimate(cfg.activation_checkpointing) * (2 if cuda else 4) * tokens + loss,
        "loss_bytes": loss,
        "block_params": block_params(model),
        "root_params": sum(p.numel() for p in model.parameters())
        - sum(p.numel() for block in model.blocks for p in block.parameters()),
    }


def split_choices(cfg: Config, topo: Topology) -> dict[str, tuple[int, ...]]:
    """The tensor-parallel degrees inside a node and the pipeline depths up to the node count that
    the model and batch can be split by (:func:`trainer.config.check_split`); none but the llama's."""
    if cfg.model != "llama":
        return {}
    shape, size, batch = token_shape(cfg), cfg.llama_size, cfg.batch_size
    nodes = topo.world // topo.local_world
    return {
        "tp_choices": tuple(t for t in range(1, topo.local_world + 1) if not check_split(shape, size, t, 1, batch, 1)),
        "pp_choices": tuple(p for p in range(1, nodes + 1) if not check_split(shape, size, 1, p, batch, p)),
    }


def resolve(cfg: Config, topo: Topology, model: torch.nn.Module) -> Network:
    """Probe, choose and log, as the flags ask. A collective when a probe runs.

    Args:
        cfg: the validated config.
        topo: this process's place in the job.
        model: the model, on any device (the meta device included): only its size is read.

    Returns:
        The config to train with and what the choice rested on.

    Raises:
        UsageError: an unreadable ``--fabric-record``, or ``--parallel auto`` with a model that
            fits nowhere.
    """
    fabric: FabricReport | dict | None = None
    auto = cfg.parallel == "auto"
    if cfg.fabric_record and auto:
        fabric = read_record(cfg.fabric_record)
        summary = fabric.get("summary_busbw_GBps", {})
    elif (cfg.fabric_probe or auto) and topo.world > 1:
        fabric = probe(topo)
        summary = fabric.summary()
        if topo.is_main:
            write_atomic(Path(cfg.output_dir) / PROBE_FILE, dumps(fabric.to_json()))
            log("fabric probe (best bus bandwidth, GB/s): " + describe(summary))
    else:
        summary = {}
    if not auto:
        return Network(cfg, None, fabric)
    inputs = Inputs(
        params=sum(p.numel() for p in model.parameters()),
        world=topo.world,
        local_world=topo.local_world,
        device_memory_bytes=device_memory(topo),
        param_bytes=2 if topo.device.type == "cuda" else 4,
        intra_GBps=summary.get(f"{INTRA}/all_reduce"),
        inter_GBps=summary.get(f"{INTER}/all_reduce"),
        shardable=getattr(model, "blocks", None) is not None,
        **memory_inputs(model, cfg, topo.device.type == "cuda"),
        **split_choices(cfg, topo),
    )
    try:
        decision = decide(inputs)
    except DecisionError as err:
        raise UsageError(f"--parallel auto: {err}") from None
    if topo.is_main:
        source = f"recorded in {cfg.fabric_record}" if cfg.fabric_record else "measured"
        log(
            f"--parallel auto chose {decision.strategy} (as {' '.join(decision.flags())}): "
            f"{inputs.params} parameters, all-reduce bus bandwidth {source}: intra-node {gbps(inputs.intra_GBps)}, "
            f"inter-node {gbps(inputs.inter_GBps)}; " + "; ".join(decision.reasons)
        )
    strategy = "ddp" if decision.strategy == "single" else decision.strategy
    chosen = replace(
        cfg,
        parallel=strategy,
        fsdp=strategy in ("fsdp", "hsdp"),
        bucket_mb=decision.bucket_mb,
        reshard_after_forward=decision.reshard_after_forward,
        tp=decision.tp,
        pp=decision.pp,
    )
    return Network(chosen, decision, fabric)


def dumps(document: dict) -> bytes:
    """A probe's JSON document as written to the output volume."""
    return (json.dumps(document, indent=2) + "\n").encode()


def gbps(value: float | None) -> str:
    return "not measured" if value is None else f"{value:g} GB/s"


def describe(summary: dict[str, float | None]) -> str:
    return ", ".join(f"{key} {value:g}" for key, value in summary.items() if value is not None) or "nothing to measure"

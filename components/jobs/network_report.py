"""What ``ack-jobs get`` shows of a job's network: the parallel strategy the trainer chose or was
given, its device mesh when it splits the model (``--tp``, ``--pp``), and the bandwidths its fabric probe measured (``trainer/parallelism/fabric.py``), both read from rank 0's
``/metrics`` exposition."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from trainer.telemetry.metric_names import (
    FABRIC_BUS_BANDWIDTH,
    MESH_LABELS,
    OP_LABEL,
    PARALLEL_MESH,
    PARALLEL_STRATEGY,
    SCOPE_LABEL,
    SHARD_GROUP,
    STRATEGY_LABEL,
)

SCOPES = ("intra-node", "inter-node", "world")


def network_summary(text: str) -> str | None:
    """One line: the strategy with its shard group, and the all-reduce bus bandwidth by scope.

    Args:
        text: a Prometheus text exposition from rank 0.

    Returns:
        E.g. ``hsdp, 8 processes per shard group; all-reduce bus bandwidth intra-node 150 GB/s,
        inter-node 20 GB/s``, or ``fsdp on mesh dp 4 × pp 4 × tp 2, 4 processes per shard group``;
        None when the exposition holds neither.
    """
    strategy, shard_group, bandwidth, mesh = None, None, {}, None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == PARALLEL_STRATEGY.name and sample.value == 1:
                strategy = sample.labels[STRATEGY_LABEL]
            elif sample.name == PARALLEL_MESH.name and sample.value == 1:
                mesh = [int(sample.labels[label]) for label in MESH_LABELS]
            elif sample.name == SHARD_GROUP.name:
                shard_group = int(sample.value)
            elif sample.name == FABRIC_BUS_BANDWIDTH.name and sample.labels[OP_LABEL] == "all_reduce":
                bandwidth[sample.labels[SCOPE_LABEL]] = sample.value
    parts = []
    if strategy is not None:
        group = f", {shard_group} processes per shard group" if shard_group and shard_group > 1 else ""
        split = mesh is not None and mesh[1] * mesh[2] > 1
        shape = (
            f" on mesh {' × '.join(f'{label} {n}' for label, n in zip(MESH_LABELS, mesh, strict=True))}"
            if split
            else ""
        )
        parts.append(f"{strategy}{shape}{group}")
    if bandwidth:
        figures = ", ".join(f"{scope} {bandwidth[scope] / 1e9:.3g} GB/s" for scope in SCOPES if scope in bandwidth)
        parts.append(f"all-reduce bus bandwidth {figures}")
    return "; ".join(parts) or None

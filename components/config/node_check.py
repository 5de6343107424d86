"""The pre-job node check of a multi-node GPU job (``jobs[].nodeCheck``; docs/node-health.md)."""

from __future__ import annotations

from pydantic import Field

from .base import Spec

DEFAULT_MIN_SHARE = 0.8
"""A healthy node's all-reduce stays within a few percent of its pool's best (nccl-tests practice,
as ``monitoring.alerts.minBusBandwidthOfBaseline``); a fifth lost is a degraded NVLink or GPU."""


class NodeCheckSpec(Spec):
    """An all-reduce across each pod's GPUs before training starts (an init container running
    ``python -m trainer.health.check``); a node below the baseline fails its pod before any step."""

    baseline_gbps: float = Field(gt=0)
    """The pool's all-reduce bus bandwidth across one node's GPUs, GB/s (10^9 bytes per second): the
    ``intra-node`` ``all_reduce`` figure of a ``netbench`` job on the same pool (its ``netbench.json``,
    docs/network.md)."""
    min_share: float = Field(default=DEFAULT_MIN_SHARE, gt=0, le=1)
    """Share of the baseline a node must reach."""


def node_check_problem(gpus: int, backend: str) -> str | None:
    """Why a job with ``gpus`` GPUs per pod on ``backend`` cannot take the node check, or ``None``."""
    if gpus < 2:
        return (
            f"the check all-reduces across a node's GPUs, and this job has {gpus} per node: drop nodeCheck "
            "(the fabric alerts and the DCGM controller still watch the node)"
        )
    if backend != "v1":
        return "the node check runs as an init container of v1 jobs' pods; on v2 drop nodeCheck"
    return None

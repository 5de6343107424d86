"""The Prometheus metrics the trainer and its all-reduce benchmark serve.

One table that the trainer's exporter, the platform's alert rules and its dashboard all
read, so a renamed metric cannot leave an alert or a panel watching nothing. Pure data:
the components import it without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass

METRICS_PORT = 9464
"""The port a job's rank 0 serves ``/metrics`` on (the port registered for Prometheus
exporters of OpenTelemetry, unused by the operator, torchrun and the GPU exporter)."""
METRICS_PORT_NAME = "metrics"
"""The container port's name, which the PodMonitor scrapes by."""
RANK_LABEL = "rank"
SIZE_LABEL = "size_bytes"
SCOPE_LABEL = "scope"
"""``intra-node``, ``inter-node`` or ``world`` (:mod:`trainer.parallelism.fabric`)."""
OP_LABEL = "op"
STRATEGY_LABEL = "strategy"
MESH_LABELS = ("dp", "pp", "tp")
"""The device mesh's dimensions (:mod:`trainer.parallelism.mesh`), as labels of :data:`PARALLEL_MESH`."""


@dataclass(frozen=True)
class Metric:
    """One exported metric.

    Args:
        name: the name as scraped (a counter's includes its ``_total`` suffix).
        kind: ``gauge`` or ``counter``.
        help: the HELP text.
        labels: label names beyond the ones Prometheus adds when it scrapes.
        column: the ``metrics.jsonl`` key holding the same value, if there is one.
    """

    name: str
    kind: str
    help: str
    labels: tuple[str, ...] = ()
    column: str | None = None


STEP = Metric("trainer_step", "gauge", "Optimizer steps completed.", column="step")
TRAINING_LOOP = Metric(
    "trainer_training_loop",
    "gauge",
    "1 while the run takes optimizer steps; 0 before its first step and after its last (final checkpoint, export).",
)
EPOCH = Metric("trainer_epoch", "gauge", "Epoch of the last logged step.", column="epoch")
LOSS = Metric("trainer_loss", "gauge", "Training loss at the last log step, mean over the ranks.", column="loss")
LEARNING_RATE = Metric("trainer_learning_rate", "gauge", "Learning rate at the last log step.", column="lr")
SAMPLES_PER_SECOND = Metric(
    "trainer_samples_per_second", "gauge", "Samples per second over the last log window.", column="samples_per_s"
)
TOKENS_PER_SECOND = Metric(
    "trainer_tokens_per_second", "gauge", "Tokens per second over the last log window.", column="tokens_per_s"
)
MFU = Metric(
    "trainer_mfu_ratio",
    "gauge",
    "Model FLOPs utilisation (0-1) over the last log window, checkpoint time excluded.",
    column="mfu",
)
STEP_TIME = Metric(
    "trainer_step_time_seconds", "gauge", "Mean step time of each rank over the last log window.", labels=(RANK_LABEL,)
)
PEAK_MEMORY = Metric(
    "trainer_peak_memory_bytes", "gauge", "Peak accelerator (or host) memory of each rank.", labels=(RANK_LABEL,)
)
GRAD_NORM = Metric(
    "trainer_grad_norm", "gauge", "Gradient norm at the last log step, before clipping.", column="grad_norm"
)
NONFINITE_STEPS = Metric(
    "trainer_nonfinite_steps_total",
    "counter",
    "Steps skipped because a rank's loss or gradients were not finite.",
    column="nonfinite_steps",
)
CHECKPOINT_STEP = Metric("trainer_last_checkpoint_step", "gauge", "Step of the last committed checkpoint.")
CHECKPOINT_TIME = Metric(
    "trainer_last_checkpoint_timestamp_seconds", "gauge", "Unix time at which the last checkpoint was committed."
)
CHECKPOINT_EVERY = Metric("trainer_checkpoint_every_steps", "gauge", "Steps between periodic checkpoints.")
RESTARTS = Metric(
    "trainer_restarts",
    "gauge",
    "Times torchrun restarted this run's workers in this pod (TORCHELASTIC_RESTART_COUNT).",
)
ALLREDUCE_BUS_BANDWIDTH = Metric(
    "trainer_allreduce_bus_bandwidth_bytes_per_second",
    "gauge",
    "All-reduce bus bandwidth measured by trainer.bench, by message size.",
    labels=(SIZE_LABEL,),
)
FABRIC_BUS_BANDWIDTH = Metric(
    "trainer_fabric_bus_bandwidth_bytes_per_second",
    "gauge",
    "Best bus bandwidth the fabric probe measured, by scope (intra-node, inter-node, world) and collective.",
    labels=(SCOPE_LABEL, OP_LABEL),
)
PARALLEL_STRATEGY = Metric(
    "trainer_parallel_strategy",
    "gauge",
    "1 for the strategy the run trains with (ddp, fsdp, hsdp, single); the value of the shard-group size is "
    "trainer_parallel_shard_group_size.",
    labels=(STRATEGY_LABEL,),
)
SHARD_GROUP = Metric(
    "trainer_parallel_shard_group_size", "gauge", "Processes each parameter is sharded over (1 under DDP)."
)
PARALLEL_MESH = Metric(
    "trainer_parallel_mesh",
    "gauge",
    "1, labelled with the device mesh the run trains on: dp data-parallel replicas × pp pipeline stages × tp "
    "tensor-parallel ranks (1 × 1 × 1 for one process).",
    labels=MESH_LABELS,
)

TRAINING = (
    STEP,
    TRAINING_LOOP,
    EPOCH,
    LOSS,
    LEARNING_RATE,
    SAMPLES_PER_SECOND,
    TOKENS_PER_SECOND,
    MFU,
    STEP_TIME,
    PEAK_MEMORY,
    GRAD_NORM,
    NONFINITE_STEPS,
    CHECKPOINT_STEP,
    CHECKPOINT_TIME,
    CHECKPOINT_EVERY,
    RESTARTS,
    FABRIC_BUS_BANDWIDTH,
    PARALLEL_STRATEGY,
    SHARD_GROUP,
    PARALLEL_MESH,
)
"""What a training run's rank 0 serves."""
POD = (RESTARTS,)
"""What the first process of each other pod of a run serves: its pod's restarts. Every pod is
then a live scrape target, which matters because rank 0 may be on any pod of an elastic job."""
BENCHMARK = (ALLREDUCE_BUS_BANDWIDTH, FABRIC_BUS_BANDWIDTH)
"""What ``python -m trainer.bench`` serves."""
ALL = tuple(dict.fromkeys(TRAINING + BENCHMARK))

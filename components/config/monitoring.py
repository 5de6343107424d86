"""Monitoring: which Prometheus scrapes the jobs and evaluates the alerts, the alert
thresholds, the Grafana dashboard and TensorBoard."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from .base import Cpu, DnsLabel, Labels, Quantity, Spec, check_pinned, check_pinned_tag, field_error
from .costs import BudgetSpec, CostsSpec
from .node_health import NodeHealthSpec

if TYPE_CHECKING:
    from collections.abc import Callable

PrometheusMode = Literal["arms", "operator", "none"]
ARMS_AGENT_NAMESPACE = "arms-prom"
"""Where ACK's ``arms-prometheus`` add-on runs its agent (the namespace of the ARMS monitoring objects
in aliyun/terraform-provider-alicloud's ``alicloud_arms_prometheus_monitoring`` examples)."""

DEFAULT_NO_PROGRESS_MINUTES = 15
"""Long enough for a checkpoint save or a slow evaluation, short enough that a hung
collective does not burn an hour of GPUs unnoticed."""
DEFAULT_CHECKPOINT_INTERVALS = 3
"""One missed checkpoint can be a slow save; three in a row mean saving is broken."""
DEFAULT_RESTARTS_PER_HOUR = 3
DEFAULT_BANDWIDTH_OF_BASELINE = 0.8
"""Run-to-run spread of a healthy fabric's all-reduce stays within a few percent (nccl-tests practice);
a fifth lost is a degraded link, a job spread over more switches, or RDMA fallen back to TCP."""
DEFAULT_PENDING_MINUTES = 20
"""New GPU nodes take 5-10 minutes on ACK; twice that means they are not coming (no stock, a quota,
a pod that fits no node). Below Kueue's default 30-minute pods-ready timeout, which evicts the job."""


class AlertThresholds(Spec):
    """When the platform's alerts fire. A threshold left unset switches its alert off."""

    no_progress_minutes: int = Field(default=DEFAULT_NO_PROGRESS_MINUTES, ge=5, le=1440)
    """Minutes without a new optimizer step (``trainer_step`` unchanged) before a running job counts as stuck.
    ``trainer_step`` moves at each log step (the trainer's ``--log-every``), so keep this well above the time
    between two log steps."""
    checkpoint_intervals: int = Field(default=DEFAULT_CHECKPOINT_INTERVALS, ge=2, le=100)
    """How many checkpoint intervals (the job's ``checkpointEvery`` steps) training may run past its last
    committed checkpoint."""
    restarts_per_hour: int = Field(default=DEFAULT_RESTARTS_PER_HOUR, ge=1, le=1000)
    """Restarts of one training pod (in place or recreated) or of one TrainJob's nodes within an hour that count as
    restarting repeatedly."""
    pending_minutes: int = Field(default=DEFAULT_PENDING_MINUTES, ge=5, le=1440)
    """Minutes a training pod may wait for a node before it counts as stuck pending. With Kueue keep it
    below ``trainerV2.kueue.podsReadyTimeoutMinutes``, after which Kueue evicts and requeues the job."""
    min_bus_bandwidth_gbps: float | None = Field(default=None, gt=0)
    """Lowest acceptable all-reduce bus bandwidth of the ``netbench`` job, GB/s (10^9 bytes per second), at
    its best message size, while it has no baseline yet (``minBusBandwidthOfBaseline``). Unset: no fixed
    floor (what is good depends on the fabric and GPU count)."""
    min_bus_bandwidth_of_baseline: float = Field(default=DEFAULT_BANDWIDTH_OF_BASELINE, gt=0, lt=1)
    """A ``netbench`` job's best all-reduce bus bandwidth alerts below this share of its baseline: the best any
    netbench job on the same pool, with as many nodes and the same network, measured in the 7 days before it
    (docs/network.md)."""
    min_mfu: float | None = Field(default=None, gt=0, lt=1)
    """Lowest acceptable model FLOPs utilisation (0-1) of a GPU job over 30 minutes. Unset: no alert (what
    is good depends on the model and the GPU)."""


class TensorBoardSpec(Spec):
    """TensorBoard over every job's ``<output>/<job>/tensorboard`` events, on the system nodes."""

    enabled: bool = True
    """Run TensorBoard. Left unset in a stack without jobs and without ``image``, none runs: there is no
    training image to take it from, and no events to show."""
    image: str | None = None
    """Full image reference with ``tensorboard`` installed, pinned by tag (not ``latest``) or digest; default:
    the first job's training image, which installs it (``trainer/Dockerfile``)."""
    image_tag: str | None = None
    """Tag of the training image in the platform's registry (instead of ``image``), pinned (not ``latest``)."""
    cpu: Cpu = "500m"
    """CPU requested (and the limit): TensorBoard reads event files and serves a few users."""
    memory: Quantity = "2Gi"
    """Memory requested (and the limit): it holds the loaded scalars of every run in memory."""

    @model_validator(mode="after")
    def _check(self) -> TensorBoardSpec:
        if self.image is not None:
            check_pinned(self.image, "image")
        if self.image_tag is not None:
            check_pinned_tag(self.image_tag, "imageTag")
        return self


class ExportersSpec(Spec):
    """How Prometheus labels the series of the exporters the platform reads but does not deploy. Prometheus also
    scrapes the teams' training pods, whose metrics port can serve series of any name, so the cost rules read
    kube-state-metrics' and the DCGM exporter's series only by these labels, the job alerts
    kube-state-metrics' where its label is given, and the dashboard's GPU panels, ``ack-jobs top`` and
    ``ack-jobs cost`` (from the stack output ``exporters``) the DCGM exporter's where its namespace is given."""

    kube_state_metrics_job: str | None = Field(default=None, min_length=1, max_length=253, pattern=r'^[^"\\\n]+$')
    """The ``job`` label of kube-state-metrics' series: with prometheus-operator, its ServiceMonitor's ``jobLabel``
    value on its Service, else the Service's name (kube-state-metrics' chart: its ``app.kubernetes.io/name``, such as
    ``kube-state-metrics``; ``count by (job) (kube_node_info)`` shows it). Its own series never carry ``job``, while a team's pod's served ``job``
    label is kept as ``exported_job``. Required with ``costs`` under ``prometheus: operator``; when set, the job
    alerts read only its series too. Unset: they read kube-state-metrics' series by name (under ARMS the managed
    exporter's job label is not known here)."""
    dcgm_namespace: DnsLabel | None = None
    """The namespace the DCGM exporter's pods run in, such as ``gpu-operator``; its ServiceMonitor must keep
    ``honorLabels: false`` (NVIDIA's chart does), so that a series names the GPU's pod as ``exported_namespace``
    and ``exported_pod``. Required with ``costs`` under ``prometheus: operator``; where
    ``monitoring.nodeHealth.exporterNamespace`` is set too, the same; never the training namespace or a team's,
    whose pods the platform scrapes. Unset: the dashboard's GPU panels,
    ``ack-jobs top`` and ``ack-jobs cost`` read GPU series from any namespace."""


class MonitoringSpec(Spec):
    """How the platform watches its jobs (metric names: ``trainer/telemetry/metric_names.py``)."""

    prometheus: PrometheusMode | None = None
    """``arms``: ACK's managed Prometheus (the ``arms-prometheus`` add-on), scraping configured and alert
    rules created through the ARMS API; ``operator``: a prometheus-operator the cluster runs already
    (PodMonitor, PrometheusRule and dashboard ConfigMap objects); ``none``. Default: ``arms`` on ACK,
    ``none`` on a local cluster."""
    alerts: AlertThresholds = Field(default_factory=AlertThresholds)
    dashboard: bool = True
    """Generate the training dashboard: a ConfigMap for Grafana's dashboard sidecar (``operator``) and
    ``dashboards/training.json`` in the offline plan's output, to import into ARMS Grafana."""
    labels: Labels = Field(default_factory=dict)
    """Labels added to the PodMonitors, the PrometheusRule and the dashboard ConfigMap, such as
    ``release: <its release>``, without which kube-prometheus-stack's Prometheus selects none of them;
    with ``prometheus: operator`` only, the one mode that creates those objects."""
    tensorboard: TensorBoardSpec = Field(default_factory=TensorBoardSpec)
    scraper_namespace: DnsLabel | None = None
    """The namespace of the Prometheus that scrapes the trainers: on a Terway cluster only its pods may
    reach a team's metrics port. Default: ``arms-prom`` with ``arms``; with ``operator`` name your
    Prometheus's namespace, or no pod may scrape the teams' jobs."""
    node_health: NodeHealthSpec = Field(default_factory=NodeHealthSpec)
    exporters: ExportersSpec = Field(default_factory=ExportersSpec)


@dataclass(frozen=True)
class MonitoringScope:
    """What one :class:`~components.Monitoring` watches, as the platform derives it
    (``PlatformSpec.monitoring_scope``): the stack's ``monitoring`` key, and the facts about
    the rest of the platform the scraping and the alerts depend on.

    Args:
        monitoring: the ``monitoring`` key.
        prometheus: the Prometheus that scrapes and alerts, resolved from its default.
        namespaces: where jobs run: the training namespace first, then each team's.
        v1_operator: the stack installs the Training Operator (its PodMonitor, its counters).
        trainer_v2: jobs run on Trainer v2 (the TrainJob alerts).
        tensorboard_image: TensorBoard's image as ``(full reference, tag in the registry)``.
        costs: the stack's prices (``costs``), or ``None``.
        spot_pools: the pools whose nodes are spot instances.
        budgets: each team's budget, as ``(team namespace, budget)``.
        gpu_pool: the GPU pool's name, whose nodes the node health controller watches.
        trainer_image: the image carrying the platform's ``trainer`` package, as ``(full reference, tag in the
            registry)``: the node health controller runs from it (``monitoring.nodeHealth.image``).
    """

    monitoring: MonitoringSpec
    prometheus: PrometheusMode
    namespaces: tuple[str, ...]
    v1_operator: bool
    trainer_v2: bool
    tensorboard_image: tuple[str | None, str | None] = (None, None)
    costs: CostsSpec | None = None
    spot_pools: tuple[str, ...] = ()
    budgets: tuple[tuple[str, BudgetSpec], ...] = ()
    gpu_pool: str | None = None
    trainer_image: tuple[str | None, str | None] = (None, None)

    @property
    def runs_tensorboard(self) -> bool:
        """Whether TensorBoard runs: switched on, with an image to run from."""
        return self.monitoring.tensorboard.enabled and self.tensorboard_image != (None, None)

    @property
    def cost_currency(self) -> str | None:
        """The prices' currency where the cost recording rules run (``operator`` with ``costs``): the
        dashboard's Cost row reads them; ``None`` elsewhere."""
        return self.costs.currency if self.costs is not None and self.prometheus == "operator" else None

    @property
    def home(self) -> str:
        """The namespace the monitoring objects, TensorBoard and the dashboard live in."""
        return self.namespaces[0]


def check_monitoring(
    monitoring: MonitoringSpec,
    *,
    local: bool,
    prometheus: PrometheusMode,
    tensorboard_image: Callable[[], tuple[str | None, str | None]],
    registry: bool,
    costs: bool = False,
    scraped: tuple[str, ...] = (),
) -> None:
    """The rules between ``monitoring`` and the rest of the platform.

    Args:
        monitoring: the stack's ``monitoring``.
        local: the cluster is a local one.
        prometheus: the Prometheus that watches the jobs, defaults applied.
        tensorboard_image: TensorBoard's image as (full reference, tag in the registry).
        registry: the stack has a registry.
        costs: the stack has prices (``costs``).
        scraped: the namespaces whose pods the platform's PodMonitor scrapes (the training namespace, the teams').

    Raises:
        PydanticCustomError: a rule is broken; the message names the stack key.
    """
    if local and monitoring.prometheus == "arms":
        raise field_error(
            "monitoring.prometheus",
            "ARMS is ACK's managed Prometheus and a local cluster has none: use operator (a prometheus-operator "
            "running in the cluster) or none",
        )
    if monitoring.labels and prometheus != "operator":
        raise field_error(
            "monitoring.labels",
            f"labels select the PodMonitors, PrometheusRule and dashboard ConfigMap for a prometheus-operator, "
            f"and with prometheus: {prometheus} there are none to carry them: drop labels, or set "
            "prometheus: operator",
        )
    if costs and prometheus == "operator":
        exporters = monitoring.exporters
        if exporters.kube_state_metrics_job is None:
            raise field_error(
                "monitoring.exporters.kubeStateMetricsJob",
                "the cost rules read kube-state-metrics' series, and Prometheus also scrapes the teams' pods, which "
                "could serve series of the same names: give the job label of its series (such as kube-state-metrics: "
                "count by (job) (kube_node_info) shows it), or drop costs",
            )
        if exporters.dcgm_namespace is None:
            raise field_error(
                "monitoring.exporters.dcgmNamespace",
                "the cost rules count idle GPUs from the DCGM exporter's series, and Prometheus also scrapes the "
                "teams' pods, which could serve series of the same names: give the namespace its pods run in "
                "(such as gpu-operator), or drop costs",
            )
    dcgm, health = monitoring.exporters.dcgm_namespace, monitoring.node_health.exporter_namespace
    if dcgm in scraped:
        # A series scraped from a pod there carries that namespace too, so it would pass for the exporter's.
        raise field_error(
            "monitoring.exporters.dcgmNamespace",
            f"{dcgm!r} is a namespace whose pods the platform scrapes (the training namespace or a team's), so a "
            "pod there could serve GPU series that pass for the DCGM exporter's: give the namespace its pods run in",
        )
    if dcgm is not None and health is not None and dcgm != health:
        raise field_error(
            "monitoring.exporters.dcgmNamespace",
            f"{dcgm!r} is not monitoring.nodeHealth.exporterNamespace ({health!r}): both name the namespace the DCGM "
            "exporter's pods run in; give the same",
        )
    board = monitoring.tensorboard
    if not board.enabled:
        return
    if board.image is not None and board.image_tag is not None:
        raise field_error("monitoring.tensorboard.image", "give image or imageTag, not both: drop one of them")
    image, tag = tensorboard_image()
    if image is None and tag is None and "enabled" in board.model_fields_set:
        raise field_error(
            "monitoring.tensorboard.image",
            "TensorBoard runs from the training image, and the stack has no job to take it from: give "
            "image (or imageTag), or set enabled: false",
        )
    if tag is not None and not registry:
        raise field_error(
            "monitoring.tensorboard.imageTag",
            "imageTag needs a registry; without one give a full image reference in image",
        )

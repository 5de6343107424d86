"""GPU node health: the controller that cordons GPU nodes whose DCGM series show a fault, and
its alert (``monitoring.nodeHealth``), and the pre-job node check of a multi-node GPU job
(``jobs[].nodeCheck``); docs/node-health.md."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pydantic import Field, model_validator

from trainer.health.signals import APPLICATION_XIDS, NODE_XIDS

from .base import DnsLabel, Spec, check_pinned, check_pinned_tag, field_error

if TYPE_CHECKING:
    from collections.abc import Sequence


class JobImage(Protocol):
    """What the trainer image is chosen from, of a job (:class:`.training_job.TrainingJobSpec`); a
    protocol, so that the monitoring settings stay below the jobs' specs."""

    command: list[str] | None
    image: str | None
    image_tag: str | None


DEFAULT_MAX_CORDONED_SHARE = 0.1
"""A tenth of the pool (at least one node) out at once: enough for the faults hardware has, too
few to empty the pool when a fault shows everywhere at once (a bad driver, an exporter bug)."""
DEFAULT_INTERVAL_S = 60
"""A pass a minute: about two scrapes of the exporter at its default 30-second interval."""
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


class NodeHealthSpec(Spec):
    """The GPU node health controller and the ``GPUNodeUnhealthy`` and ``GPUNodeCheckFailed`` alerts. Off unless
    enabled."""

    enabled: bool = False
    """Deploy the controller (a Deployment of ``python -m trainer.health.guard`` from ``image``, on the system
    nodes) and add the alerts."""
    image: str | None = None
    """Full reference of an image carrying the platform's ``trainer`` package (``trainer/Dockerfile``), pinned by
    tag (not ``latest``) or digest: the controller and every job's pre-job node check run from it. Default: the
    image of the first job that runs the bundled trainer (one without a ``command`` of its own)."""
    image_tag: str | None = None
    """Tag of that image in the platform's registry (instead of ``image``), pinned (not ``latest``)."""
    prometheus_url: str | None = None
    """Base URL of a Prometheus that scrapes the DCGM exporter, as the controller reaches it from the cluster, such
    as ``http://prometheus-operated.monitoring:9090`` (its ``/api/v1/query`` must answer without a login). Required
    when enabled."""
    exporter_namespace: DnsLabel | None = None
    """The namespace the DCGM exporter's pods run in, such as ``gpu-operator``. The controller and the alert read
    only the series Prometheus scraped from pods of that namespace: Prometheus also scrapes the teams' training pods,
    and a team's pod could serve series of the same names naming any node. Required when enabled."""
    max_cordoned_share: float = Field(default=DEFAULT_MAX_CORDONED_SHARE, gt=0, le=1)
    """Share of the GPU pool's nodes that may be cordoned at once (at least one node); failing nodes past it are
    left to the alert."""
    interval_seconds: int = Field(default=DEFAULT_INTERVAL_S, ge=10, le=3600)
    """Seconds between two passes of the controller."""
    cordon_xids: list[int] = Field(default_factory=lambda: sorted(NODE_XIDS))
    """XIDs (``DCGM_FI_DEV_XID_ERRORS``) that take a node out; default: those after which the GPU takes no new work
    until it is reset, the node rebooted or the board serviced (48, 64, 74, 79, 95, 119, 120). Add 63 (row remapping
    pending), 92 (high corrected error rate) or 94 (contained ECC error) to take nodes out for those too."""
    max_nvlink_errors: float | None = Field(default=None, ge=0)
    """NVLink errors a GPU may add in 10 minutes before its node is taken out (the exporter must collect the NVLink
    error counters). Unset: NVLink errors alone take no node out."""

    @model_validator(mode="after")
    def _check(self) -> NodeHealthSpec:
        application = sorted(set(self.cordon_xids) & APPLICATION_XIDS)
        if application:
            raise field_error(
                "cordonXids",
                f"XID {', '.join(map(str, application))} is raised by a job's own fault (NVIDIA's action: restart "
                "the application), so a node is not to blame: drop it",
            )
        if self.image is not None:
            check_pinned(self.image, "image")
        if self.image_tag is not None:
            check_pinned_tag(self.image_tag, "imageTag")
        if self.prometheus_url is not None and not self.prometheus_url.startswith(("http://", "https://")):
            raise field_error(
                "prometheusUrl", f"{self.prometheus_url!r} is not a URL: write http://host:port or https://host:port"
            )
        return self


def trainer_image(health: NodeHealthSpec, jobs: Sequence[JobImage]) -> tuple[str | None, str | None]:
    """The image the platform's own ``trainer`` code runs from (the node health controller, the pre-job node
    check), as ``(full reference, tag in the registry)``: ``monitoring.nodeHealth``'s, else the first job's that
    runs the bundled trainer; neither when no job does. A job with its own ``command`` may run an image without
    the ``trainer`` package, so its image is never taken."""
    if health.image is not None or health.image_tag is not None:
        return health.image, health.image_tag
    bundled = next((job for job in jobs if job.command is None), None)
    return (bundled.image, bundled.image_tag) if bundled is not None else (None, None)


NO_TRAINER_IMAGE = (
    "no job of the stack runs the bundled trainer (each has a command of its own, whose image may lack the "
    "trainer package): give monitoring.nodeHealth.image (or imageTag), an image built from trainer/Dockerfile"
)


def check_trainer_image(health: NodeHealthSpec, jobs: Sequence[JobImage], key: str) -> None:
    """``key`` (what needs the image) has an image carrying the ``trainer`` package to run from.

    Raises:
        PydanticCustomError: there is none.
    """
    if trainer_image(health, jobs) == (None, None):
        raise field_error(key, f"it runs the platform's trainer package, and {NO_TRAINER_IMAGE}")


def check_node_health(health: NodeHealthSpec, *, jobs: Sequence[JobImage], registry: bool, gpu_pool: bool) -> None:
    """The rules between ``monitoring.nodeHealth`` and the rest of the platform.

    Args:
        health: the stack's ``monitoring.nodeHealth``.
        jobs: the stack's jobs.
        registry: the stack has a registry.
        gpu_pool: the stack has a GPU pool.

    Raises:
        PydanticCustomError: a rule is broken; the message names the stack key.
    """
    if health.image is not None and health.image_tag is not None:
        raise field_error("monitoring.nodeHealth.image", "give image or imageTag, not both: drop one of them")
    if health.image_tag is not None and not registry:
        raise field_error(
            "monitoring.nodeHealth.imageTag",
            "imageTag needs a registry; without one give a full image reference in image",
        )
    if not health.enabled:
        return
    check_trainer_image(health, jobs, "monitoring.nodeHealth.image")
    if health.prometheus_url is None:
        raise field_error(
            "monitoring.nodeHealth.prometheusUrl",
            "the controller reads the DCGM exporter's series from Prometheus: give its base URL, such as "
            "http://prometheus-operated.monitoring:9090, or set enabled: false",
        )
    if health.exporter_namespace is None:
        raise field_error(
            "monitoring.nodeHealth.exporterNamespace",
            "give the namespace the DCGM exporter's pods run in (such as gpu-operator): Prometheus also scrapes the "
            "teams' training pods, and a team's pod could serve series of the same names that name any node, so only "
            "the series scraped from that namespace may cordon a node or fire the alert",
        )
    if not gpu_pool:
        raise field_error(
            "monitoring.nodeHealth.enabled",
            "there is no gpuPool whose nodes it could watch: add a gpuPool, or set enabled: false",
        )

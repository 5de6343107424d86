"""The Training Operator (v1), Volcano, Kubeflow Trainer v2 with Kueue, and the namespace
jobs run in."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated

from pydantic import Field, model_validator

from .base import (
    _VERSION_TAG,
    DEFAULT_KUEUE_VERSION,
    DEFAULT_OPERATOR_VERSION,
    DEFAULT_TRAINER_V2_VERSION,
    DEFAULT_VOLCANO_VERSION,
    HOSTNAME_LABEL,
    ZONE_LABEL,
    Cpu,
    DnsLabel,
    LabelKey,
    Quantity,
    Spec,
    check_pinned,
    check_pinned_tag,
    field_error,
)
from .job_settings import topology_problem
from .pins import KUEUE_CHARTS, OPERATOR_OVERLAYS, TRAINER_V2_CHARTS, VOLCANO_MANIFESTS
from .training_job import Backend

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .pools import GpuPoolSpec
    from .training_job import TrainingJobSpec

DEFAULT_MAX_REQUEUES = 5
"""Requeues before Kueue gives up on a job whose nodes never arrive: with the 30-minute default
timeout and Kueue's backoff, about four hours."""


def _unpinned(what: str, version: str, pinned: dict) -> str:
    return (
        f"{what} {version!r} has no pinned local copy: this platform installs {', '.join(sorted(pinned))} "
        "(add a release to components/config/pins.py)"
    )


# --- operator and namespace ----------------------------------------------------------


class VolcanoSpec(Spec):
    enabled: bool = False
    """Install Volcano and start the operator with ``--gang-scheduler-name=volcano``."""
    version: str = Field(default=DEFAULT_VOLCANO_VERSION, pattern=r"^\d+\.\d+\.\d+$")
    """Volcano release (pinned), installed from its manifest at that tag."""

    @model_validator(mode="after")
    def _check(self) -> VolcanoSpec:
        if self.enabled and self.version not in VOLCANO_MANIFESTS:
            raise field_error("version", _unpinned("Volcano", self.version, VOLCANO_MANIFESTS))
        return self


class OperatorSpec(Spec):
    """The Kubeflow Training Operator (v1) that runs PyTorchJobs."""

    install: bool = True
    """Install it (off: the cluster has one already)."""
    version: str = DEFAULT_OPERATOR_VERSION
    """Release tag of kubeflow/training-operator, pinned."""
    volcano: VolcanoSpec = Field(default_factory=VolcanoSpec)

    @model_validator(mode="after")
    def _check(self) -> OperatorSpec:
        if not _VERSION_TAG.match(self.version):
            raise field_error(
                "version", f"{self.version!r} is not a release tag: pin one such as {DEFAULT_OPERATOR_VERSION!r}"
            )
        if not self.version.startswith("v1."):
            raise field_error(
                "version", f"{self.version!r} is not a v1 release; this platform emits kubeflow.org/v1 PyTorchJobs"
            )
        if self.install and self.version not in OPERATOR_OVERLAYS:
            raise field_error("version", _unpinned("operator", self.version, OPERATOR_OVERLAYS))
        return self


class KueueTopologySpec(Spec):
    """Kueue's topology-aware scheduling of GPU v2 jobs: Kueue admits a job only where its pods fit
    together in one domain of the level its ``topology.key`` names, and pins each pod to a node.

    Kueue counts only GPU nodes that exist and are ready (kubernetes-sigs/kueue v0.19.2
    ``site/content/en/docs/concepts/topology_aware_scheduling.md``, "Capacity calculation"), so it
    never asks the autoscaler for one: the GPU pool needs ``minSize`` nodes for its largest v2 job."""

    levels: list[LabelKey] = Field(default_factory=lambda: [ZONE_LABEL], min_length=1, max_length=15)
    """Node labels, from the widest network domain to the narrowest, that every GPU node carries:
    ``topology.kubernetes.io/zone`` on any node; on ACK Lingjun nodes ``alibabacloud.com/point-of-delivery``
    then ``alibabacloud.com/asw-id`` (docs/network.md). ``kubernetes.io/hostname`` is always added
    below them. A node without all of them is left out of Kueue's count."""

    @model_validator(mode="after")
    def _check(self) -> KueueTopologySpec:
        for i, level in enumerate(self.levels):
            if level == HOSTNAME_LABEL:
                raise field_error(
                    f"levels[{i}]", f"{HOSTNAME_LABEL} is always the lowest level, added by the platform: drop it"
                )
            if level in self.levels[:i]:
                raise field_error(f"levels[{i}]", f"{level!r} is listed twice: each level once")
        return self

    @property
    def node_levels(self) -> tuple[str, ...]:
        """The Topology's levels: ``levels`` and the host below them. Kueue accepts the host only as
        the lowest level, and with it there pins every pod to a node and heeds node taints
        (v0.19.2 ``apis/kueue/v1beta2/topology_types.go``, ``site/static/examples/tas/sample-gpu-queues.yaml``)."""
        return (*self.levels, HOSTNAME_LABEL)


class KueueSpec(Spec):
    """Queueing and quota for v2 jobs with Kueue."""

    enabled: bool = False
    """Create a ClusterQueue with the GPU quota and a LocalQueue in the training namespace, and
    label every v2 job with it (``kueue.x-k8s.io/queue-name``)."""
    install: bool = True
    """Install Kueue from its Helm chart with the TrainJob integration and ``waitForPodsReady`` (off: the
    cluster runs Kueue already, with its TrainJob integration on)."""
    version: str = Field(default=DEFAULT_KUEUE_VERSION, pattern=r"^\d+\.\d+\.\d+$")
    """Kueue Helm chart version (pinned)."""

    @model_validator(mode="after")
    def _check(self) -> KueueSpec:
        if self.version not in KUEUE_CHARTS:
            raise field_error("version", _unpinned("Kueue", self.version, KUEUE_CHARTS))
        if self.priorities and not self.enabled:
            raise field_error(
                "priorities",
                "WorkloadPriorityClasses order Kueue's queue, and Kueue is off: set enabled: true, or drop priorities "
                "(a v1 job takes a pod PriorityClass in scheduling.priorityClass)",
            )
        return self

    pods_ready_timeout_minutes: int = Field(default=30, ge=1)
    """How long an admitted job's pods may take to run, new GPU nodes included; then Kueue evicts the job
    and requeues it, so a job holds its quota only while all of its pods can run."""
    max_requeues: int | None = Field(default=DEFAULT_MAX_REQUEUES, ge=0)
    """Requeues after ``podsReadyTimeoutMinutes`` before Kueue deactivates the job (it then stays suspended,
    with its Workload's ``spec.active`` false, until someone sets it back to true); ``null`` requeues for
    ever. Requeues wait 60 s, doubling up to an hour."""
    priorities: dict[DnsLabel, Annotated[int, Field(ge=-(2**31), lt=2**31)]] = Field(default_factory=dict)
    """Kueue WorkloadPriorityClasses to create, name → value; a v2 job names one in
    ``scheduling.priorityClass``. With any, a job of higher priority preempts lower ones in the queue
    (they checkpoint on SIGTERM and are requeued)."""
    cpu_quota: Cpu = "1024"
    """CPUs the queue admits at once, for CPU jobs and again for GPU jobs (one flavor each). Kueue
    admits a job only when its queue covers every resource the pods request; GPUs are the quota that
    matters (``training.gpuQuota``)."""
    memory_quota: Quantity = "8Ti"
    """Memory the queue admits at once (see ``cpuQuota``)."""
    topology: KueueTopologySpec | None = None
    """Place GPU v2 jobs with Kueue's topology-aware scheduling (``{}``: by zone); unset: GPU jobs
    are admitted by quota alone and a job's ``topology`` is a pod affinity, as on v1."""

    @property
    def topology_levels(self) -> tuple[str, ...]:
        """The levels GPU v2 jobs are placed over; empty without topology-aware scheduling."""
        return self.topology.node_levels if self.enabled and self.topology is not None else ()


def check_kueue_topology(
    kueue: KueueSpec,
    *,
    pool: GpuPoolSpec | None,
    jobs: Sequence[TrainingJobSpec],
    job_backend: Callable[[TrainingJobSpec], Backend],
    job_gpus: Callable[[TrainingJobSpec], int],
) -> None:
    """The rules between ``trainerV2.kueue.topology``, the GPU pool and the v2 jobs.

    Args:
        kueue: the stack's ``trainerV2.kueue``.
        pool: the stack's GPU pool.
        jobs: the stack's jobs.
        job_backend: the API that runs a job on this platform.
        job_gpus: GPUs per pod of a job on this platform.

    Raises:
        PydanticCustomError: a rule is broken; the message names the stack key.
    """
    if kueue.topology is None:
        return
    key = "trainerV2.kueue.topology"
    if not kueue.enabled:
        raise field_error(key, "topology-aware scheduling is Kueue's: set trainerV2.kueue.enabled: true, or drop it")
    if pool is None:
        raise field_error(key, "it places GPU jobs on the GPU pool's nodes and the stack has no gpuPool: drop it")
    if pool.min_size == 0:
        raise field_error(
            "gpuPool.minSize",
            "0 nodes: Kueue's topology-aware scheduling admits a GPU job only onto nodes that exist, so the "
            "autoscaler is never asked for the first one; give minSize the nodes of the largest v2 GPU job, or "
            f"drop {key}",
        )
    for i, job in enumerate(jobs):
        if job_backend(job) != "v2" or not job_gpus(job):
            continue
        if job.nodes > pool.min_size:
            raise field_error(
                f"jobs[{i}].nodes",
                f"{job.nodes} nodes, but the GPU pool keeps {pool.min_size} (gpuPool.minSize) and Kueue's "
                f"topology-aware scheduling ({key}) admits a job only onto nodes that exist: raise minSize",
            )
        problem = topology_problem(job.topology, kueue.topology_levels)
        if problem is not None:
            raise field_error(f"jobs[{i}].topology.key", problem)


class TrainerV2Spec(Spec):
    """Kubeflow Trainer v2 (``trainer.kubeflow.org/v1alpha1``), which runs TrainJobs; it can run
    beside the v1 Training Operator."""

    install: bool | None = None
    """Install its Helm chart (controller, CRDs, webhooks); on when a job runs on backend v2.
    Off: the cluster has Trainer v2 already (the platform's runtimes are still created)."""
    version: str = DEFAULT_TRAINER_V2_VERSION
    """Release tag of kubeflow/trainer, pinned; the chart version is the tag without ``v``."""
    jobset: bool = True
    """Install JobSet, which Trainer v2 runs jobs with, as the chart's dependency (off: the cluster
    runs JobSet already)."""
    kueue: KueueSpec = Field(default_factory=KueueSpec)
    runtime_image: str | None = None
    """Full reference, pinned by tag or digest, of the image the platform's runtimes run a TrainJob with
    when the job names none (the Kubeflow SDK's ``CustomTrainer``); default: ``runtimeImageTag``, else the
    first job's training image."""
    runtime_image_tag: str | None = None
    """Tag of the training image in the platform's registry for the runtimes (instead of ``runtimeImage``)."""
    pip_index_url: str | None = None
    """The PyPI index, such as a mirror reachable from the cluster, that pip in the runtimes' trainer
    containers installs from (``PIP_INDEX_URL``); the Kubeflow SDK's ``packages_to_install`` takes it
    through ``pip_index_urls`` (docs/sdk.md)."""

    @model_validator(mode="after")
    def _check(self) -> TrainerV2Spec:
        if not re.match(r"^v2\.\d+\.\d+$", self.version):
            raise field_error(
                "version",
                f"{self.version!r} is not a Trainer v2 release tag: pin one such as {DEFAULT_TRAINER_V2_VERSION!r}",
            )
        if self.version not in TRAINER_V2_CHARTS:
            raise field_error("version", _unpinned("Trainer", self.version, TRAINER_V2_CHARTS))
        if self.runtime_image is not None and self.runtime_image_tag is not None:
            raise field_error("runtimeImage", "give runtimeImage or runtimeImageTag, not both: drop one of them")
        if self.runtime_image is not None:
            check_pinned(self.runtime_image, "runtimeImage")
        if self.runtime_image_tag is not None:
            check_pinned_tag(self.runtime_image_tag, "runtimeImageTag")
        if self.pip_index_url is not None and not re.match(r"^https?://[^\s/]+", self.pip_index_url):
            raise field_error(
                "pipIndexUrl",
                f"{self.pip_index_url!r} is not an index URL: give one such as "
                "'https://mirrors.aliyun.com/pypi/simple/'",
            )
        return self


class TrainingNamespaceSpec(Spec):
    """The namespace jobs run in, and what every job there shares."""

    namespace: DnsLabel = "training"
    service_account: DnsLabel = Field(default="trainer")
    gpu_quota: int | None = Field(default=None, ge=0)
    """Most GPUs all jobs in the namespace may request together (no quota when unset)."""
    backend: Backend = "v1"
    """Kubeflow API of every job without its own ``backend``: ``v1`` (PyTorchJob, Training Operator) or ``v2``
    (TrainJob, Kubeflow Trainer v2)."""

"""The parts of a training job's spec: trainer flags, elastic sizing, run and scheduling
policy, tolerations, topology, secret references, and the image-pinning rule every
image a job names follows."""

from __future__ import annotations

import posixpath
from typing import Annotated, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from trainer.config import LLAMA_SIZES, PARALLEL_CHOICES, Config, flag_problem, model_problem

from .base import (
    CODE_MOUNT,
    DATA_MOUNT,
    OUTPUT_MOUNT,
    UNION_TAGS,
    ZONE_LABEL,
    DnsLabel,
    EnvValue,
    LabelKey,
    LabelValue,
    Spec,
    check_pinned,
    check_pinned_tag,
    field_error,
)

RESERVED_PRIORITY_PREFIX = "system-"
"""Kubernetes reserves PriorityClass names starting with ``system-`` for itself
(``system-node-critical``, ``system-cluster-critical``): pods with them preempt and outlive
the cluster's own components."""


def check_priority_class(name: str | None, key: str) -> None:
    """Refuse a system-reserved priority class for a training job."""
    if name is not None and name.startswith(RESERVED_PRIORITY_PREFIX):
        raise field_error(
            key,
            f"{name!r} is reserved for the cluster's own components (PriorityClasses named {RESERVED_PRIORITY_PREFIX}*): "
            "a training job with it could preempt and outlive them; give a PriorityClass of your own",
        )


class ElasticSpec(Spec):
    min_nodes: int = Field(ge=1)
    max_nodes: int = Field(ge=1)
    max_restarts: int = Field(default=3, ge=0)
    """Restarts of the whole worker group torchrun allows after a failure or membership change."""

    @model_validator(mode="after")
    def _check(self) -> ElasticSpec:
        if self.min_nodes > self.max_nodes:
            raise field_error("minNodes", f"minNodes ({self.min_nodes}) must not exceed maxNodes ({self.max_nodes})")
        return self


AbsolutePath = Annotated[str, Field(pattern=r"^/")]


TRAINER_ENV_FIELDS = ("init_from", "final_model_path")
"""Fields a job passes not as flags but as the variables their flags default to, ``MODEL_PATH`` and
``FINAL_MODEL_PATH`` (``manifests/job_env.py`` sets them beside the job's other paths)."""


def _below(path: str, mount: str) -> bool:
    """Whether ``path`` names a file inside the directory ``mount`` (``..`` resolved)."""
    return posixpath.normpath(path).startswith(mount + "/")


class TrainerArgs(Spec):
    """Flags for the bundled trainer (``python -m trainer``); unset, each is the trainer's own default
    (``trainer/config.py``)."""

    # The fields are in the order of the flags in the job's command (to_flags): a new field goes
    # after the others, so that the commands of existing jobs stay as they are.
    model: str = Field(default=Config.model, examples=["own_models.mixer:factory", "llama"])
    """``cnn`` (the MNIST convnet), ``gpt`` (a small decoder), ``llama`` (a Llama-family decoder, sized by
    ``llamaSize``), or your own model's factory as ``package.module:factory``, imported from the job's
    ``code`` (docs/trainer.md)."""
    batch_size: int = Field(default=Config.batch_size, ge=1)
    """Samples per process in each step, or in each micro-step under ``--grad-accum``."""
    checkpoint_every: int = Field(default=Config.checkpoint_every, ge=1)
    """Steps between checkpoints; the most work a preemption can lose."""
    max_steps: int | None = Field(default=Config.max_steps, ge=1)
    """Optimizer steps; with ``epochs`` the run ends at whichever comes first, and the learning rate
    anneals to that end."""
    epochs: int | None = Field(default=Config.epochs, ge=1)
    """Passes over the data; unlimited under ``maxSteps`` alone, one when neither is set."""
    lr: float | None = Field(default=Config.lr, gt=0)
    """Peak learning rate, reached after the warm-up; the trainer's default for the model when unset."""
    synthetic_data: bool = Field(default=False)
    """Train on generated data instead of the data volume (smoke tests)."""
    parallel: Literal[PARALLEL_CHOICES] | None = Field(default=None)
    """``ddp`` (the trainer's default), ``fsdp``, ``hsdp`` (shard within a node, replicate across nodes), or
    ``auto``: chosen at start from the model's size, the GPU memory and a fabric probe (docs/network.md)."""
    fabric_probe: bool = Field(default=Config.fabric_probe)
    """Time the collectives inside and across nodes at start (a few seconds) and serve the figures;
    ``parallel: auto`` probes anyway."""
    init_from: AbsolutePath | None = Field(default=Config.init_from)
    """Pretrained weights to start from, a plain state_dict (``.pt`` or ``.safetensors``), on the data
    volume (``/mnt/data/...``) or the output volume (``/mnt/output/...``); passed as ``MODEL_PATH``. A job that has checkpoints resumes from them instead."""
    final_model_path: AbsolutePath | None = Field(default=Config.final_model_path)
    """Where the final weights go (``FINAL_MODEL_PATH``), under ``/mnt/output/``; ``final_model.pt`` in the
    job's output directory when unset."""
    llama_size: Literal[tuple(LLAMA_SIZES)] | None = Field(default=None)
    """``model: llama``'s shape: ``tiny`` (the trainer's default), or Llama 3.2 1B's, Llama 3.1 8B's or 70B's
    (``1b``, ``8b``, ``70b``; docs/trainer.md)."""
    tp: int | None = Field(default=None, ge=1)
    """Tensor-parallel processes per sample (``model: llama``), inside one pod: it must divide the pod's processes
    and the model's key-value heads. 1 (the trainer's default) when unset; ``parallel: auto`` chooses it."""
    pp: int | None = Field(default=None, ge=1)
    """Pipeline stages (``model: llama``), e.g. one per pod across slow links; ``tp × pp`` must divide the job's
    processes, the rest being FSDP replicas. 1 when unset; ``parallel: auto`` chooses it."""

    @model_validator(mode="after")
    def _check(self) -> TrainerArgs:
        problem = model_problem(self.model)
        if problem:
            raise field_error("model", f"model {problem}")
        if self.final_model_path is not None and not _below(self.final_model_path, OUTPUT_MOUNT):
            raise field_error(
                "finalModelPath",
                f"{self.final_model_path!r} is not on the output volume, the pod's only lasting place to write: "
                f"give a path under {OUTPUT_MOUNT}/, or drop it for final_model.pt in the job's output directory",
            )
        if self.init_from is not None and not any(_below(self.init_from, m) for m in (DATA_MOUNT, OUTPUT_MOUNT)):
            raise field_error(
                "initFrom",
                f"{self.init_from!r} is on neither volume the pod mounts: give a path under {DATA_MOUNT}/ "
                f"or {OUTPUT_MOUNT}/",
            )
        # A factory's model is checked for blocks when the trainer builds it.
        if self.parallel in ("fsdp", "hsdp") and self.model == "cnn":
            raise field_error(
                "parallel",
                f"parallel {self.parallel} shards the gpt and llama models; the cnn takes ddp or auto (which keeps ddp)",
            )
        if self.llama_size is not None and self.model != "llama":
            raise field_error("llamaSize", f"llamaSize {self.llama_size} applies to model llama, not {self.model}")
        if (problem := self.split_problem()) is not None:
            raise field_error(*problem)
        return self

    def split_problem(self) -> tuple[str, str] | None:
        """Why ``tp`` and ``pp`` cannot split the model, as (key, message); None when they can (or are unset)."""
        tp, pp = self.tp or 1, self.pp or 1
        if tp * pp > 1 and self.batch_size % pp:
            return "batchSize", (
                f"batchSize {self.batch_size} must be a multiple of pp ({pp}): the pipeline cuts each process's batch "
                "into pp micro-batches"
            )
        size = self.llama_size or Config.llama_size
        why = flag_problem(self.model, self.parallel or "fsdp", size, tp, pp, self.batch_size, pp)
        if why is None:
            return None
        key = "parallel" if why.startswith("--parallel") else "tp" if tp > 1 else "pp"
        # The trainer's words name its flags; the spec's keys are the same words without the dashes.
        for flag, spec_key in (("--llama-size", "llamaSize"), ("--batch-size", "batchSize"), ("--", "")):
            why = why.replace(flag, spec_key)
        return key, why

    def mesh_problem(self, procs: int, pods: range) -> tuple[str, str] | None:
        """Why ``tp`` and ``pp`` do not fit a job of ``procs`` processes a pod at each pod count of
        ``pods``, as (key, message); None when they do."""
        tp, pp = self.tp or 1, self.pp or 1
        if procs % tp:
            return "tp", (
                f"tp {tp} does not divide the pod's {procs} processes: tensor parallelism runs a collective per "
                "layer and stays inside a pod; choose a tp that divides procsPerNode (gpusPerNode)"
            )
        for n in pods:
            if (n * procs) % (tp * pp):
                return "pp", (
                    f"tp {tp} × pp {pp} = {tp * pp} does not divide the job's {n * procs} processes ({n} pods × "
                    f"{procs}): the processes are arranged as FSDP replicas × pp × tp"
                )
        return None

    def to_flags(self) -> list[str]:
        """The trainer's flags for these settings, in field order: ``--<field-name>`` (the
        trainer's flag of the same name, ``trainer/flags.py``) and the value, a true switch alone; unset and false ones left out, and
        those in ``TRAINER_ENV_FIELDS``, which travel as variables."""
        flags: list[str] = []
        for name, value in self:
            if name in TRAINER_ENV_FIELDS or value is None or value is False:
                continue
            flag = FORMER_SPELLINGS.get(name) or "--" + name.replace("_", "-")
            flags += [flag] if value is True else [flag, str(value)]
        return flags


FORMER_SPELLINGS = {"synthetic_data": "--synthetic"}
"""Flags the pods still get in their former spelling, for one release: an image built before a
flag's rename knows only that one, and today's trainer accepts both (``trainer/flags.py``), so a
platform upgraded ahead of its images keeps starting their jobs."""


MPI_MOUNTS = ("/etc/mpi", "/home/mpiuser/.ssh")
"""Where the operators mount an MPI job's own files: the hostfile on both backends (Training Operator
v1.9.4 ``pkg/controller.v1/mpi/mpijob.go`` ``configMountPath``, Trainer v2.3.0 ``pkg/constants``
``MPIHostfileDir``) and the SSH key at the runtime's ``sshAuthMountPath`` on backend v2
(:data:`components.manifests.jobs.mpi_runtime.SSH_AUTH_MOUNT`). A second volume at the same path is
refused by the API server when the pod is created."""

PLATFORM_MOUNTS = ("/dev", DATA_MOUNT, OUTPUT_MOUNT, CODE_MOUNT, "/var/run/secrets", "/proc", "/sys", *MPI_MOUNTS)
"""Where a job's containers hold the platform's own mounts (``/dev/shm``, the data and output volumes,
the code, the checkpoint key and the ServiceAccount token under ``/var/run/secrets``, an MPI job's
hostfile and SSH key) or the kernel's, none of which another volume may cover or be mounted inside."""


class JobVolume(Spec):
    """A PersistentVolumeClaim of the job's namespace mounted in every pod of the job, as arena's
    ``--data <claim>:<path>`` does."""

    claim: DnsLabel
    """The claim's name, in the job's namespace."""
    mount_path: str
    """Where the pods see it: an absolute path outside the platform's mounts."""
    read_only: bool = False
    """Mount it read-only."""

    @model_validator(mode="after")
    def _check(self) -> JobVolume:
        path = self.mount_path
        if not path.startswith("/") or posixpath.normpath(path) != path.rstrip("/") or path == "/":
            raise field_error(
                "mountPath",
                f"{path!r} is not a plain absolute path (no '..', '.' or '//'): give one like /mnt/{self.claim}",
            )
        clash = next((m for m in PLATFORM_MOUNTS if path == m or _below(path, m) or _below(m, path)), None)
        if clash is not None:
            raise field_error(
                "mountPath",
                f"{path!r} would cover or sit inside {clash}, which the platform mounts: give another path, "
                f"such as /mnt/{self.claim}",
            )
        return self


class TopologySpec(Spec):
    """Keep a job's pods on nodes that are close in the network: a pod affinity among the job's own pods on a node
    label whose equal values mark one network domain. The Kubernetes scheduler and Volcano (its ``nodeorder`` and
    ``predicates`` plugins) both honour it. A GPU v2 job queued by Kueue with ``trainerV2.kueue.topology`` is placed
    by Kueue instead, on a level of that topology. See docs/network.md for which labels ACK sets."""

    key: LabelKey = ZONE_LABEL
    """The node label, e.g. ``topology.kubernetes.io/zone`` (on every ACK node), or ``alibabacloud.com/asw-id`` /
    ``alibabacloud.com/point-of-delivery`` (ACK Lingjun nodes)."""
    mode: Literal["preferred", "required"] = "preferred"
    """``preferred`` still starts a job the domain cannot hold; ``required`` leaves it pending instead."""


def topology_problem(topology: TopologySpec | None, levels: tuple[str, ...]) -> str | None:
    """Why a job's ``topology`` cannot be placed by Kueue over ``levels``, or ``None`` when it can.

    Kueue admits a pod set whose topology annotation names a label that is not a level of its
    flavor's Topology on no flavor at all (kubernetes-sigs/kueue v0.19.2
    ``pkg/scheduler/flavorassigner/tas_flavorassigner.go``: "does not contain the requested level").
    """
    if topology is None or topology.key in levels:
        return None
    return (
        f"{topology.key!r} is not a level of Kueue's topology, so the job would never be admitted: use one of "
        f"{list(levels)} (trainerV2.kueue.topology.levels, above kubernetes.io/hostname)"
    )


class RunPolicySpec(Spec):
    backoff_limit: int = Field(default=6, ge=0)
    """Pod restarts allowed before the job fails (preemptions count); v1 only: v2 jobs restart whole up to 6 times."""
    active_deadline_seconds: int | None = Field(default=None, ge=1)
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    """Seconds after the job ends before the operator deletes it (v1 only). Refused in a stack's ``jobs``: the job
    is a Pulumi resource, and one the operator deleted would be created, and trained, again by the next
    ``pulumi up --refresh``; remove the job from the stack to delete it. For jobs ``ack-jobs submit`` creates."""
    clean_pod_policy: Literal["None", "Running", "All"] = Field(default="None")
    """``None`` keeps finished pods so their logs stay readable; v1 only (v2 keeps them). Unset, ``Running`` for an
    MPIJob and a TFJob with PS or an Evaluator, whose pods outlive the job and would keep their GPUs."""
    suspend: bool = False
    """Suspend the job: its pods stop, or never start, until this is ``false`` again (``ack-jobs resume``).
    Of a job's settings, the only one changed in place."""


class TolerationSpec(Spec):
    """A taint the job's pods tolerate, beside the pool's own."""

    key: LabelKey
    value: LabelValue | None = None
    """Only the taint with this value (operator ``Equal``); any value when unset (operator ``Exists``)."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]

    def manifest(self) -> dict[str, str]:
        """The pod's toleration (``core/v1`` ``Toleration``)."""
        if self.value is None:
            return {"key": self.key, "operator": "Exists", "effect": self.effect}
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}


class SchedulingSpec(Spec):
    queue: str | None = None
    """Volcano queue (needs ``operator.volcano.enabled``); v1 only: v2 jobs queue with ``trainerV2.kueue``."""
    priority_class: str | None = Field(default=None)
    """Pod PriorityClass (v1), or Kueue WorkloadPriorityClass from ``trainerV2.kueue.priorities`` (v2)."""
    min_available: int | None = Field(default=None, ge=1)
    """Gang size in pods, an MPIJob's Launcher and a TFJob's PS and Evaluator counted (needs Volcano); v1 only. Every
    pod of a fixed-size job, an elastic job's ``minNodes`` to ``maxNodes``; unset, every pod or ``minNodes``."""

    @model_validator(mode="after")
    def _check(self) -> SchedulingSpec:
        check_priority_class(self.priority_class, "priorityClass")
        return self


class SecretKeySelector(Spec):
    name: DnsLabel
    """Secret in the job's namespace."""
    key: str = Field(pattern=r"^[-._a-zA-Z0-9]+$")
    """Key inside the Secret."""


class SecretEnv(Spec):
    """An environment variable read from a Secret when the pod starts: the value never
    enters the stack, its state or the job object."""

    secret_key_ref: SecretKeySelector
    """The Secret and the key the value comes from."""


class CheckpointKeySpec(Spec):
    """The key each checkpoint is signed and checked with (HMAC-SHA256, ``trainer/checkpoints/integrity.py``):
    mounted read-only as a file, named by ``$CHECKPOINT_KEY_FILE``. A checkpoint that is not signed
    with it is never loaded, so only pods holding the key can write what a resume trusts."""

    secret_key_ref: SecretKeySelector | None = None
    """An existing Secret in the job's namespace and its key. Unset: a random key of 64 characters,
    generated once for the job (pulumi-random) and kept in the Secret ``<job>-checkpoint-key``; in the
    stack's state it is a Pulumi secret."""


EnvEntry = Annotated[
    Annotated[EnvValue, Tag(UNION_TAGS[0])] | Annotated[SecretEnv, Tag(UNION_TAGS[1])],
    Discriminator(lambda value: UNION_TAGS[isinstance(value, dict | SecretEnv)]),
]
"""A plain value, or ``{secretKeyRef: ...}``; the shape decides which, so a bad entry gets
the one message of the form it has."""


def check_image_choice(image: str | None, image_tag: str | None) -> None:
    """Exactly one of a full ``image`` reference, pinned, or an ``imageTag`` in the platform
    registry, pinned (not ``latest``)."""
    if (image is None) == (image_tag is None):
        raise field_error(
            "image", "give exactly one of image (a full reference) or imageTag (a tag in the platform registry)"
        )
    if image is not None:
        check_pinned(image, "image")
    if image_tag is not None:
        check_pinned_tag(image_tag, "imageTag")

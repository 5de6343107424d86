"""The environment of a job's trainer container, on every backend: where its data, outputs
and checkpoint key are, NCCL's settings, the flight recorder and the values a Secret holds."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from trainer.telemetry.metric_names import METRICS_PORT

from ...config import SecretEnv, TrainingJobSpec
from ...config.base import DATA_MOUNT, OUTPUT_MOUNT
from ..base import Manifest
from ..fabrics import FabricProfile

CHECKPOINT_KEY_DIR = "/var/run/secrets/checkpoint-key"
CHECKPOINT_KEY_FILE = f"{CHECKPOINT_KEY_DIR}/key"
CHECKPOINT_KEY_SUFFIX = "-checkpoint-key"
GENERATED_KEY = "key"
"""The key of a generated checkpoint key in its Secret, ``<job>-checkpoint-key``."""
FLIGHT_RECORDER_ENTRIES = 2000
"""Collectives each rank remembers; torch's own default once the recorder is on."""
TERMINATION_GRACE_S = 120
"""How long an evicted pod has to stop: the trainer checkpoints on SIGTERM, and torchrun
waits this long less ten seconds before it kills the workers (its own default is 30 s)."""
TCP_NCCL_ENV = {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0"}
"""NCCL over the pod network when the job uses no RDMA fabric."""


def container_env(env: Mapping[str, str | SecretEnv]) -> list[Manifest]:
    """A container's ``env`` list: plain values, and values a Secret holds (``secretKeyRef``)."""
    return [
        {"name": name, "valueFrom": value.model_dump(by_alias=True)}
        if isinstance(value, SecretEnv)
        else {"name": name, "value": value}
        for name, value in env.items()
    ]


def runtime_env() -> dict[str, str]:
    """What every trainer process needs, whichever job it belongs to."""
    return {
        # A restarted torchrun can fail or stall on the shared rendezvous store (pytorch#135712).
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(TERMINATION_GRACE_S - 10),
        "PYTHONUNBUFFERED": "1",
        # A team's uid has no entry in the image, so its home would be "/", which it cannot
        # write; the Kubeflow SDK installs a job's packages with `pip install --user` into the
        # home (kubeflow 0.5.0 backends/kubernetes/utils.py). The image's /tmp takes any uid.
        "HOME": "/tmp",
        # Rank 0 serves the run's metrics here and each other pod its restarts; torchrun may
        # give rank 0 to any pod of an elastic job, so every pod declares the port.
        "METRICS_PORT": str(METRICS_PORT),
    }


def runtime_pod_env(extra: Mapping[str, str]) -> list[Manifest]:
    """The ``env`` of a platform runtime's trainer container: :func:`runtime_env`, then ``extra``
    (a fabric's NCCL settings, pip's index), then the job's identity (:data:`RUNTIME_JOB_ENV`)."""
    return [*container_env({**runtime_env(), **extra}), *(copy.deepcopy(e) for e in RUNTIME_JOB_ENV)]


def nccl_env(fabric: FabricProfile | None) -> dict[str, str]:
    """NCCL's settings for a GPU job over ``fabric`` (``None``: TCP)."""
    return {
        # NCCL hangs survivors of a dead peer until the collective timeout; this makes
        # the watchdog tear the process down so the pod restarts and resumes instead.
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
        **(fabric.nccl_env if fabric is not None else TCP_NCCL_ENV),
    }


def flight_recorder_env(job: TrainingJobSpec) -> dict[str, str]:
    """The NCCL flight recorder: each rank keeps its last collectives and writes them out when
    a collective times out, so a hung job leaves evidence in its output directory (torch 2.13:
    ``FlightRecorder.hpp``, ``ProcessGroupNCCL.hpp``; the dump file prefix is
    ``TORCH_FR_DUMP_TEMP_FILE``, followed by the rank)."""
    return {
        "TORCH_NCCL_TRACE_BUFFER_SIZE": str(FLIGHT_RECORDER_ENTRIES),
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_FR_DUMP_TEMP_FILE": f"{OUTPUT_MOUNT}/{job.name}/nccl_trace_rank_",
    }


def job_env(job: TrainingJobSpec, namespace: str) -> dict[str, str]:
    """Where this job's data and outputs are: one output directory per job. ``MODEL_PATH``
    names weights to start from, as in the PyTorchJob examples; the final model has its own
    variable. ``CHECKPOINT_KEY_FILE`` is the trainer's default for ``--checkpoint-key-file``
    (``trainer/flags.py``). ``TRAINING_JOB``, ``<namespace>/<name>``, is the default of
    ``--job-id``, with which the trainer claims its output directory: two jobs given one
    (an ``OUTPUT_PATH`` in a job's ``env`` naming another's, or one name in two namespaces
    whose claims share a volume) are refused rather than move each other's checkpoints aside. The name and namespace
    are the job's own, known here, and stay the same across the operator's pod re-creations
    and a resubmission of the job, which resume its checkpoints; the job's uid would not."""
    output_path = f"{OUTPUT_MOUNT}/{job.name}"
    return {
        "TRAINING_JOB": f"{namespace}/{job.name}",
        "TRAIN_DATA_PATH": DATA_MOUNT,
        "OUTPUT_PATH": output_path,
        **({"MODEL_PATH": job.trainer.init_from} if job.trainer.init_from else {}),
        "FINAL_MODEL_PATH": job.trainer.final_model_path or f"{output_path}/final_model.pt",
        **({"CHECKPOINT_KEY_FILE": CHECKPOINT_KEY_FILE} if job.checkpoint_key is not None else {}),
    }


def generated_key_secret(job_name: str) -> str:
    """The Secret holding a job's generated checkpoint key."""
    return f"{job_name}{CHECKPOINT_KEY_SUFFIX}"


def checkpoint_key_ref(job: TrainingJobSpec) -> tuple[str, str] | None:
    """(Secret, key) of the job's checkpoint key, or ``None`` when checkpoints are not signed."""
    if job.checkpoint_key is None:
        return None
    ref = job.checkpoint_key.secret_key_ref
    return (ref.name, ref.key) if ref is not None else (generated_key_secret(job.name), GENERATED_KEY)


JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
"""The label JobSet gives every pod of a JobSet, its name (kubernetes-sigs/jobset v0.12.0
``pkg/controllers/jobset_controller.go`` ``labelAndAnnotateObject``: ``labels[jobset.JobSetNameKey]
= js.Name``, on each Job's pod template), which Trainer v2 names after the TrainJob
(kubeflow/trainer v2.3.0 ``pkg/runtime/framework/plugins/jobset/jobset.go``: ``JobSet(trainJob.Name,
trainJob.Namespace)``)."""

RUNTIME_JOB_ENV: tuple[Manifest, ...] = (
    {"name": "TRAINING_JOB_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    {"name": "TRAINING_JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOBSET_NAME_LABEL}']"}}},
    {"name": "TRAINING_JOB", "value": "$(TRAINING_JOB_NAMESPACE)/$(TRAINING_JOB_NAME)"},
)
"""``TRAINING_JOB`` in a runtime's pods, for TrainJobs that do not set it (those the Kubeflow SDK
creates): ``<namespace>/<TrainJob name>`` from the downward API, the namespace and the JobSet's
name label, joined by the kubelet's ``$(VAR)`` expansion of earlier entries (kubernetes.io,
"Define Dependent Environment Variables"), so the trainer claims its output directory for the
job as it does for the stack's own jobs, whose ``trainer.env`` sets it (:func:`job_env`) and
replaces this one, Trainer upserting by name."""

POD_NAME_ENV: Manifest = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
"""The pod's name through the downward API (kubernetes.io, "Expose Pod Information to Containers
Through Environment Variables"): the key of its retry count, stable across the operator's
re-creations."""

"""The TrainJob (``trainer.kubeflow.org/v1alpha1``) a training job becomes on backend v2,
and the platform's ClusterTrainingRuntimes it runs on.

The API is Kubeflow Trainer v2.3.0's: ``pkg/apis/trainer/v1alpha1/trainjob_types.go`` and
``trainingruntime_types.go`` in kubeflow/trainer at tag v2.3.0, whose webhooks
(``pkg/webhooks/``, and the plugins' ``Validate`` under ``pkg/runtime/framework/plugins/``)
are the rules the tests check.

Why the platform owns its runtimes rather than patching upstream's ``torch-distributed``:

- the chart installs no runtime by default (``runtimes.defaultEnabled: false``,
  ``charts/kubeflow-trainer/values.yaml``), so a stack would have to switch one on anyway,
  and upstream's would change under the stack with every Trainer release;
- what every job needs cannot be patched per job: a TrainJob's runtime patches may not set
  environment variables on the trainer container ``node`` (JobSet plugin, ``Validate``),
  a pod's host network, its DNS policy or a failure policy (``PodSpecPatch``,
  ``JobSetSpecPatch``). The runtime carries those: torchrun's settings, NCCL's for the
  fabric, ``/dev/shm``, the grace period for the SIGTERM checkpoint and how a failed job
  restarts. NCCL's settings differ per fabric, so each fabric gets a runtime;
- what differs per job goes in the TrainJob: ``trainer`` (image, command, env, nodes,
  processes, resources) and one runtime patch owned by the platform (placement, the
  shared volumes, service account, pull secret, pod labels).

Trainer merges each patch into the runtime's JobSet spec as a strategic merge patch
(``pkg/runtime/core/trainingruntime.go`` ``mergeRuntimePatches``), keyed by name for the
replicated jobs (``zz_generated.openapi.go``: JobSetSpec ``replicatedJobs``
``x-kubernetes-patch-merge-key: name``), the containers and the volumes: the runtime's
``dshm`` volume takes the job's size, and the job's mounts add to the runtime's.
"""

from __future__ import annotations

import copy

from ...config import PROJECT, RunPolicySpec, TrainingJobSpec, topology_problem, v2_conflict
from ...config.kinds import ML_POLICIES
from ...config.training_job import xgboost_gpus_problem
from ..base import MANAGED_BY, Manifest
from ..fabrics import FabricProfile
from .env import TERMINATION_GRACE_S, container_env, flight_recorder_env, job_env, nccl_env, runtime_pod_env
from .names import PREFERRED_TOPOLOGY, REQUIRED_TOPOLOGY, TRAINER_API, TRAINER_NODE, UNCONSTRAINED_TOPOLOGY
from .pod import (
    METRICS_CONTAINER_PORT,
    SHM_MOUNT,
    JobContext,
    job_command,
    job_fabric,
    job_labels,
    job_metadata,
    job_resources,
    job_volumes,
    placement_fields,
    pod_labels,
    shared_volume_mounts,
)

MPI_LAUNCHER = "launcher"
"""An MPI job's launcher, its trainer ancestor (v2.3.0 ``pkg/constants``: ``Launcher``)."""
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
PATCH_MANAGER = f"{PROJECT}/platform"
"""Owner of the platform's runtime patch: the webhook requires a domain-prefixed path, and other
managers (Kueue's ``kueue.x-k8s.io/manager``) keep patches of their own beside it."""
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The LocalQueue a TrainJob is submitted to (Kueue: "Run A TrainJob")."""
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
"""The WorkloadPriorityClass of a queued job (Kueue v0.19.2 ``pkg/controller/constants``)."""
PODSET_GROUP = "kueue.x-k8s.io/podset-group-name"
"""Pod sets of one group are placed as a unit, in one topology domain (``topology_types.go``
``PodSetGroupName``). Each replicated job is a pod set of its own, so without it an MPI job's launcher
and its node pods may land in different domains of a required topology. Kueue accepts a group of
exactly two pod sets, one of a single pod, both asking for the same topology, under a name that is not
a number (``pkg/controller/jobframework/tas_validation.go``): an MPI job's launcher and nodes."""
JOB_RESTARTS = RunPolicySpec.model_fields["backoff_limit"].default
"""Restarts of a whole job after a pod fails, as many as a v1 job's default ``backoffLimit``."""
DEFAULT_SHM = "2Gi"
"""``/dev/shm`` in the runtime; each TrainJob patches in its own size."""
REPLACED_ON_CHANGE_V2 = (
    "spec.runtimeRef",
    "spec.trainer",
    "spec.runtimePatches",
    "spec.activeDeadlineSeconds",
    "spec.managedBy",
)
"""What Trainer v2 keeps immutable: ``runtimeRef``, ``trainer``, ``activeDeadlineSeconds`` and
``managedBy`` (``self == oldSelf`` rules in ``trainjob_types.go``), and ``runtimePatches``,
which may change only while the job is suspended (JobSet plugin,
``checkRuntimePatchesImmutability``). A change there replaces the job (deleted first, then
created again, resuming from its last checkpoint); ``suspend`` and labels change in place."""


BUG_EXIT_CODES = list(range(1, 128))
"""What ``trainer.launch`` exits with when the failed worker's own status says a retry would fail
the same way (a bad flag, bad data, a bug); 128 and above are signals and lost peers."""
BUG_RULE, PREEMPTED_RULE = 0, 1
POD_FAILURE_POLICY: Manifest = {
    # Kubernetes reports the rule that matched in the Job's failure message: "... matching
    # FailJob rule at index N" (kubernetes.io, "Handling retriable and non-retriable pod failures
    # with Pod failure policy"). Its order is read back by FAILURE_POLICY below.
    "rules": [
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": TRAINER_NODE, "operator": "In", "values": BUG_EXIT_CODES},
        },
        {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]
}
"""The node Job's ``podFailurePolicy``: a bug or a disruption (eviction, preemption, a node taken
away) fails the Job with reason ``PodFailurePolicy`` and says which; any other failure (a signal,
a lost peer, the transient status) fails it through ``backoffLimit: 0``."""
FAILURE_POLICY: Manifest = {
    "maxRestarts": JOB_RESTARTS,
    # JobSet v0.12.0 evaluates these in order on the failed Job's reason and message
    # (pkg/controllers/failure_policy.go ruleIsApplicable); no match restarts the JobSet against
    # maxRestarts.
    "rules": [
        {
            "name": "FailOnBug",
            "action": "FailJobSet",
            "onJobFailureReasons": ["PodFailurePolicy"],
            "onJobFailureMessagePatterns": [f"matching FailJob rule at index {BUG_RULE}$"],
        },
        {
            "name": "RetryDisruption",
            "action": "RestartJobSetAndIgnoreMaxRestarts",
            "onJobFailureReasons": ["PodFailurePolicy"],
            "onJobFailureMessagePatterns": [f"matching FailJob rule at index {PREEMPTED_RULE}$"],
        },
    ],
}
"""The JobSet's failure policy: the v1 operator's ``restartPolicy: ExitCode`` for v2 jobs. A bug
fails the job at once; a disrupted pod restarts every node without spending a restart; any other
failure spends one of ``maxRestarts``."""


def runtime_name(fabric: FabricProfile | None, framework: str = "pytorch") -> str:
    """The platform runtime for ``framework``'s jobs over ``fabric`` (``None``: the pod network),
    named after its ML policy, which also labels it ``trainer.kubeflow.org/framework`` as
    upstream labels its runtimes (``manifests/base/runtimes/``)."""
    prefix = f"{PROJECT}-{ML_POLICIES[framework]}"
    return prefix if fabric is None else f"{prefix}-{fabric.name}"


RUNTIME_RESOURCES: Manifest = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}
"""The node's resources for a TrainJob that gives none. Trainer merges a TrainJob's
``resourcesPerNode`` over them key by key (v2.3.0 ``pkg/runtime/core/trainingruntime.go``,
``MergeResourceRequirements``); the Kubeflow SDK reads a runtime's device from the limits and
refuses nothing without them, but shows no device (kubeflow 0.5.0
``trainer/backends/kubernetes/utils.py`` ``get_container_devices``). One CPU: the torch plugin's
``auto`` runs one process per CPU without a GPU (``plugins/torch/torch.go``)."""


def training_runtime(
    fabric: FabricProfile | None = None,
    framework: str = "pytorch",
    *,
    image: str | None = None,
    pip_index_url: str | None = None,
) -> Manifest:
    """The platform's ClusterTrainingRuntime for ``framework``'s jobs over ``fabric``.

    A failed pod fails its Job at once (``backoffLimit: 0``, ``restartPolicy: Never``), and
    the JobSet then fails, or recreates every node's Job (:data:`FAILURE_POLICY`): torchrun's
    static rendezvous cannot take back one restarted node (``JAX_NUM_PROCESSES`` and
    ``DMLC_NUM_WORKER`` fix a JAX or XGBoost world at start too), and the program resumes all
    of them from its last checkpoint. The pods
    are the same for every framework, as on v1, where each kind's pods get one environment:
    only the ML policy differs, and with it what Trainer v2 injects (torchrun's ``PET_*``,
    JAX's ``JAX_*``, XGBoost's ``DMLC_*``). NCCL's settings are there for GPU jobs; CPU jobs
    ignore them.

    Args:
        fabric: the RDMA fabric of the jobs it runs, or ``None`` for NCCL over TCP.
        framework: a framework of ``V2_FRAMEWORKS``.
        image: the node's image when a TrainJob names none (a TrainJob's ``trainer.image``
            replaces it, v2.3.0 ``plugins/jobset/builder.go`` ``Trainer``); the Kubeflow SDK
            refuses a runtime whose node has none (kubeflow 0.5.0 ``get_runtime_trainer``).
        pip_index_url: the PyPI index pip in the node installs from (``PIP_INDEX_URL``).

    Returns:
        A complete ClusterTrainingRuntime object.
    """
    policy = ML_POLICIES[framework]
    pod = runtime_pod(fabric, image=image, pip_index_url=pip_index_url, resources=RUNTIME_RESOURCES)
    return {
        "apiVersion": TRAINER_API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {
            "name": runtime_name(fabric, framework),
            "labels": {**MANAGED_BY, "trainer.kubeflow.org/framework": policy},
        },
        "spec": {
            "mlPolicy": {"numNodes": 1, policy: {}},
            "template": {
                "spec": {
                    "failurePolicy": FAILURE_POLICY,
                    "replicatedJobs": [replicated_job(TRAINER_NODE, pod, trainer=True)],
                }
            },
        },
    }


def runtime_pod(
    fabric: FabricProfile | None,
    *,
    image: str | None = None,
    pip_index_url: str | None = None,
    resources: Manifest | None = None,
) -> Manifest:
    """The pod of every platform runtime: the settings a runtime patch cannot carry (see the
    module's docstring), for NCCL over ``fabric`` (``None``: TCP), with the node's default
    ``image``, pip's index and ``resources`` (see :func:`training_runtime`)."""
    env = {**nccl_env(fabric), **({"PIP_INDEX_URL": pip_index_url} if pip_index_url else {})}
    pod: Manifest = {
        "restartPolicy": "Never",
        # Lets the trainer's SIGTERM handler finish a checkpoint on eviction or spot reclaim.
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
        "containers": [
            {
                "name": TRAINER_NODE,
                **({"image": image} if image is not None else {}),
                "env": runtime_pod_env(env),
                **({"resources": copy.deepcopy(resources)} if resources is not None else {}),
                # A TrainJob cannot declare ports (its trainer and runtime patches have no
                # field for them), so the runtime does; Trainer v2 adds its own to these
                # (v2.3.0 pkg/apply/apply.go UpsertPort; plugins/torch/torch.go, jax/jax.go,
                # xgboost/xgboost.go: 29500, for the master, coordinator or tracker).
                "ports": [dict(METRICS_CONTAINER_PORT)],
                "volumeMounts": [dict(SHM_MOUNT)],
            }
        ],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": DEFAULT_SHM}}],
    }
    return pod


def replicated_job(name: str, pod: Manifest, *, trainer: bool) -> Manifest:
    """One replicated job of a platform runtime: one Job whose failed pod fails it at once
    (:data:`POD_FAILURE_POLICY`); ``trainer`` labels it as the one that takes the TrainJob's
    ``trainer`` (image, command, resources)."""
    template: Manifest = {
        "spec": {"backoffLimit": 0, "podFailurePolicy": copy.deepcopy(POD_FAILURE_POLICY), "template": {"spec": pod}},
    }
    if trainer:
        template = {"metadata": {"labels": {ANCESTOR_LABEL: "trainer"}}, **template}
    return {"name": name, "replicas": 1, "template": template}


def mpi_procs(job: TrainingJobSpec, gpus: int) -> int:
    """An MPI job's ranks per node: ``procsPerNode``, else one per GPU, else one."""
    return job.procs_per_node or gpus or 1


def train_job(job: TrainingJobSpec, ctx: JobContext) -> Manifest:
    """The ``trainer.kubeflow.org/v1alpha1`` TrainJob for ``job``.

    Args:
        job: the validated job spec (one without v1-only settings; see
            :func:`components.config.v2_conflict`).
        ctx: what the job takes from the pool, storage, registry and queue.

    Returns:
        A complete TrainJob object, on the runtime :func:`runtime_name` gives for its framework
        and fabric.

    Raises:
        ValueError: the job does not fit its placement (see :func:`job_fabric`), or has a
            setting Trainer v2 has no counterpart for.
    """
    conflict = v2_conflict(job)
    if conflict is None and job.framework == "xgboost" and ctx.gpus > 1:
        conflict = ("gpusPerNode", xgboost_gpus_problem(ctx.gpus))
    if conflict is not None:
        raise ValueError(f"job {job.name!r} cannot run on Trainer v2: {conflict[0]}: {conflict[1]}")
    fabric = job_fabric(job, ctx)
    torch, mpi = job.framework == "pytorch", job.framework == "mpi"
    procs = (ctx.gpus or job.procs_per_node or 1) if torch else mpi_procs(job, ctx.gpus) if mpi else 1
    env = {
        **job_env(job, ctx.namespace),
        **(flight_recorder_env(job) if ctx.gpus else {}),
        **({"NCCL_DEBUG": job.nccl_debug} if ctx.gpus and job.nccl_debug else {}),
        **job.env,
    }
    container: Manifest = {"name": TRAINER_NODE, "volumeMounts": shared_volume_mounts(job)}
    labels = job_labels(job)
    pod_patch: Manifest = {
        **placement_fields(job, ctx),
        "volumes": job_volumes(job, ctx),
        "containers": [container],
    }
    pod_metadata: Manifest = {"labels": pod_labels(job, ctx)}
    topology = kueue_topology_annotations(job, ctx)
    if mpi and topology.keys() & {REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY}:
        topology[PODSET_GROUP] = job.name
    if topology:
        # Kueue chooses the domain and pins each pod to a node in it: a pod affinity would add nothing.
        pod_patch.pop("affinity", None)
        pod_metadata["annotations"] = topology
    patch = {
        "manager": PATCH_MANAGER,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": name,
                            "template": {
                                "spec": {
                                    "template": {
                                        "metadata": copy.deepcopy(pod_metadata),
                                        "spec": copy.deepcopy(pod_patch),
                                    }
                                }
                            },
                        }
                        # An MPI job's launcher is a node too, with the same placement and volumes.
                        for name in (TRAINER_NODE, *([MPI_LAUNCHER] if mpi else []))
                    ]
                }
            }
        },
    }
    spec: Manifest = {
        "runtimeRef": {
            # An MPI job's runtime is its own (see mpi_runtime.py), beside it in its namespace.
            "name": job.name if mpi else runtime_name(fabric, job.framework),
            "apiGroup": TRAINER_API.split("/")[0],
            "kind": "TrainingRuntime" if mpi else "ClusterTrainingRuntime",
        },
        "trainer": {
            "image": ctx.image,
            "command": job_command(job, procs, backend="v2", gpus=ctx.gpus),
            "env": container_env(env),
            "numNodes": job.nodes,
            # Read by the torch and MPI plugins only (MPI's as the hostfile's slots): JAX runs
            # one process per pod, and XGBoost counts its workers from the GPUs (v2.3.0
            # plugins/jax/jax.go, xgboost/xgboost.go, mpi/mpi.go EnforceMLPolicy).
            **({"numProcPerNode": procs} if torch or mpi else {}),
            "resourcesPerNode": job_resources(job, ctx.gpus, fabric),
        },
        "runtimePatches": [patch],
    }
    if ctx.queue is None:
        # Kueue owns spec.suspend of a queued job: it suspends it at creation and resumes it
        # once admitted, so the platform leaves the field alone there.
        spec["suspend"] = job.run_policy.suspend
    if job.run_policy.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = job.run_policy.active_deadline_seconds
    metadata_labels = {**labels, **({QUEUE_LABEL: ctx.queue} if ctx.queue else {})}
    if ctx.queue and job.scheduling.priority_class:
        metadata_labels[PRIORITY_LABEL] = job.scheduling.priority_class
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": job_metadata(job, ctx.namespace, metadata_labels),
        "spec": spec,
    }


def kueue_topology_annotations(job: TrainingJobSpec, ctx: JobContext) -> dict[str, str]:
    """The annotation by which a queued GPU job asks Kueue for topology-aware scheduling, or none.

    Trainer v2 copies a runtime patch's pod template annotations into the JobSet (kubeflow/trainer
    v2.3.0 ``pkg/runtime/core/trainingruntime_test.go``, "labels and annotations overrides"), where
    Kueue reads them. A job without ``topology`` asks too, unconstrained: the GPU flavor admits only
    pod sets that ask.

    Raises:
        ValueError: ``job.topology.key`` is not a level of the Topology.
    """
    if not (ctx.queue and ctx.gpus and ctx.topology_levels):
        return {}
    problem = topology_problem(job.topology, ctx.topology_levels)
    if problem is not None:
        raise ValueError(f"job {job.name!r}: topology.key {problem}")
    if job.topology is None:
        return {UNCONSTRAINED_TOPOLOGY: "true"}
    mode = REQUIRED_TOPOLOGY if job.topology.mode == "required" else PREFERRED_TOPOLOGY
    return {mode: job.topology.key}


def trainjob_kubectl_commands(name: str, namespace: str) -> dict[str, str]:
    """Commands to follow a TrainJob; JobSet labels its pods with the TrainJob's name
    (``jobset.sigs.k8s.io/jobset-name``: v2.3.0 ``docs/user-guides/megatron.md``)."""
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    return {
        "status": f"kubectl -n {namespace} get trainjob {name} -w",
        "describe": f"kubectl -n {namespace} describe trainjob {name}",
        "pods": f"kubectl -n {namespace} get pods -l {selector} -o wide",
        "logs": f"kubectl -n {namespace} logs -f --max-log-requests 64 -l {selector}",
    }

"""The PyTorchJob (``kubeflow.org/v1``) a training job becomes on backend v1, and the pieces
of a pod that every backend shares: command, resources, volumes, placement (the container's
environment is :mod:`.env`'s)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

from trainer.telemetry.metric_names import METRICS_PORT, METRICS_PORT_NAME

from ...config import Backend, TrainingJobSpec, job_shm_size, nodes_needed
from ..base import MANAGED_BY, NETWORK_LABEL, NODES_LABEL, POOL_LABEL, Manifest
from ..fabrics import FabricProfile
from ..monitoring.scraping import JOB_NAME_POD_LABEL
from ..placement import GPU_RESOURCE, Placement
from .env import (
    CHECKPOINT_KEY_DIR,
    CHECKPOINT_KEY_FILE,
    DATA_MOUNT,
    OUTPUT_MOUNT,
    POD_NAME_ENV,
    TERMINATION_GRACE_S,
    checkpoint_key_ref,
    container_env,
    flight_recorder_env,
    job_env,
    nccl_env,
    runtime_env,
)
from .launchers import code_fields, counts_restarts, launcher_command, torchrun_command
from .node_check import node_check_container
from .run_policy import run_policy

MASTER_PORT = 23456
"""The operator's default; its injected MASTER_PORT reads the port named pytorchjob-port."""
REPLACED_ON_CHANGE = (
    "spec.pytorchReplicaSpecs",
    "spec.elasticPolicy",
    "spec.nprocPerNode",
    "spec.runPolicy.backoffLimit",
    "spec.runPolicy.activeDeadlineSeconds",
    "spec.runPolicy.cleanPodPolicy",
    "spec.runPolicy.schedulingPolicy",
)
"""What the v1 operator reads only when it starts a job: a change there replaces the job
(deleted first, then created again, resuming from its last checkpoint); ``suspend`` and
labels change in place."""


@dataclass(frozen=True)
class JobContext:
    """What a job takes from the rest of the platform.

    Args:
        namespace: namespace the job runs in.
        image: the container image, pinned.
        gpus: GPUs per pod (0: CPU job).
        placement: the pool's node selector and tolerations.
        data_claim: claim of the data volume, mounted read-only.
        output_claim: claim of the checkpoint/output volume.
        service_account: pods' service account (it carries the pull secret).
        image_pull_secret: pull secret name, or ``None`` for public images.
        queue: Kueue LocalQueue that admits the job (v2), or ``None`` for no queueing.
        topology_levels: levels of the Topology over which Kueue places the queue's GPU jobs
            (``trainerV2.kueue.topology``); empty when it does not.
        security_context: the pods' security context (a team's uid and gid), or ``None`` for the image's user.
        trainer_image: the platform's image with the ``trainer`` package, pinned, that the pre-job node
            check runs from (``monitoring.nodeHealth.image``); ``None`` without one.
    """

    namespace: str
    image: str
    gpus: int
    placement: Placement
    data_claim: str
    output_claim: str
    service_account: str | None = None
    image_pull_secret: str | None = None
    queue: str | None = None
    security_context: Manifest | None = None
    topology_levels: tuple[str, ...] = ()
    trainer_image: str | None = None


METRICS_CONTAINER_PORT = {"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"}
"""The trainer container's metrics port, by which the PodMonitor scrapes it; the protocol is
Kubernetes' default, written out as the Trainer v2 models fill it in."""


def job_command(job: TrainingJobSpec, procs: int, backend: Backend = "v1", gpus: int = 0) -> list[str]:
    """The container command: the bundled trainer under ``trainer.launch``, which is torchrun
    with exit statuses that ``restartPolicy: ExitCode`` can act on (an evicted pod exits 143,
    not 1), or the job's own command under its launcher (``launchers.py`` says how each
    launcher learns the world from the operator)."""
    if job.command is not None:
        return launcher_command(job, procs, gpus, backend)
    launcher = torchrun_command(job, procs, backend)
    if job.preset == "netbench":
        return [*launcher, "-m", "trainer.bench", *job.args]
    return [*launcher, "-m", "trainer", *job.trainer.to_flags(), *job.args]


def job_fabric(job: TrainingJobSpec, ctx: JobContext) -> FabricProfile | None:
    """The RDMA fabric ``job`` uses, after checking that the job fits its placement.

    Raises:
        ValueError: more GPUs or nodes than the pool offers, or RDMA networking on a pool
            without a fabric.
    """
    placement = ctx.placement
    if ctx.gpus and placement.gpus_per_node < ctx.gpus:
        raise ValueError(
            f"job {job.name!r} asks for {ctx.gpus} GPUs per pod but its placement offers {placement.gpus_per_node}"
        )
    if ctx.gpus and placement.max_nodes is not None:
        needed = nodes_needed(job, ctx.gpus, placement.gpus_per_node)
        if needed > placement.max_nodes:
            raise ValueError(
                f"job {job.name!r} needs {needed} nodes for its {job.max_pods} pods but its pool has at most "
                f"{placement.max_nodes}"
            )
    fabric = placement.fabric if job.network == "rdma" else None
    if job.network == "rdma" and fabric is None:
        raise ValueError(f"job {job.name!r} uses rdma networking but its placement has no RDMA fabric")
    return fabric


def job_resources(job: TrainingJobSpec, gpus: int, fabric: FabricProfile | None) -> Manifest:
    """Requests equal to limits per pod: CPU, memory, the GPUs and the fabric's devices."""
    limits = {"cpu": job.cpu, "memory": job.memory}
    if gpus:
        limits[GPU_RESOURCE] = str(gpus)
    if fabric is not None:
        limits[fabric.resource] = "1"
    return {"requests": dict(limits), "limits": dict(limits)}


SHM_MOUNT = {"name": "dshm", "mountPath": "/dev/shm"}


def claim_mounts() -> list[Manifest]:
    """The data volume (read-only) and the output volume."""
    return [{"name": "data", "mountPath": DATA_MOUNT, "readOnly": True}, {"name": "output", "mountPath": OUTPUT_MOUNT}]


def claim_volumes(ctx: JobContext) -> list[Manifest]:
    """The shared data (read-only) and output claims of ``ctx``'s namespace."""
    return [
        {"name": "data", "persistentVolumeClaim": {"claimName": ctx.data_claim, "readOnly": True}},
        {"name": "output", "persistentVolumeClaim": {"claimName": ctx.output_claim}},
    ]


def shared_volume_mounts(job: TrainingJobSpec) -> list[Manifest]:
    """The data volume (read-only), the output volume, the checkpoint key (read-only) when the job has
    one, and the job's own ``volumes``."""
    key = [{"name": "checkpoint-key", "mountPath": CHECKPOINT_KEY_DIR, "readOnly": True}]
    own = [
        {"name": f"volume-{i}", "mountPath": v.mount_path, **({"readOnly": True} if v.read_only else {})}
        for i, v in enumerate(job.volumes)
    ]
    return [*claim_mounts(), *(key if job.checkpoint_key is not None else []), *own]


def job_volumes(job: TrainingJobSpec, ctx: JobContext) -> list[Manifest]:
    """``/dev/shm`` sized for the job, the shared data and output claims, the checkpoint key's Secret and
    the job's own ``volumes``."""
    volumes = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": job_shm_size(job, ctx.gpus)}},
        *claim_volumes(ctx),
    ]
    if (ref := checkpoint_key_ref(job)) is not None:
        secret, key = ref
        # The files of a Secret volume belong to root (no fsGroup here, see tenancy.py), and a
        # team's pods run as the team's uid: the file must be readable by others. Only this
        # job's pods mount it.
        items = [{"key": key, "path": CHECKPOINT_KEY_FILE.rsplit("/", 1)[1]}]
        volumes.append(
            {"name": "checkpoint-key", "secret": {"secretName": secret, "items": items, "defaultMode": 0o444}}
        )
    for i, v in enumerate(job.volumes):
        # The data claim stays read-only wherever a job mounts it: datasets change through imports only.
        read_only = v.read_only or v.claim == ctx.data_claim
        claim = {"claimName": v.claim, **({"readOnly": True} if read_only else {})}
        volumes.append({"name": f"volume-{i}", "persistentVolumeClaim": claim})
    return volumes


def placement_fields(job: TrainingJobSpec, ctx: JobContext) -> Manifest:
    """Pod fields from the pool, the job, the registry and the team: node selector,
    tolerations, service account, pull secret, security context."""
    fields: Manifest = {}
    if ctx.security_context:
        fields["securityContext"] = dict(ctx.security_context)
    node_selector = {**ctx.placement.node_selector, **job.node_selector}
    if node_selector:
        fields["nodeSelector"] = node_selector
    tolerations = [dict(t) for t in ctx.placement.tolerations] + [t.manifest() for t in job.tolerations]
    if tolerations:
        fields["tolerations"] = tolerations
    if ctx.service_account:
        fields["serviceAccountName"] = ctx.service_account
    if ctx.image_pull_secret:
        fields["imagePullSecrets"] = [{"name": ctx.image_pull_secret}]
    if job.topology is not None:
        fields["affinity"] = topology_affinity(job)
    return fields


def topology_affinity(job: TrainingJobSpec) -> Manifest:
    """A pod affinity that draws the job's pods onto nodes with one value of ``job.topology.key``.

    The first pod matches its own term, which the scheduler accepts when no peer runs yet
    (Kubernetes: "Inter-pod affinity and anti-affinity"), so ``required`` does not block a job's start.
    """
    term = {"labelSelector": {"matchLabels": {JOB_NAME_POD_LABEL: job.name}}, "topologyKey": job.topology.key}
    if job.topology.mode == "required":
        return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return {
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]}
    }


def job_labels(job: TrainingJobSpec) -> dict[str, str]:
    return {**MANAGED_BY, JOB_NAME_POD_LABEL: job.name, **job.labels}


def pod_labels(job: TrainingJobSpec, ctx: JobContext) -> dict[str, str]:
    """A job pod's labels: the job's, and the pool it runs on, which the PodMonitor copies onto
    every series so that an alert can compare a job with earlier ones on the same pool; a netbench
    job's also its node count and network, so that it is compared only with runs of its shape."""
    pool = ctx.placement.node_selector.get(POOL_LABEL)
    labels = {**job_labels(job), **({POOL_LABEL: pool} if pool else {})}
    if job.preset == "netbench":
        labels |= {NODES_LABEL: str(job.max_pods), NETWORK_LABEL: job.network}
    return labels


def job_metadata(job: TrainingJobSpec, namespace: str, labels: dict[str, str]) -> Manifest:
    metadata: Manifest = {"name": job.name, "namespace": namespace, "labels": labels}
    if job.annotations:
        metadata["annotations"] = dict(job.annotations)
    return metadata


def pytorch_job(job: TrainingJobSpec, ctx: JobContext) -> Manifest:
    """The ``kubeflow.org/v1`` PyTorchJob for ``job``.

    Args:
        job: the validated job spec.
        ctx: what the job takes from the pool, storage and registry.

    Returns:
        A complete PyTorchJob object.

    Raises:
        ValueError: the job does not fit its placement: more GPUs or nodes than the pool
            offers, or RDMA networking on a pool without a fabric.
    """
    fabric = job_fabric(job, ctx)
    procs = ctx.gpus or job.procs_per_node or 1
    labels = job_labels(job)
    pod_spec = pod_template(
        job,
        ctx,
        fabric,
        container_name="pytorch",
        command=job_command(job, procs, gpus=ctx.gpus),
        port={"name": "pytorchjob-port", "containerPort": MASTER_PORT},
    )

    def replica(replicas: int) -> Manifest:
        return replica_spec(job, pod_labels(job, ctx), pod_spec, replicas)

    spec: Manifest = {"nprocPerNode": str(procs)}
    if job.elastic is not None:
        spec["elasticPolicy"] = {
            "minReplicas": job.elastic.min_nodes,
            "maxReplicas": job.elastic.max_nodes,
            "rdzvBackend": "c10d",
            "maxRestarts": job.elastic.max_restarts,
        }
        spec["pytorchReplicaSpecs"] = {"Worker": replica(job.elastic.max_nodes)}
    else:
        spec["pytorchReplicaSpecs"] = {"Master": replica(1)}
        if job.nodes > 1:
            spec["pytorchReplicaSpecs"]["Worker"] = replica(job.nodes - 1)
    spec["runPolicy"] = run_policy(job)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": job_metadata(job, ctx.namespace, labels),
        "spec": spec,
    }


def pod_template(
    job: TrainingJobSpec,
    ctx: JobContext,
    fabric: FabricProfile | None,
    container_name: str,
    command: list[str],
    port: Manifest,
) -> Manifest:
    """The pod spec every v1 kind's replicas share: the one container the operator looks for
    by ``container_name`` (its port named as the operator reads it), the job's environment,
    resources, volumes, code, placement and fabric.

    Args:
        job: the validated job spec.
        ctx: what the job takes from the pool, storage and registry.
        fabric: the RDMA fabric the job uses (``job_fabric``), or ``None``.
        container_name: the kind's default container name, from which the operator injects its settings.
        command: the container command.
        port: the kind's default port (name and number), from which the operator derives its addresses.
    """
    env = {
        **job_env(job, ctx.namespace),
        **runtime_env(),
        **(nccl_env(fabric) if ctx.gpus else {}),
        **(flight_recorder_env(job) if ctx.gpus else {}),
        **({"NCCL_DEBUG": job.nccl_debug} if ctx.gpus and job.nccl_debug else {}),
        **job.env,
    }
    code_container, init_containers, code_volumes = code_fields(job)
    container: Manifest = {
        "name": container_name,
        "image": ctx.image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "env": [*container_env(env), *([dict(POD_NAME_ENV)] if counts_restarts(job) else [])],
        "ports": [port, dict(METRICS_CONTAINER_PORT)],
        "resources": job_resources(job, ctx.gpus, fabric),
        "volumeMounts": [dict(SHM_MOUNT), *shared_volume_mounts(job), *code_container.pop("volumeMounts", [])],
        **code_container,
    }
    # A job of the bundled trainer carries the check in its own image; one with its own command may not.
    trainer_image = ctx.trainer_image or (ctx.image if job.command is None else None)
    check = node_check_container(job, trainer_image, ctx.gpus, copy.deepcopy(container["resources"]), SHM_MOUNT)
    init_containers = [check, *init_containers] if check else init_containers
    pod_spec: Manifest = {
        **({"initContainers": init_containers} if init_containers else {}),
        "containers": [container],
        "volumes": [*job_volumes(job, ctx), *code_volumes],
        # Lets the trainer's SIGTERM handler finish a checkpoint on eviction or spot reclaim.
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
        **placement_fields(job, ctx),
    }
    if job.scheduling.priority_class:
        pod_spec["priorityClassName"] = job.scheduling.priority_class
    return pod_spec


def replica_spec(job: TrainingJobSpec, labels: dict[str, str], pod_spec: Manifest, replicas: int) -> Manifest:
    """One replica type of a v1 job: its count, the job's restart policy and a copy of the pod."""
    return {
        "replicas": replicas,
        "restartPolicy": job.restart_policy,
        # A copy per replica type: shared dicts would serialise as YAML anchors.
        "template": {"metadata": {"labels": dict(labels)}, "spec": copy.deepcopy(pod_spec)},
    }


def kubectl_commands(name: str, namespace: str, kind: str = "PyTorchJob") -> dict[str, str]:
    """Commands to follow a v1 job of ``kind``; the operator labels every kind's pods alike."""
    selector = f"training.kubeflow.org/job-name={name}"
    return {
        "status": f"kubectl -n {namespace} get {kind.lower()} {name} -w",
        "describe": f"kubectl -n {namespace} describe {kind.lower()} {name}",
        "pods": f"kubectl -n {namespace} get pods -l {selector} -o wide",
        "masterLogs": f"kubectl -n {namespace} logs -f -l {selector},training.kubeflow.org/replica-type=master",
        "workerLogs": f"kubectl -n {namespace} logs -f --max-log-requests 64 -l {selector},training.kubeflow.org/replica-type=worker",
    }

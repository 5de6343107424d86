"""The PyTorchJob (``kubeflow.org/v1``) a training job becomes."""

from __future__ import annotations

import copy
from dataclasses import dataclass

from ..config import TrainingJobSpec, job_shm_size, nodes_needed
from .base import MANAGED_BY, Manifest
from .placement import GPU_RESOURCE, Placement

DATA_MOUNT = "/mnt/data"
OUTPUT_MOUNT = "/mnt/output"
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
FLIGHT_RECORDER_ENTRIES = 2000
"""Collectives each rank remembers; torch's own default once the recorder is on."""
TERMINATION_GRACE_S = 120
"""How long an evicted pod has to stop: the trainer checkpoints on SIGTERM, and torchrun
waits this long less ten seconds before it kills the workers (its own default is 30 s)."""


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
    """

    namespace: str
    image: str
    gpus: int
    placement: Placement
    data_claim: str
    output_claim: str
    service_account: str | None = None
    image_pull_secret: str | None = None


def _network_env(job: TrainingJobSpec, gpus: int, placement: Placement, output_path: str) -> dict[str, str]:
    env: dict[str, str] = {}
    if gpus:
        # NCCL hangs survivors of a dead peer until the collective timeout; this makes
        # the watchdog tear the process down so the pod restarts and resumes instead.
        env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "3"
        # The flight recorder keeps each rank's last collectives and writes them out when a
        # collective times out, so a hung job leaves evidence on the output volume
        # (torch 2.13: FlightRecorder.hpp, ProcessGroupNCCL.hpp; the dump file prefix is
        # TORCH_FR_DUMP_TEMP_FILE, followed by the rank).
        env.update(
            {
                "TORCH_NCCL_TRACE_BUFFER_SIZE": str(FLIGHT_RECORDER_ENTRIES),
                "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
                "TORCH_FR_DUMP_TEMP_FILE": f"{output_path}/nccl_trace_rank_",
            }
        )
        if job.network == "rdma" and placement.fabric is not None:
            env.update(placement.fabric.nccl_env)
        else:
            env.update({"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0"})
        if job.nccl_debug:
            env["NCCL_DEBUG"] = job.nccl_debug
    return env


def job_command(job: TrainingJobSpec, procs: int) -> list[str]:
    """The container command: ``trainer.launch``, which is torchrun with exit statuses
    that ``restartPolicy: ExitCode`` can act on (an evicted pod exits 143, not 1).
    torchrun reads the node count and node rank from the ``PET_*`` variables the operator
    (v1.9) injects, but the rest needs saying:

    - the processes per node, because the operator injects ``PET_NPROC_PER_NODE`` only
      for jobs with a Master, so an elastic job would start one process per node;
    - for a fixed multi-node job, the Master's address and port: torchrun does not read
      the operator's ``MASTER_ADDR`` and ``MASTER_PORT`` (Kubernetes expands ``$(VAR)``
      from the container's environment), and without them every node would rendezvous
      with itself at 127.0.0.1:29500. Elastic jobs meet at ``PET_RDZV_ENDPOINT``.
    """
    if job.command is not None:
        return [*job.command, *job.args]
    launcher = ["python", "-m", "trainer.launch", f"--nproc-per-node={procs}"]
    if job.elastic is None and job.nodes > 1:
        launcher += ["--master-addr=$(MASTER_ADDR)", "--master-port=$(MASTER_PORT)"]
    if job.preset == "netbench":
        return [*launcher, "-m", "trainer.bench", *job.args]
    return [*launcher, "-m", "trainer", *job.trainer.to_flags(), *job.args]


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
    procs = ctx.gpus or job.procs_per_node or 1
    output_path = f"{OUTPUT_MOUNT}/{job.name}"
    env = {
        "TRAIN_DATA_PATH": DATA_MOUNT,
        "OUTPUT_PATH": output_path,
        # MODEL_PATH names weights to start from, as in the PyTorchJob examples; the final
        # model has its own variable.
        **({"MODEL_PATH": job.trainer.init_from} if job.trainer.init_from else {}),
        "FINAL_MODEL_PATH": job.trainer.final_model_path or f"{output_path}/final_model.pt",
        # A restarted torchrun can fail or stall on the shared rendezvous store (pytorch#135712).
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(TERMINATION_GRACE_S - 10),
        "PYTHONUNBUFFERED": "1",
        **_network_env(job, ctx.gpus, placement, output_path),
        **job.env,
    }
    limits = {"cpu": job.cpu, "memory": job.memory}
    if ctx.gpus:
        limits[GPU_RESOURCE] = str(ctx.gpus)
    if fabric is not None:
        limits[fabric.resource] = "1"
    container: Manifest = {
        "name": "pytorch",
        "image": ctx.image,
        "imagePullPolicy": "IfNotPresent",
        "command": job_command(job, procs),
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "ports": [{"name": "pytorchjob-port", "containerPort": MASTER_PORT}],
        "resources": {"requests": dict(limits), "limits": dict(limits)},
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "data", "mountPath": DATA_MOUNT, "readOnly": True},
            {"name": "output", "mountPath": OUTPUT_MOUNT},
        ],
    }
    if fabric is not None:
        container["securityContext"] = dict(fabric.security_context)
    labels = {**MANAGED_BY, "app.kubernetes.io/name": job.name, **job.labels}
    pod_spec: Manifest = {
        "containers": [container],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": job_shm_size(job, ctx.gpus)}},
            {"name": "data", "persistentVolumeClaim": {"claimName": ctx.data_claim, "readOnly": True}},
            {"name": "output", "persistentVolumeClaim": {"claimName": ctx.output_claim}},
        ],
        # Lets the trainer's SIGTERM handler finish a checkpoint on eviction or spot reclaim.
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
    }
    if placement.node_selector:
        pod_spec["nodeSelector"] = dict(placement.node_selector)
    if placement.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in placement.tolerations]
    if ctx.service_account:
        pod_spec["serviceAccountName"] = ctx.service_account
    if ctx.image_pull_secret:
        pod_spec["imagePullSecrets"] = [{"name": ctx.image_pull_secret}]
    if job.scheduling.priority_class:
        pod_spec["priorityClassName"] = job.scheduling.priority_class
    if fabric is not None:
        pod_spec.update({"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"})

    def replica(replicas: int) -> Manifest:
        return {
            "replicas": replicas,
            "restartPolicy": job.restart_policy,
            # A copy per replica type: shared dicts would serialise as YAML anchors.
            "template": {"metadata": {"labels": dict(labels)}, "spec": copy.deepcopy(pod_spec)},
        }

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
    spec["runPolicy"] = _run_policy(job)
    metadata: Manifest = {"name": job.name, "namespace": ctx.namespace, "labels": labels}
    if job.annotations:
        metadata["annotations"] = dict(job.annotations)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata, "spec": spec}


def _run_policy(job: TrainingJobSpec) -> Manifest:
    run = job.run_policy
    policy: Manifest = {
        "cleanPodPolicy": run.clean_pod_policy,
        "backoffLimit": run.backoff_limit,
        "suspend": run.suspend,
    }
    if run.active_deadline_seconds is not None:
        policy["activeDeadlineSeconds"] = run.active_deadline_seconds
    scheduling = {
        k: v
        for k, v in {
            "queue": job.scheduling.queue,
            "priorityClass": job.scheduling.priority_class,
            "minAvailable": job.scheduling.min_available,
        }.items()
        if v is not None
    }
    if scheduling:
        policy["schedulingPolicy"] = scheduling
    return policy


def kubectl_commands(name: str, namespace: str) -> dict[str, str]:
    """Commands to follow a PyTorchJob."""
    selector = f"training.kubeflow.org/job-name={name}"
    return {
        "status": f"kubectl -n {namespace} get pytorchjob {name} -w",
        "describe": f"kubectl -n {namespace} describe pytorchjob {name}",
        "pods": f"kubectl -n {namespace} get pods -l {selector} -o wide",
        "masterLogs": f"kubectl -n {namespace} logs -f -l {selector},training.kubeflow.org/replica-type=master",
        "workerLogs": f"kubectl -n {namespace} logs -f --max-log-requests 64 -l {selector},training.kubeflow.org/replica-type=worker",
    }

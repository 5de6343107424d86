"""Pure builders: validated specs in, Kubernetes manifest dicts out.

Nothing here imports Pulumi. The components wrap these functions (through ``apply``
where an input is only known after deployment), and the offline plan and the golden
tests read the very same dicts.
"""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass, field
from typing import Any

from .config import (
    DEFAULT_CPU_SHM_GIB,
    DEFAULT_SHM_PER_GPU_GIB,
    PROJECT,
    GpuPoolSpec,
    OssSpec,
    TrainingJobSpec,
    TrainingNamespaceSpec,
)

Manifest = dict[str, Any]

MANAGED_BY = {"app.kubernetes.io/managed-by": PROJECT}
POOL_LABEL = f"{PROJECT}/pool"
DRIVER_LABEL = "ack.aliyun.com/nvidia-driver-version"
GPU_RESOURCE = "nvidia.com/gpu"
RDMA_RESOURCE = "rdma/hca"
NAS_PROVISIONER = "nasplugin.csi.alibabacloud.com"
OSS_PROVISIONER = "ossplugin.csi.alibabacloud.com"
NFS_MOUNT_OPTIONS = ("nolock,tcp,noresvport", "vers=3")
"""ACK's recommended NFSv3 options: no lock daemon, TCP, and a fresh source port on
reconnect so a NAS failover does not hang the mount."""
DATA_MOUNT = "/mnt/data"
OUTPUT_MOUNT = "/mnt/output"
MASTER_PORT = 23456
"""The operator's default; its injected MASTER_PORT reads the port named pytorchjob-port."""
TERMINATION_GRACE_S = 120
"""How long an evicted pod has to stop: the trainer checkpoints on SIGTERM, and torchrun
waits this long less ten seconds before it kills the workers (its own default is 30 s)."""


@dataclass(frozen=True)
class Placement:
    """Where a job's pods may run, as the GPU node pool exposes it.

    Args:
        node_selector: labels the pods must match.
        tolerations: tolerations for the pool's taints.
        gpus_per_node: GPUs on each node (0: CPU nodes).
        rdma: whether the nodes expose ``rdma/hca``.
    """

    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, str], ...] = ()
    gpus_per_node: int = 0
    rdma: bool = False


CPU_PLACEMENT = Placement()


def pool_node_labels(pool: GpuPoolSpec) -> dict[str, str]:
    """Labels set on every node of ``pool``."""
    labels = {POOL_LABEL: pool.name, **pool.labels}
    if pool.driver_version:
        labels[DRIVER_LABEL] = pool.driver_version
    return labels


def pool_placement(pool: GpuPoolSpec) -> Placement:
    """The placement jobs derive from ``pool``: its label selector and taint toleration."""
    taint = pool.taint
    return Placement(
        node_selector={POOL_LABEL: pool.name},
        tolerations=({"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect},),
        gpus_per_node=pool.gpus_per_node,
        rdma=pool.rdma,
    )


def nas_storage_class(name: str, server: str) -> Manifest:
    """A NAS CSI StorageClass whose volumes are subdirectories of one file system.

    Args:
        name: StorageClass name.
        server: ``<mount target domain>:/<directory>/``, the directory holding the volumes.
    """
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "labels": dict(MANAGED_BY)},
        "provisioner": NAS_PROVISIONER,
        "parameters": {
            "volumeAs": "subpath",
            "server": server,
            # A deleted volume's directory is renamed, not wiped: checkpoints survive mistakes.
            "archiveOnDelete": "true",
            # The provisioner creates each volume's directory as root, 755; the trainer image
            # runs as an unprivileged user that must create its job directory there. The CSI
            # plugin chmods only the volume's own directory (modeType non-recursive), so what
            # jobs write keeps its owner's permissions.
            "mode": "777",
            "modeType": "non-recursive",
        },
        "mountOptions": list(NFS_MOUNT_OPTIONS),
        "reclaimPolicy": "Retain",
        "allowVolumeExpansion": True,
        "volumeBindingMode": "Immediate",
    }


def persistent_volume_claim(
    name: str, namespace: str, storage_class: str, size: str, access_mode: str, volume_name: str | None = None
) -> Manifest:
    """A shared volume claim (``ReadWriteMany`` on NAS); bound to ``volume_name`` when given."""
    spec: Manifest = {
        "accessModes": [access_mode],
        "storageClassName": storage_class,
        "resources": {"requests": {"storage": size}},
    }
    if volume_name is not None:
        spec["volumeName"] = volume_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "spec": spec,
    }


def oss_persistent_volume(
    name: str, oss: OssSpec, endpoint: str, size: str, secret_name: str, secret_namespace: str
) -> Manifest:
    """A static, read-only OSS volume (ossfs through the OSS CSI plugin), kept on delete."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(MANAGED_BY)},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadOnlyMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "csi": {
                "driver": OSS_PROVISIONER,
                "volumeHandle": name,
                "readOnly": True,
                "nodePublishSecretRef": {"name": secret_name, "namespace": secret_namespace},
                # Metadata caching off: datasets change between runs, stale listings would hide files.
                "volumeAttributes": {
                    "bucket": oss.bucket,
                    "url": endpoint,
                    "path": oss.path,
                    "otherOpts": "-o umask=022 -o max_stat_cache_size=0 -o allow_other",
                },
            },
        },
    }


def training_namespace(spec: TrainingNamespaceSpec) -> list[Manifest]:
    """The jobs' Namespace, ServiceAccount and, when configured, a GPU ResourceQuota.

    Jobs name the image pull secret themselves, so the ServiceAccount carries none.
    """
    objects: list[Manifest] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": spec.namespace, "labels": dict(MANAGED_BY)}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": spec.service_account, "namespace": spec.namespace, "labels": dict(MANAGED_BY)},
        },
    ]
    if spec.gpu_quota is not None:
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "gpu-quota", "namespace": spec.namespace, "labels": dict(MANAGED_BY)},
                "spec": {"hard": {f"requests.{GPU_RESOURCE}": str(spec.gpu_quota)}},
            }
        )
    return objects


def docker_config_json(server: str, username: str, password: str) -> str:
    """The ``.dockerconfigjson`` payload of an image pull secret."""
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    return json.dumps({"auths": {server: {"username": username, "password": password, "auth": auth}}})


def operator_source(version: str) -> str:
    """The standalone kustomize overlay of the Training Operator at ``version``."""
    return f"https://github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref={version}"


def operator_kustomization(version: str, gang_scheduler: str) -> Manifest:
    """A kustomization that starts the operator with ``--gang-scheduler-name``."""
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [operator_source(version)],
        "patches": [
            {
                "target": {"kind": "Deployment", "name": "training-operator"},
                "patch": json.dumps(
                    [
                        {
                            "op": "add",
                            "path": "/spec/template/spec/containers/0/args/-",
                            "value": f"--gang-scheduler-name={gang_scheduler}",
                        }
                    ]
                ),
            }
        ],
    }


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


def job_shm_size(job: TrainingJobSpec, gpus: int) -> str:
    """``/dev/shm`` size: as configured, else sized for the data loader workers per GPU."""
    if job.shm_size is not None:
        return job.shm_size
    return f"{DEFAULT_SHM_PER_GPU_GIB * gpus}Gi" if gpus else f"{DEFAULT_CPU_SHM_GIB}Gi"


def _network_env(job: TrainingJobSpec, gpus: int) -> dict[str, str]:
    env: dict[str, str] = {}
    if gpus:
        # NCCL hangs survivors of a dead peer until the collective timeout; this makes
        # the watchdog tear the process down so the pod restarts and resumes instead.
        env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "3"
        if job.network == "rdma":
            env.update(
                {
                    "NCCL_IB_DISABLE": "0",
                    "NCCL_IB_HCA": "mlx5",
                    "NCCL_IB_GID_INDEX": "3",
                    "NCCL_NET_GDR_LEVEL": "PHB",
                    "NCCL_SOCKET_IFNAME": "eth0",
                }
            )
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
        ValueError: the job asks for GPUs but the placement has none, or RDMA without it.
    """
    if ctx.gpus and ctx.placement.gpus_per_node < ctx.gpus:
        raise ValueError(
            f"job {job.name!r} asks for {ctx.gpus} GPUs per pod but its placement offers {ctx.placement.gpus_per_node}"
        )
    if job.network == "rdma" and not ctx.placement.rdma:
        raise ValueError(f"job {job.name!r} uses rdma networking but its placement has no RDMA")
    procs = ctx.gpus or job.procs_per_node or 1
    output_path = f"{OUTPUT_MOUNT}/{job.name}"
    env = {
        "TRAIN_DATA_PATH": DATA_MOUNT,
        "OUTPUT_PATH": output_path,
        "MODEL_PATH": f"{output_path}/final_model.pt",
        # A restarted torchrun can fail or stall on the shared rendezvous store (pytorch#135712).
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(TERMINATION_GRACE_S - 10),
        "PYTHONUNBUFFERED": "1",
        **_network_env(job, ctx.gpus),
        **job.env,
    }
    limits = {"cpu": job.cpu, "memory": job.memory}
    if ctx.gpus:
        limits[GPU_RESOURCE] = str(ctx.gpus)
    if job.network == "rdma":
        limits[RDMA_RESOURCE] = "1"
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
    if job.network == "rdma":
        container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
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
    if ctx.placement.node_selector:
        pod_spec["nodeSelector"] = dict(ctx.placement.node_selector)
    if ctx.placement.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in ctx.placement.tolerations]
    if ctx.service_account:
        pod_spec["serviceAccountName"] = ctx.service_account
    if ctx.image_pull_secret:
        pod_spec["imagePullSecrets"] = [{"name": ctx.image_pull_secret}]
    if job.scheduling.priority_class:
        pod_spec["priorityClassName"] = job.scheduling.priority_class
    if job.network == "rdma":
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
    if run.ttl_seconds_after_finished is not None:
        policy["ttlSecondsAfterFinished"] = run.ttl_seconds_after_finished
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

"""The namespaced TrainingRuntime of one MPI job on backend v2 (Kubeflow Trainer v2.3.0's MPI policy).

Trainer v2.3.0 gives a TrainJob's image, command and resources only to the replicated job
labelled as the trainer ancestor, here the launcher (``pkg/runtime/framework/plugins/jobset/builder.go``
``Trainer``), and a runtime patch has no image field (``ContainerPatch``): the node pods run what
their runtime says. So each MPI job gets a runtime of its own, in its namespace and named after
it, with the job's image and resources written in both replicated jobs.

The shape is upstream's MPI runtimes' (``manifests/base/runtimes/deepspeed_distributed.yaml``,
``mlx_distributed.yaml`` at v2.3.0): the launcher is node 0 (``runLauncherAsNode``) and runs the
job's command once every node pod is ready; the other node pods run ``sshd`` for ``mpirun``. The
MPI plugin (``pkg/runtime/framework/plugins/mpi/mpi.go``) adds the SSH key Secret mounted at
``sshAuthMountPath`` in every pod, the hostfile, and OpenMPI's ``OMPI_MCA_*`` settings on the launcher.
"""

from __future__ import annotations

from ...config import TrainingJobSpec
from ..base import Manifest
from ..fabrics import FabricProfile
from .names import TRAINER_API
from .pod import JobContext, job_labels, job_resources
from .trainjob import FAILURE_POLICY, MPI_LAUNCHER, TRAINER_NODE, mpi_procs, replicated_job, runtime_pod

MPI_HOME = "/home/mpiuser"
SSH_AUTH_MOUNT = f"{MPI_HOME}/.ssh"
SSHD_COMMAND = ["/usr/sbin/sshd", "-De", "-f", f"{MPI_HOME}/.sshd_config"]
SSHD_PORT = 2222
"""How a node pod serves ``mpirun``: upstream's MPI runtimes run this ``sshd``, as user 1000, on
port 2222 with the user's own config, and the launcher waits for that port (the node job's
readiness); the job's image must carry both (see docs/job-kinds.md)."""
MPI_USER = 1000
"""The user and ``fsGroup`` of upstream's MPI runtimes (``runAsUser: 1000`` on the container,
``fsGroup: 1000`` on the pod), for a job that is not a team's."""


def ssh_key_access(ctx: JobContext) -> tuple[Manifest, Manifest | None]:
    """The pod and container security contexts that let the pod's user read the job's SSH key.

    The MPI plugin mounts the key Secret with the private key at mode 0640 and the rest 0644
    (v2.3.0 ``pkg/runtime/framework/plugins/mpi/mpi.go``, ``pkg/constants`` ``MPISSHPrivateKeyFileMode``):
    owned by root, readable by its group, which is the pod's ``fsGroup`` when it has one (Kubernetes
    "Configure a Security Context for a Pod or Container": volumes that support ownership management
    are owned by ``fsGroup``). Without it only root reads the key, and ``mpirun`` never reaches the
    nodes. A team's pods run as its uid and gid, so the group is the team's; others run as upstream's
    runtimes do. The NAS and OSS volumes are left alone: their CSI drivers declare no ``fsGroupPolicy``
    (kubernetes-sigs/alibaba-cloud-csi-driver ``deploy/charts/alibaba-cloud-csi-driver/templates/csi-driver.yaml``),
    whose default, ``ReadWriteOnceWithFSType``, changes no ``ReadWriteMany`` volume.

    Returns:
        (the pod's security context, the container's or ``None``).
    """
    group = (ctx.security_context or {}).get("runAsGroup")
    if group is not None:
        return {"fsGroup": group}, None
    return {"fsGroup": MPI_USER}, {"runAsUser": MPI_USER}


def mpi_training_runtime(job: TrainingJobSpec, ctx: JobContext, fabric: FabricProfile | None) -> Manifest:
    """The TrainingRuntime ``job`` (framework ``mpi``, backend v2) runs on, named after it in its namespace.

    Its pods are the platform's other runtimes' (:func:`runtime_pod`: grace period, ``/dev/shm``,
    NCCL's settings for the fabric) and fail as theirs do (:data:`FAILURE_POLICY`);
    the TrainJob patches in the same placement, volumes and pull secret for both replicated jobs.

    Args:
        job: the validated job.
        ctx: its context; ``ctx.image`` goes into both replicated jobs.
        fabric: its RDMA fabric, or ``None``.

    Returns:
        A complete ``TrainingRuntime``.
    """
    pod_security, container_security = ssh_key_access(ctx)
    node_pod = runtime_pod(fabric)
    node_pod["containers"][0].update(
        image=ctx.image,
        command=SSHD_COMMAND[:1],
        args=SSHD_COMMAND[1:],
        # Trainer v2.3.0 gives the TrainJob's resourcesPerNode to the launcher only (builder.go
        # Trainer: "For MPI we should apply container resources to the Node ReplicatedJob also").
        resources=job_resources(job, ctx.gpus, fabric),
        readinessProbe={"tcpSocket": {"port": SSHD_PORT}, "initialDelaySeconds": 5},
    )
    launcher_pod = runtime_pod(fabric)
    launcher_pod["containers"][0]["image"] = ctx.image
    for pod in (node_pod, launcher_pod):
        pod["securityContext"] = dict(pod_security)
        if container_security is not None:
            pod["containers"][0]["securityContext"] = dict(container_security)
    launcher = replicated_job(MPI_LAUNCHER, launcher_pod, trainer=True)
    launcher["dependsOn"] = [{"name": TRAINER_NODE, "status": "Ready"}]
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainingRuntime",
        "metadata": {
            "name": job.name,
            "namespace": ctx.namespace,
            "labels": {**job_labels(job), "trainer.kubeflow.org/framework": "mpi"},
        },
        "spec": {
            "mlPolicy": {
                "numNodes": job.nodes,
                "mpi": {
                    "numProcPerNode": mpi_procs(job, ctx.gpus),
                    "mpiImplementation": "OpenMPI",
                    "sshAuthMountPath": SSH_AUTH_MOUNT,
                    "runLauncherAsNode": True,
                },
            },
            "template": {
                "spec": {
                    # Node pods are reachable by name before they are ready, as upstream's runtimes have them.
                    "network": {"publishNotReadyAddresses": True},
                    "successPolicy": {"operator": "All", "targetReplicatedJobs": [MPI_LAUNCHER]},
                    "failurePolicy": FAILURE_POLICY,
                    "replicatedJobs": [replicated_job(TRAINER_NODE, node_pod, trainer=False), launcher],
                }
            },
        },
    }

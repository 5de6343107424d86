"""What the Training Operator v1.9.4 adds to the pods of an emitted XGBoostJob or MPIJob: the
pod's name, the environment it appends to the container, the files it mounts and the command
it gives a container that has none.

Everything here is derived from the emitted object itself, as the operator derives it (the
replica counts, the container's named port, ``slotsPerWorker``), following kubeflow/trainer
v1.9.4:

- XGBoostJob: ``pkg/controller.v1/xgboost/xgboost.go`` ``SetPodEnv``; pods and their headless
  Services are named ``<job>-<replica type in lower case>-<index>``
  (``pkg/controller.v1/common/util.go`` ``GenGeneralName``, ``service.go``);
- MPIJob: ``pkg/controller.v1/mpi/mpijob_controller.go`` (``newConfigMap``, ``newLauncher``,
  ``newWorker``) and ``mpijob.go`` (the mount paths); no Services: the Launcher reaches each
  Worker pod by name through ``kubectl exec``.

The tests start each pod as a local process with exactly these additions, so a wrong variable
here or in the builder fails a real XGBoost or Open MPI run. Pure: no Pulumi, no cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import Manifest
from .kinds import KINDS

MPI_CONFIG_DIR = "/etc/mpi"
"""Where the Launcher (hostfile, ``kubexec.sh``) and the Workers (``kubexec.sh``) mount the job's ConfigMap."""
MPI_HOSTFILE = f"{MPI_CONFIG_DIR}/hostfile"
MPI_KUBEXEC = f"{MPI_CONFIG_DIR}/kubexec.sh"
KUBECTL = "/opt/kube/kubectl"
"""The ``kubectl`` an init container delivers into the Launcher, which ``kubexec.sh`` runs."""
MPI_WORKER_IDLE = ["sleep", "365d"]
"""A Worker container without a command idles so that ``mpirun`` can start ranks in it."""


@dataclass(frozen=True)
class OperatorPod:
    """One pod as the operator creates it from a replica's template.

    Args:
        name: the pod's name (for an XGBoostJob also its Service's, which resolves to the pod).
        env: appended to the kind's container; a name the template already has is overridden.
        files: absolute path → content of the ConfigMap files mounted into the container.
        command: the container command when the operator replaces a missing one, else ``None``.
    """

    name: str
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    command: list[str] | None = None


def framework_of(manifest: Manifest) -> str:
    """The platform's framework name for an emitted object's kind."""
    for framework, kind in KINDS.items():
        if kind.kind == manifest["kind"]:
            return framework
    raise ValueError(f"{manifest['kind']} is not a Training Operator v1 kind")


def _container(replica_spec: Manifest, name: str) -> Manifest:
    return next(c for c in replica_spec["template"]["spec"]["containers"] if c["name"] == name)


def _port(replica_spec: Manifest, framework: str) -> int:
    """The port the operator reads: the kind's container's port of the kind's port name."""
    kind = KINDS[framework]
    ports = _container(replica_spec, kind.container).get("ports", [])
    for port in ports:
        if port["name"] == kind.port_name:
            return int(port["containerPort"])
    raise ValueError(f"the {kind.container} container has no port named {kind.port_name}: the operator fails the job")


def pod_name(job_name: str, replica: str, index: int) -> str:
    """``GenGeneralName``: the pod (and Service) name of one replica."""
    return f"{job_name}-{replica.lower()}-{index}".replace("/", "-")


def xgboost_pod(manifest: Manifest, replica: str, index: int) -> OperatorPod:
    """An XGBoostJob pod: ``RANK`` counts the Master first, ``MASTER_ADDR`` names the Master's
    Service and ``MASTER_PORT`` is its ``xgboostjob-port``; the Master runs the collective
    tracker there. ``WORKER_ADDRS``/``WORKER_PORT`` are for LightGBM."""
    specs, name = manifest["spec"]["xgbReplicaSpecs"], manifest["metadata"]["name"]
    rank = index + (specs["Master"]["replicas"] if replica == "Worker" else 0)
    world = sum(spec["replicas"] for spec in specs.values())
    env = {
        "MASTER_PORT": str(_port(specs["Master"], "xgboost")),
        "MASTER_ADDR": pod_name(name, "Master", 0),
        "WORLD_SIZE": str(world),
        "RANK": str(rank),
        "PYTHONUNBUFFERED": "1",
    }
    if world > 1:
        # The operator names world - 1 Workers whatever the Worker count: with one Master
        # that is every Worker.
        env["WORKER_PORT"] = str(_port(specs["Worker"], "xgboost"))
        env["WORKER_ADDRS"] = ",".join(pod_name(name, "Worker", i) for i in range(world - 1))
    return OperatorPod(pod_name(name, replica, index), env)


def _gpu_launcher(launcher: Manifest) -> bool:
    """``isGPULauncher``: a Launcher container limit whose resource name contains ``gpu``
    (``nvidia.com/gpu`` among them)."""
    containers = launcher["template"]["spec"]["containers"]
    return any("gpu" in resource for c in containers for resource in c.get("resources", {}).get("limits", {}))


def mpi_hostfile(manifest: Manifest) -> str:
    """The hostfile: one line ``<pod> slots=<slotsPerWorker>`` per Worker (1 slot when unset),
    the Launcher first when it has a GPU."""
    spec, name = manifest["spec"], manifest["metadata"]["name"]
    slots = spec.get("slotsPerWorker", 1)
    hosts = [f"{name}-launcher"] if _gpu_launcher(spec["mpiReplicaSpecs"]["Launcher"]) else []
    hosts += [f"{name}-worker-{i}" for i in range(spec["mpiReplicaSpecs"]["Worker"]["replicas"])]
    return "".join(f"{host} slots={slots}\n" for host in hosts)


def mpi_kubexec(manifest: Manifest) -> str:
    """``kubexec.sh``, Open MPI's remote shell: it runs the command in the named pod."""
    main = manifest["spec"].get("mainContainer")
    container = f" --container {main}" if main else ""
    return f'#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n{KUBECTL} exec ${{POD_NAME}}{container} -- /bin/sh -c "$*"'


def mpi_pod(manifest: Manifest, replica: str, index: int) -> OperatorPod:
    """An MPIJob pod. The Launcher (``<job>-launcher``) gets Open MPI 4's settings for the
    hostfile and remote shell, Intel MPI's unless its container sets them, and no GPUs when
    it asks for none; a Worker (``<job>-worker-<i>``) gets ``kubexec.sh`` and, without a
    command, the idle one."""
    name, specs = manifest["metadata"]["name"], manifest["spec"]["mpiReplicaSpecs"]
    kubexec = {MPI_KUBEXEC: mpi_kubexec(manifest)}
    if replica == "Worker":
        command = specs["Worker"]["template"]["spec"]["containers"][0].get("command")
        return OperatorPod(f"{name}-worker-{index}", files=kubexec, command=None if command else MPI_WORKER_IDLE)
    env = {"OMPI_MCA_plm_rsh_agent": MPI_KUBEXEC, "OMPI_MCA_orte_default_hostfile": MPI_HOSTFILE}
    if not _gpu_launcher(specs["Launcher"]):
        env |= {"NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_DRIVER_CAPABILITIES": ""}
    # The operator sets the first container of each pod, which the builder makes the mpi one.
    own = {e["name"] for e in specs["Launcher"]["template"]["spec"]["containers"][0].get("env", [])}
    if "I_MPI_HYDRA_BOOTSTRAP" not in own:
        env["I_MPI_HYDRA_BOOTSTRAP"] = "rsh"
    if "I_MPI_HYDRA_BOOTSTRAP_EXEC" not in own:
        env["I_MPI_HYDRA_BOOTSTRAP_EXEC"] = MPI_KUBEXEC
    return OperatorPod(f"{name}-launcher", env, {**kubexec, MPI_HOSTFILE: mpi_hostfile(manifest)})


def operator_pods(manifest: Manifest) -> dict[tuple[str, int], OperatorPod]:
    """Every pod the operator creates for an emitted XGBoostJob or MPIJob, by (replica type, index).

    Raises:
        ValueError: another kind, or a container without the port the operator reads.
    """
    framework = framework_of(manifest)
    build = {"xgboost": xgboost_pod, "mpi": mpi_pod}.get(framework)
    if build is None:
        raise ValueError(f"{manifest['kind']}: only XGBoostJob and MPIJob pods are derived here")
    specs = manifest["spec"][KINDS[framework].specs_key]
    return {
        (replica, index): build(manifest, replica, index)
        for replica, spec in specs.items()
        for index in range(spec["replicas"])
    }

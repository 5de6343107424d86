"""Which pod is which replica or rank of a job, from the labels the controllers set: pure.

- v1 (Training Operator v1.9.4): ``training.kubeflow.org/job-name``, ``replica-type`` (the
  type in lower case: ``master``, ``worker``) and ``replica-index``
  (``pkg/controller.v1/common/pod.go``; the SDK's ``constants.py`` selects with the same keys).
  A fixed-size job's node rank is the Master's 0, then worker N's N + 1 (the operator sets
  ``RANK`` so in ``pkg/controller.v1/pytorch/envvar.go``). An elastic job has Workers only and
  torchrun's rendezvous hands out ranks as the nodes join, so no pod has a fixed rank.
- An MPIJob's pods are made by its own controller (``pkg/controller.v1/mpi/mpijob_controller.go``):
  the Launcher gets ``replica-type=launcher`` and no ``replica-index`` (``newLauncher``), the
  Workers ``replica-type=worker`` with their index (``getOrCreateWorker``). The Launcher runs
  ``mpirun`` and no rank; the hostfile lists the Workers in index order (``newConfigMap``). A
  Worker's own process is the operator's ``sleep 365d`` (``newWorker``: the platform gives Workers
  no command), and ``mpirun`` starts the ranks in it through ``kubectl exec`` (``kubexec.sh``), so
  every rank's output reaches the Launcher's log, and a Worker's log is empty: ``--rank`` is
  refused there with a pointer to the Launcher's log.
- v2 (Trainer v2.3.0 with JobSet v0.12.0): ``jobset.sigs.k8s.io/jobset-name`` (the TrainJob's
  name), ``jobset.sigs.k8s.io/replicatedjob-name`` (``node``), and the indexed Job's
  ``batch.kubernetes.io/job-completion-index``, which is the node rank: Trainer's torch plugin
  sets torchrun's ``PET_NODE_RANK`` from the completion index
  (``pkg/runtime/framework/plugins/torch/torch.go``), as the JAX and XGBoost plugins set
  ``JAX_PROCESS_ID`` and ``DMLC_TASK_ID`` (``plugins/jax/jax.go``, ``plugins/xgboost/xgboost.go``).
"""

from __future__ import annotations

from typing import Any

from .status import (
    JOBSET_NAME_LABEL,
    PYTORCHJOB,
    REPLICATED_JOB_LABEL,
    V1_INDEX_LABEL,
    V1_JOB_LABEL,
    V1_KINDS,
    V1_TYPE_LABEL,
    is_v1,
    v1_replica_specs,
)

NODE_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
"""An Indexed Job's pod index, as a label since Kubernetes 1.28 (KEP-4017, the pod index
label): node N of a TrainJob is index N of its node Job."""
V2_NODE = "node"
"""The replicated job and the container of a TrainJob's nodes (the platform's runtimes)."""


class ReplicaError(ValueError):
    """A replica or rank the job does not have; the message names the flag."""


MPIJOB = "MPIJob"
MPI_LAUNCHER = "launcher"
"""The one replica type whose pod carries no ``replica-index``."""


def is_elastic(job: dict[str, Any]) -> bool:
    """A v1 job without a Master: its Workers meet at a rendezvous."""
    return job.get("kind") == PYTORCHJOB and "Master" not in v1_replica_specs(job)


def node_count(job: dict[str, Any]) -> int:
    """The nodes the job asks for: a TrainJob's ``numNodes``, a v1 job's replicas."""
    if is_v1(job):
        ranked = ("Worker", *([] if job["kind"] == MPIJOB else ["Master", "Chief"]))
        return sum(spec.get("replicas", 1) for role, spec in v1_replica_specs(job).items() if role in ranked)
    return ((job.get("spec") or {}).get("trainer") or {}).get("numNodes", 1)


def _lead(job: dict[str, Any]) -> str | None:
    """The v1 replica type that leads the job when it is not a Worker: Master, Chief or Launcher."""
    return next((role.lower() for role in v1_replica_specs(job) if role in ("Master", "Chief", "Launcher")), None)


def default_replica(job: dict[str, Any]) -> str:
    """The replica ``logs`` reads without ``--replica``: rank 0, an MPIJob's Launcher (every rank's output
    reaches it through ``mpirun``), or worker-0 of an elastic job."""
    if not is_v1(job):
        return f"{V2_NODE}-0"
    return _lead(job) or "worker-0"


def rank_replica(job: dict[str, Any], rank: int) -> str:
    """The replica that runs node rank ``rank``.

    Raises:
        ReplicaError: the job has no such rank, its ranks are not fixed (elastic), or its ranks write
            to another pod's log (an MPIJob's Launcher).
    """
    name = job["metadata"]["name"]
    if job.get("kind") == MPIJOB:
        raise ReplicaError(
            f"--rank {rank}: MPIJob {name}'s ranks run under mpirun, whose Launcher log holds every rank's "
            f"output; its Workers' own log is the operator's sleep: run `ack-jobs logs {name}` without --rank"
        )
    if is_elastic(job):
        raise ReplicaError(
            f"--rank {rank}: PyTorchJob {name} is elastic: torchrun assigns node ranks at rendezvous, so no pod "
            "has a fixed rank; give --replica worker-N"
        )
    nodes = node_count(job)
    if not 0 <= rank < nodes:
        raise ReplicaError(f"--rank {rank}: {job['kind']} {name} has node ranks 0 to {nodes - 1}")
    if not is_v1(job):
        return f"{V2_NODE}-{rank}"
    lead = _lead(job)
    if lead is None:
        return f"worker-{rank}"
    return lead if rank == 0 else f"worker-{rank - 1}"


def replica_selector(job: dict[str, Any], replica: str) -> tuple[dict[str, str], str]:
    """The label selector of one replica's pod, and its training container.

    Args:
        job: the job object.
        replica: a v1 replica type in lower case, with ``-N`` for all but the first
            (``master``, ``worker-0``, ``ps-1``), or ``node-N`` (v2).

    Raises:
        ReplicaError: the job has no such replica.
    """
    name = job["metadata"]["name"]
    kind, _, index = replica.rpartition("-") if "-" in replica else (replica, "", "")
    if not is_v1(job):
        if kind != V2_NODE or not index.isdigit():
            raise ReplicaError(f"--replica {replica!r}: a TrainJob has replicas node-0, node-1, ...")
        labels = {JOBSET_NAME_LABEL: name, REPLICATED_JOB_LABEL: V2_NODE, NODE_INDEX_LABEL: index}
        return labels, V2_NODE
    roles = [role.lower() for role in v1_replica_specs(job)]
    if kind not in roles or not (index.isdigit() or index == ""):
        shown = " and ".join(f"{role}-0, {role}-1, ..." if role == "worker" else role for role in roles)
        raise ReplicaError(f"--replica {replica!r}: a {job['kind']} has replicas {shown}")
    labels = {V1_JOB_LABEL: name, V1_TYPE_LABEL: kind}
    if not (job["kind"] == MPIJOB and kind == MPI_LAUNCHER):
        labels[V1_INDEX_LABEL] = index or "0"
    return labels, container_of(job)


def job_selector(job: dict[str, Any]) -> dict[str, str]:
    """The labels every pod of the job carries."""
    label = V1_JOB_LABEL if is_v1(job) else JOBSET_NAME_LABEL
    return {label: job["metadata"]["name"]}


def container_of(job: dict[str, Any]) -> str:
    return V1_KINDS[job["kind"]].container if is_v1(job) else V2_NODE


def pod_job(pod: dict[str, Any]) -> str | None:
    """The name of the training job a pod belongs to, if any."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(V1_JOB_LABEL) or labels.get(JOBSET_NAME_LABEL)

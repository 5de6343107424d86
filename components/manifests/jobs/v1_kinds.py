"""The Training Operator v1 object for each framework: PyTorchJob, TFJob, XGBoostJob, MPIJob,
JAXJob, PaddleJob, with the same pod (``pod_template``), run policy and restart policy.

The kinds' names and ports are in :mod:`.names`; the replica types are the ones each kind's
types declare (kubeflow/trainer v1.9.4 ``pkg/apis/kubeflow.org/v1/<kind>_types.go``).
"""

from __future__ import annotations

import dataclasses

from ...config import TrainingJobSpec
from ..base import Manifest
from .names import KINDS, MPI_LAUNCHER_ACCOUNT
from .pod import (
    REPLACED_ON_CHANGE,
    JobContext,
    job_command,
    job_fabric,
    job_labels,
    job_metadata,
    pod_labels,
    pod_template,
    pytorch_job,
    replica_spec,
)
from .run_policy import run_policy

MPI_LAUNCHER_SIZE = {"cpu": "1", "memory": "4Gi", "gpus_per_node": 0, "network": "tcp", "shm_size": "1Gi"}
"""The MPI Launcher only runs ``mpirun``, which starts the ranks on the Workers."""
PS_SIZE = {"gpus_per_node": 0, "network": "tcp", "shm_size": None}
"""A TFJob parameter server holds and updates variables on its CPUs, with the job's CPU and memory;
the GPUs and the fabric are the Workers'."""


def _roles(job: TrainingJobSpec) -> dict[str, int]:
    """Replica type → count for a kind with one pod per node (all but PyTorch and MPI).

    - TFJob: a Chief (rank 0 of ``TF_CONFIG``, it writes checkpoints) and ``nodes - 1``
      Workers, plus PS and an Evaluator when asked for;
    - XGBoostJob: a Master (rank 0, it runs the collective tracker: ``MASTER_ADDR`` names it)
      and ``nodes - 1`` Workers;
    - JAXJob, PaddleJob (collective mode): ``nodes`` Workers; JAX's coordinator is Worker 0.
    """
    if job.framework == "tensorflow":
        roles = {"Chief": 1, "Worker": job.nodes - 1, "PS": job.parameter_servers, "Evaluator": int(job.evaluator)}
    elif job.framework == "xgboost":
        roles = {"Master": 1, "Worker": job.nodes - 1}
    else:
        roles = {"Worker": job.nodes}
    return {role: count for role, count in roles.items() if count}


def kubeflow_job(job: TrainingJobSpec, ctx: JobContext) -> Manifest:
    """The ``kubeflow.org/v1`` object for ``job``'s framework.

    Raises:
        ValueError: the job does not fit its placement (see ``job_fabric``).
    """
    if job.framework == "pytorch":
        return pytorch_job(job, ctx)
    kind = KINDS[job.framework]
    fabric = job_fabric(job, ctx)
    labels, pods = job_labels(job), pod_labels(job, ctx)
    port = {"name": kind.port_name, "containerPort": kind.port}

    def pod(spec: TrainingJobSpec, job_ctx: JobContext, command: list[str] | None) -> Manifest:
        template = pod_template(spec, job_ctx, job_fabric(spec, job_ctx), kind.container, command or [], port)
        if command is None:
            del template["containers"][0]["command"]
        return template

    spec: Manifest = {}
    if job.framework == "mpi":
        procs = job.procs_per_node or max(ctx.gpus, 1)
        launcher = job.model_copy(update=MPI_LAUNCHER_SIZE)
        # Workers without a command sleep while the Launcher's mpirun starts the ranks in them
        # (v1.9.4 pkg/controller.v1/mpi/mpijob_controller.go, newWorker).
        spec["slotsPerWorker"] = procs
        launcher_pod = pod(launcher, dataclasses.replace(ctx, gpus=0), job_command(job, procs))
        launcher_pod["serviceAccountName"] = job.name + MPI_LAUNCHER_ACCOUNT
        launcher_pod["automountServiceAccountToken"] = True
        spec[kind.specs_key] = {
            "Launcher": replica_spec(job, pods, launcher_pod, 1),
            "Worker": replica_spec(job, pods, pod(job, ctx, None), job.nodes),
        }
    else:
        template = pod_template(job, ctx, fabric, kind.container, job_command(job, 1, gpus=ctx.gpus), port)
        spec[kind.specs_key] = {role: replica_spec(job, pods, template, n) for role, n in _roles(job).items()}
        if job.parameter_servers:
            ps, ps_ctx = job.model_copy(update=PS_SIZE), dataclasses.replace(ctx, gpus=0)
            ps_template = pod_template(ps, ps_ctx, None, kind.container, job_command(ps, 1), port)
            spec[kind.specs_key]["PS"] = replica_spec(job, pods, ps_template, job.parameter_servers)
    spec["runPolicy"] = run_policy(job)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind.kind,
        "metadata": job_metadata(job, ctx.namespace, labels),
        "spec": spec,
    }


def v1_replaced_on_change(framework: str) -> list[str]:
    """What the operator reads only when it starts a job of this kind (as ``REPLACED_ON_CHANGE``
    for a PyTorchJob): its replica specs, and an MPIJob's slots."""
    if framework == "pytorch":
        return list(REPLACED_ON_CHANGE)
    kind = KINDS[framework]
    shared = [path for path in REPLACED_ON_CHANGE if path.startswith("spec.runPolicy.")]
    return [f"spec.{kind.specs_key}", *(["spec.slotsPerWorker"] if framework == "mpi" else []), *shared]

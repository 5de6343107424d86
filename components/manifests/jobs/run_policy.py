"""A v1 job's ``runPolicy``: what the operator does with its pods when it ends, how often it may
fail, and the gang Volcano schedules it as. The same for every Training Operator v1 kind."""

from __future__ import annotations

from ...config import TrainingJobSpec
from ..base import Manifest


def clean_pod_policy(job: TrainingJobSpec) -> str:
    """The job's ``cleanPodPolicy``: as set, else ``Running`` where pods outlive the job and
    ``None`` (finished pods kept, their logs readable) elsewhere.

    An MPIJob ends with its Launcher while its Workers, which ``sleep 365d`` unless given a command
    (v1.9.4 ``pkg/controller.v1/mpi/mpijob_controller.go`` ``newWorker``), keep running; a TFJob
    ends with its Chief while its parameter servers and Evaluator never exit on their own. The
    operator deletes such pods only through this policy, on success and on a failure by
    ``backoffLimit`` or ``activeDeadlineSeconds`` alike (``pkg/controller.v1/common/job.go``
    ``DeletePodsAndServices``: ``None`` deletes nothing once the job is finished, ``Running``
    the pods still running or pending), so under ``None`` they would hold their nodes and GPUs
    until the job is deleted.
    """
    if "clean_pod_policy" in job.run_policy.model_fields_set:
        return job.run_policy.clean_pod_policy
    outlive = job.framework == "mpi" or (job.framework == "tensorflow" and (job.parameter_servers or job.evaluator))
    return "Running" if outlive else job.run_policy.clean_pod_policy


def gang_size(job: TrainingJobSpec) -> int | None:
    """``schedulingPolicy.minAvailable``: as set, else an elastic job's minimum. Without it the
    operator makes the PodGroup's ``minMember`` the replica total (v1.9.4
    ``pkg/controller.v1/common/job.go`` ``ReconcileJobs``), which for an elastic job is
    ``maxNodes`` Workers: it would wait for nodes it does not need to start."""
    if job.scheduling.min_available is not None:
        return job.scheduling.min_available
    return job.elastic.min_nodes if job.elastic is not None else None


def run_policy(job: TrainingJobSpec) -> Manifest:
    run = job.run_policy
    policy: Manifest = {
        "cleanPodPolicy": clean_pod_policy(job),
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
            "minAvailable": gang_size(job),
        }.items()
        if v is not None
    }
    if scheduling:
        policy["schedulingPolicy"] = scheduling
    return policy

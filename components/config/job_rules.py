"""The rules that cross areas: between the stack's jobs and the rest of the platform (backend,
Kueue, namespace, registry, GPU pool, quota, fabric and Volcano), and between its teams and the
rest (their names and ids, the storage, the cluster's network, their jobs and quotas)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import field_error
from .node_health import check_trainer_image, node_check_problem
from .teams import team_quota_owner
from .training_job import v2_conflict, xgboost_gpus_problem

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from .cluster import ClusterSpec
    from .node_health import NodeHealthSpec
    from .pools import GpuPoolSpec
    from .storage import StorageSpec
    from .teams import TeamSpec
    from .training_job import Backend, TrainingJobSpec


def check_jobs(
    jobs: Sequence[TrainingJobSpec],
    *,
    job_backend: Callable[[TrainingJobSpec], Backend],
    job_gpus: Callable[[TrainingJobSpec], int],
    pool: GpuPoolSpec | None,
    namespace: str,
    gpu_quota: int | None,
    registry: bool,
    kueue: bool,
    kueue_priorities: Mapping[str, int],
    volcano: bool,
    node_health: NodeHealthSpec,
    pool_problem: Callable[[TrainingJobSpec, GpuPoolSpec], tuple[str, str] | None],
    quota_problem: Callable[[TrainingJobSpec, int, Mapping[str, str | int], str], str | None],
) -> None:
    """The rules between ``jobs`` and the rest of the platform.

    Args:
        jobs: the stack's jobs.
        job_backend: the API that runs a job on this platform.
        job_gpus: GPUs per pod of a job on this platform.
        pool: the stack's GPU pool, if any.
        namespace: the platform's own namespace (``training.namespace``).
        gpu_quota: GPUs all of the platform namespace's pods may request (``training.gpuQuota``).
        registry: whether the stack has a registry.
        kueue: whether Kueue queues the v2 jobs (``trainerV2.kueue.enabled``).
        kueue_priorities: Kueue's WorkloadPriorityClasses (``trainerV2.kueue.priorities``).
        volcano: whether Volcano is installed (``operator.volcano.enabled``).
        node_health: the node health settings, whose image the pre-job node check runs from.
        pool_problem: why a job does not fit the pool (:func:`.fit.pool_problem`), and
        quota_problem: why a job could never start within a quota (:func:`.fit.quota_problem`), both
            taken as arguments like ``job_gpus`` so that the jobs' rules stay below the fit rules.

    Raises:
        PydanticCustomError: a rule is broken; the message names the stack key.
    """
    names = [job.name for job in jobs]
    for i, job in enumerate(jobs):
        key = f"jobs[{i}]"
        if job.name in names[:i]:
            raise field_error(f"{key}.name", f"job name {job.name!r} is used twice")
        if job.run_policy.ttl_seconds_after_finished is not None:
            # Allowed for jobs ack-jobs submits, which no stack recreates.
            raise field_error(
                f"{key}.runPolicy.ttlSecondsAfterFinished",
                "a job the operator deletes after it finishes would be created and trained again by the next "
                "pulumi up --refresh: drop the TTL and remove the job from the stack when you are done with it "
                "(cleanPodPolicy frees its pods)",
            )
        if job_backend(job) == "v2":
            conflict = v2_conflict(job) if job.backend is None else None
            if conflict is not None:
                raise field_error(f"{key}.{conflict[0]}", conflict[1] + " (training.backend is v2)")
            priority = job.scheduling.priority_class
            if priority is not None and (not kueue or priority not in kueue_priorities):
                raise field_error(
                    f"{key}.scheduling.priorityClass",
                    f"{priority!r}: a TrainJob's priority is a Kueue WorkloadPriorityClass (its runtime patches "
                    "cannot set a pod priority class): declare it in trainerV2.kueue.priorities "
                    f"({sorted(kueue_priorities) or 'none declared'}) with trainerV2.kueue.enabled: true",
                )
            if kueue and job.run_policy.suspend:
                raise field_error(
                    f"{key}.runPolicy.suspend",
                    "Kueue suspends and resumes queued TrainJobs itself (trainerV2.kueue.enabled): drop suspend, "
                    "and stop a queued job by deactivating its Kueue Workload (spec.active: false)",
                )
        if job.team is None and job.namespace not in (None, namespace):
            raise field_error(
                f"{key}.namespace",
                f"the data and output claims and the pull secret live in training.namespace "
                f"({namespace!r}), so pods in {job.namespace!r} could not start: drop namespace, "
                "or set training.namespace",
            )
        if job.image_tag is not None and not registry:
            raise field_error(
                f"{key}.image_tag",
                "imageTag needs a registry; without one give a full image reference in image",
            )
        gpus = job_gpus(job)
        if gpus and pool is None:
            raise field_error(
                f"{key}.gpus_per_node",
                f"the job asks for {gpus} GPUs per node but the stack has no gpuPool; set gpusPerNode: 0 for a CPU job",
            )
        if job.node_check is not None:
            if problem := node_check_problem(gpus, job_backend(job)):
                raise field_error(f"{key}.nodeCheck", problem)
            check_trainer_image(node_health, jobs, f"{key}.nodeCheck")
        if job.framework == "xgboost" and gpus > 1 and job_backend(job) == "v2":
            raise field_error(f"{key}.gpusPerNode", xgboost_gpus_problem(gpus))
        problem = pool_problem(job, pool) if pool is not None else None
        if problem is not None:
            raise field_error(f"{key}.{problem[0]}", problem[1])
        too_big = quota_problem(job, gpus, {"gpus": gpu_quota}, "training.gpuQuota") if gpu_quota is not None else None
        if job.team is None and too_big is not None:
            raise field_error(f"{key}.nodes", too_big)
        if job.network == "rdma" and (pool is None or pool.fabric == "none"):
            raise field_error(f"{key}.network", "rdma networking needs a gpuPool with an RDMA fabric (fabric: erdma)")
        if (job.scheduling.queue or job.scheduling.min_available) and not volcano:
            raise field_error(
                f"{key}.scheduling",
                "queues and gang scheduling need Volcano: set operator.volcano.enabled: true",
            )


def check_teams(
    teams: Sequence[TeamSpec],
    *,
    namespace: str,
    storage: StorageSpec,
    cluster: ClusterSpec,
    jobs: Sequence[TrainingJobSpec],
    job_gpus: Callable[[TrainingJobSpec], int],
    quota_problem: Callable[[TrainingJobSpec, int, Mapping[str, str | int], str], str | None],
) -> None:
    """The rules between ``teams``, the jobs and the rest of the platform.

    Args:
        teams: the stack's teams.
        namespace: the platform's own namespace (``training.namespace``).
        storage: the stack's storage.
        cluster: the stack's cluster.
        jobs: the stack's jobs.
        job_gpus: GPUs per pod of a job on this platform.
        quota_problem: why a job could never start within a quota (:func:`.fit.quota_problem`), taken
            as an argument like ``job_gpus`` so that the teams' rules stay below the fit rules.

    Raises:
        PydanticCustomError: a rule is broken; the message names the stack key.
    """
    names = [team.name for team in teams]
    uids = [team.uid for team in teams]
    gids = [team.group_id for team in teams]
    for i, team in enumerate(teams):
        if team.name in names[:i]:
            raise field_error(f"teams[{i}].name", f"team name {team.name!r} is used twice")
        if team.uid in uids[:i]:
            raise field_error(
                f"teams[{i}].uid",
                f"uid {team.uid} is also {names[uids.index(team.uid)]!r}'s: NFS tells teams apart by uid alone, "
                "so each team needs its own",
            )
        if team.group_id in gids[:i]:
            raise field_error(
                f"teams[{i}].{'uid' if team.gid is None else 'gid'}",
                f"gid {team.group_id} is also {names[gids.index(team.group_id)]!r}'s: a team's NAS directories are "
                "open to its group (output 0770, data 0750), so each team needs a gid of its own",
            )
        if team.name == namespace:
            raise field_error(
                f"teams[{i}].name",
                f"{team.name!r} is the platform's own namespace (training.namespace): name the team otherwise",
            )
    if teams and storage.oss is not None:
        raise field_error(
            "storage.oss", "an OSS dataset is one bucket mounted for every job, which teams would share: drop oss"
        )
    if len(teams) > 1 and not cluster.is_local and cluster.network == "flannel" and not cluster.shared_network:
        raise field_error(
            "cluster.network",
            "Flannel enforces no NetworkPolicy, so every team's pods could reach every other's: create the "
            "cluster with network: terway, or keep one team, or accept an open pod network with sharedNetwork: true",
        )
    by_name = {team.name: team for team in teams}
    for i, job in enumerate(jobs):
        key = f"jobs[{i}]"
        if job.team is None:
            if teams:
                raise field_error(f"{key}.team", f"the stack declares teams: name the job's team, one of {names}")
            continue
        team = by_name.get(job.team)
        if team is None:
            raise field_error(
                f"{key}.team", f"no team {job.team!r}: declare it under teams, or use one of {names or 'none'}"
            )
        if job.namespace not in (None, team.name):
            raise field_error(
                f"{key}.namespace",
                f"team {team.name!r}'s jobs run in its namespace {team.name!r}, where its claims are: drop namespace",
            )
        if job.network == "rdma" and not team.rdma:
            raise field_error(
                f"{key}.network",
                f"team {team.name!r} may not use the eRDMA devices, which its admission policy refuses: "
                f"set teams[{names.index(team.name)}].rdma: true to allow it, or use network: tcp",
            )
        index = names.index(team.name)
        problem = quota_problem(job, job_gpus(job), team.quota.model_dump(), team_quota_owner(team, index))
        if problem is not None:
            raise field_error(f"{key}.nodes", problem)

"""What a team's pods may use, as the stack knows it: the input of the team's admission policies
(:mod:`.admission`, :mod:`.job_guard`)."""

from __future__ import annotations

from dataclasses import dataclass

from ...config import PlatformSpec, SecretEnv, TeamSpec
from ..fabrics import FABRICS, FabricProfile
from ..jobs.datasets import source_claim_name
from ..jobs.env import checkpoint_key_ref, generated_key_secret
from ..jobs.names import KINDS

DEFAULT_SCHEDULER = "default-scheduler"
VOLCANO_SCHEDULER = "volcano"
"""The scheduler the operator names on its pods when started with ``--gang-scheduler-name=volcano``
(kubeflow/trainer v1.9.4 ``cmd/training-operator.v1/main.go``; ``config/operator.py``)."""
V2_POD_OWNER = "Job"
"""The controller of a TrainJob's pods: JobSet's batch Jobs (kubernetes ``pkg/controller/job``
creates each pod with its Job as controller reference)."""


@dataclass(frozen=True)
class TeamBoundary:
    """What a team's pods may use, as the stack knows it.

    Args:
        team: the team.
        claims: the claims of its namespace (data, output, dataset sources).
        service_account: the jobs' ServiceAccount.
        job_kinds: ``(job, kind)``: each of the stack's jobs in the team and the kind of its pods'
            controller (the v1 kind, or ``Job`` under Trainer v2).
        mpi_launchers: the stack's v1 MPIJobs in the team, whose Launcher alone gets a token.
        job_secrets: ``(job, Secret)`` pairs the stack's jobs name (a checkpoint key of their own,
            Secret environment variables); a job's generated ``<job>-checkpoint-key`` is always its own.
        priority_classes: the PriorityClasses the stack's jobs name.
        fabric: the eRDMA fabric whose devices the team's pods may request, or ``None`` for none.
        schedulers: the schedulers its pods may name: Kubernetes' own, and Volcano where the
            operator gang-schedules with it.
    """

    team: TeamSpec
    claims: tuple[str, ...]
    service_account: str
    job_kinds: tuple[tuple[str, str], ...] = ()
    mpi_launchers: tuple[str, ...] = ()
    job_secrets: tuple[tuple[str, str], ...] = ()
    priority_classes: tuple[str, ...] = ()
    fabric: FabricProfile | None = None
    schedulers: tuple[str, ...] = (DEFAULT_SCHEDULER,)


def team_boundary(spec: PlatformSpec, team: TeamSpec) -> TeamBoundary:
    """The boundary of ``team`` in the stack ``spec``: its claims, its jobs' Secrets and
    PriorityClasses, and the fabric of the GPU pool when the team runs eRDMA jobs."""
    jobs = [job for job in spec.jobs if job.team == team.name]
    secrets = set()
    for job in jobs:
        ref = checkpoint_key_ref(job)
        if ref is not None and ref[0] != generated_key_secret(job.name):
            secrets.add((job.name, ref[0]))
        secrets |= {(job.name, value.secret_key_ref.name) for value in job.env.values() if isinstance(value, SecretEnv)}
    sources = [source_claim_name(d) for d in spec.datasets if d.team == team.name and d.oss is not None]
    pool = spec.gpu_pool
    volcano = spec.operator.install and spec.operator.volcano.enabled
    v1 = [job for job in jobs if spec.job_backend(job) == "v1"]
    kinds = {job.name: KINDS[job.framework].kind for job in v1} | {
        job.name: V2_POD_OWNER for job in jobs if spec.job_backend(job) == "v2"
    }
    return TeamBoundary(
        team=team,
        claims=(spec.storage.data.claim_name, spec.storage.output.claim_name, *sources),
        service_account=spec.training.service_account,
        job_kinds=tuple(sorted(kinds.items())),
        mpi_launchers=tuple(sorted(job.name for job in v1 if job.framework == "mpi")),
        job_secrets=tuple(sorted(secrets)),
        priority_classes=tuple(sorted({j.scheduling.priority_class for j in jobs if j.scheduling.priority_class})),
        fabric=FABRICS.get(pool.fabric) if team.rdma and pool is not None else None,
        schedulers=(DEFAULT_SCHEDULER, *([VOLCANO_SCHEDULER] if volcano else [])),
    )

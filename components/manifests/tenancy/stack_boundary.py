"""Each team's boundary as the whole stack decides it (its jobs, datasets, GPU pool, operator and
storage): the :class:`.boundary.TeamBoundary` its admission policies (:mod:`.admission`) hold it to."""

from __future__ import annotations

from ...config import PlatformSpec, SecretEnv, TeamSpec
from ..fabrics import FABRICS
from ..jobs.datasets import source_claim_name
from ..jobs.env import checkpoint_key_ref, generated_key_secret
from ..jobs.names import KINDS
from .boundary import DEFAULT_SCHEDULER, V2_POD_OWNER, VOLCANO_SCHEDULER, TeamBoundary


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

"""What a team's pods may use, as the stack knows it: the input of the team's admission policies
(:mod:`.admission`, :mod:`.job_guard`), which :func:`.stack_boundary.team_boundary` derives from the stack."""

from __future__ import annotations

from dataclasses import dataclass

from ...config import TeamSpec
from ..fabrics import FabricProfile

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

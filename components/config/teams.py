"""Teams sharing one platform: each gets its own namespace, NAS directories, quota, queue
and RBAC (``teams``), and the rules that tie jobs to a team."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from .base import Cpu, DnsLabel, Quantity, Spec, field_error
from .costs import BudgetSpec

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from .cluster import ClusterSpec
    from .storage import StorageSpec
    from .training_job import TrainingJobSpec

MIN_TEAM_ID = 1000
"""Below this, uids and gids belong to system accounts of typical images."""

# --- teams ---------------------------------------------------------------------------


class TeamQuotaSpec(Spec):
    """What all of a team's pods may request together (a ResourceQuota on its namespace)."""

    gpus: int = Field(ge=0)
    """GPUs."""
    cpu: Cpu
    """CPU cores, e.g. ``"512"``."""
    memory: Quantity
    """Memory, e.g. ``4Ti``."""


class TeamMemberSpec(Spec):
    """Who may run the team's jobs: a user or group as the cluster's authenticator names it
    (for ACK, a RAM user or role id)."""

    kind: Literal["User", "Group"] = "Group"
    name: str = Field(min_length=1, max_length=253)


class TeamSpec(Spec):
    """One team: a namespace of its own (named after the team), claims on its own NAS
    directory ``<basePath>/<team>/<claim>``, a quota, a Kueue LocalQueue when Kueue is on, and
    a Role for its members. Its pods run as ``uid``/``gid``."""

    name: DnsLabel
    """Team name; also its namespace."""
    uid: int = Field(ge=MIN_TEAM_ID, le=2**31 - 1)
    """User id every pod of the team runs as, and the owner of its NAS directories. Unique per team:
    NFS tells teams apart by uid alone."""
    gid: int | None = Field(default=None, ge=MIN_TEAM_ID, le=2**31 - 1)
    """Group id of the team's pods and directories; ``uid`` when unset."""
    quota: TeamQuotaSpec
    members: list[TeamMemberSpec] = Field(default_factory=list)
    """Users and groups bound to the team's Role (jobs, the namespace's runtimes, their pods, logs and events, in its namespace only)."""
    rdma: bool = False
    """The team may run eRDMA jobs (``network: rdma``): its pods may request the GPU pool's eRDMA
    devices, which the admission policy refuses to other teams. Its namespace enforces ``baseline``
    like every other: eRDMA pods are unprivileged, on the pod network."""
    budget: BudgetSpec | None = None
    """What the team's jobs may cost per period (``costs`` prices them); over it, ``TeamBudgetExceeded`` fires
    (docs/monitoring.md, "Cost"). Needs ``monitoring.prometheus: operator``, where the cost rules run. Unset: no
    budget alert."""

    @property
    def group_id(self) -> int:
        return self.gid if self.gid is not None else self.uid


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


def team_quota_owner(team: TeamSpec, index: int | None = None) -> str:
    """The team's quota as a message names it, ``{resource}`` left to fill in."""
    where = f"teams[{index}].quota.{{resource}}" if index is not None else "quota.{resource}"
    return f"team {team.name!r}'s quota ({where})"

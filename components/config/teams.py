"""Teams sharing one platform: each gets its own namespace, NAS directories, quota, queue
and RBAC (``teams``). The rules that tie jobs to a team are :mod:`.job_rules`'."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Cpu, DnsLabel, Quantity, Spec
from .costs import BudgetSpec

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


def team_quota_owner(team: TeamSpec, index: int | None = None) -> str:
    """The team's quota as a message names it, ``{resource}`` left to fill in."""
    where = f"teams[{index}].quota.{{resource}}" if index is not None else "quota.{resource}"
    return f"team {team.name!r}'s quota ({where})"

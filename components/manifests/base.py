"""Names every builder shares, the Pod Security labels of the namespaces the platform makes, and
the pod template of a workload object."""

from __future__ import annotations

from typing import Any

from ..config.base import POOL_LABEL as POOL_LABEL
from ..config.base import PROJECT, SYSTEM_POOL_NAME

Manifest = dict[str, Any]

MANAGED_BY = {"app.kubernetes.io/managed-by": PROJECT}
NODES_LABEL = f"{PROJECT}/nodes"
NETWORK_LABEL = f"{PROJECT}/network"
"""A netbench job's pods carry its node count and network here: its result is compared only with
runs of the same shape."""
TEAM_LABEL = f"{PROJECT}/team"
"""A team's namespace and the objects made for it carry the team's name here."""
JOB_LABEL = "app.kubernetes.io/name"
"""Every pod of a platform job carries its job's name here (``job_labels``)."""
TRAINER_UID = 1000
"""The training image's non-root user (``trainer/Dockerfile``: ``useradd --uid 1000 trainer``), which the
platform's own pods that read or write the shared volumes run as too."""
SYSTEM_POOL = SYSTEM_POOL_NAME
"""Name and ``POOL_LABEL`` value of the untainted pool for the cluster's own workloads."""
POD_SECURITY = "pod-security.kubernetes.io"
BASELINE, RESTRICTED = "baseline", "restricted"


def pod_security_labels(enforce: str) -> dict[str, str]:
    """Pod Security Admission labels: refuse pods below ``enforce``, and warn about and audit
    pods that would not pass ``restricted`` (Kubernetes docs, "Enforce Pod Security
    Standards with namespace labels")."""
    return {f"{POD_SECURITY}/enforce": enforce, f"{POD_SECURITY}/warn": RESTRICTED, f"{POD_SECURITY}/audit": RESTRICTED}


def pod_spec(obj: Manifest) -> Manifest | None:
    """The pod template of a workload object, or ``None`` for an object that runs no pods."""
    kind = obj.get("kind")
    if kind == "Pod":
        return obj.get("spec")
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        return obj.get("spec", {}).get("template", {}).get("spec")
    if kind == "CronJob":
        return obj.get("spec", {}).get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec")
    return None

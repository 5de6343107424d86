"""Names every builder shares."""

from __future__ import annotations

from typing import Any

from ..config import PROJECT

Manifest = dict[str, Any]

MANAGED_BY = {"app.kubernetes.io/managed-by": PROJECT}
POOL_LABEL = f"{PROJECT}/pool"
SYSTEM_POOL = "system"
"""Name and ``POOL_LABEL`` value of the untainted pool for the cluster's own workloads."""

"""Names every builder shares."""

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
SYSTEM_POOL = SYSTEM_POOL_NAME
"""Name and ``POOL_LABEL`` value of the untainted pool for the cluster's own workloads."""

"""Glue between manifest dicts and the typed pulumi-kubernetes resources."""

from __future__ import annotations

import re
from typing import Any

from .manifests import Manifest

TOKEN = "ack-training-platform:components"
"""Type-token prefix of every component; renames must add an alias, or stacks replace them."""


def resource_args(manifest: Manifest) -> dict[str, Any]:
    """``manifest``'s top-level fields as keyword arguments of the SDK class.

    The SDK checks top-level keyword names, so a misspelled field fails at once;
    nested objects pass through in their Kubernetes camelCase form.
    """
    return {re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower(): value for key, value in manifest.items()}

"""Glue between manifest dicts and the typed pulumi-kubernetes resources."""

from __future__ import annotations

import re
from typing import Any

import pulumi_kubernetes as k8s

from .manifests import Manifest

TOKEN = "ack-training-platform:components"
"""Type-token prefix of every component; renames must add an alias, or stacks replace them."""


def resource_args(manifest: Manifest) -> dict[str, Any]:
    """``manifest``'s top-level fields as keyword arguments of the SDK class.

    The SDK checks top-level keyword names, so a misspelled field fails at once;
    nested objects pass through in their Kubernetes camelCase form.
    """
    return {re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower(): value for key, value in manifest.items()}


def typed_resource(name: str, manifest: Manifest, opts: Any) -> Any:
    """The pulumi-kubernetes resource of ``manifest``'s kind (``apps/v1`` Deployment:
    ``k8s.apps.v1.Deployment``), so the SDK checks its top-level fields; a kind the SDK has
    no class for becomes a ``CustomResource``."""
    group, _, version = manifest["apiVersion"].rpartition("/")
    module = getattr(k8s, group.split(".")[0] if group else "core", None)
    cls = getattr(getattr(module, version, None), manifest["kind"], None)
    if cls is None:
        return k8s.apiextensions.CustomResource(name, **resource_args(manifest), opts=opts)
    return cls(name, **resource_args(manifest), opts=opts)

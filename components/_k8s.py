"""Glue between manifest dicts and the typed pulumi-kubernetes resources."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from .manifests import Manifest

TOKEN = "ack-training-platform:components"
"""Type-token prefix of every component; renames must add an alias, or stacks replace them."""
IMAGE_PLACEHOLDER = "<image>"
"""Stands for an image in a builder's manifest (builders are pure, and an image in the
stack's registry is known only after deployment) until :func:`with_image` sets it."""
TRAINER_IMAGE_PLACEHOLDER = "<trainer image>"
"""Stands for the platform's image with the ``trainer`` package (the pre-job node check's) in a job's
manifest, which may run another image, until :func:`with_values` sets it."""


def with_image(manifest: Any, image: pulumi.Input[str]) -> Any:
    """``manifest`` with every :data:`IMAGE_PLACEHOLDER` replaced by ``image``."""
    if manifest == IMAGE_PLACEHOLDER:
        return image
    if isinstance(manifest, dict):
        return {key: with_image(value, image) for key, value in manifest.items()}
    if isinstance(manifest, list):
        return [with_image(value, image) for value in manifest]
    return manifest


def with_values(manifest: Any, values: Mapping[str, pulumi.Input[Any]]) -> Any:
    """``manifest`` with each text that is a key of ``values`` replaced by its value (an output
    of another resource a package component was given, see :mod:`components.package.outputs`)."""
    if not values:
        return manifest
    if isinstance(manifest, str):
        return values.get(manifest, manifest)
    if isinstance(manifest, dict):
        return {key: with_values(value, values) for key, value in manifest.items()}
    if isinstance(manifest, list):
        return [with_values(value, values) for value in manifest]
    return manifest


def resource_args(manifest: Manifest) -> dict[str, Any]:
    """``manifest``'s top-level fields as keyword arguments of the SDK class.

    The SDK checks top-level keyword names, so a misspelled field fails at once;
    nested objects pass through in their Kubernetes camelCase form.
    """
    return {re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower(): value for key, value in manifest.items()}


class CustomObject(pulumi.CustomResource):
    """A custom resource whose fields are not all under ``spec`` (Kueue's WorkloadPriorityClass
    holds ``value`` at the top), which the Python SDK's ``apiextensions.CustomResource`` cannot
    express. It registers the same type token with every field as an input, as the Node.js SDK's
    ``CustomResource`` does with its other fields (pulumi-kubernetes
    ``sdk/nodejs/apiextensions/customResource.ts``); the provider applies the inputs as the object.

    Args:
        name: Pulumi resource name.
        manifest: the whole object.
        opts: resource options; give the cluster's provider.
    """

    def __init__(self, name: str, manifest: Manifest, opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}", name, dict(manifest), opts)


def typed_resource(name: str, manifest: Manifest, opts: Any) -> Any:
    """The pulumi-kubernetes resource of ``manifest``'s kind (``apps/v1`` Deployment:
    ``k8s.apps.v1.Deployment``), so the SDK checks its top-level fields; a kind the SDK has
    no class for becomes a ``CustomResource``, or a :class:`CustomObject` when it has
    top-level fields besides ``spec``."""
    group, _, version = manifest["apiVersion"].rpartition("/")
    module = getattr(k8s, group.split(".")[0] if group else "core", None)
    cls = getattr(getattr(module, version, None), manifest["kind"], None)
    if cls is not None:
        return cls(name, **resource_args(manifest), opts=opts)
    if set(manifest) - {"apiVersion", "kind", "metadata", "spec"}:
        return CustomObject(name, manifest, opts)
    return k8s.apiextensions.CustomResource(name, **resource_args(manifest), opts=opts)

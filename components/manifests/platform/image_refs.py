"""An image as the cluster pulls it: copied into the stack's mirror, and pinned by the digest of
the stack's image lock. The operator's, Volcano's and Trainer v2's builders (:mod:`.operator`,
:mod:`.volcano`, :mod:`.trainer_v2`) share these."""

from __future__ import annotations

from collections.abc import Mapping


def mirrored(image: str, mirror: str) -> str:
    """``image`` as copied into ``mirror``: its last path part with its tag or digest, since
    an ACR repository name is a single path segment."""
    return f"{mirror}/{image.rsplit('/', 1)[-1]}"


def pulled(image: str, mirror: str | None, digests: Mapping[str, str] | None = None) -> str:
    """``image`` as the cluster pulls it: from ``mirror`` when given, and as
    ``<repository>:<tag>@sha256:...`` where ``digests`` (the stack's image lock) has it; the
    runtime then pulls that manifest whatever the tag points to now (Kubernetes "Images",
    https://kubernetes.io/docs/concepts/containers/images/: a digest names one version of an image)."""
    image = mirrored(image, mirror) if mirror is not None else image
    digest = (digests or {}).get(image)
    return f"{image}@{digest}" if digest else image


def repository_and_tag(image: str) -> tuple[str, str]:
    """An image's repository and tag, the tag carrying ``@<digest>`` when pinned: what a chart
    printing ``<repository>:<tag>`` needs in order to print the pinned reference."""
    name, at, digest = image.partition("@")
    repository, _, tag = name.rpartition(":")
    return repository, f"{tag}{at}{digest}"

"""The third-party images a stack deploys: the operator and its init containers, Volcano, Trainer
v2, JobSet and Kueue, as released upstream and as the cluster pulls them (from ``imageMirror``
where the stack has one). The image lock (:mod:`components.upstream.digests`) pins these, the
mirror is filled with them (:mod:`components.images.mirror_fill`), and ``python -m
components.upstream images`` lists them."""

from __future__ import annotations

from ...config import PlatformSpec
from .image_refs import mirrored
from .operator import operator_images
from .trainer_v2 import trainer_v2_images
from .volcano import volcano_images


def stack_images(spec: PlatformSpec) -> list[tuple[str, str]]:
    """(upstream image, image as the cluster pulls it) for every third-party image the stack
    deploys: the operator and its init container, Volcano, Trainer v2, JobSet and Kueue.

    Raises:
        ValueError: the stack names an operator or Trainer release whose images are not known here.
    """
    operator = spec.operator
    images: list[str] = []
    if operator.install:
        images += operator_images(operator.version)
        if operator.volcano.enabled:
            images += volcano_images(operator.volcano.version)
    if spec.installs_trainer_v2:
        images += trainer_v2_images(spec.trainer_v2)
    mirror = spec.image_mirror
    return [(image, mirrored(image, mirror) if mirror is not None else image) for image in images]


def image_copies(spec: PlatformSpec) -> list[tuple[str, str]]:
    """(upstream image, mirrored image) for every third-party image the stack pulls.

    Raises:
        ValueError: the stack sets no ``imageMirror``, or names an operator release whose
            image is not known here.
    """
    if spec.image_mirror is None:
        raise ValueError("the stack sets no imageMirror: its images are pulled from their own registries")
    return stack_images(spec)


def filled_copies(spec: PlatformSpec) -> list[tuple[str, str]]:
    """The (upstream, mirrored) images the stack copies into the mirror during ``pulumi up``:
    every mirrored image when ``mirrorFill`` is ``subscription`` or ``copy``, none otherwise."""
    return stack_images(spec) if spec.mirror_fill != "none" else []

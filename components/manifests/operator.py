"""The Kubeflow Training Operator (v1) and Volcano as this platform installs them.

The operator comes from its upstream kustomize overlay, rendered once from a verified
local copy (:mod:`components.local_sources`); :func:`customized_operator_objects` adjusts
each rendered object before it is applied. Volcano comes from its Helm chart with :func:`volcano_values`.
Facts about the upstream objects are from kubeflow/trainer at tag v1.9.4 and
volcano-sh/volcano's chart at v1.12.1.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from ..config import ClusterSpec, OperatorSpec
from .base import POOL_LABEL, SYSTEM_POOL, Manifest

OPERATOR_NAMESPACE = "kubeflow"
OPERATOR_DEPLOYMENT = "training-operator"
OPERATOR_CONTAINER = "training-operator"
"""v1.9.4 ``manifests/base/deployment.yaml``: one container, ``command: [/manager]``, no ``args``."""
OPERATOR_IMAGES = {"v1.9.4": "ghcr.io/kubeflow/training-v1/training-operator:v1-93c5489"}
"""The image each release's standalone overlay deploys (its kustomization's ``images``)."""
PYTORCH_INIT_IMAGE = "alpine:3.23.3"
"""The init container of Worker pods, which waits for the Master's DNS name with busybox's
``sh``, ``seq`` and ``nslookup`` (v1.9.4 ``pkg/controller.v1/pytorch/initcontainer.go``). The
operator's default is ``alpine:3.10`` (``pkg/config/config.go``), out of support since 2021;
3.23 is supported until 2027-11 (Alpine's release branches), so the platform always sets it."""

VOLCANO_NAMESPACE = "volcano-system"
VOLCANO_IMAGES = ("volcanosh/vc-controller-manager", "volcanosh/vc-scheduler", "volcanosh/vc-webhook-manager")
"""The chart's images (``basic.*_image_name``, from ``basic.image_registry`` docker.io); the
admission-init hook Job runs the webhook-manager image."""
VOLCANO_SCHEDULER_CONF = """\
actions: "allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
"""Volcano's default scheduler configuration without the ``enqueue`` action (and the
``overcommit`` plugin, which only votes there).

With ``enqueue``, a PodGroup stays Pending until the cluster has room for the whole gang;
the operator creates no pods while its PodGroup is Pending (v1.9.4
``pkg/controller.v1/control/podgroup_control.go``); without pending pods the autoscaler
never adds GPU nodes: a pool at zero never starts the job (volcano-sh/volcano#3910).
Without ``enqueue``, the ``allocate`` action moves a Pending PodGroup to Inqueue at once
(volcano v1.12.1 ``pkg/scheduler/actions/allocate/allocate.go``), the operator creates the
pods, they stay unschedulable until the autoscaler has started enough nodes, and the
gang plugin binds them all together or none. The cost: queues no longer hold jobs back
for overcommit; their ``capability`` still caps what runs."""


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


def operator_flags(
    *, gang_scheduler: str | None, mirror: str | None, digests: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The manager flags the platform sets (v1.9.4 ``cmd/training-operator.v1/main.go``)."""
    flags = {}
    if gang_scheduler is not None:
        flags["--gang-scheduler-name"] = gang_scheduler
    flags["--pytorch-init-container-image"] = pulled(f"docker.io/library/{PYTORCH_INIT_IMAGE}", mirror, digests)
    return flags


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


def customize_operator_object(
    obj: Manifest,
    *,
    gang_scheduler: str | None = None,
    mirror: str | None = None,
    node_selector: dict[str, str] | None = None,
    digests: Mapping[str, str] | None = None,
) -> None:
    """Adjust one object of the rendered operator overlay in place.

    - The operator's container gets the platform's flags, appended to any ``args`` it has
      (v1.9.4 has none, which is why a JSON patch adding to ``args/-`` cannot build).
    - Every image is pulled from ``mirror``, when given, and by digest where ``digests`` has it.
    - The operator's pods run on the nodes matching ``node_selector``, when given.

    Args:
        obj: a Kubernetes object as the overlay renders it.
        gang_scheduler: start the operator with ``--gang-scheduler-name`` (``volcano``).
        mirror: registry path third-party images were copied to.
        node_selector: labels of the nodes for the operator (the system pool).
        digests: the stack's image lock, digests by image as pulled.

    Raises:
        ValueError: the overlay's operator Deployment has no container of the expected name.
    """
    pod = pod_spec(obj)
    if pod is None:
        return
    for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
        container["image"] = pulled(container["image"], mirror, digests)
    if obj["kind"] != "Deployment" or obj.get("metadata", {}).get("name") != OPERATOR_DEPLOYMENT:
        return
    if node_selector:
        pod["nodeSelector"] = {**pod.get("nodeSelector", {}), **node_selector}
    flags = operator_flags(gang_scheduler=gang_scheduler, mirror=mirror, digests=digests)
    if not flags:
        return
    container = next((c for c in pod.get("containers", []) if c.get("name") == OPERATOR_CONTAINER), None)
    if container is None:
        names = [c.get("name") for c in pod.get("containers", [])]
        raise ValueError(f"the operator Deployment has no container {OPERATOR_CONTAINER!r} (found {names})")
    kept = [arg for arg in container.get("args", []) if arg.split("=", 1)[0] not in flags]
    container["args"] = kept + [f"{flag}={value}" for flag, value in flags.items()]


def operator_customization(
    operator: OperatorSpec,
    *,
    mirror: str | None,
    node_selector: dict[str, str] | None,
    digests: Mapping[str, str] | None = None,
) -> Callable[[Manifest], None]:
    """What the platform changes in each rendered object of the operator's overlay."""
    gang_scheduler = "volcano" if operator.volcano.enabled else None

    def customize(obj: Manifest) -> None:
        customize_operator_object(
            obj, gang_scheduler=gang_scheduler, mirror=mirror, node_selector=node_selector, digests=digests
        )

    return customize


def customized_operator_objects(
    objects: list[Manifest],
    operator: OperatorSpec,
    *,
    mirror: str | None,
    node_selector: dict[str, str] | None,
    digests: Mapping[str, str] | None = None,
) -> list[Manifest]:
    """Copies of the rendered overlay's ``objects`` as the platform applies them."""
    customize = operator_customization(operator, mirror=mirror, node_selector=node_selector, digests=digests)
    customized = copy.deepcopy(objects)
    for obj in customized:
        customize(obj)
    return customized


def volcano_values(*, mirror: str | None, node_selector: dict[str, str] | None) -> dict[str, Any]:
    """Values for the Volcano chart (keys of its ``values.yaml`` at v1.12.1).

    Args:
        mirror: registry path Volcano's images were copied to.
        node_selector: labels of the nodes for Volcano's pods (the system pool).
    """
    custom: dict[str, Any] = {"scheduler_config_override": VOLCANO_SCHEDULER_CONF}
    if node_selector:
        custom["default_ns"] = dict(node_selector)
    values: dict[str, Any] = {"custom": custom}
    if mirror is not None:
        values["basic"] = {
            "image_registry": mirror,
            **{
                f"{part}_image_name": image.rsplit("/", 1)[-1]
                for part, image in zip(("controller", "scheduler", "admission"), VOLCANO_IMAGES, strict=True)
            },
        }
    return values


def third_party_images(*, operator_version: str | None, volcano_version: str | None) -> list[str]:
    """The images the operator and Volcano pull, as their upstream manifests name them.

    Raises:
        ValueError: the operator version's image is not known here.
    """
    images: list[str] = []
    if operator_version is not None:
        if operator_version not in OPERATOR_IMAGES:
            raise ValueError(f"the image of operator {operator_version} is not known: list it from its overlay")
        images += [OPERATOR_IMAGES[operator_version], f"docker.io/library/{PYTORCH_INIT_IMAGE}"]
    if volcano_version is not None:
        images += [f"docker.io/{name}:v{volcano_version}" for name in VOLCANO_IMAGES]
    return images


def system_node_selector(cluster: ClusterSpec) -> dict[str, str] | None:
    """Labels of the nodes for the operator and Volcano: the system pool, when there is one."""
    return {POOL_LABEL: SYSTEM_POOL} if cluster.has_system_pool else None

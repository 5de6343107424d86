"""The Kubeflow Training Operator (v1) as this platform installs it.

The operator comes from its upstream kustomize overlay, rendered once from a verified
local copy (:mod:`components.upstream.local_sources`); :func:`customized_operator_objects` adjusts
each rendered object before it is applied. Facts about the upstream objects are from
kubeflow/trainer at tag v1.9.4.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping

from ...config import DEFAULT_OPERATOR_VERSION, ClusterSpec, OperatorSpec
from ..base import BASELINE, POOL_LABEL, SYSTEM_POOL, Manifest, pod_security_labels, pod_spec
from .image_refs import pulled

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
MPI_KUBECTL_DELIVERY_IMAGES = {"v1.9.4": "ghcr.io/kubeflow/training-v1/kubectl-delivery:v1-93c5489"}
"""The init container the operator adds to every MPIJob Launcher, which copies ``kubectl`` in for
``kubexec.sh`` (v1.9.4 ``pkg/controller.v1/mpi/mpijob_controller.go`` ``newLauncher``). Its image is
the operator's ``--mpi-kubectl-delivery-image`` flag (``cmd/training-operator.v1/main.go``), whose
default is ``ghcr.io/kubeflow/training-v1/kubectl-delivery:latest`` (``pkg/config/config.go``
``MPIKubectlDeliveryImageDefault``): unpinned, and never in a mirror. The release's workflow builds
it beside the operator from the same commit and tags both ``v1-<short commit>``
(``.github/workflows/publish-core-images.yaml``, ``template-publish-image/action.yaml``), so the
tag of the operator the overlay deploys (``OPERATOR_IMAGES``) is the matching one."""


def operator_flags(
    *,
    gang_scheduler: str | None,
    mirror: str | None,
    digests: Mapping[str, str] | None = None,
    version: str = DEFAULT_OPERATOR_VERSION,
) -> dict[str, str]:
    """The manager flags the platform sets (v1.9.4 ``cmd/training-operator.v1/main.go``): every
    image the operator puts into a job's pods is one the stack mirrors and locks."""
    flags = {}
    if gang_scheduler is not None:
        flags["--gang-scheduler-name"] = gang_scheduler
    flags["--pytorch-init-container-image"] = pulled(f"docker.io/library/{PYTORCH_INIT_IMAGE}", mirror, digests)
    if version not in MPI_KUBECTL_DELIVERY_IMAGES:
        raise ValueError(f"the MPI init image of operator {version} is not known: list it from its release")
    flags["--mpi-kubectl-delivery-image"] = pulled(MPI_KUBECTL_DELIVERY_IMAGES[version], mirror, digests)
    return flags


def customized_kind(obj: Manifest) -> bool:
    """Whether :func:`customize_operator_object` changes ``obj``: a namespace, or an object that
    runs pods; it leaves every other object as it is."""
    return obj["kind"] == "Namespace" or pod_spec(obj) is not None


def customize_operator_object(
    obj: Manifest,
    *,
    gang_scheduler: str | None = None,
    mirror: str | None = None,
    node_selector: dict[str, str] | None = None,
    digests: Mapping[str, str] | None = None,
    version: str = DEFAULT_OPERATOR_VERSION,
) -> None:
    """Adjust one object of the rendered operator overlay in place.

    - The operator's container gets the platform's flags, appended to any ``args`` it has
      (v1.9.4 has none, which is why a JSON patch adding to ``args/-`` cannot build).
    - Every image is pulled from ``mirror``, when given, and by digest where ``digests`` has it.
    - The operator's pods run on the nodes matching ``node_selector``, when given.
    - Its namespace enforces Pod Security ``baseline``.

    Args:
        obj: a Kubernetes object as the overlay renders it.
        gang_scheduler: start the operator with ``--gang-scheduler-name`` (``volcano``).
        mirror: registry path third-party images were copied to.
        node_selector: labels of the nodes for the operator (the system pool).
        digests: the stack's image lock, digests by image as pulled.
        version: the operator's release, whose MPI init image the flags name.

    Raises:
        ValueError: the overlay's operator Deployment has no container of the expected name.
    """
    if not customized_kind(obj):
        return
    if obj["kind"] == "Namespace":
        # The overlay's namespace (kubeflow) carries no Pod Security label; the operator's pod
        # passes baseline, which every namespace the platform applies enforces.
        obj["metadata"].setdefault("labels", {}).update(pod_security_labels(BASELINE))
        return
    pod = pod_spec(obj)
    if pod is None:
        return
    for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
        container["image"] = pulled(container["image"], mirror, digests)
    if obj["kind"] != "Deployment" or obj.get("metadata", {}).get("name") != OPERATOR_DEPLOYMENT:
        return
    if node_selector:
        pod["nodeSelector"] = {**pod.get("nodeSelector", {}), **node_selector}
    flags = operator_flags(gang_scheduler=gang_scheduler, mirror=mirror, digests=digests, version=version)
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
            obj,
            gang_scheduler=gang_scheduler,
            mirror=mirror,
            node_selector=node_selector,
            digests=digests,
            version=operator.version,
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
    """The rendered overlay's ``objects`` as the platform applies them: copies of those
    :func:`customize_operator_object` changes (the namespace and what runs pods), the others
    as given: those are the CRDs, 3.7 MB for v1.9.4, whose copy cost a plan about 35 ms.
    ``objects`` themselves are never changed."""
    customize = operator_customization(operator, mirror=mirror, node_selector=node_selector, digests=digests)
    customized = [copy.deepcopy(obj) if customized_kind(obj) else obj for obj in objects]
    for obj in customized:
        customize(obj)
    return customized


def operator_images(version: str) -> list[str]:
    """The images the operator ``version`` pulls, as its upstream manifests name them.

    Raises:
        ValueError: the operator version's image is not known here.
    """
    if version not in OPERATOR_IMAGES or version not in MPI_KUBECTL_DELIVERY_IMAGES:
        raise ValueError(f"the image of operator {version} is not known: list it from its overlay")
    return [OPERATOR_IMAGES[version], f"docker.io/library/{PYTORCH_INIT_IMAGE}", MPI_KUBECTL_DELIVERY_IMAGES[version]]


def system_node_selector(cluster: ClusterSpec) -> dict[str, str] | None:
    """Labels of the nodes for the operator and Volcano: the system pool, when there is one."""
    return {POOL_LABEL: SYSTEM_POOL} if cluster.has_system_pool else None

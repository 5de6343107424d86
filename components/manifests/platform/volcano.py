"""Volcano as this platform installs it: the objects of its pinned release manifest, adjusted.

volcano-sh/volcano v1.12.1 ``installer/volcano-development.yaml`` is the release's Helm chart
rendered by ``hack/generate-yaml.sh`` with release name ``volcano`` in namespace
``volcano-system`` and default values: the names and namespace a Helm release ``volcano``
gave its objects. :func:`customized_volcano_objects` makes of it what the platform applies,
each image pinned by digest (a chart prints all three images from one
``basic.image_tag_version`` value, so no value can carry three digests).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from ..base import BASELINE, Manifest, pod_security_labels, pod_spec
from .image_refs import pulled

VOLCANO_NAMESPACE = "volcano-system"
VOLCANO_IMAGES = ("volcanosh/vc-controller-manager", "volcanosh/vc-scheduler", "volcanosh/vc-webhook-manager")
"""The controller's, the scheduler's and the admission webhook's images; the admission-init Job
runs the webhook-manager image too (v1.12.1 ``installer/volcano-development.yaml``)."""
VOLCANO_ADMISSION = "volcano-admission"
"""The Deployment of Volcano's admission webhooks."""
ADMISSION_PORT = 8443
"""The webhook server's port unless its ``--port`` says otherwise (v1.12.1
``cmd/webhook-manager/app/options/options.go``)."""
VOLCANO_SCHEDULER_CONFIGMAP = "volcano-scheduler-configmap"
VOLCANO_SCHEDULER_CONF_KEY = "volcano-scheduler.conf"
"""The scheduler reads its configuration from this key of that ConfigMap (its Deployment's
``--scheduler-conf=/volcano.scheduler/volcano-scheduler.conf``), where the chart's
``custom.scheduler_config_override`` value put it (``templates/scheduler.yaml``)."""
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


def volcano_images(version: str) -> list[str]:
    """The images Volcano ``version``'s manifest runs, as it names them."""
    return [f"docker.io/{name}:v{version}" for name in VOLCANO_IMAGES]


def customized_volcano_objects(
    objects: list[Manifest],
    *,
    version: str,
    mirror: str | None,
    node_selector: dict[str, str] | None,
    digests: Mapping[str, str] | None = None,
) -> list[Manifest]:
    """Copies of Volcano's manifest ``objects`` as the platform applies them.

    - Only the ``volcano-system`` Namespace is kept: the manifest also creates
      ``volcano-monitoring``, for the monitoring manifest the platform does not install. It
      enforces Pod Security ``baseline``, which every pod of the v1.12.1 manifest passes
      (checked against the fetched manifest with the tests' baseline check).
    - The scheduler's configuration is :data:`VOLCANO_SCHEDULER_CONF`.
    - Every container and init container is pulled from ``mirror``, when given, and by digest
      where ``digests`` has it; its pods run on the nodes matching ``node_selector``.
    - The admission webhook is ready only once it serves (:func:`serving_readiness`), so that
      what waits for it (:func:`waits_for_admission`) starts after.

    Args:
        objects: the manifest's objects, as parsed.
        version: Volcano's release, which names the images.
        mirror: registry path third-party images were copied to.
        node_selector: labels of the nodes for Volcano (the system pool).
        digests: the stack's image lock, digests by image as pulled.

    Raises:
        ValueError: the manifest runs an image the platform does not list (so no lock would
            pin it), or has no scheduler ConfigMap to configure.
    """
    known = set(volcano_images(version))
    customized = [
        obj
        for obj in copy.deepcopy(objects)
        if obj["kind"] != "Namespace" or obj["metadata"]["name"] == VOLCANO_NAMESPACE
    ]
    configured = False
    for obj in customized:
        if obj["kind"] == "Namespace":
            labels = obj["metadata"].setdefault("labels", {})
            labels |= pod_security_labels(BASELINE)
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == VOLCANO_SCHEDULER_CONFIGMAP:
            obj["data"] = {**obj.get("data", {}), VOLCANO_SCHEDULER_CONF_KEY: VOLCANO_SCHEDULER_CONF}
            configured = True
        pod = pod_spec(obj)
        if pod is None:
            continue
        for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
            if container["image"] not in known:
                raise ValueError(
                    f"Volcano {version}'s {obj['kind']} {obj['metadata']['name']} runs {container['image']}, "
                    f"not one of {sorted(known)}: list it in VOLCANO_IMAGES so that the image lock pins it"
                )
            container["image"] = pulled(container["image"], mirror, digests)
        if node_selector:
            pod["nodeSelector"] = {**pod.get("nodeSelector", {}), **node_selector}
        if is_admission(obj):
            for container in pod["containers"]:
                container.setdefault("readinessProbe", serving_readiness(container))
    if not configured:
        raise ValueError(f"Volcano {version}'s manifest has no ConfigMap {VOLCANO_SCHEDULER_CONFIGMAP!r}")
    return customized


def is_admission(obj: Manifest) -> bool:
    """Whether ``obj`` is Volcano's admission webhook Deployment."""
    return obj["kind"] == "Deployment" and obj["metadata"]["name"] == VOLCANO_ADMISSION


def serving_readiness(container: Manifest) -> Manifest:
    """A readiness probe that passes once the webhook server accepts connections.

    The manifest gives the admission container none, so its pod is Ready as soon as it
    starts. The webhook manager adds its CA to the webhook configurations (whose
    ``caBundle`` the manifest leaves empty) before it listens on its port (v1.12.1
    ``cmd/webhook-manager/app/server.go``, ``Run``: ``addCaCertForWebhook``, then
    ``ListenAndServeTLS``): a connection on that port means both are done.
    """
    ports = [a.split("=", 1)[1] for a in container.get("args", []) if a.startswith("--port=")]
    return {
        "tcpSocket": {"port": int(ports[-1]) if ports else ADMISSION_PORT},
        "periodSeconds": 5,
        "failureThreshold": 3,
    }


def waits_for_admission(obj: Manifest) -> bool:
    """Whether ``obj`` must start after the admission webhook serves: every other Volcano
    workload. The scheduler creates the ``root`` and ``default`` Queues as it starts, through
    the Queue webhooks, retrying for about a minute and then exiting (v1.12.1
    ``pkg/scheduler/cache/cache.go``, ``newDefaultAndRootQueue``); the controllers create
    PodGroups, which the webhooks validate too."""
    return pod_spec(obj) is not None and obj["kind"] != "Job" and not is_admission(obj)

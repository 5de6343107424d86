"""Kubeflow Trainer v2 as this platform installs it (its Helm chart with JobSet), and Kueue
(its Helm chart; the queues for the stack's v2 jobs are :mod:`.kueue`'s).

Facts about the chart are from kubeflow/trainer at tag v2.3.0,
``charts/kubeflow-trainer/`` (``Chart.yaml``: version 2.3.0, dependency ``jobset`` 0.12.0
from ``oci://registry.k8s.io/jobset/charts`` under ``jobset.install``; ``values.yaml``:
``image.registry``/``image.repository``, ``manager.nodeSelector``, runtimes off by default;
``templates/_helpers.tpl``: the manager image tag defaults to ``v<chart version>``). The
JobSet subchart's values (``image.repository``/``tag``, ``controller.nodeSelector``) are
kubernetes-sigs/jobset v0.12.0's ``charts/jobset/values.yaml``: it has no registry key, and its
Deployment prints ``<image.repository>:<image.tag>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from ...config import KueueSpec, TrainerV2Spec
from .image_refs import pulled, repository_and_tag

TRAINER_V2_NAMESPACE = "kubeflow-system"
"""The namespace of the upstream installation guide (``docs/operator-guides/installation.md``)."""
TRAINER_V2_IMAGE = "ghcr.io/kubeflow/trainer/trainer-controller-manager"
JOBSET_IMAGE = "registry.k8s.io/jobset/jobset"
JOBSET_VERSIONS = {"v2.3.0": "v0.12.0"}
"""The JobSet release each Trainer release's chart depends on (its ``Chart.yaml``)."""

KUEUE_NAMESPACE = "kueue-system"
KUEUE_IMAGE = "registry.k8s.io/kueue/kueue"
"""The released image, ``v<chart version>`` (v0.19.2 ``hack/testing/e2e-common.sh``); the chart's own
``values.yaml`` names a staging image, so the platform sets it."""
KUEUE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob")
"""The integrations Kueue manages: TrainJobs, and the JobSets and Jobs they become (the chart's
default list holds these among others; v0.19.2 ``charts/kueue/values.yaml``)."""


def trainer_v2_chart_version(spec: TrainerV2Spec) -> str:
    """The chart version of a release tag: the tag without ``v``."""
    return spec.version.removeprefix("v")


def trainer_v2_values(
    spec: TrainerV2Spec,
    *,
    mirror: str | None,
    node_selector: dict[str, str] | None,
    digests: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Values for the kubeflow-trainer chart.

    Args:
        spec: the Trainer v2 settings.
        mirror: registry path the third-party images were copied to.
        node_selector: labels of the nodes for the controllers (the system pool).
        digests: the stack's image lock; a locked image's tag is ``<tag>@sha256:...``, which
            the chart prints after ``<repository>:`` (``templates/_helpers.tpl`` ``trainer.image``).

    Raises:
        ValueError: the chart installs JobSet and the JobSet release of ``spec.version`` is not known here.
    """
    values: dict[str, Any] = {"jobset": {"install": spec.jobset}}
    if node_selector:
        values["manager"] = {"nodeSelector": dict(node_selector)}
        if spec.jobset:
            values["jobset"]["controller"] = {"nodeSelector": dict(node_selector)}
    if mirror is not None:
        # The chart writes <registry>/<repository>:<tag>, which is mirrored()'s layout.
        values["image"] = {"registry": mirror, "repository": TRAINER_V2_IMAGE.rsplit("/", 1)[-1]}
    manager = pulled(f"{TRAINER_V2_IMAGE}:{spec.version}", mirror, digests)
    if "@" in manager:
        values.setdefault("image", {})["tag"] = repository_and_tag(manager)[1]
    if spec.jobset:
        # Always set: the chart's own values name a staging image tagged main (JobSet's release
        # packaging sets the released one, jobset v0.12.0 hack/helm-chart-package.sh, and the chart
        # here is the tagged source), and it takes a whole repository path: there is no registry key.
        jobset = pulled(f"{JOBSET_IMAGE}:{_jobset_version(spec.version)}", mirror, digests)
        repository, tag = repository_and_tag(jobset)
        values["jobset"]["image"] = {"repository": repository, "tag": tag}
    return values


def _jobset_version(version: str) -> str:
    if version not in JOBSET_VERSIONS:
        raise ValueError(f"the JobSet release of Trainer {version} is not known: read it from its chart's Chart.yaml")
    return JOBSET_VERSIONS[version]


def trainer_v2_images(spec: TrainerV2Spec) -> list[str]:
    """The images Trainer v2's chart pulls (the controller, and JobSet when it installs it),
    and Kueue's controller when the stack installs Kueue."""
    images = [f"{TRAINER_V2_IMAGE}:{spec.version}"]
    if spec.jobset:
        images.append(f"{JOBSET_IMAGE}:{_jobset_version(spec.version)}")
    if spec.kueue.enabled and spec.kueue.install:
        images.append(kueue_image(spec.kueue))
    return images


def kueue_values(
    spec: KueueSpec,
    *,
    mirror: str | None,
    node_selector: dict[str, str] | None,
    digests: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Values for the Kueue chart (keys of its v0.19.2 ``values.yaml``).

    The manager's configuration replaces the chart's default one: the same ports and leader
    election, only the integrations v2 jobs need, and ``waitForPodsReady``, which evicts
    and requeues a job whose pods do not all run within the timeout. Kueue admits a job by
    quota before its nodes exist, so the pods are created and the autoscaler adds nodes
    for them; the timeout gives a job that cannot get all its nodes back to the queue
    (Kueue: ``apis/config/v1beta2/configuration_types.go`` ``WaitForPodsReady``).

    Args:
        spec: the Kueue settings.
        mirror: registry path the third-party images were copied to.
        node_selector: labels of the nodes for Kueue's controller (the system pool).
        digests: the stack's image lock (the chart prints ``<repository>:<tag>``, v0.19.2
            ``templates/manager/manager.yaml``, so a locked tag is ``<tag>@sha256:...``).
    """
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "waitForPodsReady": {
            "timeout": f"{spec.pods_ready_timeout_minutes}m",
            "blockAdmission": False,
            **(
                {"requeuingStrategy": {"backoffLimitCount": spec.max_requeues}} if spec.max_requeues is not None else {}
            ),
        },
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
    }
    repository, tag = repository_and_tag(pulled(kueue_image(spec), mirror, digests))
    manager: dict[str, Any] = {"image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"}}
    controller: dict[str, Any] = {"manager": manager}
    if node_selector:
        controller["nodeSelector"] = dict(node_selector)
    return {
        "controllerManager": controller,
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(config, sort_keys=False)},
    }


def kueue_image(spec: KueueSpec) -> str:
    return f"{KUEUE_IMAGE}:v{spec.version}"

"""Kubeflow Trainer v2 as this platform installs it (its Helm chart with JobSet), and Kueue
with its queue for v2 jobs.

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

from ..config import KueueSpec, PlatformSpec, TrainerV2Spec
from .base import MANAGED_BY, Manifest
from .operator import pulled, repository_and_tag
from .placement import FABRICS, GPU_RESOURCE, FabricProfile

TRAINER_V2_NAMESPACE = "kubeflow-system"
"""The namespace of the upstream installation guide (``docs/operator-guides/installation.md``)."""
TRAINER_V2_IMAGE = "ghcr.io/kubeflow/trainer/trainer-controller-manager"
JOBSET_IMAGE = "registry.k8s.io/jobset/jobset"
JOBSET_VERSIONS = {"v2.3.0": "v0.12.0"}
"""The JobSet release each Trainer release's chart depends on (its ``Chart.yaml``)."""

KUEUE_API = "kueue.x-k8s.io/v1beta2"
"""Kueue's API for queues (kubernetes-sigs/kueue v0.19.2 ``apis/kueue/v1beta2``)."""
KUEUE_FLAVOR = "default-flavor"
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


def v2_fabrics(spec: PlatformSpec) -> list[FabricProfile | None]:
    """The networks the stack's v2 jobs run over, one platform runtime each: always the pod
    network (``None``), and the GPU pool's fabric when a v2 job uses ``network: rdma``."""
    fabric = FABRICS.get(spec.gpu_pool.fabric) if spec.gpu_pool is not None else None
    uses_fabric = any(spec.job_backend(job) == "v2" and job.network == "rdma" for job in spec.jobs)
    return [None, fabric] if fabric is not None and uses_fabric else [None]


def kueue_queue_name(spec: PlatformSpec) -> str:
    """The ClusterQueue and LocalQueue of the stack's v2 jobs, named after their namespace."""
    return spec.training.namespace


def kueue_gpu_quota(spec: PlatformSpec) -> int:
    """GPUs the queue admits at once: ``training.gpuQuota``, else what the GPU pool can hold."""
    if spec.training.gpu_quota is not None:
        return spec.training.gpu_quota
    return spec.gpu_pool.gpus_per_node * spec.gpu_pool.max_size if spec.gpu_pool is not None else 0


def kueue_objects(spec: PlatformSpec) -> list[Manifest]:
    """ResourceFlavor, WorkloadPriorityClasses, ClusterQueue and LocalQueue that admit the stack's v2 jobs.

    Kueue admits a job only when its ClusterQueue covers every resource the job's pods
    request, and admits all of a job's pods together by quota, before any node exists:
    the pods are then created, stay pending, and the autoscaler adds nodes for them.
    The queue admits only workloads of the training namespace; with teams, each team has a
    ClusterQueue of its own, holding its quota and admitting its namespace only, and a
    LocalQueue of the same name as the training namespace's would have.
    """
    fabric = FABRICS.get(spec.gpu_pool.fabric) if spec.gpu_pool is not None else None
    # One device resource per job pod, and one job pod per node.
    devices = [(fabric.resource, str(spec.gpu_pool.max_size))] if fabric is not None else []
    labels = dict(MANAGED_BY)
    flavor = {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": KUEUE_FLAVOR, "labels": labels}}
    priorities = [
        {
            "apiVersion": KUEUE_API,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": n, "labels": labels},
            "value": v,
        }
        for n, v in spec.trainer_v2.kueue.priorities.items()
    ]
    # With priorities, a job of higher priority takes a lower one's quota: Kueue evicts it (its pods
    # get SIGTERM and checkpoint) and requeues it (v0.19.2 apis/kueue/v1beta2 ClusterQueuePreemption).
    preempt = bool(priorities)
    if spec.teams:
        queues = [
            _queues(
                team.name,
                team.name,
                kueue_queue_name(spec),
                preempt,
                [
                    ("cpu", team.quota.cpu),
                    ("memory", team.quota.memory),
                    (GPU_RESOURCE, str(team.quota.gpus)),
                    *devices,
                ],
            )
            for team in spec.teams
        ]
        return [flavor, *priorities, *(obj for pair in queues for obj in pair)]
    name = kueue_queue_name(spec)
    resources = [
        ("cpu", spec.trainer_v2.kueue.cpu_quota),
        ("memory", spec.trainer_v2.kueue.memory_quota),
        (GPU_RESOURCE, str(kueue_gpu_quota(spec))),
        *devices,
    ]
    return [flavor, *priorities, *_queues(name, spec.training.namespace, name, preempt, resources)]


def _queues(
    cluster_queue: str, namespace: str, local_queue: str, preempt: bool, resources: list[tuple[str, str]]
) -> list[Manifest]:
    labels = dict(MANAGED_BY)
    preemption = {"preemption": {"withinClusterQueue": "LowerPriority"}} if preempt else {}
    return [
        {
            "apiVersion": KUEUE_API,
            "kind": "ClusterQueue",
            "metadata": {"name": cluster_queue, "labels": labels},
            "spec": {
                **preemption,
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "resourceGroups": [
                    {
                        "coveredResources": [resource for resource, _ in resources],
                        "flavors": [
                            {
                                "name": KUEUE_FLAVOR,
                                "resources": [{"name": r, "nominalQuota": quota} for r, quota in resources],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": local_queue, "namespace": namespace, "labels": labels},
            "spec": {"clusterQueue": cluster_queue},
        },
    ]

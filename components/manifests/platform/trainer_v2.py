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

import hashlib
from collections.abc import Mapping
from typing import Any

import yaml

from ...config import GpuPoolSpec, KueueSpec, KueueTopologySpec, PlatformSpec, TrainerV2Spec
from ..base import MANAGED_BY, POOL_LABEL, Manifest
from ..fabrics import FABRICS, FabricProfile
from ..jobs.names import KUEUE_API
from ..placement import GPU_RESOURCE
from .operator import pulled, repository_and_tag

TRAINER_V2_NAMESPACE = "kubeflow-system"
"""The namespace of the upstream installation guide (``docs/operator-guides/installation.md``)."""
TRAINER_V2_IMAGE = "ghcr.io/kubeflow/trainer/trainer-controller-manager"
JOBSET_IMAGE = "registry.k8s.io/jobset/jobset"
JOBSET_VERSIONS = {"v2.3.0": "v0.12.0"}
"""The JobSet release each Trainer release's chart depends on (its ``Chart.yaml``)."""

DEFAULT_LOCAL_QUEUE = "default"
"""The LocalQueue Kueue's webhook labels a job with when the job names none and its namespace has one
of this name (v0.19.2 ``pkg/controller/constants/constants.go`` ``DefaultLocalQueueName``;
``pkg/controller/jobs/trainjob/trainjob_webhook.go`` ``Default`` calls
``jobframework.ApplyDefaultLocalQueueWithManagedJobsNamespaceSelector``, behind no feature gate, for
namespaces of ``managedJobsNamespaceSelector``, by default all but ``kube-system`` and Kueue's own,
``apis/config/v1beta2/defaults.go``): a TrainJob created with the Kubeflow SDK, which sets no queue
label, joins the namespace's queue."""
KUEUE_CPU_FLAVOR = "default-flavor"
"""The flavor of CPU jobs; the GPU pool's is named by :func:`kueue_gpu_flavor`."""
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
    """Flavors, Topology, WorkloadPriorityClasses, ClusterQueue and LocalQueue that admit the stack's v2 jobs.

    Kueue admits a job only when its ClusterQueue covers every resource the job's pods
    request, and admits all of a job's pods together by quota, before any node exists:
    the pods are then created, stay pending, and the autoscaler adds nodes for them.
    CPU jobs take the CPU flavor and GPU jobs the GPU pool's (:func:`kueue_flavors`), each
    with ``cpuQuota`` and ``memoryQuota`` of its own. The queue admits only workloads of the
    training namespace; with teams, each team has a ClusterQueue of its own, holding its quota
    and admitting its namespace only, and a LocalQueue of the same name as the training
    namespace's would have. Each namespace also has the LocalQueue :data:`DEFAULT_LOCAL_QUEUE` on the
    same ClusterQueue, for jobs that name no queue.
    """
    pool = spec.gpu_pool
    fabric = FABRICS.get(pool.fabric) if pool is not None else None
    # One device resource per job pod, and one job pod per node.
    devices = [fabric.resource] if fabric is not None else []
    labels = dict(MANAGED_BY)
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

    def quotas(cpu: str, memory: str, gpus: int) -> list[tuple[str, list[tuple[str, str]]]]:
        # Every flavor lists every covered resource (the ClusterQueue CRD's CEL rule): the CPU
        # flavor has no GPU, so a GPU job never fits it and Kueue tries the next flavor.
        covered = ["cpu", "memory", GPU_RESOURCE, *devices]
        flavors = [(KUEUE_CPU_FLAVOR, [cpu, memory, "0", *("0" for _ in devices)])]
        if pool is not None:
            gpu_flavor = kueue_gpu_flavor(pool, spec.trainer_v2.kueue.topology)
            flavors.append((gpu_flavor, [cpu, memory, str(gpus), *(str(pool.max_size) for _ in devices)]))
        return [(flavor, list(zip(covered, values, strict=True))) for flavor, values in flavors]

    objects = [*kueue_flavors(spec), *priorities]
    if spec.teams:
        for team in spec.teams:
            flavors = quotas(team.quota.cpu, team.quota.memory, team.quota.gpus)
            objects += _queues(team.name, team.name, kueue_queue_name(spec), preempt, flavors)
        return objects
    name = kueue_queue_name(spec)
    kueue = spec.trainer_v2.kueue
    flavors = quotas(kueue.cpu_quota, kueue.memory_quota, kueue_gpu_quota(spec))
    return [*objects, *_queues(name, spec.training.namespace, name, preempt, flavors)]


def kueue_flavors(spec: PlatformSpec) -> list[Manifest]:
    """The CPU flavor, and with a GPU pool its flavor, and its Topology with ``trainerV2.kueue.topology``.

    The CPU flavor has no node labels, so CPU jobs run where they would without Kueue. The GPU
    flavor's node labels are the pool's, which Kueue matches against a job's node selector and
    injects into its pods, and its ``nodeTaints`` the pool's taint, which a pod set must tolerate
    to get the flavor (v0.19.2 ``apis/kueue/v1beta2/resourceflavor_types.go``;
    ``pkg/scheduler/flavorassigner/flavorassigner.go`` ``checkFlavorForPodSets``): a job placed off
    the pool does not tolerate it, so Kueue never moves it onto the pool, even when the CPU flavor is
    full (a ``NoSchedule`` or ``NoExecute`` taint: Kueue ignores ``PreferNoSchedule``). A flavor with a
    ``topologyName`` admits only pod sets that ask for topology-aware scheduling
    (``tas_flavorassigner.go``: "supports only TopologyAwareScheduling"); :func:`train_job` has every
    GPU job ask.
    """
    labels = dict(MANAGED_BY)
    cpu = {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": KUEUE_CPU_FLAVOR, "labels": labels}}
    pool = spec.gpu_pool
    if pool is None:
        return [cpu]
    taint = pool.taint
    gpu_spec: Manifest = {
        "nodeLabels": {POOL_LABEL: pool.name},
        "nodeTaints": [{"key": taint.key, "value": taint.value, "effect": taint.effect}],
    }
    topology = spec.trainer_v2.kueue.topology
    name = kueue_gpu_flavor(pool, topology)
    topologies = []
    if topology is not None:
        gpu_spec["topologyName"] = name
        topologies.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "Topology",
                "metadata": {"name": name, "labels": labels},
                "spec": {"levels": [{"nodeLabel": level} for level in topology.node_levels]},
            }
        )
    gpu = {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name, "labels": labels}}
    return [cpu, *topologies, {**gpu, "spec": gpu_spec}]


def kueue_gpu_flavor(pool: GpuPoolSpec, topology: KueueTopologySpec | None) -> str:
    """The name of the GPU pool's flavor, and of its Topology: the pool's, and with a topology a
    digest of its levels after it.

    Kueue keeps a Topology's levels immutable, and a flavor's ``topologyName`` and node labels once
    it has a topology (v0.19.2 ``apis/kueue/v1beta2/topology_types.go``,
    ``resourceflavor_types.go``: "field is immutable", "topologyName is immutable"), so other
    levels, or none, make new objects; Kueue deletes the old ones once no ClusterQueue or flavor
    uses them (its ``resource-in-use`` finalizer).
    """
    if topology is None:
        return pool.name
    digest = hashlib.sha256("\n".join(topology.node_levels).encode()).hexdigest()[:8]
    return f"{pool.name}-{digest}"


def _queues(
    cluster_queue: str,
    namespace: str,
    local_queue: str,
    preempt: bool,
    flavors: list[tuple[str, list[tuple[str, str]]]],
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
                        "coveredResources": [resource for resource, _ in flavors[0][1]],
                        # Kueue tries the flavors in this order: CPU jobs take the CPU flavor first.
                        "flavors": [
                            {"name": name, "resources": [{"name": r, "nominalQuota": q} for r, q in resources]}
                            for name, resources in flavors
                        ],
                    }
                ],
            },
        },
        *(
            {
                "apiVersion": KUEUE_API,
                "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": namespace, "labels": labels},
                "spec": {"clusterQueue": cluster_queue},
            }
            for name in dict.fromkeys((local_queue, DEFAULT_LOCAL_QUEUE))
        ),
    ]

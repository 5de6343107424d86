"""Kueue's queues for the stack's v2 jobs (flavors, topology, WorkloadPriorityClasses, ClusterQueues
and LocalQueues), and the networks those jobs run over: what the whole stack decides for its
v2 jobs, where :mod:`.trainer_v2` installs Trainer v2 and Kueue themselves."""

from __future__ import annotations

import hashlib

from ...config import GpuPoolSpec, KueueTopologySpec, PlatformSpec
from ..base import MANAGED_BY, POOL_LABEL, Manifest
from ..fabrics import FABRICS, FabricProfile
from ..jobs.names import KUEUE_API
from ..placement import GPU_RESOURCE

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
    (``tas_flavorassigner.go``: "supports only TopologyAwareScheduling"); :func:`components.manifests.jobs.trainjob.train_job`
    has every GPU job ask.
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

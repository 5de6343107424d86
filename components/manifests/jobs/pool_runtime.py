"""The platform's runtimes placed on the GPU pool, for TrainJobs that come without the platform's
runtime patch (those the Kubeflow SDK creates).

The pool is tainted so that only GPU work lands there, and a pod reaches it only with the pool's
node selector and a toleration of its taint. A job of the stack gets both through its runtime
patch; a TrainJob the SDK creates has none, so the runtime must carry them. Trainer builds the
JobSet from the runtime's template, with the TrainJob's runtime patches merged over it when it has
any, and sets only the ``node`` container's image, command, env, ports, mounts and resources from
the TrainJob (kubeflow/trainer v2.3.0 ``pkg/runtime/core/trainingruntime.go`` ``newRuntimeInfo``,
``mergeRuntimePatches``; ``pkg/runtime/framework/plugins/jobset/jobset.go`` ``Build``): the
runtime's node selector and tolerations reach every pod.

The pod-network runtimes stay off the pool (no toleration), so a GPU runtime is a variant of
each, named ``<runtime>-gpu``: the SDK finds a runtime by name only (kubeflow 0.5.0
``trainer/backends/kubernetes/backend.py`` ``get_runtime``), and a stack has one GPU pool, so the
name a user's code holds does not change with the pool's. A fabric's runtimes serve the pool only
and carry its placement under their own names.
"""

from __future__ import annotations

import copy

from ..base import Manifest
from ..placement import GPU_RESOURCE, Placement
from .names import TRAINER_NODE, UNCONSTRAINED_TOPOLOGY

GPU_RUNTIME_SUFFIX = "-gpu"


def gpu_runtime_name(runtime_name: str) -> str:
    """The GPU pool's variant of the pod-network runtime ``runtime_name``."""
    return f"{runtime_name}{GPU_RUNTIME_SUFFIX}"


def placed_runtime(
    runtime: Manifest, placement: Placement, *, name: str | None = None, topology: bool = False
) -> Manifest:
    """``runtime`` with every pod on ``placement``'s nodes, named ``name`` (default: its own).

    Each pod gets the placement's node selector and tolerations, and the ``node`` container the
    pool's GPUs per node in its requests and limits: a whole node for a TrainJob that asks for no
    GPUs, and the device the SDK shows for the runtime (kubeflow 0.5.0
    ``trainer/backends/kubernetes/utils.py`` ``get_container_devices`` reads ``nvidia.com/gpu`` from
    the limits). A TrainJob's ``resourcesPerNode`` is merged over them key by key (v2.3.0
    ``MergeResourceRequirements``), so the SDK's ``"gpu": 2`` (its alias of ``nvidia.com/gpu``,
    ``get_resources_per_node``) asks for two.

    With ``topology``, for a queue whose GPU flavor has a Topology and so admits only pod sets that
    ask for topology-aware scheduling (see :func:`~components.manifests.platform.kueue.kueue_flavors`),
    each pod template asks, unconstrained, as :func:`~components.manifests.jobs.trainjob.kueue_topology_annotations`
    has a stack job without ``topology`` ask: Kueue takes a TrainJob's pod sets from the JobSet
    Trainer builds from the runtime (kubernetes-sigs/kueue v0.19.2
    ``pkg/controller/jobs/trainjob/trainjob_controller.go`` ``podSets``). Only a variant gets it: a
    stack job's own runtime patch may ask with another mode, and Kueue refuses a pod set with more
    than one topology annotation (``pkg/controller/jobframework/tas_validation.go``
    ``ValidateTASPodSetRequest``).
    """
    own = copy.deepcopy(runtime)
    if name is not None:
        own["metadata"] = {**own["metadata"], "name": name}
    gpus = {GPU_RESOURCE: str(placement.gpus_per_node)} if placement.gpus_per_node else {}
    for rjob in own["spec"]["template"]["spec"]["replicatedJobs"]:
        template = rjob["template"]["spec"]["template"]
        if topology:
            metadata = template.setdefault("metadata", {})
            metadata["annotations"] = {**metadata.get("annotations", {}), UNCONSTRAINED_TOPOLOGY: "true"}
        pod = template["spec"]
        pod["nodeSelector"] = dict(placement.node_selector)
        pod["tolerations"] = [dict(t) for t in placement.tolerations]
        for container in pod["containers"]:
            if container["name"] == TRAINER_NODE and gpus:
                resources = container.setdefault("resources", {})
                for kind in ("requests", "limits"):
                    resources[kind] = {**resources.get(kind, {}), **gpus}
    return own

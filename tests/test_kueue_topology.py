"""Kueue's flavors and topology-aware scheduling of v2 jobs: CPU jobs on a flavor of their own,
GPU jobs on the GPU pool's flavor and its Topology, and the pod-template annotation by which a
GPU job asks Kueue for a domain. Kueue's rules are kubernetes-sigs/kueue v0.19.2's."""

from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import cfg, stack_config
from fixtures.models import assert_matches_model
from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob
from test_jobs import CPU_PLACEMENT, IMAGE, POOL_8_ERDMA, context

from components.config import TrainingJobSpec
from components.manifests import (
    POOL_LABEL,
    context_from_defaults,
    job_defaults,
    mpi_training_runtime,
    pytorch_job,
    train_job,
)

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
TRAINJOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
LEVELS = (ZONE, HOST)


def _node_template(job: dict[str, Any]) -> dict[str, Any]:
    """The pod template of the trainer's replicated job, as the platform's runtime patch sets it."""
    [patch] = job["spec"]["runtimePatches"]
    [node] = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    return node["template"]["spec"]["template"]


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    return any(
        t["key"] == taint["key"]
        and (t["operator"] == "Exists" or t.get("value") == taint["value"])
        and t.get("effect") in (None, taint["effect"])
        for t in tolerations
    )


def kueue_flavor(job: dict[str, Any], cluster_queue: dict[str, Any], flavors: dict[str, Any]) -> str | None:
    """The flavor Kueue gives a TrainJob's pods in an empty queue, or ``None`` when none fits.

    The first flavor, in the ClusterQueue's order, that passes the checks of
    ``pkg/scheduler/flavorassigner``: a flavor with a Topology only for a pod set that asks for
    one and the other way round (``tas_flavorassigner.go`` ``checkPodSetAndFlavorMatchForTAS``),
    every NoSchedule/NoExecute ``nodeTaints`` tolerated and ``nodeLabels`` agreeing with the node
    selector (``flavorassigner.go`` ``checkFlavorForPodSets``), and quota for every resource the
    pods request (an empty queue: any quota above zero).
    """
    template = _node_template(job)
    pod, annotations = template["spec"], template["metadata"].get("annotations", {})
    resources = job["spec"]["trainer"]["resourcesPerNode"]
    requested = {**resources.get("requests", {}), **resources.get("limits", {})}
    asks_topology = any(key.startswith("kueue.x-k8s.io/podset-") for key in annotations)
    for entry in cluster_queue["spec"]["resourceGroups"][0]["flavors"]:
        spec = flavors[entry["name"]].get("spec", {})
        taints = [t for t in spec.get("nodeTaints", []) if t["effect"] in ("NoSchedule", "NoExecute")]
        quota = {r["name"]: r["nominalQuota"] for r in entry["resources"]}
        if (
            asks_topology == ("topologyName" in spec)
            and all(_tolerates(pod.get("tolerations", []), t) for t in taints)
            and all(pod.get("nodeSelector", {}).get(k, v) == v for k, v in spec.get("nodeLabels", {}).items())
            and all(quota.get(r, "0") != "0" for r in requested)
        ):
            return entry["name"]
    return None


def tas_stack() -> dict[str, Any]:
    """The dev stack on v2 with Kueue placing GPU jobs by zone: a two-node GPU job required in one
    zone, a GPU job without topology, and a CPU job (on the GPU pool's nodes, as every job of a
    stack with a pool) with a pod affinity of its own."""
    config = stack_config("dev")
    config[cfg("training")]["backend"] = "v2"
    config[cfg("gpuPool")]["minSize"] = 2
    config[cfg("trainerV2")] = {"kueue": {"enabled": True, "topology": {}}}
    gpu = config[cfg("jobs")][0]
    config[cfg("jobs")] = [
        {**gpu, "name": "ddp-zone", "nodes": 2, "topology": {"key": ZONE, "mode": "required"}},
        {**gpu, "name": "mnist-gpu"},
        {**gpu, "name": "mnist-cpu", "gpusPerNode": 0, "topology": {"key": HOST}},
    ]
    return config


def test_gpu_jobs_get_the_pools_flavor_and_topology_and_cpu_jobs_their_own(run_stack) -> None:
    plan = run_stack(tas_stack())
    topology = plan.one(KUEUE + "Topology").inputs
    # The lowest level is the host, as Kueue's CRD requires of it (topology_types.go).
    assert topology["spec"]["levels"] == [{"nodeLabel": ZONE}, {"nodeLabel": HOST}]
    gpu = topology["metadata"]["name"]
    assert gpu.startswith("gpu-")  # the pool's name, and its levels'
    flavors = {r.inputs["metadata"]["name"]: r.inputs for r in plan.of_type(KUEUE + "ResourceFlavor")}
    assert "spec" not in flavors["default-flavor"]  # no node labels: CPU jobs run where they would without Kueue
    assert flavors[gpu]["spec"] == {
        "nodeLabels": {POOL_LABEL: "gpu"},
        "nodeTaints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "topologyName": gpu,
    }
    cluster_queue = plan.one(KUEUE + "ClusterQueue").inputs
    [group] = cluster_queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    # The CRD's rule: each flavor lists every covered resource. The GPU quota is on the GPU flavor only.
    assert [[r["name"] for r in f["resources"]] for f in group["flavors"]] == [group["coveredResources"]] * 2
    assert {f["name"]: f["resources"][2]["nominalQuota"] for f in group["flavors"]} == {
        "default-flavor": "0",
        gpu: "2",
    }

    jobs = {r.inputs["metadata"]["name"]: r.inputs for r in plan.of_type(TRAINJOB)}
    zone = _node_template(jobs["ddp-zone"])
    assert zone["metadata"]["annotations"] == {"kueue.x-k8s.io/podset-required-topology": ZONE}
    assert "affinity" not in zone["spec"]  # Kueue picks the zone and the nodes
    assert _node_template(jobs["mnist-gpu"])["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-unconstrained-topology": "true"
    }
    cpu = _node_template(jobs["mnist-cpu"])
    assert "annotations" not in cpu["metadata"]
    assert cpu["spec"]["affinity"]["podAffinity"]  # not Kueue's to place: the pod affinity stays
    assert {name: kueue_flavor(job, cluster_queue, flavors) for name, job in jobs.items()} == {
        "ddp-zone": gpu,
        "mnist-gpu": gpu,
        "mnist-cpu": "default-flavor",
    }
    # Without its annotation a GPU job would fit no flavor: the GPU flavor admits only pod sets
    # that ask for topology, and the CPU flavor has no GPUs.
    del _node_template(jobs["mnist-gpu"])["metadata"]["annotations"]
    assert kueue_flavor(jobs["mnist-gpu"], cluster_queue, flavors) is None
    # Submitted jobs are placed the same way.
    assert plan.outputs["jobDefaults"]["topologyLevels"] == list(LEVELS)


def test_without_topology_gpu_jobs_still_get_the_pools_flavor(run_stack) -> None:
    config = tas_stack()
    del config[cfg("trainerV2")]["kueue"]["topology"]
    plan = run_stack(config)
    assert not plan.of_type(KUEUE + "Topology")
    flavors = {r.inputs["metadata"]["name"]: r.inputs for r in plan.of_type(KUEUE + "ResourceFlavor")}
    assert "topologyName" not in flavors["gpu"]["spec"]
    cluster_queue = plan.one(KUEUE + "ClusterQueue").inputs
    jobs = {r.inputs["metadata"]["name"]: r.inputs for r in plan.of_type(TRAINJOB)}
    assert {name: kueue_flavor(job, cluster_queue, flavors) for name, job in jobs.items()} == {
        "ddp-zone": "gpu",
        "mnist-gpu": "gpu",
        "mnist-cpu": "default-flavor",
    }
    # A CPU job placed off the pool does not tolerate its taint: even with the CPU flavor full it never
    # takes the GPU flavor, which would move it onto the pool. (The stack's own CPU job selects the pool.)
    gpu_only = {"spec": {"resourceGroups": [{"flavors": cluster_queue["spec"]["resourceGroups"][0]["flavors"][1:]}]}}
    off_pool = train_job(
        TrainingJobSpec(name="a", image=IMAGE, backend="v2", gpus_per_node=0),
        context(CPU_PLACEMENT, 0, queue="training"),
    )
    assert kueue_flavor(off_pool, cluster_queue, flavors) == "default-flavor"
    assert kueue_flavor(off_pool, gpu_only, flavors) is None
    assert kueue_flavor(jobs["mnist-gpu"], gpu_only, flavors) == "gpu"
    # A job's topology is then a pod affinity, as on v1.
    zone = _node_template(jobs["ddp-zone"])
    assert "annotations" not in zone["metadata"] and zone["spec"]["affinity"]["podAffinity"]


def test_other_levels_make_a_new_topology_and_flavor(run_stack) -> None:
    """Kueue keeps a Topology's levels, and a flavor's topologyName, immutable: a change of levels
    (or dropping the topology) must create objects of other names, not update the old ones."""
    config = tas_stack()
    by_zone = run_stack(config).one(KUEUE + "Topology").inputs["metadata"]["name"]
    config[cfg("trainerV2")]["kueue"]["topology"] = {"levels": ["alibabacloud.com/point-of-delivery"]}
    config[cfg("jobs")][0]["topology"]["key"] = "alibabacloud.com/point-of-delivery"
    plan = run_stack(config)
    by_pod = plan.one(KUEUE + "Topology").inputs["metadata"]["name"]
    assert by_pod != by_zone and by_pod.startswith("gpu-")
    # Sorted: resources register in the order their inputs resolve, not the program's.
    flavors = sorted(r.inputs["metadata"]["name"] for r in plan.of_type(KUEUE + "ResourceFlavor"))
    assert flavors == sorted(["default-flavor", by_pod])
    del config[cfg("trainerV2")]["kueue"]["topology"]
    flavors = sorted(r.inputs["metadata"]["name"] for r in run_stack(config).of_type(KUEUE + "ResourceFlavor"))
    assert flavors == ["default-flavor", "gpu"]


PLACED = context(POOL_8_ERDMA, 8, queue="training", topology_levels=LEVELS)


@pytest.mark.parametrize(
    ("topology", "annotations"),
    [
        ({"key": ZONE, "mode": "required"}, {"kueue.x-k8s.io/podset-required-topology": ZONE}),
        ({"key": HOST}, {"kueue.x-k8s.io/podset-preferred-topology": HOST}),
        (None, {"kueue.x-k8s.io/podset-unconstrained-topology": "true"}),
    ],
)
def test_a_placed_gpu_job_asks_kueue_on_its_pod_template(topology, annotations) -> None:
    job = train_job(TrainingJobSpec(name="a", image=IMAGE, backend="v2", nodes=2, topology=topology), PLACED)
    assert _node_template(job)["metadata"]["annotations"] == annotations
    assert_matches_model(job, TrainerV1alpha1TrainJob)


def _pod_sets(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    jobs = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    return {r["name"]: r["template"]["spec"]["template"]["metadata"]["annotations"] for r in jobs}


@pytest.mark.parametrize("mode", ["required", "preferred"])
def test_an_mpi_jobs_launcher_and_nodes_are_placed_as_one_group(mode: str) -> None:
    """Kueue places each pod set on its own unless they share ``podset-group-name``; it accepts a group
    of exactly two pod sets, one of a single pod, with the same topology request and a name that is not
    a number (kueue v0.19.2 ``pkg/controller/jobframework/tas_validation.go``
    ``ValidatePodSetGroupingTopology``, ``validatePodSetGroupNameAnnotation``)."""
    spec = TrainingJobSpec(
        name="hvd",
        image=IMAGE,
        backend="v2",
        framework="mpi",
        nodes=3,
        command=["mpirun", "python", "t.py"],
        topology={"key": ZONE, "mode": mode},
    )
    job = train_job(spec, PLACED)
    sets = _pod_sets(job)
    groups = {annotations.get("kueue.x-k8s.io/podset-group-name") for annotations in sets.values()}
    assert len(sets) == 2 and len(groups) == 1 and None not in groups
    assert not next(iter(groups)).isdigit()
    launcher, node = sets["launcher"], sets["node"]
    assert {k: v for k, v in launcher.items() if "topology" in k} == {k: v for k, v in node.items() if "topology" in k}
    # The launcher is the group's single pod: one replica of a Job of one pod, in the job's runtime.
    runtime = mpi_training_runtime(spec, PLACED, PLACED.placement.fabric)
    launcher_job = next(r for r in runtime["spec"]["template"]["spec"]["replicatedJobs"] if r["name"] == "launcher")
    assert launcher_job["replicas"] == 1 and launcher_job["template"]["spec"].get("parallelism", 1) == 1
    assert_matches_model(job, TrainerV1alpha1TrainJob)
    # A job without a topology request asks for none, and so has no group (Kueue forbids one then).
    loose = train_job(spec.model_copy(update={"topology": None}), PLACED)
    assert all("kueue.x-k8s.io/podset-group-name" not in a for a in _pod_sets(loose).values())


def test_a_submitted_job_is_placed_and_refused_like_a_stack_job() -> None:
    submitted = context_from_defaults(job_defaults(PLACED, backend="v2"), image=IMAGE, gpus=8, backend="v2")
    assert submitted.topology_levels == LEVELS
    spec = TrainingJobSpec(name="a", image=IMAGE, backend="v2", topology={"key": "alibabacloud.com/asw-id"})
    message = (
        "job 'a': topology.key 'alibabacloud.com/asw-id' is not a level of Kueue's topology, so the job would "
        f"never be admitted: use one of {list(LEVELS)} (trainerV2.kueue.topology.levels, above kubernetes.io/hostname)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        train_job(spec, submitted)
    # v1 jobs do not join the queue: a submitted PyTorchJob keeps its pod affinity.
    v1 = context_from_defaults(job_defaults(PLACED, backend="v2"), image=IMAGE, gpus=8, backend="v1")
    assert v1.topology_levels == ()
    master = pytorch_job(spec.model_copy(update={"backend": "v1"}), v1)["spec"]["pytorchReplicaSpecs"]["Master"]
    assert master["template"]["spec"]["affinity"]["podAffinity"]


def test_cpu_jobs_are_not_placed_by_kueue() -> None:
    ctx = context(CPU_PLACEMENT, 0, queue="training", topology_levels=LEVELS)
    job = train_job(TrainingJobSpec(name="a", image=IMAGE, backend="v2", gpus_per_node=0), ctx)
    assert "annotations" not in _node_template(job)["metadata"]

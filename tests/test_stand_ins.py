"""The stand-ins that play a controller, checked against what the controller's source says.

Each stand-in module names the upstream files it models. Each fact below quotes the line of
kubeflow/trainer v1.9.4 it rests on (the path is relative to that tag) and checks the stand-in's
pods (``fixtures.operator_pods``) against it: labels, init containers and injected environment.
The pods are derived from jobs the platform's builders emit, for an operator started with the
flags the platform gives it. The job commands' stand-in API server (``loopback_api``) is held to
the labels the v1 controllers and JobSet v0.12.0 give their pods, and the Trainer v2 stand-in
(``fixtures.trainer_pods``) to how Trainer v2.3.0 merges a TrainJob's runtime patches over its
runtime's pods.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from fixtures.operator_pods import (
    KUBECTL,
    KUBECTL_DELIVERY,
    MPI_HOSTFILE,
    MPI_KUBEXEC,
    MPI_WORKER_IDLE,
    OperatorPod,
    operator_pods,
)
from fixtures.trainer_pods import pod_placement, trainer_pods
from loopback_api import FakeApi, serve_mpi, v1_pod, v2_pod
from test_jobs import IMAGE, POOL_1, context

from components.config import TrainingJobSpec
from components.manifests import Placement, kubeflow_job, training_runtime
from components.manifests.jobs.pool_runtime import placed_runtime
from components.manifests.platform.operator import operator_flags

STAND_INS = [
    "fixtures.operator_pods",
    "fixtures.trainer_pods",
    "fixtures.local_cluster",
    "fixtures.failures",
    "fixtures.waiting",
    "loopback_api",
]
UPSTREAM_FILE = re.compile(r"``(pkg|cmd|third_party|staging)/[\w./-]+\.go``")
MIRROR = "registry-vpc.cn-hangzhou.aliyuncs.com/ml-mirror"
LABEL = "training.kubeflow.org/"
MPI = "pkg/controller.v1/mpi/mpijob_controller.go"
TF = "pkg/controller.v1/tensorflow/tfjob_controller.go"


@pytest.mark.parametrize("module", STAND_INS)
def test_every_stand_in_names_the_upstream_files_it_models(module: str) -> None:
    doc = importlib.import_module(module).__doc__ or ""
    assert UPSTREAM_FILE.search(doc), f"{module} does not name the upstream source it models"
    assert re.search(r"v\d+\.\d+\.\d+", doc), f"{module} does not name the release it models"


def _pods(framework: str) -> dict[tuple[str, int], OperatorPod]:
    fields: dict[str, Any] = {"framework": framework, "nodes": 2, "gpus_per_node": 1, "command": ["python", "t.py"]}
    if framework == "tensorflow":
        fields |= {"parameter_servers": 1, "evaluator": True}
    job = kubeflow_job(TrainingJobSpec(name="job", image=IMAGE, **fields), context(POOL_1, 1))
    if framework == "mpi":
        # Workers without a command idle (the builder gives them none).
        assert "command" not in job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    return operator_pods(job, operator_flags(gang_scheduler=None, mirror=MIRROR))


@dataclass(frozen=True)
class Fact:
    """One line of upstream source and what it means for the stand-in's pods."""

    where: str
    quote: str
    holds: Callable[[dict[tuple[str, int], OperatorPod]], bool]
    framework: str = "mpi"


def _launcher(pods: dict[tuple[str, int], OperatorPod]) -> OperatorPod:
    return pods[("Launcher", 0)]


def _workers(pods: dict[tuple[str, int], OperatorPod]) -> list[OperatorPod]:
    return [pod for (replica, _), pod in sorted(pods.items()) if replica == "Worker"]


FACTS = [
    Fact(
        f"{MPI} newLauncher",
        "labels := defaultLauncherLabels(genericLabels)",
        lambda pods: (
            f"{LABEL}replica-index" not in _launcher(pods).labels
            and _launcher(pods).labels[f"{LABEL}replica-type"] == "launcher"
        ),
    ),
    Fact(
        f"{MPI} IsMasterRole",
        "return string(rtype) == string(kubeflowv1.MPIJobReplicaTypeLauncher)",
        lambda pods: (
            _launcher(pods).labels[f"{LABEL}job-role"] == "master"
            and all(f"{LABEL}job-role" not in w.labels for w in _workers(pods))
        ),
    ),
    Fact(
        f"{MPI} getOrCreateWorker",
        "worker.Labels[kubeflowv1.ReplicaIndexLabel] = strconv.Itoa(int(i))",
        lambda pods: (
            [w.labels[f"{LABEL}replica-index"] for w in _workers(pods)] == ["0", "1"]
            and all(w.labels[f"{LABEL}replica-type"] == "worker" for w in _workers(pods))
        ),
    ),
    Fact(
        "pkg/controller.v1/common/job_controller.go GenLabels (MPI: controllerName)",
        'controllerName  = "mpijob-controller"',
        lambda pods: all(
            p.labels[f"{LABEL}operator-name"] == "mpijob-controller" and p.labels[f"{LABEL}job-name"] == "job"
            for p in pods.values()
        ),
    ),
    Fact(
        f"{MPI} newLauncher",
        "podSpec.Spec.InitContainers = append(podSpec.Spec.InitContainers, corev1.Container{",
        lambda pods: (
            [c["name"] for c in _launcher(pods).init_containers] == [KUBECTL_DELIVERY]
            and all(not w.init_containers for w in _workers(pods))
        ),
    ),
    Fact(
        "cmd/training-operator.v1/main.go, and newLauncher's Image: kubectlDeliveryImage",
        'flag.StringVar(&config.Config.MPIKubectlDeliveryImage, "mpi-kubectl-delivery-image",',
        # With the platform's flags the Launcher's init container is pulled from the mirror.
        lambda pods: _launcher(pods).init_containers[0]["image"] == f"{MIRROR}/kubectl-delivery:v1-93c5489",
    ),
    Fact(
        "pkg/controller.v1/mpi/mpijob.go",
        'kubectlMountPath        = "/opt/kube"',
        lambda pods: (
            {"name": "TARGET_DIR", "value": KUBECTL.rsplit("/", 1)[0]} in _launcher(pods).init_containers[0]["env"]
        ),
    ),
    Fact(
        f"{MPI} newLauncher",
        """Name:  "OMPI_MCA_plm_rsh_agent",""",
        lambda pods: (
            _launcher(pods).env["OMPI_MCA_plm_rsh_agent"] == MPI_KUBEXEC
            and _launcher(pods).env["OMPI_MCA_orte_default_hostfile"] == MPI_HOSTFILE
            and not any(w.env for w in _workers(pods))
        ),
    ),
    Fact(
        f"{MPI} newLauncher (isGPULauncher false)",
        """Name:  "NVIDIA_VISIBLE_DEVICES",""",
        lambda pods: _launcher(pods).env["NVIDIA_VISIBLE_DEVICES"] == "",
    ),
    Fact(
        f"{MPI} newWorker",
        'container.Args = []string{"365d"}',
        lambda pods: all(w.command == MPI_WORKER_IDLE for w in _workers(pods)) and _launcher(pods).command is None,
    ),
    Fact(
        "pkg/controller.v1/common/pod.go createNewPod",
        "utillabels.SetReplicaIndex(labels, index)",
        lambda pods: all(p.labels[f"{LABEL}replica-index"] == str(index) for (_, index), p in pods.items()),
        "tensorflow",
    ),
    Fact(
        f"{TF} IsMasterRole",
        "return rtype == kubeflowv1.TFJobReplicaTypeChief || rtype == kubeflowv1.TFJobReplicaTypeMaster",
        lambda pods: [r for (r, _), p in pods.items() if p.labels.get(f"{LABEL}job-role") == "master"] == ["Chief"],
        "tensorflow",
    ),
    Fact(
        f"{TF} (controllerName)",
        'controllerName = "tfjob-controller"',
        lambda pods: {p.labels[f"{LABEL}operator-name"] for p in pods.values()} == {"tfjob-controller"},
        "tensorflow",
    ),
    Fact(
        f"{TF} SetClusterSpec",
        'tfConfig = "TF_CONFIG"',
        lambda pods: all(set(p.env) == {"TF_CONFIG"} for p in pods.values()),
        "tensorflow",
    ),
]


@pytest.mark.parametrize("fact", FACTS, ids=[f"{f.framework}: {f.quote}" for f in FACTS])
def test_the_stand_in_pods_hold_what_the_controller_source_says(fact: Fact) -> None:
    assert fact.holds(_pods(fact.framework)), f"{fact.where}: {fact.quote!r}"


def _served_mpi_pods() -> dict[str, dict[str, str]]:
    api = FakeApi()
    serve_mpi(api)
    return {pod["metadata"]["name"]: pod["metadata"]["labels"] for pod in api.pods}


API_FACTS = [
    (
        "kubeflow/trainer v1.9.4 pkg/controller.v1/common/pod.go createNewPod",
        "utillabels.SetReplicaIndex(labels, index)",
        lambda: all(
            v1_pod("mnist", kind, 0)["metadata"]["labels"][f"{LABEL}replica-index"] == "0"
            for kind in ("master", "worker")
        ),
    ),
    (
        "kubeflow/trainer v1.9.4 pkg/controller.v1/pytorch/pytorchjob_controller.go IsMasterRole",
        "return rtype == kubeflowv1.PyTorchJobReplicaTypeMaster",
        lambda: (
            v1_pod("mnist", "master", 0)["metadata"]["labels"][f"{LABEL}job-role"] == "master"
            and f"{LABEL}job-role" not in v1_pod("mnist", "worker", 0)["metadata"]["labels"]
        ),
    ),
    (
        f"kubeflow/trainer v1.9.4 {MPI} newLauncher",
        "labels := defaultLauncherLabels(genericLabels)",
        lambda: (
            f"{LABEL}replica-index" not in _served_mpi_pods()["hvd-launcher"]
            and _served_mpi_pods()["hvd-worker-1"][f"{LABEL}replica-index"] == "1"
        ),
    ),
    (
        "kubernetes-sigs/jobset v0.12.0 api/jobset/v1alpha2/jobset_types.go",
        'JobSetNameKey         string = "jobset.sigs.k8s.io/jobset-name"',
        lambda: v2_pod("gpt", 1)["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "gpt",
    ),
    (
        "kubernetes-sigs/jobset v0.12.0 pkg/constants/constants.go",
        'RestartsKey = "jobset.sigs.k8s.io/restart-attempt"',
        lambda: v2_pod("gpt", 1, attempt=2)["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "2",
    ),
]


@pytest.mark.parametrize(("where", "quote", "holds"), API_FACTS, ids=[quote for _, quote, _ in API_FACTS])
def test_the_api_stand_in_labels_pods_as_the_controllers_do(where: str, quote: str, holds) -> None:
    assert holds(), f"{where}: {quote!r}"


GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
SPOT = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}


def _placed(*patches: dict[str, Any]) -> dict[str, Any]:
    """The node pods' placement of a TrainJob with ``patches`` (pod specs of ``node``) on a runtime
    placed on a pool."""
    runtime = placed_runtime(training_runtime(), Placement(node_selector={"pool": "gpu"}, tolerations=(GPU_TAINT,)))
    job = {
        "spec": {
            "runtimePatches": [
                {
                    "trainingRuntimeSpec": {
                        "template": {
                            "spec": {
                                "replicatedJobs": [
                                    {"name": "node", "template": {"spec": {"template": {"spec": patch}}}}
                                ]
                            }
                        }
                    }
                }
                for patch in patches
            ]
        }
    }
    return pod_placement(job, runtime)


def _trainjob_pod_labels(name: str) -> dict[str, str]:
    job = {"metadata": {"name": name}, "spec": {"runtimeRef": {"name": "torch"}, "trainer": {"numNodes": 2}}}
    return trainer_pods(job, training_runtime())[("node", 1)].labels


TRAINER_V2_FACTS = [
    (
        "kubernetes-sigs/jobset v0.12.0 pkg/controllers/jobset_controller.go labelAndAnnotateObject",
        "labels[jobset.JobSetNameKey] = js.Name",
        lambda: _trainjob_pod_labels("gpt")["jobset.sigs.k8s.io/jobset-name"] == "gpt",
    ),
    (
        "kubeflow/trainer v2.3.0 pkg/runtime/core/trainingruntime.go mergeRuntimePatches",
        "merged, err := strategicpatch.StrategicMergePatch(source, patch, jobsetv1alpha2.JobSetSpec{})",
        lambda: (
            _placed() == {"nodeSelector": {"pool": "gpu"}, "tolerations": [GPU_TAINT]}
            and _placed({"nodeSelector": {"zone": "a"}})["nodeSelector"] == {"pool": "gpu", "zone": "a"}
        ),
    ),
    (
        "kubeflow/trainer v2.3.0 manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml (pod tolerations)",
        "x-kubernetes-list-type: atomic",
        lambda: _placed({"tolerations": [SPOT]})["tolerations"] == [SPOT],
    ),
]


@pytest.mark.parametrize(("where", "quote", "holds"), TRAINER_V2_FACTS, ids=[q for _, q, _ in TRAINER_V2_FACTS])
def test_the_trainjob_stand_in_places_pods_as_trainer_merges_them(where: str, quote: str, holds) -> None:
    assert holds(), f"{where}: {quote!r}"

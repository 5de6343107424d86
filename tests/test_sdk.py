"""The Kubeflow SDK (PyPI ``kubeflow`` 0.5.0, its real ``TrainerClient``) against the platform's
runtimes: a loopback API server serves the ClusterTrainingRuntimes a planned stack creates, takes
the TrainJob the SDK creates, and runs it as Trainer v2.3.0 would (``fixtures.trainer_api``):
two CPU nodes on this host, with the environment the torch plugin gives them."""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from typing import Any

import pytest
from admission_cel import admit_mutations, v2_pods
from conftest import ROOT, cfg, free_port
from fixtures.models import assert_matches_model
from fixtures.trainer_api import TrainerApi
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import BuiltinTrainer, CustomTrainer, CustomTrainerContainer, TorchTuneConfig, TrainerClient
from kubeflow.trainer.options.kubernetes import TrainerCommand
from kubeflow_trainer_api.models import TrainerV1alpha1TrainingRuntime, TrainerV1alpha1TrainJob
from loopback_api import loopback
from test_admission import refused
from test_config import validate
from test_kueue_topology import KUEUE
from test_teams import with_teams
from test_trainjob import RUNTIME, runtime_problems, trainjob_problems

from components.manifests import Placement, pool_placement
from components.manifests.jobs.trainjob import UNCONSTRAINED_TOPOLOGY
from components.manifests.tenancy.teams import JOB_USER_RULES

NS = "training"
RUNTIME_IMAGE = "registry.example.com/ml/trainer:v1.4.0@sha256:" + "4" * 64
MIRROR = "https://mirrors.aliyun.com/pypi/simple/"
PLATFORM_RUNTIME = "ack-training-platform-torch"
GPU_RUNTIME = "ack-training-platform-torch-gpu"
NAMESPACED_RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"


def sdk_stack() -> dict[str, Any]:
    """A v2 stack with a GPU pool, two teams, Kueue, a runtime image and a PyPI mirror."""
    config = with_teams(backend="v2")
    config[cfg("trainerV2")] = {"runtimeImage": RUNTIME_IMAGE, "pipIndexUrl": MIRROR, "kueue": {"enabled": True}}
    return config


@pytest.fixture
def plan(run_stack) -> Any:
    return run_stack(sdk_stack())


@pytest.fixture
def runtimes(plan) -> list[dict[str, Any]]:
    """The stack's ClusterTrainingRuntimes, and the TrainingRuntimes in each namespace."""
    return [r.inputs for r in [*plan.of_type(RUNTIME), *plan.of_type(NAMESPACED_RUNTIME)]]


def pool() -> Placement:
    """The GPU pool's placement, as the stack's own jobs get it."""
    return pool_placement(validate(sdk_stack()).gpu_pool)


def pod_template(runtime: dict[str, Any]) -> dict[str, Any]:
    [node] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return node["template"]["spec"]["template"]["spec"]


def served_pods(api: Any, name: str) -> list[dict[str, Any]]:
    """The job's pods as the API serves them to a client."""
    return [p for p in api.pods if p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == name]


def runtime_of(job: dict[str, Any], runtimes: list[dict[str, Any]]) -> dict[str, Any]:
    ref = job["spec"]["runtimeRef"]
    return next(
        r
        for r in runtimes
        if (r["kind"], r["metadata"]["name"], r["metadata"].get("namespace", job["metadata"]["namespace"]))
        == (ref["kind"], ref["name"], job["metadata"]["namespace"])
    )


def admission_refusals(plan: Any, job: dict[str, Any], runtime: dict[str, Any]) -> list[str]:
    """Why what the stack deploys would refuse the pods of ``job`` (as the SDK created it, on
    ``runtime``) in the job's namespace: its Pod Security level and the team's admission policies,
    evaluated as the API server would after its mutating admission."""
    objects = plan.kubernetes_objects()
    namespace = job["metadata"]["namespace"]
    accounts = {
        o["metadata"]["name"]: o.get("automountServiceAccountToken", True)
        for o in objects
        if o["kind"] == "ServiceAccount" and o["metadata"].get("namespace") == namespace
    }
    why = []
    for pod in v2_pods(job, runtime):
        pod["spec"] = admit_mutations(pod["spec"], accounts)
        why += refused(objects, namespace, pod)
    return why


def all_reduce() -> None:
    """The function the SDK ships: it runs under torchrun in every process of every node."""
    import os

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    total = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(total)
    print(f"rank {dist.get_rank()} of {dist.get_world_size()}: sum {total.item():.0f}", flush=True)
    # The identity with which the bundled trainer claims its output directory (--job-id).
    print(f"job {os.environ.get('TRAINING_JOB')}", flush=True)
    dist.destroy_process_group()


def role_allows(method: str, path: str, query: dict[str, list[str]], namespace: str) -> bool:
    """Whether the team Role (``JOB_USER_RULES``) lets a member make this request in ``namespace``
    (Kubernetes "Authorization": GET of a name is ``get``, of a collection ``list``, or ``watch``
    with ``watch=true``; POST is ``create``; a named object's path may end in its subresource)."""
    core = path.startswith("/api/")
    parts = path.strip("/").split("/")[2:] if core else path.strip("/").split("/")[1:]
    group, rest = ("", parts) if core else (parts[0], parts[2:])
    if rest[:2] != ["namespaces", namespace] or len(rest) < 3:
        return False
    resource = rest[2] + (f"/{rest[4]}" if len(rest) > 4 else "")
    verb = {"POST": "create", "DELETE": "delete", "PATCH": "patch", "PUT": "update"}.get(method) or (
        "get" if len(rest) > 3 else "watch" if query.get("watch") == ["true"] else "list"
    )
    return any(
        group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]
        for rule in JOB_USER_RULES
    )


def client(kubeconfig: Path) -> TrainerClient:
    return TrainerClient(backend_config=KubernetesBackendConfig(namespace=NS, config_file=str(kubeconfig)))


def test_the_sdk_takes_the_platforms_runtimes(runtimes: list[dict[str, Any]], tmp_path: Path) -> None:
    with loopback(tmp_path) as (api, kubeconfig):
        TrainerApi(api, NS, runtimes, tmp_path / "pods", port=free_port())
        found = {r.name: r for r in client(kubeconfig).list_runtimes()}
    # Every platform runtime, each with the image, device and launcher the SDK reads from it.
    assert sorted(found) == sorted({r["metadata"]["name"] for r in runtimes})
    torch = found[PLATFORM_RUNTIME].trainer
    assert (torch.image, torch.framework, torch.device, torch.device_count, torch.num_nodes) == (
        RUNTIME_IMAGE,
        "torch",
        "cpu",
        "1",
        1,
    )
    assert torch.command[0] == "bash" and "torchrun" in torch.command[2]


def test_a_custom_trainer_runs_as_two_nodes_and_reports_back(runtimes: list[dict[str, Any]], tmp_path: Path) -> None:
    with loopback(tmp_path) as (api, kubeconfig):
        trainer = TrainerApi(api, NS, runtimes, tmp_path / "pods", port=free_port())
        sdk = client(kubeconfig)
        name = sdk.train(
            runtime=PLATFORM_RUNTIME,
            trainer=CustomTrainer(func=all_reduce, num_nodes=2, resources_per_node={"cpu": 1, "memory": "2Gi"}),
        )
        job = sdk.wait_for_job_status(name, timeout=180, polling_interval=1)
        first = list(sdk.get_job_logs(name, follow=True))
        second = list(sdk.get_job_logs(name, step="node-1"))
    [created] = trainer.created
    assert created["metadata"]["name"] == name
    runtime = runtime_of(created, runtimes)
    assert_matches_model(created, TrainerV1alpha1TrainJob)
    assert trainjob_problems(created, runtime) == []
    # The SDK names no image: the runtime's is the pods'.
    assert "image" not in created["spec"]["trainer"]
    assert trainer.containers[name]["image"] == RUNTIME_IMAGE
    assert {"name": "PIP_INDEX_URL", "value": MIRROR} in trainer.containers[name]["env"]
    assert job.status == "Complete" and job.num_nodes == 2
    assert sorted((s.name, s.status, s.device, s.device_count) for s in job.steps) == [
        ("node-0", "Succeeded", "cpu", "1"),
        ("node-1", "Succeeded", "cpu", "1"),
    ]
    assert "rank 0 of 2: sum 3" in first
    assert "rank 1 of 2: sum 3" in second
    assert f"job {NS}/{name}" in first and f"job {NS}/{name}" in second


def test_a_custom_trainer_container_runs_its_own_image(runtimes: list[dict[str, Any]], tmp_path: Path) -> None:
    image = "registry.example.com/vision/resnet:v3"
    script = "import torch.distributed as dist\ndist.init_process_group('gloo')\n" + (
        "print(f'own image, rank {dist.get_rank()} of {dist.get_world_size()}', flush=True)\n"
    )
    with loopback(tmp_path) as (api, kubeconfig):
        trainer = TrainerApi(
            api, NS, runtimes, tmp_path / "pods", port=free_port(), image_files={image: {"train.py": script}}
        )
        sdk = client(kubeconfig)
        name = sdk.train(
            runtime=PLATFORM_RUNTIME,
            trainer=CustomTrainerContainer(image=image, num_nodes=2, resources_per_node={"cpu": 1}),
            options=[TrainerCommand(command=["torchrun", "train.py"])],
        )
        job = sdk.wait_for_job_status(name, timeout=180, polling_interval=1)
        logs = list(sdk.get_job_logs(name))
    [created] = trainer.created
    assert_matches_model(created, TrainerV1alpha1TrainJob)
    assert trainjob_problems(created, runtime_of(created, runtimes)) == []
    # The job's own image wins over the runtime's.
    assert created["spec"]["trainer"]["image"] == image and trainer.containers[name]["image"] == image
    assert job.status == "Complete"
    assert "own image, rank 0 of 2" in logs


def test_a_builtin_trainer_is_refused_naming_the_runtime(runtimes: list[dict[str, Any]], tmp_path: Path) -> None:
    with loopback(tmp_path) as (api, kubeconfig):
        trainer = TrainerApi(api, NS, runtimes, tmp_path / "pods", port=free_port())
        with pytest.raises(ValueError, match=f"BuiltinTrainer can't be used with .*name='{PLATFORM_RUNTIME}'"):
            client(kubeconfig).train(runtime=PLATFORM_RUNTIME, trainer=BuiltinTrainer(config=TorchTuneConfig()))
    assert trainer.created == []


def test_the_docs_example_runs_as_shown(runtimes: list[dict[str, Any]], tmp_path: Path) -> None:
    page = (ROOT / "docs" / "sdk.md").read_text()
    example = page.split("<!-- runs in tests/test_sdk.py", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "example.py"
    script.write_text(example)
    with loopback(tmp_path) as (api, kubeconfig):
        trainer = TrainerApi(api, NS, runtimes, tmp_path / "pods", port=free_port())
        # A script of its own, as a user runs it: the SDK reads the function's source from its file.
        done = subprocess.run(
            [sys.executable, str(script)],
            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    [created] = trainer.created
    assert created["spec"]["runtimeRef"]["name"] == PLATFORM_RUNTIME
    assert "rank 0 of 2: sum 3" in done.stdout.splitlines()


def test_a_team_member_names_only_the_namespace(plan, runtimes: list[dict[str, Any]], tmp_path: Path) -> None:
    with loopback(tmp_path) as (api, kubeconfig):
        trainer = TrainerApi(api, "vision", runtimes, tmp_path / "pods", port=free_port())
        sdk = TrainerClient(backend_config=KubernetesBackendConfig(namespace="vision", config_file=str(kubeconfig)))
        name = sdk.train(
            runtime=PLATFORM_RUNTIME, trainer=CustomTrainer(func=all_reduce, num_nodes=2, resources_per_node={"cpu": 1})
        )
        job = sdk.wait_for_job_status(name, timeout=180, polling_interval=1)
        logs = list(sdk.get_job_logs(name))
        pods = served_pods(api, name)
    # Each call the SDK made is one the team's Role grants its members (the version ConfigMap
    # of another namespace aside: the SDK only warns when it cannot read it, backend.py verify_backend).
    refused = [
        (method, path)
        for method, path, query, _ in api.requests
        if not path.startswith("/api/v1/namespaces/kubeflow-system/") and not role_allows(method, path, query, "vision")
    ]
    assert refused == []
    assert "rank 0 of 2: sum 3" in logs
    [created] = trainer.created
    # The team's own copy of the runtime, found in its namespace.
    assert created["spec"]["runtimeRef"] == {
        "name": PLATFORM_RUNTIME,
        "kind": "TrainingRuntime",
        "apiGroup": "trainer.kubeflow.org",
    }
    runtime = runtime_of(created, runtimes)
    assert_matches_model(created, TrainerV1alpha1TrainJob)
    assert_matches_model(runtime, TrainerV1alpha1TrainingRuntime)
    assert runtime_problems(runtime) == [] and trainjob_problems(created, runtime) == []
    # What the team's namespace admits: its Pod Security level and its admission policies.
    assert admission_refusals(plan, created, runtime) == []
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"runAsUser": 2001, "runAsGroup": 2001, "runAsNonRoot": True}
    assert pod["serviceAccountName"] == "trainer"
    claims = {v["name"]: v["persistentVolumeClaim"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    assert claims == {
        "data": {"claimName": "training-data", "readOnly": True},
        "output": {"claimName": "training-output"},
    }
    mounts = {m["name"]: m for m in trainer.containers[name]["volumeMounts"]}
    assert mounts["data"] == {"name": "data", "mountPath": "/mnt/data", "readOnly": True}
    assert mounts["output"] == {"name": "output", "mountPath": "/mnt/output"}
    # Off the GPU pool: nothing selects its nodes or tolerates its taint.
    assert len(pods) == 2 and all(not {"nodeSelector", "tolerations"} & p["spec"].keys() for p in pods)
    assert job.status == "Complete"


def test_a_gpu_job_from_the_sdk_lands_on_the_gpu_pool(plan, runtimes: list[dict[str, Any]], tmp_path: Path) -> None:
    with loopback(tmp_path) as (api, kubeconfig):
        trainer = TrainerApi(api, "vision", runtimes, tmp_path / "pods", port=free_port())
        sdk = TrainerClient(backend_config=KubernetesBackendConfig(namespace="vision", config_file=str(kubeconfig)))
        gpu = next(r for r in sdk.list_runtimes() if r.name == GPU_RUNTIME)
        name = sdk.train(
            runtime=GPU_RUNTIME,
            trainer=CustomTrainer(
                func=all_reduce, num_nodes=2, resources_per_node={"cpu": 8, "memory": "32Gi", "gpu": 2}
            ),
        )
        job = sdk.wait_for_job_status(name, timeout=180, polling_interval=1)
        pods = served_pods(api, name)
    [created] = trainer.created
    assert created["spec"]["runtimeRef"] == {
        "name": GPU_RUNTIME,
        "kind": "TrainingRuntime",
        "apiGroup": "trainer.kubeflow.org",
    }
    # The SDK adds no runtime patch: the placement is the runtime's alone.
    assert "runtimePatches" not in created["spec"]
    runtime = runtime_of(created, runtimes)
    assert_matches_model(runtime, TrainerV1alpha1TrainingRuntime)
    assert runtime_problems(runtime) == [] and trainjob_problems(created, runtime) == []
    assert admission_refusals(plan, created, runtime) == []
    placement = pool()
    assert (gpu.trainer.device, gpu.trainer.device_count) == ("gpu", str(placement.gpus_per_node))
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["nodeSelector"] == placement.node_selector
        assert pod["spec"]["tolerations"] == list(placement.tolerations)
        [node] = pod["spec"]["containers"]
        assert node["resources"]["limits"] == {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}
    assert job.status == "Complete"
    assert sorted((s.name, s.device, s.device_count) for s in job.steps) == [
        ("node-0", "gpu", "2"),
        ("node-1", "gpu", "2"),
    ]


def test_each_namespace_has_a_gpu_runtime_on_the_pool_and_cpu_runtimes_off_it(
    plan: Any, runtimes: list[dict[str, Any]]
) -> None:
    placement = pool()
    placed = {
        (r["kind"], r["metadata"].get("namespace"), r["metadata"]["name"])
        for r in runtimes
        if pod_template(r).get("nodeSelector") == placement.node_selector
        and pod_template(r).get("tolerations") == list(placement.tolerations)
    }
    unplaced = {
        (r["kind"], r["metadata"].get("namespace"), r["metadata"]["name"])
        for r in runtimes
        if not {"nodeSelector", "tolerations"} & pod_template(r).keys()
    }
    names = {r["metadata"]["name"] for r in runtimes}
    cpu = sorted(n for n in names if not n.endswith("-gpu"))
    assert cpu == [f"ack-training-platform-{p}" for p in ("jax", "torch", "xgboost")]
    where = [("ClusterTrainingRuntime", None), *(("TrainingRuntime", ns) for ns in ("training", "vision", "speech"))]
    assert placed == {(kind, ns, f"{name}-gpu") for kind, ns in where for name in cpu}
    assert unplaced == {(kind, ns, name) for kind, ns in where for name in cpu}
    # Without a topology the queue's flavors ask for none, and neither do the runtimes.
    assert not any(annotations(r) for r in runtimes)
    # Kueue gives a pod set the pool's flavor only when it tolerates the flavor's taints and its
    # node selector matches the flavor's labels (see kueue_flavors).
    [flavor] = [f.inputs for f in plan.of_type(KUEUE + "ResourceFlavor") if "nodeTaints" in f.inputs.get("spec", {})]
    assert flavor["spec"]["nodeLabels"].items() <= placement.node_selector.items()
    for taint in flavor["spec"]["nodeTaints"]:
        assert {"key": taint["key"], "operator": "Equal", "value": taint["value"], "effect": taint["effect"]} in list(
            placement.tolerations
        )


def wheel(directory: Path, name: str, version: str, source: str) -> Path:
    """A pure-Python wheel of one module (PEP 427: the module, and the dist-info's METADATA,
    WHEEL and RECORD)."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": source,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    records = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
        f"{len(text.encode())}"
        for path, text in files.items()
    ]
    files[f"{info}/RECORD"] = "\n".join([*records, f"{info}/RECORD,,"]) + "\n"
    path = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for inside, text in files.items():
            archive.writestr(inside, text)
    return path


def uses_a_package() -> None:
    import os
    import sys

    sys.path.insert(0, os.environ["PIP_TARGET"])
    import mirror_probe

    print(f"from the mirror: {mirror_probe.ORIGIN}", flush=True)


def test_packages_come_from_the_mirror_named_in_the_trainer(runtimes: list[dict[str, Any]], tmp_path: Path) -> None:
    package = tmp_path / "mirror" / "simple" / "mirror-probe"
    package.mkdir(parents=True)
    built = wheel(package, "mirror_probe", "1.0", "ORIGIN = 'the stack mirror'\n")
    (package / "index.html").write_text(f'<a href="{built.name}">{built.name}</a>\n')
    requests: list[str] = []

    class Mirror(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(tmp_path / "mirror"), **kwargs)

        def log_message(self, *args: Any) -> None:
            requests.append(self.path)

    mirror = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Mirror)
    threading.Thread(target=mirror.serve_forever, daemon=True).start()
    index = f"http://127.0.0.1:{mirror.server_address[1]}/simple/"
    try:
        with loopback(tmp_path) as (api, kubeconfig):
            TrainerApi(api, NS, runtimes, tmp_path / "pods", port=free_port())
            sdk = client(kubeconfig)
            name = sdk.train(
                runtime=PLATFORM_RUNTIME,
                trainer=CustomTrainer(
                    func=uses_a_package,
                    num_nodes=1,
                    packages_to_install=["mirror-probe==1.0"],
                    pip_index_urls=[index],
                    # Installs into the pod's own directory: the image's interpreter here is this
                    # checkout's, whose packages the pod must not change.
                    env={"PIP_TARGET": "/opt/packages"},
                ),
            )
            job = sdk.wait_for_job_status(name, timeout=180, polling_interval=1)
            logs = list(sdk.get_job_logs(name))
    finally:
        mirror.shutdown()
        mirror.server_close()
    assert job.status == "Complete", logs
    assert "from the mirror: the stack mirror" in logs
    assert any(path.startswith("/simple/mirror-probe/") for path in requests)


def annotations(runtime: dict[str, Any]) -> dict[str, str]:
    [node] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return node["template"]["spec"]["template"].get("metadata", {}).get("annotations", {})


def test_with_a_topology_the_gpu_runtimes_ask_kueue_for_one(run_stack) -> None:
    # The pool's flavor then admits only pod sets that ask (see kueue_flavors): a job from the SDK
    # asks through its runtime, unconstrained, as a stack job without a topology does.
    config = sdk_stack()
    config[cfg("trainerV2")]["kueue"]["topology"] = {}
    config[cfg("gpuPool")]["minSize"] = 2
    plan = run_stack(config)
    [flavor] = [f.inputs for f in plan.of_type(KUEUE + "ResourceFlavor") if "topologyName" in f.inputs.get("spec", {})]
    runtimes = [r.inputs for r in [*plan.of_type(RUNTIME), *plan.of_type(NAMESPACED_RUNTIME)]]
    asking = {r["metadata"]["name"] for r in runtimes if annotations(r) == {UNCONSTRAINED_TOPOLOGY: "true"}}
    assert flavor["spec"]["topologyName"] and asking == {
        f"ack-training-platform-{p}-gpu" for p in ("jax", "torch", "xgboost")
    }
    assert all(annotations(r) == {} for r in runtimes if r["metadata"]["name"] not in asking)
    assert len([r for r in runtimes if r["metadata"]["name"] in asking]) == 4 * len(asking)

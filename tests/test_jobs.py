"""TrainingJob: the pure PyTorchJob builder, golden manifests, the official models and
the operator's webhook rules, and the wiring under Pulumi mocks."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import cfg, stack_config
from fixtures.models import assert_matches_model
from fixtures.upstream import OPERATOR_IMAGE
from kubeflow.training.api_client import ApiClient

from components.config import GpuPoolSpec, TrainingJobSpec
from components.manifests import CPU_PLACEMENT, JobContext, Placement, pool_placement, pytorch_job
from trainer.telemetry.metric_names import METRICS_PORT, METRICS_PORT_NAME

GOLDEN = Path(__file__).parent / "golden"
POOL_1 = pool_placement(GpuPoolSpec(instance_types=["ecs.gn7i-c8g1.2xlarge"], gpus_per_node=1, max_size=4))
POOL_8_ERDMA = pool_placement(
    GpuPoolSpec(instance_types=["ecs.ebmgn8v.48xlarge"], gpus_per_node=8, fabric="erdma", max_size=4)
)
IMAGE = "registry-vpc.cn-hangzhou.aliyuncs.com/ml/trainer:v0.1.0"


def context(placement: Placement, gpus: int, **extra: Any) -> JobContext:
    return JobContext(
        namespace="training",
        image=IMAGE,
        gpus=gpus,
        placement=placement,
        data_claim="training-data",
        output_claim="training-output",
        service_account="trainer",
        **extra,
    )


REPRESENTATIVE = {
    "single-node-1gpu": (
        TrainingJobSpec(name="mnist", image=IMAGE),
        context(POOL_1, 1, image_pull_secret="registry-pull"),
    ),
    "multi-node-4x8-erdma": (
        TrainingJobSpec(
            name="gpt-pretrain",
            image=IMAGE,
            nodes=4,
            network="rdma",
            cpu="180",
            memory="1600Gi",
            restart_policy="ExitCode",
            trainer={"model": "gpt", "max_steps": 100000, "batch_size": 16, "parallel": "auto"},
            scheduling={"queue": "default", "min_available": 4},
            run_policy={"backoff_limit": 10},
            topology={"key": "topology.kubernetes.io/zone"},
        ),
        context(POOL_8_ERDMA, 8),
    ),
    "elastic": (
        TrainingJobSpec(
            name="elastic-gpt", image=IMAGE, elastic={"min_nodes": 2, "max_nodes": 4}, trainer={"model": "gpt"}
        ),
        context(POOL_8_ERDMA, 8),
    ),
    "cpu-local": (
        TrainingJobSpec(
            name="mnist-cpu",
            image="trainer:0.1.0",
            gpus_per_node=0,
            procs_per_node=2,
            cpu="2",
            memory="4Gi",
            trainer={"max_steps": 200, "synthetic_data": True},
        ),
        context(CPU_PLACEMENT, 0),
    ),
}


@pytest.mark.parametrize("case", REPRESENTATIVE)
def test_golden_manifests(case: str) -> None:
    spec, ctx = REPRESENTATIVE[case]
    text = yaml.safe_dump(pytorch_job(spec, ctx), sort_keys=False)
    path = GOLDEN / f"{case}.yaml"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} changed; review and rerun with UPDATE_GOLDEN=1"


def webhook_problems(job: dict[str, Any]) -> list[str]:
    """The Training Operator v1 webhook's rules for PyTorchJobs."""
    problems = []
    if not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", job["metadata"]["name"]) or len(job["metadata"]["name"]) > 63:
        problems.append("name is not a DNS-1035 label")
    replicas = job["spec"]["pytorchReplicaSpecs"]
    if set(replicas) - {"Master", "Worker"}:
        problems.append("replica types other than Master/Worker")
    if "Master" in replicas and replicas["Master"]["replicas"] != 1:
        problems.append("Master must have exactly one replica")
    for kind, replica in replicas.items():
        if not any(c["name"] == "pytorch" for c in replica["template"]["spec"]["containers"]):
            problems.append(f"{kind} has no container named pytorch")
    elastic = job["spec"].get("elasticPolicy")
    if elastic is not None:
        if "Worker" not in replicas:
            problems.append("elasticPolicy needs a Worker spec")
        if "nProcPerNode" in elastic and "nprocPerNode" in job["spec"]:
            problems.append("elasticPolicy.nProcPerNode together with spec.nprocPerNode")
    return problems


@pytest.mark.parametrize("case", REPRESENTATIVE)
def test_manifest_fits_official_models_and_webhook(case: str) -> None:
    spec, ctx = REPRESENTATIVE[case]
    job = pytorch_job(spec, ctx)
    assert_matches_model(job, "KubeflowOrgV1PyTorchJob")
    client = ApiClient()
    model = client._ApiClient__deserialize(job, "KubeflowOrgV1PyTorchJob")
    assert client.sanitize_for_serialization(model) == job
    assert webhook_problems(job) == []
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        container = replica["template"]["spec"]["containers"][0]
        limits, requests = container["resources"]["limits"], container["resources"]["requests"]
        assert limits == requests
        assert int(job["spec"]["nprocPerNode"]) == int(limits.get("nvidia.com/gpu", spec.procs_per_node or 1))
        env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
        assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
        assert {m["mountPath"] for m in container["volumeMounts"]} == {"/dev/shm", "/mnt/data", "/mnt/output"}


def test_validator_catches_unknown_fields() -> None:
    spec, ctx = REPRESENTATIVE["single-node-1gpu"]
    job = pytorch_job(spec, ctx)
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["gpus"] = 1
    with pytest.raises(AssertionError, match="containers\\[0\\].gpus: not a field of V1Container"):
        assert_matches_model(job, "KubeflowOrgV1PyTorchJob")


BUILDS = [
    # (case, spec, context, expectation on the manifest)
    (
        "shm sized per GPU",
        TrainingJobSpec(name="a", image=IMAGE, memory="512Gi"),
        context(POOL_8_ERDMA, 8),
        lambda j: _pod(j)["volumes"][0]["emptyDir"] == {"medium": "Memory", "sizeLimit": "128Gi"},
    ),
    (
        "shm at most half the memory",
        TrainingJobSpec(name="a", image=IMAGE),
        context(POOL_8_ERDMA, 8),
        lambda j: _pod(j)["volumes"][0]["emptyDir"] == {"medium": "Memory", "sizeLimit": "32Gi"},
    ),
    (
        "shm for CPU jobs",
        TrainingJobSpec(name="a", image=IMAGE, gpus_per_node=0),
        context(CPU_PLACEMENT, 0),
        lambda j: _pod(j)["volumes"][0]["emptyDir"]["sizeLimit"] == "2Gi",
    ),
    (
        "tolerations from the pool",
        TrainingJobSpec(name="a", image=IMAGE),
        context(POOL_1, 1),
        lambda j: (
            _pod(j)["tolerations"]
            == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]
            and _pod(j)["nodeSelector"] == {"ack-training-platform/pool": "gpu"}
        ),
    ),
    (
        "tcp has no host network",
        TrainingJobSpec(name="a", image=IMAGE),
        context(POOL_8_ERDMA, 8),
        lambda j: (
            "hostNetwork" not in _pod(j)
            and "securityContext" not in _pod(j)["containers"][0]
            and _env(j)["NCCL_IB_DISABLE"] == "1"
        ),
    ),
    (
        "rdma preset",
        TrainingJobSpec(name="a", image=IMAGE, network="rdma"),
        context(POOL_8_ERDMA, 8),
        lambda j: (
            "hostNetwork" not in _pod(j)
            and "dnsPolicy" not in _pod(j)
            and "securityContext" not in _pod(j)["containers"][0]
            and _pod(j)["containers"][0]["resources"]["limits"]["aliyun/erdma"] == "1"
            and _env(j)["NCCL_IB_DISABLE"] == "0"
            and _env(j)["NCCL_SOCKET_IFNAME"] == "eth0"
            and _env(j)["NCCL_IB_GID_INDEX"] == "-1"
            and _env(j)["NCCL_IB_ADDR_FAMILY"] == "AF_INET"
            and "NCCL_IB_HCA" not in _env(j)
        ),
    ),
    (
        "flight recorder dumps on the output volume",
        TrainingJobSpec(name="run-7", image=IMAGE),
        context(POOL_1, 1),
        lambda j: (
            _env(j)["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000"
            and _env(j)["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
            and _env(j)["TORCH_FR_DUMP_TEMP_FILE"] == "/mnt/output/run-7/nccl_trace_rank_"
        ),
    ),
    (
        "no flight recorder without NCCL",
        TrainingJobSpec(name="a", image="trainer:0.1.0", gpus_per_node=0),
        context(CPU_PLACEMENT, 0),
        lambda j: not any(name.startswith(("TORCH_NCCL", "TORCH_FR")) for name in _env(j)),
    ),
    (
        "nccl debug",
        TrainingJobSpec(name="a", image=IMAGE, nccl_debug="INFO"),
        context(POOL_1, 1),
        lambda j: _env(j)["NCCL_DEBUG"] == "INFO",
    ),
    (
        "user env wins",
        TrainingJobSpec(name="a", image=IMAGE, env={"NCCL_SOCKET_IFNAME": "bond0"}),
        context(POOL_1, 1),
        lambda j: _env(j)["NCCL_SOCKET_IFNAME"] == "bond0",
    ),
    (
        "netbench preset",
        TrainingJobSpec(name="a", image=IMAGE, preset="netbench", nodes=2),
        context(POOL_8_ERDMA, 8),
        lambda j: (
            _pod(j)["containers"][0]["command"]
            == [
                "python",
                "-m",
                "trainer.launch",
                "--nproc-per-node=8",
                "--master-addr=$(MASTER_ADDR)",
                "--master-port=$(MASTER_PORT)",
                "-m",
                "trainer.bench",
            ]
            and j["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
        ),
    ),
    (
        "elastic is worker-only",
        TrainingJobSpec(name="a", image=IMAGE, elastic={"min_nodes": 1, "max_nodes": 3}),
        context(POOL_1, 1),
        lambda j: (
            list(j["spec"]["pytorchReplicaSpecs"]) == ["Worker"]
            and j["spec"]["elasticPolicy"]
            == {"minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d", "maxRestarts": 3}
        ),
    ),
    (
        "run policy",
        TrainingJobSpec(
            name="a",
            image=IMAGE,
            run_policy={"active_deadline_seconds": 3600, "suspend": True},
        ),
        context(POOL_1, 1),
        lambda j: (
            j["spec"]["runPolicy"]
            == {
                "cleanPodPolicy": "None",
                "backoffLimit": 6,
                "suspend": True,
                "activeDeadlineSeconds": 3600,
            }
        ),
    ),
    (
        "output per job",
        TrainingJobSpec(name="run-7", image=IMAGE),
        context(POOL_1, 1),
        lambda j: (
            _env(j)["OUTPUT_PATH"] == "/mnt/output/run-7"
            and _env(j)["FINAL_MODEL_PATH"] == "/mnt/output/run-7/final_model.pt"
            and "MODEL_PATH" not in _env(j)
        ),
    ),
    (
        "fine-tuning starts from MODEL_PATH",
        TrainingJobSpec(
            name="tune",
            image=IMAGE,
            trainer={"init_from": "/mnt/data/base/final_model.pt", "final_model_path": "/mnt/output/tuned.pt"},
        ),
        context(POOL_1, 1),
        lambda j: (
            _env(j)["MODEL_PATH"] == "/mnt/data/base/final_model.pt"
            and _env(j)["FINAL_MODEL_PATH"] == "/mnt/output/tuned.pt"
        ),
    ),
    (
        "max steps alone: the trainer chooses the epochs",
        TrainingJobSpec(name="a", image=IMAGE, trainer={"max_steps": 10000}),
        context(POOL_1, 1),
        lambda j: (
            "--epochs" not in _pod(j)["containers"][0]["command"]
            and _pod(j)["containers"][0]["command"][-2:] == ["--max-steps", "10000"]
        ),
    ),
]


def _pod(job: dict[str, Any]) -> dict[str, Any]:
    return next(iter(job["spec"]["pytorchReplicaSpecs"].values()))["template"]["spec"]


def _env(job: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in _pod(job)["containers"][0]["env"]}


@pytest.mark.parametrize(("case", "spec", "ctx", "check"), BUILDS, ids=[b[0] for b in BUILDS])
def test_builder(case: str, spec: TrainingJobSpec, ctx: JobContext, check) -> None:
    assert check(pytorch_job(spec, ctx))


CUSTOM_COMMAND = TrainingJobSpec(name="own", image=IMAGE, nodes=2, command=["bash", "-c", "sleep 1"])


def assert_every_pod_declares_the_metrics_port(containers: list[dict[str, Any]]) -> None:
    """Each trainer container has ``METRICS_PORT`` and the named port the PodMonitor scrapes."""
    assert containers
    for container in containers:
        env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
        assert env["METRICS_PORT"] == str(METRICS_PORT)
        named = [p for p in container["ports"] if p["name"] == METRICS_PORT_NAME]
        assert [p["containerPort"] for p in named] == [METRICS_PORT]


@pytest.mark.parametrize(
    ("spec", "ctx"),
    [*REPRESENTATIVE.values(), (CUSTOM_COMMAND, context(POOL_1, 1))],
    ids=[*REPRESENTATIVE, "custom-command"],
)
def test_every_replica_declares_the_metrics_port(spec: TrainingJobSpec, ctx: JobContext) -> None:
    # Rank 0 may land in any pod of an elastic job, so Master and Workers all declare it.
    replicas = pytorch_job(spec, ctx)["spec"]["pytorchReplicaSpecs"].values()
    assert_every_pod_declares_the_metrics_port([c for r in replicas for c in r["template"]["spec"]["containers"]])


@pytest.mark.parametrize(
    ("spec", "ctx", "message"),
    [
        (
            TrainingJobSpec(name="a", image=IMAGE),
            context(CPU_PLACEMENT, 1),
            "job 'a' asks for 1 GPUs per pod but its placement offers 0",
        ),
        (
            TrainingJobSpec(name="a", image=IMAGE, network="rdma"),
            context(POOL_1, 1),
            "job 'a' uses rdma networking but its placement has no RDMA fabric",
        ),
        (
            TrainingJobSpec(name="a", image=IMAGE, nodes=5),
            context(POOL_1, 1),
            "job 'a' needs 5 nodes for its 5 pods but its pool has at most 4",
        ),
    ],
)
def test_builder_rejects_impossible_placement(spec, ctx, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        pytorch_job(spec, ctx)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "a" * 41}, "is not a valid job name"),
        ({"image": "trainer"}, "is not pinned"),
        ({"image": "trainer@sha256:abc"}, "has a malformed digest"),
        ({"elastic": {"min_nodes": 3, "max_nodes": 2}}, "minNodes (3) must not exceed maxNodes (2)"),
        ({"nodes": 2, "elastic": {"min_nodes": 1, "max_nodes": 2}}, "an elastic job sizes itself"),
        ({"gpus_per_node": 0, "network": "rdma"}, "rdma networking is for GPU jobs"),
        ({"nodes": 2, "scheduling": {"min_available": 3}}, "minAvailable (3) exceeds the job's 2 pods"),
    ],
)
def test_job_spec_rejects(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        TrainingJobSpec(**{"name": "a", "image": IMAGE, **fields})


def test_digest_pinned_image_is_accepted(run_stack) -> None:
    image = "trainer@sha256:" + "0" * 64
    assert TrainingJobSpec(name="a", image=image).image == image
    # The stack's job carries it as given, in every container (no tag added, no lookup).
    config = stack_config("local")
    job = config[cfg("jobs")][0]
    job["image"] = image
    built = run_stack(config, "local").one("kubernetes:kubeflow.org/v1:PyTorchJob", job["name"]).inputs
    images = {
        container["image"]
        for replica in built["spec"]["pytorchReplicaSpecs"].values()
        for container in replica["template"]["spec"]["containers"]
    }
    assert images == {image}


def test_jobs_are_wired_to_operator_pool_storage_and_registry(run_stack, fixture_pins) -> None:
    plan = run_stack(stack_config("prod"), "prod")
    operator = plan.one("ack-training-platform:components:TrainingOperator")
    volcano = plan.one("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "podgroups.scheduling.volcano.sh")
    rendered = {r.urn for r in plan.resources if r.parent == operator.urn}
    assert len(rendered) == 4 + 8  # the overlay's objects and Volcano's
    claims = {c.urn for c in plan.of_type("kubernetes:core/v1:PersistentVolumeClaim")}
    for job in plan.of_type("kubernetes:kubeflow.org/v1:PyTorchJob"):
        # Every object of the overlay (the CRD among them), Volcano and the claims of the job's
        # own namespace come first.
        namespace = job.inputs["metadata"]["namespace"]
        claims = {
            c.urn
            for c in plan.of_type("kubernetes:core/v1:PersistentVolumeClaim")
            if c.inputs["metadata"]["namespace"] == namespace
        }
        assert len(claims) == 2
        assert {volcano.urn} | rendered | claims <= set(job.dependencies)
        pod = _pod(job.inputs)
        assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
        assert pod["nodeSelector"] == {"ack-training-platform/pool": "gpu-erdma"}
        assert [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"][1:]] == ["datasets", "checkpoints"]
        assert (
            pod["containers"][0]["image"] == "ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/ml/trainer:v0.1.0"
        )


def test_jobs_are_replaced_not_patched_and_suspend_changes_in_place(run_stack) -> None:
    job = run_stack(stack_config("dev")).one("kubernetes:kubeflow.org/v1:PyTorchJob")
    assert job.delete_before_replace
    assert "spec.pytorchReplicaSpecs" in job.replace_on_changes
    assert "spec.runPolicy.backoffLimit" in job.replace_on_changes
    assert not any(path.startswith("spec.runPolicy.suspend") or path == "spec" for path in job.replace_on_changes)
    assert "ttlSecondsAfterFinished" not in job.inputs["spec"]["runPolicy"]


def test_registry_pull_secret_reaches_the_pods(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    job = plan.one("kubernetes:kubeflow.org/v1:PyTorchJob").inputs
    assert _pod(job)["imagePullSecrets"] == [{"name": "registry-pull"}]
    assert plan.one("kubernetes:core/v1:Secret").inputs["metadata"]["name"] == "registry-pull"
    enterprise = stack_config("dev")
    enterprise[cfg("registry")] = {"edition": "enterprise", "enterpriseInstanceName": "team"}
    no_login = run_stack(enterprise)
    assert "imagePullSecrets" not in _pod(no_login.one("kubernetes:kubeflow.org/v1:PyTorchJob").inputs)
    assert not no_login.of_type("kubernetes:core/v1:Secret")


def test_operator_is_pinned_without_volcano(run_stack, fixture_pins) -> None:
    config = stack_config("dev")
    config.pop(cfg("imageMirror"), None)
    plan = run_stack(config)
    operator = plan.one("ack-training-platform:components:TrainingOperator")
    assert operator.inputs["overlay"] == "kubeflow/trainer v1.9.4 manifests/overlays/standalone"
    assert not plan.of_type("kubernetes:helm.sh/v3:Release")
    assert "volcano" not in operator.inputs and not [r for r in plan.resources if "volcano" in r.name]
    container = plan.one("kubernetes:apps/v1:Deployment", "kubeflow/training-operator").inputs["spec"]["template"][
        "spec"
    ]["containers"][0]
    # No gang scheduler flag; only the supported init image in place of the operator's alpine:3.10.
    assert container["args"] == [
        "--pytorch-init-container-image=docker.io/library/alpine:3.23.3",
        "--mpi-kubectl-delivery-image=ghcr.io/kubeflow/training-v1/kubectl-delivery:v1-93c5489",
    ]
    assert container["image"] == OPERATOR_IMAGE
    config = stack_config("dev")
    config[cfg("operator")] = {"install": False}
    assert not [r for r in run_stack(config).resources if r.name.startswith("kubeflow/")]


SECRET_ENV = {"HF_TOKEN": {"secretKeyRef": {"name": "hub-token", "key": "token"}}, "RUN_NOTE": 7}


def test_env_from_a_secret_is_a_reference_not_a_value() -> None:
    spec = TrainingJobSpec(name="finetune", image=IMAGE, env=SECRET_ENV)
    job = pytorch_job(spec, context(POOL_1, 1))
    assert_matches_model(job, "KubeflowOrgV1PyTorchJob")
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        env = replica["template"]["spec"]["containers"][0]["env"]
        assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hub-token", "key": "token"}}} in env
        assert {"name": "RUN_NOTE", "value": "7"} in env


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        (
            {"T": {"secretKeyRef": {"name": "Hub_Token", "key": "token"}}},
            "ack-training-platform:jobs[0].env.T.secretKeyRef.name",
        ),
        (
            {"T": {"secretKeyRef": {"name": "hub", "key": "a/b"}}},
            "ack-training-platform:jobs[0].env.T.secretKeyRef.key",
        ),
        ({"T": {"secretKeyRef": {"name": "hub"}}}, "ack-training-platform:jobs[0].env.T.secretKeyRef.key"),
    ],
)
def test_a_bad_secret_reference_names_its_key(env: dict, problem: str) -> None:
    from components.config import ConfigError, load_spec

    config = stack_config("dev")
    config[cfg("jobs")][0]["env"] = env
    with pytest.raises(ConfigError) as raised:
        load_spec(config, credentials=False)
    assert any(p.startswith(problem) for p in raised.value.problems), raised.value.problems


@pytest.mark.parametrize(
    ("trainer", "flags"),
    [
        ({"model": "gpt"}, []),
        ({"model": "gpt", "parallel": "hsdp"}, ["--parallel", "hsdp"]),
        ({"model": "cnn", "parallel": "auto", "fabric_probe": True}, ["--parallel", "auto", "--fabric-probe"]),
    ],
)
def test_the_job_spec_passes_the_parallel_strategy_and_the_probe_to_the_trainer(trainer, flags) -> None:
    job = pytorch_job(TrainingJobSpec(name="a", image=IMAGE, trainer=trainer), context(POOL_1, 1))
    command = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    tail = command[command.index("--checkpoint-every") + 2 :]
    assert tail == flags


@pytest.mark.parametrize(
    ("extra", "bounded"),
    [
        ({"restart_policy": "ExitCode", "run_policy": {"backoff_limit": 4}}, True),
        ({"restart_policy": "OnFailure", "run_policy": {"backoff_limit": 4}}, False),
        ({"restart_policy": "ExitCode", "run_policy": {"backoff_limit": 4}, "command": ["bash", "-c", "true"]}, False),
    ],
)
def test_exit_code_jobs_bound_each_pods_retries_by_the_backoff_limit(extra: dict[str, Any], bounded: bool) -> None:
    # Under ExitCode the operator re-creates failed pods and never counts them against backoffLimit.
    job = pytorch_job(TrainingJobSpec(name="bounded", image=IMAGE, nodes=2, **extra), context(POOL_1, 1))
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        container = replica["template"]["spec"]["containers"][0]
        pod_name = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
        assert (container["command"][:4] == ["python", "-m", "trainer.launch", "--max-pod-restarts=4"]) == bounded
        assert (pod_name in container["env"]) == bounded


@pytest.mark.parametrize(
    ("trainer", "extra", "problem"),
    [
        (
            {"model": "llama", "tp": 2},
            {},
            "ack-training-platform:jobs[0].trainer.tp: tp 2 does not divide the pod's 1 processes: tensor "
            "parallelism runs a collective per layer and stays inside a pod",
        ),
        (
            {"model": "llama", "pp": 3, "batchSize": 3},
            {"nodes": 2},
            "ack-training-platform:jobs[0].trainer.pp: tp 1 × pp 3 = 3 does not divide the job's 2 processes "
            "(2 pods × 1)",
        ),
        (
            {"model": "llama", "tp": 4},
            {"gpusPerNode": 0, "procsPerNode": 4},
            "ack-training-platform:jobs[0].trainer.tp: tp 4: llamaSize tiny has 2 key-value heads, which 4 ranks "
            "cannot split evenly; choose tp from 1, 2",
        ),
    ],
)
def test_a_mesh_the_job_cannot_hold_names_its_stack_key(trainer: dict, extra: dict, problem: str) -> None:
    from components.config import ConfigError, load_spec

    config = stack_config("dev")  # one A10 a node
    config[cfg("jobs")][0] |= {"trainer": trainer, **extra}
    with pytest.raises(ConfigError) as raised:
        load_spec(config, credentials=False)
    assert any(p.startswith(problem) for p in raised.value.problems), raised.value.problems


def test_the_job_spec_passes_the_mesh_to_the_trainer() -> None:
    spec = TrainingJobSpec(name="a", image=IMAGE, nodes=4, trainer={"model": "llama", "pp": 4, "batch_size": 4})
    command = pytorch_job(spec, context(POOL_1, 1))["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    command = command["containers"][0]["command"]
    assert command[command.index("--checkpoint-every") + 2 :] == ["--pp", "4"]

"""Every Training Operator v1 kind: golden files, the official ``kubeflow-training`` 1.9.4
models (strictly: an unknown field fails), the replica roles each kind's types declare, and
the settings refused at load for a kind they mean nothing to."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import cfg, stack_config
from fixtures.models import assert_matches_model
from kubeflow.training.api_client import ApiClient
from test_jobs import IMAGE, POOL_1, POOL_8_ERDMA, context

from components.config import ConfigError, TrainingJobSpec, load_spec
from components.manifests import CPU_PLACEMENT, KINDS, kubeflow_job, v1_replaced_on_change

GOLDEN = Path(__file__).parent / "golden" / "kinds"
COMMIT = "0123456789abcdef0123456789abcdef01234567"

CASES: dict[str, tuple[dict[str, Any], Any]] = {
    "tensorflow-ps": (
        {
            "framework": "tensorflow",
            "nodes": 3,
            "parameter_servers": 2,
            "evaluator": True,
            "gpus_per_node": 1,
            "command": ["python", "train_ps.py"],
            "restart_policy": "ExitCode",
        },
        context(POOL_1, 1),
    ),
    "xgboost": (
        {
            "framework": "xgboost",
            "nodes": 2,
            "gpus_per_node": 0,
            "cpu": "4",
            "memory": "8Gi",
            "launcher": "python",
            "command": ["train_xgb.py"],
            "code": {"path": "/mnt/data/code/xgb"},
        },
        context(CPU_PLACEMENT, 0),
    ),
    "mpi-horovod": (
        {
            "framework": "mpi",
            "nodes": 2,
            "network": "rdma",
            "command": ["mpirun", "-np", "16", "python", "train_hvd.py"],
            # The Launcher and the two Workers: a gang counts pods.
            "scheduling": {"queue": "default", "min_available": 3},
        },
        context(POOL_8_ERDMA, 8),
    ),
    "jax": (
        {
            "framework": "jax",
            "nodes": 2,
            "gpus_per_node": 0,
            "cpu": "2",
            "memory": "4Gi",
            "command": ["python", "train_jax.py"],
            "code": {"git_url": "https://github.com/example/jax-train.git", "commit": COMMIT},
        },
        context(CPU_PLACEMENT, 0),
    ),
    "paddle": (
        {
            "framework": "paddle",
            "nodes": 2,
            "gpus_per_node": 1,
            "command": ["python", "-m", "paddle.distributed.launch", "train.py"],
        },
        context(POOL_1, 1, image_pull_secret="registry-pull"),
    ),
    "pytorch-accelerate": (
        {"nodes": 2, "launcher": "accelerate", "command": ["train.py", "--mixed_precision=bf16"]},
        context(POOL_8_ERDMA, 8),
    ),
}

ROLES = {
    "tensorflow-ps": {"Chief": 1, "Worker": 2, "PS": 2, "Evaluator": 1},
    "xgboost": {"Master": 1, "Worker": 1},
    "mpi-horovod": {"Launcher": 1, "Worker": 2},
    "jax": {"Worker": 2},
    "paddle": {"Worker": 2},
    "pytorch-accelerate": {"Master": 1, "Worker": 1},
}
"""Replica types per kind (v1.9.4 ``pkg/apis/kubeflow.org/v1/<kind>_types.go``)."""


def build(case: str) -> dict[str, Any]:
    fields, ctx = CASES[case]
    return kubeflow_job(TrainingJobSpec(name=case, image=IMAGE, **fields), ctx)


@pytest.mark.parametrize("case", CASES)
def test_golden_manifests(case: str) -> None:
    text = yaml.safe_dump(build(case), sort_keys=False)
    path = GOLDEN / f"{case}.yaml"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} changed; review and rerun with UPDATE_GOLDEN=1"


@pytest.mark.parametrize("case", CASES)
def test_each_kind_fits_its_official_model(case: str) -> None:
    job = build(case)
    model_name = f"KubeflowOrgV1{job['kind']}"
    assert_matches_model(job, model_name)
    client = ApiClient()
    model = client._ApiClient__deserialize(job, model_name)
    assert client.sanitize_for_serialization(model) == job
    framework = CASES[case][0].get("framework", "pytorch")
    kind = KINDS[framework]
    replicas = job["spec"][kind.specs_key]
    assert {role: spec["replicas"] for role, spec in replicas.items()} == ROLES[case]
    for role, replica in replicas.items():
        pod = replica["template"]["spec"]
        container = pod["containers"][0]
        # The operator injects its settings into the container of this name, from this port.
        assert container["name"] == kind.container
        assert container["ports"][0] == {"name": kind.port_name, "containerPort": kind.port}
        assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/dev/shm", "/mnt/data", "/mnt/output"}
        # An MPI Launcher runs as its own account, which the operator binds to exec into the
        # job's Workers; every other pod as the jobs' shared one, without a token.
        launcher = role == "Launcher"
        assert pod["serviceAccountName"] == (f"{case}-launcher" if launcher else "trainer")
        assert pod.get("automountServiceAccountToken", False) is launcher
        assert replica["restartPolicy"] == CASES[case][0].get("restart_policy", "OnFailure")
    assert v1_replaced_on_change(framework)[0] == f"spec.{kind.specs_key}"


def test_mpi_workers_wait_for_the_launcher() -> None:
    """Workers without a command sleep while the Launcher's mpirun starts ranks in them
    (v1.9.4 ``pkg/controller.v1/mpi/mpijob_controller.go``); the Launcher needs no GPU."""
    job = build("mpi-horovod")
    assert job["spec"]["slotsPerWorker"] == 8
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert "command" not in worker["containers"][0]
    assert worker["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert "hostNetwork" not in worker and "securityContext" not in worker["containers"][0]
    assert "nvidia.com/gpu" not in launcher["containers"][0]["resources"]["limits"]
    assert launcher["containers"][0]["command"][:2] == ["mpirun", "-np"]


def _gpus(replica: dict[str, Any]) -> str | None:
    return replica["template"]["spec"]["containers"][0]["resources"]["limits"].get("nvidia.com/gpu")


def test_pods_that_outlive_their_job_are_deleted_when_it_ends() -> None:
    """An MPIJob ends with its Launcher while its idle Workers run on, a TFJob with its Chief while
    its PS and Evaluator run on: under cleanPodPolicy None they would keep their GPUs (v1.9.4
    ``pkg/controller.v1/common/job.go`` ``DeletePodsAndServices``)."""
    assert build("mpi-horovod")["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"
    tf = build("tensorflow-ps")
    assert tf["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"
    # Parameter servers hold variables on CPUs: no GPU of the Workers' is copied to them.
    specs = tf["spec"]["tfReplicaSpecs"]
    assert {role: _gpus(spec) for role, spec in specs.items()} == {
        "Chief": "1",
        "Worker": "1",
        "PS": None,
        "Evaluator": "1",
    }
    ps_env = {e["name"] for e in specs["PS"]["template"]["spec"]["containers"][0]["env"]}
    assert not {name for name in ps_env if name.startswith("NCCL_")}
    # Kinds whose pods all exit keep them, logs readable; a policy given is kept.
    assert build("jax")["spec"]["runPolicy"]["cleanPodPolicy"] == "None"
    fields, ctx = CASES["tensorflow-ps"]
    plain = {**fields, "parameter_servers": 0, "evaluator": False}
    assert (
        kubeflow_job(TrainingJobSpec(name="tf", image=IMAGE, **plain), ctx)["spec"]["runPolicy"]["cleanPodPolicy"]
        == "None"
    )
    kept = {**CASES["mpi-horovod"][0], "run_policy": {"clean_pod_policy": "None"}}
    job = kubeflow_job(TrainingJobSpec(name="mpi", image=IMAGE, **kept), CASES["mpi-horovod"][1])
    assert job["spec"]["runPolicy"]["cleanPodPolicy"] == "None"


@pytest.mark.parametrize(
    ("case", "wanted", "message"),
    [
        ("mpi-horovod", 3, None),
        (
            "mpi-horovod",
            2,
            "minAvailable (2) is fewer than the job's 3 pods (2 Workers, 1 Launcher): a fixed-size job runs only "
            "once all of them do",
        ),
        ("mpi-horovod", 4, "minAvailable (4) exceeds the job's 3 pods (2 Workers, 1 Launcher)"),
        ("tensorflow-ps", 6, None),
        ("tensorflow-ps", 3, "minAvailable (3) is fewer than the job's 6 pods (3 nodes, 2 PS, 1 Evaluator)"),
        ("jax", 2, None),
        ("jax", 1, "minAvailable (1) is fewer than the job's 2 pods: a fixed-size job"),
    ],
)
def test_a_gang_counts_every_pod_of_the_job(case: str, wanted: int, message: str | None) -> None:
    fields = {**CASES[case][0], "scheduling": {"min_available": wanted}}
    if message is None:
        job = kubeflow_job(TrainingJobSpec(name="gang", image=IMAGE, **fields), CASES[case][1])
        assert job["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": wanted}
        return
    with pytest.raises(ValueError, match=re.escape(message)):
        TrainingJobSpec(name="gang", image=IMAGE, **fields)


def test_an_elastic_gang_is_its_minimum_not_its_maximum() -> None:
    """Without minAvailable the operator's PodGroup waits for every replica (v1.9.4
    ``common/job.go``: ``minMember := totalReplicas``), which for an elastic job is maxNodes."""
    elastic = {"elastic": {"min_nodes": 2, "max_nodes": 4}}
    job = kubeflow_job(TrainingJobSpec(name="el", image=IMAGE, **elastic), context(POOL_8_ERDMA, 8))
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
    assert job["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 2}
    with pytest.raises(ValueError, match=re.escape("minAvailable (1) is fewer than elastic.minNodes (2)")):
        TrainingJobSpec(name="el", image=IMAGE, scheduling={"min_available": 1}, **elastic)
    ok = TrainingJobSpec(name="el", image=IMAGE, scheduling={"min_available": 3}, **elastic)
    assert kubeflow_job(ok, context(POOL_8_ERDMA, 8))["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 3}


def test_code_from_git_is_cloned_at_its_commit() -> None:
    pod = build("jax")["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]
    clone = pod["initContainers"][0]
    assert COMMIT in clone["command"][2] and "checkout -q FETCH_HEAD" in clone["command"][2]
    assert pod["containers"][0]["workingDir"] == "/mnt/code"
    assert {"name": "code", "emptyDir": {}} in pod["volumes"]


@pytest.mark.parametrize(
    ("entry", "key", "reason"),
    [
        ({"framework": "xgboost"}, "command", "runs your own code"),
        ({"framework": "tensorflow", "command": ["x"], "trainer": {"model": "gpt"}}, "trainer", "bundled PyTorch"),
        ({"framework": "jax", "command": ["x"], "preset": "netbench"}, "preset", "bundled PyTorch"),
        ({"framework": "mpi", "command": ["x"], "elastic": {"minNodes": 1, "maxNodes": 2}}, "elastic", "elastic"),
        ({"framework": "paddle", "command": ["x"], "launcher": "torchrun"}, "launcher", "torch processes"),
        ({"framework": "xgboost", "command": ["x"], "procsPerNode": 2}, "procsPerNode", "one process per pod"),
        ({"framework": "jax", "command": ["x"], "parameterServers": 1}, "parameterServers", "TFJob roles"),
        ({"parameterServers": 1}, "parameterServers", "TFJob roles"),
        ({"framework": "tensorflow", "command": ["x"], "backend": "v2"}, "framework", "nothing would set TF_CONFIG"),
        ({"framework": "paddle", "command": ["x"], "backend": "v2"}, "framework", "nothing would set PADDLE_*"),
        ({"framework": "mpi", "command": ["x"], "backend": "v2"}, "nodes", "one more node pod"),
        (
            {
                "framework": "mpi",
                "command": ["x"],
                "backend": "v2",
                "nodes": 2,
                "env": {"OMPI_MCA_plm_rsh_args": "-p 22"},
            },
            "env",
            "OMPI_MCA_plm_rsh_args: Trainer v2 sets them",
        ),
        ({"framework": "jax", "command": ["x"], "backend": "v2", "env": {"JAX_PROCESS_ID": "0"}}, "env", "sets them"),
        (
            {"framework": "xgboost", "command": ["x"], "backend": "v2", "env": {"DMLC_TASK_ID": "0"}},
            "env",
            "DMLC_TASK_ID: Trainer v2 sets them",
        ),
        ({"framework": "xgboost", "command": ["x"], "backend": "v2", "gpusPerNode": 2}, "gpusPerNode", "per GPU"),
        ({"launcher": "python"}, "command", "give command"),
        ({"launcher": "accelerate", "command": ["x"], "elastic": {"minNodes": 1, "maxNodes": 2}}, "elastic", "fixed"),
        ({"command": ["x"], "code": {"gitUrl": "https://e.com/r.git", "commit": "main"}}, "code.commit", "commit id"),
        ({"command": ["x"], "code": {"path": "/tmp/code"}}, "code.path", ""),
        ({"command": ["x"], "code": {"path": "/mnt/data/c"}, "backend": "v2"}, "code", "image"),
    ],
)
def test_meaningless_settings_are_refused_at_load(entry: dict[str, Any], key: str, reason: str) -> None:
    config = stack_config("dev")
    job = {k: v for k, v in config[cfg("jobs")][0].items() if k not in ("trainer", "preset")}
    config[cfg("jobs")][0] = {**job, **entry}
    with pytest.raises(ConfigError) as raised:
        load_spec(config, credentials=False)
    problem = f"ack-training-platform:jobs[0].{key}"
    assert any(p.startswith(problem) and reason in p for p in raised.value.problems), raised.value.problems


@pytest.mark.parametrize(
    ("entry", "key", "reason"),
    [
        ({"framework": "tensorflow", "command": ["x"]}, "framework", "TF_CONFIG: run tensorflow on backend v1"),
        ({"framework": "xgboost", "command": ["x"]}, "gpusPerNode", "8 GPUs per pod"),
    ],
)
def test_a_v2_stack_refuses_what_its_runtimes_cannot_run(entry: dict[str, Any], key: str, reason: str) -> None:
    """``training.backend: v2`` with jobs that leave ``backend`` and ``gpusPerNode`` unset: the
    job's framework and the pool's GPU count are checked where the job is."""
    config = stack_config("prod")
    config[cfg("training")] = {**config.get(cfg("training"), {}), "backend": "v2"}
    v1_only = ("trainer", "preset", "restartPolicy", "runPolicy", "scheduling")
    job = {k: v for k, v in config[cfg("jobs")][0].items() if k not in v1_only}
    config[cfg("jobs")] = [{**job, **entry}]
    with pytest.raises(ConfigError) as raised:
        load_spec(config, credentials=False)
    problem = f"ack-training-platform:jobs[0].{key}"
    assert any(p.startswith(problem) and reason in p for p in raised.value.problems), raised.value.problems


def test_jax_and_xgboost_load_on_v2() -> None:
    config = stack_config("dev")
    job = {k: v for k, v in config[cfg("jobs")][0].items() if k not in ("trainer", "preset")}
    config[cfg("jobs")] = [
        {**job, "name": "jax", "framework": "jax", "backend": "v2", "command": ["python", "train.py"]},
        {**job, "name": "xgb", "framework": "xgboost", "backend": "v2", "launcher": "python", "command": ["t.py"]},
    ]
    spec = load_spec(config, credentials=False)
    assert [(j.framework, spec.job_backend(j)) for j in spec.jobs] == [("jax", "v2"), ("xgboost", "v2")]


def test_the_local_stack_runs_every_cpu_kind() -> None:
    spec = load_spec(stack_config("local"), credentials=False)
    frameworks = {job.framework for job in spec.jobs}
    assert {"pytorch", "xgboost", "mpi", "jax"} <= frameworks


def test_ack_jobs_reads_waits_for_and_deletes_a_tfjob(cluster) -> None:
    from loopback_api import NS, cond, jobs

    api, kubeconfig = cluster
    job = build("tensorflow-ps")
    job["metadata"]["namespace"] = NS
    job["status"] = {
        "conditions": [cond("Created", "TFJobCreated", "created"), cond("Succeeded", "TFJobSucceeded", "done")],
        "replicaStatuses": {"Chief": {"succeeded": 1}, "Worker": {"succeeded": 2}, "PS": {}, "Evaluator": {}},
    }
    path = f"/apis/kubeflow.org/v1/namespaces/{NS}/tfjobs/tensorflow-ps"
    api.routes[("GET", path)] = job
    api.routes[("DELETE", path)] = {"kind": "Status", "apiVersion": "v1", "status": "Success"}
    code, lines = jobs(kubeconfig, "get", "tensorflow-ps")
    assert code == 0 and "Kind:      TFJob" in lines, lines
    assert "Replicas:  Chief 0/1 active, 1 succeeded; Worker 0/2 active, 2 succeeded; PS 0/2 active; " in "\n".join(
        lines
    )
    assert jobs(kubeconfig, "wait", "tensorflow-ps", "--for", "succeeded", "--timeout", "5")[0] == 0
    assert jobs(kubeconfig, "delete", "tensorflow-ps") == (0, ["TFJob tensorflow-ps deleted"])
    assert ("DELETE", path) in [(m, p) for m, p, _, _ in api.requests]


def test_ack_jobs_logs_reads_a_tfjob_chief_and_its_parameter_servers(cluster) -> None:
    from loopback_api import NS, PODS, jobs, v1_pod

    api, kubeconfig = cluster
    job = build("tensorflow-ps")
    job["metadata"]["namespace"] = NS
    api.routes[("GET", f"/apis/kubeflow.org/v1/namespaces/{NS}/tfjobs/tensorflow-ps")] = job
    api.pods += [v1_pod("tensorflow-ps", "chief", 0), v1_pod("tensorflow-ps", "ps", 1)]
    api.routes[("GET", f"{PODS}/tensorflow-ps-chief-0/log")] = "chief step 10\n"
    api.routes[("GET", f"{PODS}/tensorflow-ps-ps-1/log")] = "ps serving\n"
    assert jobs(kubeconfig, "logs", "tensorflow-ps") == (0, ["chief step 10"])
    assert jobs(kubeconfig, "logs", "tensorflow-ps", "--replica", "ps-1") == (0, ["ps serving"])
    logs = [(p, q["container"]) for _, p, q, _ in api.requests if p.endswith("/log")]
    # The operator's container for a TFJob is ``tensorflow`` (v1.9.4 tensorflow_types.go).
    assert logs == [
        (f"{PODS}/tensorflow-ps-chief-0/log", ["tensorflow"]),
        (f"{PODS}/tensorflow-ps-ps-1/log", ["tensorflow"]),
    ]

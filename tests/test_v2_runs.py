"""Emitted XGBoost TrainJobs run as Kubeflow Trainer v2.3.0 starts their pods: each pod is a
local process on the stand-in cluster of ``fixtures.local_cluster``, running the runtime's
``node`` container with the TrainJob's command and env, plus exactly what
``fixtures.trainer_pods`` says Trainer, JobSet and the Job controller add. Trainer's fixed
trainer port is a free one here, as every pod shares this host's ports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import free_port
from fixtures.local_cluster import STUCK_S, Cluster, Mutation, wait_all, with_env
from fixtures.trainer_pods import TRAINER_PORT, Refused, trainer_container, trainer_pods
from test_jobs import IMAGE, context
from test_kind_runs import assert_one_model_of_both_shards, documented_xgboost_program, xgboost, xgboost_job

from components.config import TrainingJobSpec
from components.manifests import CPU_PLACEMENT, train_job, training_runtime


def xgboost_trainjob(nodes: int = 2) -> tuple[dict[str, Any], dict[str, Any]]:
    """The TrainJob the builder emits for a CPU XGBoost job, and the runtime it names."""
    spec = xgboost_job(nodes).model_copy(update={"backend": "v2"})
    return train_job(spec, context(CPU_PLACEMENT, 0)), training_runtime(None, "xgboost")


def run_xgboost(
    tmp_path: Path, wrong: Mutation | None = None, timeout: float = 90
) -> tuple[list[tuple[int, str]], Cluster]:
    job, runtime = xgboost_trainjob()
    pods = trainer_pods(job, runtime, port=free_port())
    cluster = Cluster({"node": trainer_container(job, runtime)}, pods, tmp_path, wrong)
    (cluster.workdir / "train_xgb.py").write_text(documented_xgboost_program("DMLC_TRACKER_URI"))
    procs = [cluster.start(replica, index) for replica, index in cluster.pods]
    return wait_all(procs, timeout=timeout), cluster


def test_trainjob_pods_get_the_tracker_their_task_and_the_worker_count() -> None:
    job, runtime = xgboost_trainjob(nodes=3)
    pods = trainer_pods(job, runtime)
    assert [(pod.name, pod.subdomain) for pod in pods.values()] == [(f"xgb-node-0-{i}", "xgb") for i in range(3)]
    assert [pod.env for pod in pods.values()] == [
        {
            "JOB_COMPLETION_INDEX": str(i),
            "DMLC_TRACKER_URI": "xgb-node-0-0.xgb",
            "DMLC_TRACKER_PORT": str(TRAINER_PORT),
            "DMLC_TASK_ID": str(i),
            "DMLC_NUM_WORKER": "3",
        }
        for i in range(3)
    ]
    assert all(pod.command is None and pod.files == {} for pod in pods.values())
    node = trainer_container(job, runtime)
    assert node["command"] == ["python", "-m", "trainer.run", "python", "train_xgb.py"]
    assert {e["name"] for e in node["env"]} >= {"OUTPUT_PATH", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"}


def test_trainer_counts_one_xgboost_worker_per_gpu_and_the_runtimes_nodes_by_default() -> None:
    job, runtime = xgboost_trainjob(nodes=2)
    # What the builder refuses (several GPUs per pod) shows why: two workers per pod, one task id.
    job["spec"]["trainer"]["resourcesPerNode"] = {"requests": {"cpu": "4"}, "limits": {"nvidia.com/gpu": "2"}}
    assert {pod.env["DMLC_NUM_WORKER"] for pod in trainer_pods(job, runtime).values()} == {"4"}
    del job["spec"]["trainer"]["numNodes"], job["spec"]["trainer"]["resourcesPerNode"]
    runtime["spec"]["mlPolicy"]["numNodes"] = 3
    assert [pod.env["DMLC_NUM_WORKER"] for pod in trainer_pods(job, runtime).values()] == ["3"] * 3


def test_the_trainjobs_env_overrides_the_runtimes_in_place() -> None:
    job, runtime = xgboost_trainjob()
    first = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    name = first["containers"][0]["env"][0]["name"]
    job["spec"]["trainer"]["env"].append({"name": name, "value": "from-the-job"})
    env = trainer_container(job, runtime)["env"]
    assert env[0] == {"name": name, "value": "from-the-job"} and [e["name"] for e in env].count(name) == 1


def test_the_torch_policy_is_derived_too_and_no_other() -> None:
    spec = TrainingJobSpec(name="own", image=IMAGE, backend="v2", nodes=2, gpus_per_node=0, procs_per_node=2)
    job, runtime = train_job(spec, context(CPU_PLACEMENT, 0)), training_runtime()
    assert trainer_pods(job, runtime)[("node", 1)].env == {
        "JOB_COMPLETION_INDEX": "1",
        "PET_NNODES": "2",
        "PET_NPROC_PER_NODE": "2",
        "PET_NODE_RANK": "1",
        "PET_MASTER_ADDR": "own-node-0-0.own",
        "PET_MASTER_PORT": "29500",
    }
    runtime["spec"]["mlPolicy"] = {"numNodes": 1, "jax": {}}
    with pytest.raises(ValueError, match=r"ML policy \['jax'\]: only \['torch', 'xgboost'\] are modelled here"):
        trainer_pods(job, runtime)


def torch_trainjob() -> tuple[dict[str, Any], dict[str, Any]]:
    spec = TrainingJobSpec(name="own", image=IMAGE, backend="v2", nodes=2, gpus_per_node=0, procs_per_node=2, cpu="3")
    return train_job(spec, context(CPU_PLACEMENT, 0)), training_runtime()


def test_without_a_count_torch_gets_auto_or_the_nodes_cpus() -> None:
    # v2.3.0 pkg/runtime/framework/plugins/torch/torch.go EnforceMLPolicy: the count starts as
    # "auto" and only the TrainJob's numProcPerNode replaces it (the runtime's torch policy has
    # no count: pkg/apis/trainer/v1alpha1/trainingruntime_types.go TorchMLPolicySource); with no
    # GPU in the resources (the TrainJob's resourcesPerNode, else the runtime's node container's)
    # "auto" becomes max(1, getNumCPUPerNode): the CPU request, else the limit, as
    # Quantity.Value rounds it (up).
    job, runtime = torch_trainjob()
    trainer = job["spec"]["trainer"]
    del trainer["numProcPerNode"]
    counts = {}
    for case, resources in {
        "the job's CPU request": {"requests": {"cpu": "3"}, "limits": {"cpu": "4"}},
        "a fraction, rounded up": {"requests": {"cpu": "500m"}},
        "the limit without a request": {"limits": {"cpu": "2.5"}},
        "GPUs": {"requests": {"cpu": "4"}, "limits": {"nvidia.com/gpu": "8"}},
    }.items():
        trainer["resourcesPerNode"] = resources
        counts[case] = trainer_pods(job, runtime)[("node", 0)].env["PET_NPROC_PER_NODE"]
    del trainer["resourcesPerNode"]
    counts["the runtime's container, no resources"] = trainer_pods(job, runtime)[("node", 0)].env["PET_NPROC_PER_NODE"]
    assert counts == {
        "the job's CPU request": "3",
        "a fraction, rounded up": "1",
        "the limit without a request": "3",
        "GPUs": "auto",
        "the runtime's container, no resources": "1",
    }


@pytest.mark.parametrize(
    ("trainjob", "refused"),
    [
        (
            torch_trainjob,
            "spec.trainer.env: must not have reserved envs, invalid envs configured: [PET_MASTER_ADDR PET_NNODES]",
        ),
        (
            xgboost_trainjob,
            "spec.trainer.env[{j}]: Forbidden: DMLC_NUM_WORKER is reserved for the XGBoost runtime; "
            "spec.trainer.env[{i}]: Forbidden: DMLC_TASK_ID is reserved for the XGBoost runtime",
        ),
    ],
    ids=["torch", "xgboost"],
)
def test_the_webhook_refuses_a_trainjob_setting_what_its_policy_injects(trainjob, refused: str) -> None:
    # v2.3.0 pkg/webhooks/trainjob_webhook.go ValidateCreate runs the runtime's plugins' Validate:
    # torch.go gives one field.Invalid on spec.trainer.env listing the TorchRunReservedEnvNames
    # set ("must not have reserved envs, invalid envs configured: %v" of sets.List), xgboost.go a
    # field.Forbidden per entry of XGBoostReservedEnvNames, in the env's order ("%s is reserved for
    # the XGBoost runtime").
    job, runtime = trainjob()
    trainer_pods(job, runtime)
    env = job["spec"]["trainer"]["env"]
    names = ["PET_MASTER_ADDR", "PET_NNODES"] if trainjob is torch_trainjob else ["DMLC_TASK_ID", "DMLC_NUM_WORKER"]
    env += [{"name": name, "value": "x"} for name in reversed(names)]
    with pytest.raises(Refused) as raised:
        trainer_pods(job, runtime)
    assert str(raised.value) == refused.format(i=len(env) - 1, j=len(env) - 2)
    # Variables of the same family the policy does not inject are the user's.
    job["spec"]["trainer"]["env"] = [*env[:-2], {"name": "PET_RDZV_CONF", "value": "timeout=2"}]
    trainer_pods(job, runtime)


@pytest.mark.parametrize("trainjob", [torch_trainjob, xgboost_trainjob], ids=["torch", "xgboost"])
def test_the_node_container_gets_the_trainer_port(trainjob) -> None:
    # torch.go and xgboost.go EnforceMLPolicy (v2.3.0): apply.UpsertPort adds
    # constants.ContainerTrainerPort (29500) to the node container, keyed by number.
    job, runtime = trainjob()
    ports = trainer_container(job, runtime)["ports"]
    assert [p["containerPort"] for p in ports] == [9464, TRAINER_PORT] and TRAINER_PORT == 29500
    # UpsertPort matches by number or by name (pkg/apply/apply.go byContainerPortOrName, with
    # k8s.io/utils ptr.Equal true for two absent names): an unnamed port is replaced.
    node = next(
        c
        for r in runtime["spec"]["template"]["spec"]["replicatedJobs"]
        for c in r["template"]["spec"]["template"]["spec"]["containers"]
        if c["name"] == "node"
    )
    node["ports"] = [{"name": "metrics", "containerPort": 9464}, {"containerPort": 8080}]
    ports = trainer_container(job, runtime)["ports"]
    assert ports == [{"name": "metrics", "containerPort": 9464}, {"containerPort": TRAINER_PORT}]


def test_an_xgboost_trainjob_trains_one_model_across_its_pods(tmp_path: Path) -> None:
    xgb = xgboost()
    results, cluster = run_xgboost(tmp_path)
    assert [status for status, _ in results] == [0, 0], results
    assert_one_model_of_both_shards(xgb, Path(cluster.env("node", 0)["OUTPUT_PATH"]))


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(with_env("node", DMLC_TASK_ID="0"), id="task-id-duplicated"),
        pytest.param(with_env("node", DMLC_NUM_WORKER="1"), id="one-worker-too-few"),
        pytest.param(with_env("node", DMLC_NUM_WORKER="3"), id="one-worker-too-many"),
        pytest.param(with_env("node", DMLC_TRACKER_URI="xgb-node-0-0"), id="tracker-uri-without-the-service"),
    ],
)
def test_a_wrong_trainer_variable_fails_the_xgboost_run(tmp_path: Path, wrong: Mutation) -> None:
    xgboost()
    results, _ = run_xgboost(tmp_path, wrong, STUCK_S)
    assert any(status != 0 for status, _ in results), results

"""JAX and XGBoost on backend v2: the same pods as their v1 kinds, the world Trainer v2.3.0
injects in their place, and the offline plan of a stack that runs them as TrainJobs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, cfg, stack_config
from fixtures.models import assert_matches_model
from kubeflow_trainer_api.models import (
    TrainerV1alpha1ClusterTrainingRuntime,
    TrainerV1alpha1TrainingRuntime,
    TrainerV1alpha1TrainJob,
)
from test_jobs import IMAGE, POOL_8_ERDMA, context
from test_trainjob import runtime_problems, trainjob_problems

from components.config import TrainingJobSpec
from components.manifests import KINDS, kubeflow_job, train_job, training_runtime

JAX = TrainingJobSpec(
    name="jax-train",
    image=IMAGE,
    framework="jax",
    nodes=2,
    network="rdma",
    nccl_debug="WARN",
    env={"XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true"},
    command=["python", "train_jax.py"],
)
XGBOOST = TrainingJobSpec(
    name="xgb", image=IMAGE, framework="xgboost", nodes=3, gpus_per_node=1, launcher="python", command=["t.py"]
)


def _v2_pods(spec: TrainingJobSpec) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The runtime's pod, the TrainJob's patch of it, and the TrainJob."""
    ctx = context(POOL_8_ERDMA, 1 if spec.framework == "xgboost" else 8)
    v2 = spec.model_copy(update={"backend": "v2"})
    fabric = ctx.placement.fabric if spec.network == "rdma" else None
    runtime = training_runtime(fabric, spec.framework)
    job = train_job(v2, ctx)
    runtime_pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    return runtime_pod, patch["template"]["spec"]["template"]["spec"], job


@pytest.mark.parametrize("spec", [JAX, XGBOOST], ids=["jax", "xgboost"])
def test_the_same_spec_runs_on_either_backend_with_the_same_pods(spec: TrainingJobSpec) -> None:
    """Switching the backend changes the API and who sets the world, not what the pods get."""
    ctx = context(POOL_8_ERDMA, 1 if spec.framework == "xgboost" else 8)
    v1 = kubeflow_job(spec, ctx)
    v1_pod = next(iter(v1["spec"][KINDS[spec.framework].specs_key].values()))["template"]["spec"]
    v1_container = v1_pod["containers"][0]
    runtime_pod, patch, job = _v2_pods(spec)
    trainer = job["spec"]["trainer"]
    v2_env = {
        # The runtime's identity from the downward API (for TrainJobs without TRAINING_JOB) aside.
        **{e["name"]: e["value"] for e in runtime_pod["containers"][0]["env"] if "value" in e},
        **{e["name"]: e["value"] for e in trainer["env"]},
    }
    assert v2_env == {e["name"]: e["value"] for e in v1_container["env"]}
    # What the comparison leaves aside is only the identity's downward-API entries, ahead of
    # the entry whose $(VAR)s read them (the kubelet expands only earlier entries).
    names = [e["name"] for e in runtime_pod["containers"][0]["env"]]
    assert [n for n, e in zip(names, runtime_pod["containers"][0]["env"], strict=True) if "value" not in e] == [
        "TRAINING_JOB_NAMESPACE",
        "TRAINING_JOB_NAME",
    ]
    assert names[-3:] == ["TRAINING_JOB_NAMESPACE", "TRAINING_JOB_NAME", "TRAINING_JOB"]
    assert trainer["command"] == v1_container["command"]
    assert trainer["resourcesPerNode"] == v1_container["resources"]
    assert trainer["numNodes"] == spec.nodes
    assert patch["volumes"] == v1_pod["volumes"]
    assert (
        runtime_pod["containers"][0]["volumeMounts"] + patch["containers"][0]["volumeMounts"]
        == v1_container["volumeMounts"]
    )
    for key in ("nodeSelector", "tolerations", "serviceAccountName"):
        assert patch[key] == v1_pod[key]
    for key in ("terminationGracePeriodSeconds", "hostNetwork", "dnsPolicy"):
        assert runtime_pod.get(key) == v1_pod.get(key)
    assert patch["containers"][0].get("securityContext") == v1_container.get("securityContext")


@pytest.mark.parametrize("spec", [JAX, XGBOOST], ids=["jax", "xgboost"])
def test_the_runtime_is_the_frameworks_own(spec: TrainingJobSpec) -> None:
    """Trainer v2 injects a framework's world only under its own ML policy (v2.3.0
    ``plugins/jax/jax.go``, ``plugins/xgboost/xgboost.go`` return early without it); the
    torch policy would give a JAX or XGBoost program torchrun's ``PET_*`` instead."""
    runtime_pod, _, job = _v2_pods(spec)
    fabric = POOL_8_ERDMA.fabric if spec.network == "rdma" else None
    runtime = training_runtime(fabric, spec.framework)
    assert set(runtime["spec"]["mlPolicy"]) == {"numNodes", spec.framework}
    assert job["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]
    assert runtime["metadata"]["name"] != training_runtime(fabric)["metadata"]["name"]
    assert runtime_problems(runtime) == [] and trainjob_problems(job, runtime) == []
    assert_matches_model(runtime, TrainerV1alpha1ClusterTrainingRuntime)
    assert_matches_model(job, TrainerV1alpha1TrainJob)


def test_xgboost_reserved_env_is_what_its_webhook_refuses() -> None:
    _, _, job = _v2_pods(XGBOOST)
    runtime = training_runtime(None, "xgboost")
    job["spec"]["trainer"]["env"].append({"name": "DMLC_NUM_WORKER", "value": "3"})
    assert "must not have reserved envs, invalid envs configured: ['DMLC_NUM_WORKER']" in trainjob_problems(
        job, runtime
    )


def test_the_builder_refuses_an_xgboost_pod_with_several_gpus() -> None:
    # A pool's GPU count reaches the builder only through the context (ack-jobs submit).
    spec = XGBOOST.model_copy(update={"gpus_per_node": None, "backend": "v2"})
    message = "job 'xgb' cannot run on Trainer v2: gpusPerNode: 8 GPUs per pod: Trainer v2.3.0 counts one XGBoost"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        train_job(spec, context(POOL_8_ERDMA, 8))


def test_offline_plan_writes_jax_and_xgboost_trainjobs_with_their_runtimes(tmp_path: Path) -> None:
    config = stack_config("local")
    for job in config[cfg("jobs")]:
        if job["name"] in ("xgb-cpu", "jax-cpu"):
            job["backend"] = "v2"
    stack = tmp_path / "Pulumi.kinds.yaml"
    stack.write_text(yaml.safe_dump({"config": config}))
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "components.plan", "--stack-file", str(stack), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    objects = [yaml.safe_load(path.read_text()) for path in sorted(out.glob("*.yaml"))]
    kinds = {o["kind"] for o in objects}
    assert not {"XGBoostJob", "JAXJob"} & kinds and "MPIJob" in kinds
    runtimes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterTrainingRuntime"}
    jobs = {o["metadata"]["name"]: o for o in objects if o["kind"] == "TrainJob"}
    assert sorted(jobs) == ["jax-cpu", "mnist-cpu-v2", "xgb-cpu"]
    for job in jobs.values():
        runtime = runtimes[job["spec"]["runtimeRef"]["name"]]
        assert_matches_model(job, TrainerV1alpha1TrainJob)
        assert_matches_model(runtime, TrainerV1alpha1ClusterTrainingRuntime)
        assert trainjob_problems(job, runtime) == []
    assert [jobs[n]["spec"]["runtimeRef"]["name"] for n in ("jax-cpu", "xgb-cpu")] == [
        "ack-training-platform-jax",
        "ack-training-platform-xgboost",
    ]
    assert jobs["xgb-cpu"]["spec"]["trainer"]["command"] == ["python", "-m", "trainer.run", "python", "train_xgb.py"]


def test_offline_plan_gives_an_mpi_job_its_own_runtime_before_its_trainjob(run_stack) -> None:
    config = stack_config("local")
    for job in config[cfg("jobs")]:
        if job["name"] == "mpi-cpu":
            job["backend"] = "v2"
    plan = run_stack(config)
    runtime = plan.one("kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime", "mpi-cpu-runtime")
    job = plan.one("kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob", "mpi-cpu")
    namespace = job.inputs["metadata"]["namespace"]
    assert runtime.inputs["metadata"] == {**runtime.inputs["metadata"], "name": "mpi-cpu", "namespace": namespace}
    assert job.inputs["spec"]["runtimeRef"] == {
        "name": "mpi-cpu",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
    }
    # Created before the TrainJob that names it, deleted after it, and with it: both belong to the job.
    assert runtime.urn in job.dependencies and runtime.parent == job.parent
    objects = {(o["kind"], o["metadata"]["name"]): o for o in plan.kubernetes_objects()}
    assert "MPIJob" not in {kind for kind, _ in objects}
    written = objects[("TrainingRuntime", "mpi-cpu")]
    assert_matches_model(written, TrainerV1alpha1TrainingRuntime)
    assert_matches_model(objects[("TrainJob", "mpi-cpu")], TrainerV1alpha1TrainJob)
    assert trainjob_problems(objects[("TrainJob", "mpi-cpu")], written) == []
    images = {
        rjob["name"]: rjob["template"]["spec"]["template"]["spec"]["containers"][0]["image"]
        for rjob in written["spec"]["template"]["spec"]["replicatedJobs"]
    }
    # The job's image in both: the launcher's from the TrainJob too, the nodes' from here alone.
    assert images == {
        "node": job.inputs["spec"]["trainer"]["image"],
        "launcher": job.inputs["spec"]["trainer"]["image"],
    }
    assert written["spec"]["mlPolicy"]["mpi"]["numProcPerNode"] == 1

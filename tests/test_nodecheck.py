"""The pre-job node check, run for real: two processes under the platform's launcher, gloo on CPU,
against a baseline it cannot reach (fails fast with its exit status and one line) and one it can."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from conftest import ROOT, cfg, stack_config
from test_jobs import IMAGE, POOL_8_ERDMA, context
from test_trainer import ENV, run, torchrun

from components.config import TrainingJobSpec, load_spec
from components.config.loading import ConfigError
from components.manifests import pytorch_job
from components.manifests.jobs.v1_kinds import kubeflow_job
from trainer.exit_codes import NODE_BELOW_BASELINE
from trainer.health.check import verdict

CHECK = "trainer.health.check"


def test_a_node_below_the_baseline_fails_fast_with_its_status_and_one_line() -> None:
    cmd = torchrun(CHECK, "--baseline-gbps", "100000", launcher="trainer.launch")
    env = {**ENV, "NODE_NAME": "gpu-node-7"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == NODE_BELOW_BASELINE, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("nodecheck:")]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("nodecheck: node gpu-node-7 FAILED: all-reduce bus bandwidth ")
    assert lines[0].endswith("across 2 processes, below 80% of the pool's baseline 100000 GB/s (80000.00 GB/s)")


def test_a_node_at_the_baseline_passes() -> None:
    done = run(torchrun(CHECK, "--baseline-gbps", "0.000001", "--min-share", "0.5", launcher="trainer.launch"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nodecheck: node " in done.stdout and " ok: all-reduce bus bandwidth " in done.stdout


def test_the_verdict_compares_with_the_share_of_the_baseline() -> None:
    assert verdict("n", 8, 300.0, 360.0, 0.8)[0] == 0
    status, line = verdict("n", 8, 250.0, 360.0, 0.8)
    assert status == NODE_BELOW_BASELINE
    assert line == (
        "nodecheck: node n FAILED: all-reduce bus bandwidth 250.00 GB/s across 8 processes, below 80% of the "
        "pool's baseline 360 GB/s (288.00 GB/s)"
    )


# --- the init container the builders add ------------------------------------------------------


def eight_gpu_job(**more: object) -> TrainingJobSpec:
    return TrainingJobSpec(name="gpt", image=IMAGE, nodes=2, **more)


def test_a_job_with_node_check_gets_it_as_the_first_init_container_of_every_pod() -> None:
    job = eight_gpu_job(node_check={"baselineGbps": 360})
    manifest = pytorch_job(job, context(POOL_8_ERDMA, 8))
    for replica in manifest["spec"]["pytorchReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        check = pod["initContainers"][0]
        assert check["name"] == "nodecheck" and check["image"] == IMAGE
        assert check["command"] == ["python", "-m", "trainer.launch"]
        assert check["args"] == [
            "--standalone",
            "--nproc-per-node=8",
            "-m",
            "trainer.health.check",
            "--baseline-gbps=360",
            "--min-share=0.8",
        ]
        # The GPUs it measures are the pod's own: the same resources as the training container.
        assert check["resources"] == pod["containers"][0]["resources"]
        assert check["env"] == [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
        assert {"name": "dshm", "mountPath": "/dev/shm"} in check["volumeMounts"]
        assert check["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_a_job_without_node_check_has_no_init_container() -> None:
    manifest = pytorch_job(eight_gpu_job(), context(POOL_8_ERDMA, 8))
    assert all("initContainers" not in r["template"]["spec"] for r in manifest["spec"]["pytorchReplicaSpecs"].values())


def test_node_check_on_a_one_gpu_pool_names_the_key() -> None:
    config = stack_config("dev")
    config[cfg("jobs")][0]["nodeCheck"] = {"baselineGbps": 20}
    with pytest.raises(ConfigError) as err:
        load_spec(config, credentials=False)
    assert "jobs[0].nodeCheck: the check all-reduces across a node's GPUs, and this job has 1 per node" in str(
        err.value
    )


def test_the_init_container_the_builder_emits_fails_fast_below_the_baseline() -> None:
    # The emitted command and arguments, run as they are with two CPU processes instead of eight GPUs.
    pod = pytorch_job(eight_gpu_job(node_check={"baselineGbps": 100000}), context(POOL_8_ERDMA, 8))
    check = pod["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["initContainers"][0]
    args = [a.replace("--nproc-per-node=8", "--nproc-per-node=2") for a in check["args"]]
    cmd = [sys.executable, *check["command"][1:], *args]
    done = subprocess.run(
        cmd, cwd=ROOT, env={**ENV, "NODE_NAME": "gpu-node-3"}, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == NODE_BELOW_BASELINE, done.stdout + done.stderr
    assert "nodecheck: node gpu-node-3 FAILED: all-reduce bus bandwidth " in done.stderr


@pytest.mark.parametrize(("framework", "gpu_less"), [("mpi", "Launcher"), ("tensorflow", "PS")])
def test_the_gpu_less_pods_of_a_job_get_no_node_check(framework: str, gpu_less: str) -> None:
    # The MPI Launcher and TensorFlow's parameter servers run without GPUs: a check there would ask
    # torchrun for zero processes, fail, and keep the job from starting.
    job = eight_gpu_job(framework=framework, command=["python", "train.py"], node_check={"baselineGbps": 360})
    if framework == "tensorflow":
        job = job.model_copy(update={"parameter_servers": 1})
    manifest = kubeflow_job(job, context(POOL_8_ERDMA, 8, trainer_image=IMAGE))
    replicas = next(v for k, v in manifest["spec"].items() if k.endswith("ReplicaSpecs"))
    checks = {
        role: [c["name"] for c in r["template"]["spec"].get("initContainers", []) if c["name"] == "nodecheck"]
        for role, r in replicas.items()
    }
    assert checks.pop(gpu_less) == []
    assert checks and all(names == ["nodecheck"] for names in checks.values())


# --- the image the check runs from ------------------------------------------------------------

OWN_IMAGE = "registry.example.com/vision/own-code:v2"
"""A team's image with its own code: it need not carry the trainer package."""


def test_a_job_with_its_own_command_runs_the_check_from_the_platforms_trainer_image() -> None:
    job = TrainingJobSpec(
        name="gpt", image=OWN_IMAGE, command=["python", "train.py"], nodes=2, node_check={"baselineGbps": 360}
    )
    ctx = dataclasses.replace(context(POOL_8_ERDMA, 8, trainer_image=IMAGE), image=OWN_IMAGE)
    manifest = pytorch_job(job, ctx)
    for replica in manifest["spec"]["pytorchReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        assert pod["initContainers"][0]["image"] == IMAGE
        assert pod["containers"][0]["image"] == OWN_IMAGE


def test_a_job_with_its_own_command_and_no_trainer_image_is_refused_by_the_builder() -> None:
    job = eight_gpu_job(command=["python", "train.py"], node_check={"baselineGbps": 360})
    with pytest.raises(ValueError, match=r"jobs\[\].nodeCheck of job 'gpt': the check runs the platform's trainer"):
        pytorch_job(job, context(POOL_8_ERDMA, 8))


def own_code_checked() -> dict:
    """The prod stack whose vision job runs its own image and command, with the node check."""
    config = stack_config("prod")
    job = next(j for j in config[cfg("jobs")] if j["name"] == "vit-finetune")
    job.pop("imageTag")
    job.update(image=OWN_IMAGE, command=["python", "train.py"], nodeCheck={"baselineGbps": 150})
    return config


def test_the_planned_check_of_a_job_with_its_own_image_runs_the_bundled_trainers_image(run_stack) -> None:
    plan = run_stack(own_code_checked(), "prod")
    job = next(j for j in plan.of_type("kubernetes:kubeflow.org/v1:PyTorchJob") if j.name == "vit-finetune")
    for replica in job.inputs["spec"]["pytorchReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        # gpt-pretrain runs the bundled trainer: its image, the registry's v0.1.0, carries the check.
        assert pod["initContainers"][0]["image"].endswith("/ml/trainer:v0.1.0")
        assert pod["containers"][0]["image"] == OWN_IMAGE


def test_node_check_without_any_trainer_image_names_the_keys() -> None:
    config = own_code_checked()
    for job in config[cfg("jobs")]:
        job.update(image=OWN_IMAGE, command=["python", "train.py"])
        job.pop("imageTag", None)
    with pytest.raises(ConfigError) as err:
        load_spec(config, credentials=False)
    assert "nodeCheck: it runs the platform's trainer package, and no job of the stack runs the bundled trainer" in str(
        err.value
    )
    assert "give monitoring.nodeHealth.image (or imageTag)" in str(err.value)
    config[cfg("monitoring")] = {"nodeHealth": {"image": IMAGE}}
    assert load_spec(config, credentials=False).jobs[2].node_check is not None

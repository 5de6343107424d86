"""A job's checkpoint key: from a Secret (named, or generated per job), mounted read-only as the
file the trainer reads (``$CHECKPOINT_KEY_FILE``), on v1 and v2, and never a plain value anywhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, cfg, stack_config
from test_jobs import CPU_PLACEMENT, IMAGE, context

from components.config import ConfigError, TrainingJobSpec, load_spec
from components.manifests import CHECKPOINT_KEY_FILE, pytorch_job, train_job
from components.plan.records import SECRET
from trainer.flags import parse_args

OWN_KEY = {"secretKeyRef": {"name": "ckpt-key", "key": "hmac"}}
SECRET_TYPE = "kubernetes:core/v1:Secret"
PASSWORD_TYPE = "random:index/randomPassword:RandomPassword"


def _pods(job: dict[str, Any]) -> list[tuple[dict, list[dict]]]:
    """(pod spec, env of its trainer container) for each pod template of a PyTorchJob or TrainJob."""
    if job["kind"] == "PyTorchJob":
        pods = [r["template"]["spec"] for r in job["spec"]["pytorchReplicaSpecs"].values()]
        return [(pod, pod["containers"][0]["env"]) for pod in pods]
    patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    pod = patch["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return [(pod, job["spec"]["trainer"]["env"])]


def _build(backend: str, **fields: Any) -> dict[str, Any]:
    spec = TrainingJobSpec(name="finetune", image=IMAGE, backend=backend, cpu="2", memory="4Gi", **fields)
    ctx = context(CPU_PLACEMENT, 0)
    return train_job(spec, ctx) if backend == "v2" else pytorch_job(spec, ctx)


@pytest.mark.parametrize("backend", ["v1", "v2"])
@pytest.mark.parametrize(
    ("key", "secret"), [(OWN_KEY, ("ckpt-key", "hmac")), ({}, ("finetune-checkpoint-key", "key"))], ids=["own", "gen"]
)
def test_the_key_is_a_read_only_file_named_by_the_env_the_trainer_reads(backend, key, secret) -> None:
    for pod, env in _pods(_build(backend, checkpoint_key=key)):
        assert {"name": "CHECKPOINT_KEY_FILE", "value": CHECKPOINT_KEY_FILE} in env
        volume = next(v for v in pod["volumes"] if v["name"] == "checkpoint-key")
        assert volume["secret"]["secretName"] == secret[0]
        assert volume["secret"]["items"] == [{"key": secret[1], "path": Path(CHECKPOINT_KEY_FILE).name}]
        mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "checkpoint-key")
        assert mount == {"name": "checkpoint-key", "mountPath": str(Path(CHECKPOINT_KEY_FILE).parent), "readOnly": True}
    # The trainer takes its key file from that variable.
    values = {e["name"]: e["value"] for e in env if "value" in e}
    assert parse_args([]).checkpoint_key_file is None
    with pytest.MonkeyPatch.context() as patch:
        for name, value in values.items():
            patch.setenv(name, value)
        assert parse_args([]).checkpoint_key_file == CHECKPOINT_KEY_FILE


@pytest.mark.parametrize("backend", ["v1", "v2"])
def test_without_a_key_nothing_is_mounted(backend) -> None:
    for pod, env in _pods(_build(backend)):
        assert "CHECKPOINT_KEY_FILE" not in {e["name"] for e in env}
        assert "checkpoint-key" not in {v["name"] for v in pod["volumes"]}


def test_a_bad_secret_reference_names_its_key() -> None:
    config = stack_config("dev")
    config[cfg("jobs")][0]["checkpointKey"] = {"secretKeyRef": {"name": "Ckpt_Key", "key": "hmac"}}
    with pytest.raises(ConfigError) as raised:
        load_spec(config, credentials=False)
    assert "ack-training-platform:jobs[0].checkpointKey.secretKeyRef.name" in str(raised.value)


@pytest.mark.parametrize("backend", ["v1", "v2"])
def test_a_generated_key_is_a_secret_the_job_waits_for_and_never_plain(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, backend: str
) -> None:
    from components.plan import command as plan_module
    from components.plan import runner as offline

    # As the provider would answer after creating the password: a plaintext value.
    plaintext = "ck-4d2e9f-plaintext"
    monkeypatch.setitem(offline.ASSIGNED_OUTPUTS, PASSWORD_TYPE, {"result": plaintext})
    config = stack_config("dev")
    config[cfg("training")]["backend"] = backend
    config[cfg("jobs")][0]["checkpointKey"] = {}
    name = config[cfg("jobs")][0]["name"]
    plan = plan_module.run_program(plan_module.with_unset_credentials(config)[0], stack="dev", project_dir=ROOT)
    password = plan.one(PASSWORD_TYPE, f"{name}-checkpoint-key")
    assert password.inputs["length"] == 64
    secret = plan.one(SECRET_TYPE, f"{name}-checkpoint-key")
    assert secret.inputs["metadata"]["name"] == f"{name}-checkpoint-key"
    assert secret.inputs["stringData"] == {"key": SECRET}
    job = plan.one(
        "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
        if backend == "v2"
        else "kubernetes:kubeflow.org/v1:PyTorchJob"
    )
    assert secret.urn in job.dependencies
    exposed = json.dumps({**plan.as_json(), "outputs": plan.outputs}, default=str)
    plan_module.write_manifests(plan, tmp_path / "out")
    rendered = "".join(p.read_text() for p in (tmp_path / "out").iterdir())
    assert plaintext not in exposed and plaintext not in rendered
    # A job naming its own Secret gets no generated one.
    config[cfg("jobs")][0]["checkpointKey"] = OWN_KEY
    own = plan_module.run_program(plan_module.with_unset_credentials(config)[0], stack="dev", project_dir=ROOT)
    assert not own.of_type(PASSWORD_TYPE)
    assert f"{name}-checkpoint-key" not in {r.name for r in own.of_type(SECRET_TYPE)}

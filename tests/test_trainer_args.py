"""A job's trainer settings (``TrainerArgs``) and the trainer's own command line agree.

Each setting reaches the trainer's real parser (``trainer/config.py``) through the job's real
command and environment and comes out as given; a setting the trainer has no flag for fails
here. Unset, each is the trainer's own default.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from test_jobs import CPU_PLACEMENT, IMAGE, context

from components.config import TrainerArgs, TrainingJobSpec
from components.manifests.jobs.env import job_env
from components.manifests.jobs.pod import job_command, pytorch_job
from components.manifests.jobs.trainjob import train_job
from trainer.flags import parse_args, parser

TRAINER_ENV = (
    "TRAIN_DATA_PATH",
    "OUTPUT_PATH",
    "MODEL_PATH",
    "FINAL_MODEL_PATH",
    "CHECKPOINT_KEY_FILE",
    "TRAINING_JOB",
)
"""The variables the trainer's flags default to."""
READ_BACK = {"synthetic_data": lambda cfg: cfg.data_dir is None}
"""How the trainer's Config shows a setting whose name it does not share."""
SAMPLES = {"tp": 2, "pp": 2, "parallel": "fsdp", "batchSize": 8}
"""Samples that must agree with each other: a mesh goes with FSDP and a batch its stages divide."""


@pytest.fixture(autouse=True)
def _no_trainer_env(monkeypatch) -> None:
    for name in TRAINER_ENV:
        monkeypatch.delenv(name, raising=False)


def _sample(name: str, schema: dict[str, Any]) -> Any:
    """A value other than the default for each field, from its JSON schema."""
    if "examples" in schema:
        return schema["examples"][-1]
    (kind,) = [option for option in schema.get("anyOf", [schema]) if option.get("type") != "null"]
    if "enum" in kind:
        return kind["enum"][-1]
    samples = {"integer": 7, "number": 0.25, "boolean": True, "string": f"/mnt/output/{name}"}
    assert kind["type"] in samples, f"{name}: give this test a sample {kind['type']}"
    return samples[kind["type"]]


def test_every_setting_reaches_the_trainer_as_given(monkeypatch) -> None:
    properties = TrainerArgs.model_json_schema(by_alias=True)["properties"]
    settings = {key: SAMPLES.get(key, _sample(key, schema)) for key, schema in properties.items()}
    job = TrainingJobSpec(name="round-trip", image_tag="v1.4.0", trainer=settings)
    command = job_command(job, procs=1)
    for variable, value in job_env(job, "team-a").items():
        monkeypatch.setenv(variable, value)
    cfg = parse_args(command[command.index("trainer") + 1 :])
    for name, field in TrainerArgs.model_fields.items():
        read = READ_BACK.get(name, lambda cfg, name=name: getattr(cfg, name))
        assert getattr(job.trainer, name) != field.default, name
        assert read(cfg) == getattr(job.trainer, name), name


def test_each_settings_default_is_the_trainers_own() -> None:
    trainer = parser()
    for name, field in TrainerArgs.model_fields.items():
        assert trainer.get_default(name) == field.default, name
        assert f"--{name.replace('_', '-')}" in trainer._option_string_actions, name


def test_a_default_job_runs_the_trainer_as_it_runs_without_flags() -> None:
    assert parse_args(TrainerArgs().to_flags()) == parse_args([])


@pytest.mark.parametrize(
    ("settings", "flags"),
    [
        ({}, ["--model", "cnn", "--batch-size", "64", "--checkpoint-every", "200"]),
        (
            {
                "model": "gpt",
                "maxSteps": 2000,
                "epochs": 3,
                "lr": 3e-4,
                "syntheticData": True,
                "parallel": "hsdp",
                "fabricProbe": True,
                "initFrom": "/mnt/data/gpt.pt",
                "finalModelPath": "/mnt/output/gpt.pt",
            },
            [
                "--model", "gpt", "--batch-size", "64", "--checkpoint-every", "200", "--max-steps", "2000",
                "--epochs", "3", "--lr", "0.0003", "--synthetic", "--parallel", "hsdp", "--fabric-probe",
            ],
        ),
    ],
)  # fmt: skip
def test_the_flags_keep_the_order_existing_jobs_were_created_with(settings: dict, flags: list[str]) -> None:
    assert TrainerArgs.model_validate(settings).to_flags() == flags


def test_the_paths_travel_as_variables_not_flags() -> None:
    job = TrainingJobSpec(
        name="paths", image_tag="v1.4.0", trainer={"initFrom": "/mnt/data/w.pt", "finalModelPath": "/mnt/output/f.pt"}
    )
    assert not {"--init-from", "--final-model-path"} & set(job.trainer.to_flags())
    assert (job_env(job, "team-a")["MODEL_PATH"], job_env(job, "team-a")["FINAL_MODEL_PATH"]) == (
        "/mnt/data/w.pt",
        "/mnt/output/f.pt",
    )


@pytest.mark.parametrize("backend", ["v1", "v2"])
def test_each_job_gives_the_trainer_its_identity_for_claiming_the_output_directory(backend: str, monkeypatch) -> None:
    job = TrainingJobSpec(name="gpt-pretrain", image=IMAGE, trainer={"model": "gpt"})
    ctx = context(CPU_PLACEMENT, 0)
    if backend == "v1":
        (container,) = pytorch_job(job, ctx)["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
        env = container["env"]
    else:
        env = train_job(job, ctx)["spec"]["trainer"]["env"]
    plain = {item["name"]: item["value"] for item in env if "value" in item}
    assert plain["TRAINING_JOB"] == "training/gpt-pretrain"
    for name, value in plain.items():
        monkeypatch.setenv(name, value)
    assert parse_args([]).job_id == "training/gpt-pretrain"


def test_a_llama_job_reaches_the_trainer_with_its_size() -> None:
    job = TrainingJobSpec(
        name="llama", image_tag="v1.4.0", trainer={"model": "llama", "llamaSize": "8b", "parallel": "fsdp"}
    )
    command = job_command(job, procs=1)
    cfg = parse_args(command[command.index("trainer") + 1 :])
    assert (cfg.model, cfg.llama_size, cfg.parallel) == ("llama", "8b", "fsdp")
    assert parse_args(TrainerArgs(model="llama").to_flags()).llama_size == "tiny"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"model": "gpt", "llamaSize": "8b"}, "llamaSize 8b applies to model llama, not gpt"),
        ({"model": "llama", "llamaSize": "7b"}, "Input should be 'tiny', '1b', '8b' or '70b'"),
    ],
)
def test_a_llama_size_the_trainer_would_refuse_is_refused_in_the_spec(settings: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TrainerArgs.model_validate(settings)


@pytest.mark.parametrize("flag", ["--synthetic-data", "--synthetic"])
def test_synthetic_data_is_one_flag_under_its_name_and_its_former_spelling(flag: str, monkeypatch) -> None:
    monkeypatch.setenv("TRAIN_DATA_PATH", "/mnt/data/corpus")
    assert parse_args([]).data_dir == "/mnt/data/corpus"
    assert parse_args([flag]).data_dir is None

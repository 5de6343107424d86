"""``ack-jobs submit``, and connecting with the user's own kubeconfig and the stack's outputs.

``submit --dry-run`` prints the builder's manifest and ``submit`` creates exactly it (the body
the stand-in API server of ``tests/loopback_api.py`` received), on both backends; bad flags
exit 2 naming the flag.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from loopback_api import NS, V1, V2

from components.config import TrainerArgs, TrainingJobSpec
from components.jobs import submit
from components.jobs.cli import run
from components.jobs.commands.flags import parser
from components.manifests import JobContext, pytorch_job, train_job
from components.manifests.fabrics import ERDMA
from components.manifests.placement import Placement

REGISTRY = "registry-vpc.cn-hangzhou.aliyuncs.com/ml/trainer"
GPU_PLACEMENT = {
    "nodeSelector": {"ack-training-platform/pool": "gpu"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}],
    "gpusPerNode": 8,
    "fabric": "erdma",
    "maxNodes": 4,
}
DEFAULTS = {
    "namespace": NS,
    "backend": "v1",
    "registry": REGISTRY,
    "placement": GPU_PLACEMENT,
    "dataClaim": "training-data",
    "outputClaim": "training-output",
    "serviceAccount": "trainer",
    "imagePullSecret": "registry-pull",
    "queue": "training",
}


def gpu_context(backend: str) -> JobContext:
    """The context a stack with an 8-GPU eRDMA pool gives its jobs, written out by hand."""
    placement = Placement(
        node_selector=GPU_PLACEMENT["nodeSelector"],
        tolerations=tuple(GPU_PLACEMENT["tolerations"]),
        gpus_per_node=8,
        fabric=ERDMA,
        max_nodes=4,
    )
    return JobContext(
        namespace=NS,
        image=f"{REGISTRY}:v1.4.0",
        gpus=8,
        placement=placement,
        data_claim="training-data",
        output_claim="training-output",
        service_account="trainer",
        image_pull_secret="registry-pull",
        queue="training" if backend == "v2" else None,
    )


@pytest.fixture
def outputs(tmp_path: Path) -> Path:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"namespace": NS, "jobDefaults": DEFAULTS}))
    return path


FLAGS = ["--nodes", "2", "--model", "gpt", "--max-steps", "2000", "--network", "rdma", "--image-tag", "v1.4.0"]
SPEC = {"nodes": 2, "trainer": {"model": "gpt", "maxSteps": 2000}, "network": "rdma", "imageTag": "v1.4.0"}


@pytest.mark.parametrize("backend", ["v1", "v2"])
def test_submit_dry_run_prints_the_builders_manifest(outputs: Path, backend: str) -> None:
    lines: list[str] = []
    argv = ["--outputs", str(outputs), "submit", "gpt-small", *FLAGS, "--backend", backend, "--dry-run"]
    assert run([*argv, "--", "--grad-accum", "4"], out=lines.append) == 0
    spec = TrainingJobSpec.model_validate(
        {"name": "gpt-small", **SPEC, "backend": backend, "args": ["--grad-accum", "4"]}
    )
    builder = train_job if backend == "v2" else pytorch_job
    assert yaml.safe_load("\n".join(lines)) == builder(spec, gpu_context(backend))


@pytest.mark.parametrize("backend", ["v1", "v2"])
def test_submit_creates_exactly_the_builders_manifest(cluster, outputs: Path, backend: str) -> None:
    api, kubeconfig = cluster
    collection = V2 if backend == "v2" else V1
    api.routes[("POST", collection)] = lambda _, body: (201, body)
    lines: list[str] = []
    argv = ["--outputs", str(outputs), "--kubeconfig", str(kubeconfig), "submit", "gpt-small", *FLAGS]
    assert run([*argv, "--backend", backend], out=lines.append) == 0
    spec = TrainingJobSpec.model_validate({"name": "gpt-small", **SPEC, "backend": backend})
    expected = (train_job if backend == "v2" else pytorch_job)(spec, gpu_context(backend))
    assert [(m, p, b) for m, p, _, b in api.requests if m == "POST"] == [("POST", collection, expected)]
    assert lines == [f"{expected['kind']} gpt-small created in {NS}"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--nodes", "0", "--image-tag", "v1"], "--nodes: Input should be greater than or equal to 1"),
        (["--image-tag", "latest"], "--image-tag: 'latest' is not a pinned tag"),
        (["--image", "trainer:latest"], "--image: 'trainer:latest' is not pinned"),
        (["--gpus", "16", "--image-tag", "v1"], "--gpus, --nodes or --network: job 'bad' asks for 16 GPUs per pod"),
        (["--env", "NO_EQUALS", "--image-tag", "v1"], "--env 'NO_EQUALS': give NAME=VALUE"),
        (["--backend", "v2", "--env", "PET_X=1", "--image-tag", "v1"], "--env: PET_X: Trainer v2 sets torchrun's"),
        (
            ["--backend", "v2", "--framework", "paddle", "--image-tag", "v1", "--", "python", "t.py"],
            "--framework: Trainer v2.3.0 has no Paddle ML policy",
        ),
        (
            ["--backend", "v2", "--framework", "xgboost", "--gpus", "2", "--image-tag", "v1", "--", "python", "t.py"],
            "--gpus: 2 GPUs per pod: Trainer v2.3.0 counts one XGBoost worker per GPU",
        ),
        (
            ["--gpus", "4", "--procs-per-node", "2", "--image-tag", "v1"],
            "--procs-per-node: procsPerNode (2) must equal",
        ),
        (["--max-steps", "0", "--image-tag", "v1"], "--max-steps: Input should be greater than or equal to 1"),
        (["--parallel", "fsdp", "--image-tag", "v1"], "--parallel: parallel fsdp shards the gpt and llama models"),
        (["--model", "net.py", "--image-tag", "v1"], "--model: model 'net.py': choose cnn, gpt or llama, or name"),
        (
            ["--model", "llama", "--tp", "3", "--image-tag", "v1"],
            "--tp: tp 3: llamaSize tiny has 4 query heads, which 3 ranks cannot split evenly; choose tp from 1, 2",
        ),
        (["--model", "gpt", "--pp", "2", "--image-tag", "v1"], "--pp: tp and pp split the llama model's layers"),
        (
            ["--model", "llama", "--tp", "2", "--parallel", "auto", "--image-tag", "v1"],
            "--parallel: parallel auto with tp 2 and pp 1: beside tensor or pipeline parallelism",
        ),
        (
            ["--model", "llama", "--pp", "3", "--batch-size", "3", "--nodes", "2", "--image-tag", "v1"],
            "--pp: tp 1 × pp 3 = 3 does not divide the job's 16 processes (2 pods × 8)",
        ),
    ],
)
def test_submit_with_bad_flags_names_the_flag_and_exits_2(outputs: Path, capsys, flags, message) -> None:
    assert run(["--outputs", str(outputs), "submit", "bad", *flags, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ack-jobs submit: {message}") and "Traceback" not in err


PLACEMENT_FLAGS = [
    *("--label", "team=nlp", "--label", "run=7"),
    *("--node-selector", "node.kubernetes.io/instance-type=ecs.gn7i-c32g1.8xlarge"),
    *("--toleration", "spot=true:NoSchedule", "--toleration", "maintenance:NoExecute"),
]


@pytest.mark.parametrize("backend", ["v1", "v2"])
def test_submit_labels_node_selector_and_tolerations_join_the_pools(outputs: Path, backend: str) -> None:
    lines: list[str] = []
    argv = ["--outputs", str(outputs), "submit", "gpt-small", *FLAGS, *PLACEMENT_FLAGS, "--backend", backend]
    assert run([*argv, "--dry-run"], out=lines.append) == 0
    job = yaml.safe_load("\n".join(lines))
    if backend == "v1":
        pod = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    else:
        pod = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
        pod = pod["template"]["spec"]["template"]
    assert {"team": "nlp", "run": "7"}.items() <= job["metadata"]["labels"].items()
    assert {"team": "nlp", "run": "7"}.items() <= pod["metadata"]["labels"].items()
    assert pod["spec"]["nodeSelector"] == {
        "ack-training-platform/pool": "gpu",
        "node.kubernetes.io/instance-type": "ecs.gn7i-c32g1.8xlarge",
    }
    assert pod["spec"]["tolerations"] == [
        *GPU_PLACEMENT["tolerations"],
        {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "maintenance", "operator": "Exists", "effect": "NoExecute"},
    ]


def test_submit_ttl_of_a_pytorchjob(outputs: Path) -> None:
    # A stack refuses the TTL (test_config.py); a submitted job belongs to no stack.
    lines: list[str] = []
    assert (
        run(["--outputs", str(outputs), "submit", "gpt-small", *FLAGS, "--ttl", "3600", "--dry-run"], out=lines.append)
        == 0
    )
    assert yaml.safe_load("\n".join(lines))["spec"]["runPolicy"]["ttlSecondsAfterFinished"] == 3600


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--toleration", "spot=true"], "--toleration 'spot=true': give KEY[=VALUE]:EFFECT, e.g. spot=true:NoSchedule"),
        (["--toleration", "spot=true:Never"], "--toleration: Input should be 'NoSchedule', 'PreferNoSchedule' or"),
        (["--toleration", "bad key:NoSchedule"], "--toleration"),
        (["--label", "team"], "--label 'team': give KEY=VALUE"),
        (["--label", "team=not valid!"], "--label"),
        (["--node-selector", "ack-training-platform/pool=cpu"], "--node-selector: ack-training-platform/pool is the"),
        (["--ttl", "-1"], "--ttl: Input should be greater than or equal to 0"),
        (["--ttl", "60", "--backend", "v2"], "--ttl: a TrainJob has no TTL"),
    ],
)
def test_submit_placement_and_ttl_flags_that_are_not_valid(outputs: Path, capsys, flags, message) -> None:
    assert run(["--outputs", str(outputs), "submit", "bad", "--image-tag", "v1", *flags, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ack-jobs submit: {message}") and len(err.splitlines()) == 1


def test_submit_flag_of_the_wrong_type_exits_2(outputs: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        run(["--outputs", str(outputs), "submit", "bad", "--max-steps", "many", "--dry-run"])
    assert exit_.value.code == 2
    assert "argument --max-steps: invalid int value: 'many'" in capsys.readouterr().err


def test_submit_without_the_stacks_defaults(capsys) -> None:
    assert run(["submit", "gpt-small", "--image-tag", "v1", "--dry-run"]) == 2
    assert "--stack/--outputs: submit needs the stack's jobDefaults output" in capsys.readouterr().err


# --- connecting through the stack's outputs -----------------------------------------------------


def test_the_users_own_kubeconfig_and_context_reach_the_cluster(cluster, tmp_path, monkeypatch) -> None:
    api, kubeconfig = cluster
    api.routes[("GET", V1)] = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJobList", "items": []}
    # The current context points nowhere; the user picks the cluster's.
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"].append({"name": "elsewhere", "cluster": {"server": "http://127.0.0.1:9"}})
    config["contexts"].append({"name": "elsewhere", "context": {"cluster": "elsewhere", "user": "tester"}})
    config["current-context"] = "elsewhere"
    kubeconfig.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"namespace": NS, "clusterId": "c-123"}))
    lines: list[str] = []
    assert run(["--outputs", str(outputs), "--context", "loopback", "list"], out=lines.append) == 0
    assert lines == [f"No jobs in namespace {NS}."] and V1 in api.paths("GET")


def test_without_a_kubeconfig_the_error_says_how_to_get_one(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert run(["--namespace", NS, "list"]) == 2
    assert capsys.readouterr().err == (
        "ack-jobs list: $KUBECONFIG or ~/.kube/config: cannot load a kubeconfig: ConfigException. Get your "
        "kubeconfig for the cluster (the stack's clusterId output) from the ACK console or from ACK's "
        "DescribeClusterUserKubeconfig API (aliyun cs GET /k8s/<clusterId>/user_config), then pass --kubeconfig FILE "
        "or set KUBECONFIG\n"
    )


def test_the_stacks_outputs_are_read_without_its_secrets(tmp_path, monkeypatch) -> None:
    # A pulumi on PATH that records how it was called and prints the outputs it would.
    called = tmp_path / "argv"
    pulumi = tmp_path / "bin" / "pulumi"
    pulumi.parent.mkdir()
    pulumi.write_text(f'#!/bin/sh\necho "$@" > {called}\necho \'{{"namespace": "{NS}"}}\'\n')
    pulumi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{pulumi.parent}{os.pathsep}{os.environ['PATH']}")
    from components.jobs.connect import stack_outputs

    assert stack_outputs("dev", None) == {"namespace": NS}
    assert called.read_text().split() == ["stack", "output", "--json", "--stack", "dev"]


def test_several_bad_flags_are_named_on_one_line(outputs: Path, capsys) -> None:
    argv = ["--outputs", str(outputs), "submit", "bad", "--nodes", "0", "--max-steps", "0", "--image-tag", "v1"]
    assert run([*argv, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "--nodes: Input should be greater than or equal to 1" in err and "--max-steps: Input should" in err


GOLDEN = Path(__file__).parent / "golden" / "submit"
OWN_CODE = {
    "xgboost": ["--framework", "xgboost", "--nodes", "2", "--launcher", "python"],
    "mpi": ["--framework", "mpi", "--nodes", "2"],
    "torchrun-git": ["--launcher", "torchrun", "--git-url", "https://e.com/r.git", "--commit", "a" * 40],
}


@pytest.mark.parametrize("case", OWN_CODE)
def test_submit_creates_your_own_code_as_any_kind(cluster, outputs: Path, case: str) -> None:
    # The object created is compared with a reviewed golden file (tests/golden/submit/), not
    # with what the builder the command calls makes of the same flags.
    api, kubeconfig = cluster
    api.routes[("POST", V1.replace("pytorchjobs", "xgboostjobs"))] = lambda _, body: (201, body)
    api.routes[("POST", V1.replace("pytorchjobs", "mpijobs"))] = lambda _, body: (201, body)
    api.routes[("POST", V1)] = lambda _, body: (201, body)
    argv = ["--outputs", str(outputs), "--kubeconfig", str(kubeconfig), "submit", "own", "--image-tag", "v1.4.0"]
    lines: list[str] = []
    assert run([*argv, *OWN_CODE[case], "--", "train.py", "--epochs", "3"], out=lines.append) == 0
    ((_, path, _, body),) = [r for r in api.requests if r[0] == "POST"]
    golden = GOLDEN / f"{case}.yaml"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(yaml.safe_dump(body, sort_keys=False))
    expected = yaml.safe_load(golden.read_text())
    assert body == expected, f"{golden.name} changed; review and rerun with UPDATE_GOLDEN=1"
    assert path == f"/apis/kubeflow.org/v1/namespaces/{NS}/{expected['kind'].lower()}s"
    assert lines == [f"{expected['kind']} own created in {NS}"]


def test_submit_names_the_flag_a_kind_refuses(outputs: Path, capsys) -> None:
    argv = ["--outputs", str(outputs), "submit", "own", "--image-tag", "v1", "--framework", "jax", "--model", "gpt"]
    assert run([*argv, "--", "python", "t.py"], out=print) == 2
    assert "--model: trainer flags are the bundled PyTorch trainer's" in capsys.readouterr().err


def test_submit_refuses_an_mpi_trainjob_it_cannot_give_a_runtime(outputs: Path, capsys) -> None:
    argv = ["--outputs", str(outputs), "submit", "own", "--image-tag", "v1", "--framework", "mpi", "--nodes", "2"]
    assert run([*argv, "--backend", "v2", "--", "mpirun", "python", "t.py"], out=print) == 2
    assert "--framework mpi --backend v2: an MPI TrainJob runs on a TrainingRuntime of its own" in (
        capsys.readouterr().err
    )


def _submit_actions() -> dict[str, argparse.Action]:
    (commands,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: a for a in commands.choices["submit"]._actions for name in a.option_strings}


def _spec_key(path: tuple[str, ...]) -> dict:
    """The JSON schema of the spec key at ``path``."""
    schema = TrainingJobSpec.model_json_schema(by_alias=True)
    model = schema
    for key in path[:-1]:
        prop = model["properties"][key]
        ref = next(option["$ref"] for option in [prop, *prop.get("anyOf", [])] if "$ref" in option)
        model = schema["$defs"][ref.rsplit("/", 1)[-1]]
    return model["properties"][path[-1]]


@pytest.mark.parametrize("flag", [flag for flag in submit.FLAGS if flag not in submit.REPEATED])
def test_a_spec_flag_takes_its_keys_type_choices_default_and_docstring(flag: str) -> None:
    action, key = _submit_actions()[flag], _spec_key(submit.FLAGS[flag])
    (kind,) = [option for option in key.get("anyOf", [key]) if option.get("type") != "null"]
    assert action.default is None, "unset, the spec's default applies"
    assert list(action.choices or []) == kind.get("enum", [])
    if kind["type"] == "boolean":
        assert (action.nargs, action.const) == (0, True)
    else:
        assert (action.type or str) is {"integer": int, "number": float, "string": str}[kind["type"]]
    default = key.get("default")
    shown = "" if default is None or isinstance(default, bool) else f" (default {default})"
    assert action.help.endswith(shown) and action.help.count(" (default ") == bool(shown)
    summary = action.help.removesuffix(shown).lower()
    assert summary and " ".join(key["description"].replace("``", "").split()).lower().startswith(summary)


def test_every_trainer_setting_is_a_submit_flag(outputs: Path) -> None:
    settings = {"model": "gpt", "parallel": "hsdp", "fabricProbe": True, "finalModelPath": "/mnt/output/gpt.pt"}
    flags = ["--model", "gpt", "--parallel", "hsdp", "--fabric-probe", "--final-model-path", "/mnt/output/gpt.pt"]
    lines: list[str] = []
    argv = ["--outputs", str(outputs), "submit", "gpt-small", "--image-tag", "v1.4.0", *flags, "--dry-run"]
    assert run(argv, out=lines.append) == 0
    spec = TrainingJobSpec.model_validate(
        {"name": "gpt-small", "imageTag": "v1.4.0", "trainer": settings, "backend": "v1"}
    )
    assert yaml.safe_load("\n".join(lines)) == pytorch_job(spec, gpu_context("v1"))
    assert {flag for flag, path in submit.FLAGS.items() if path[0] == "trainer"} == {
        "--" + name.replace("_", "-") for name in TrainerArgs.model_fields
    }


def test_submit_carries_a_model_factory_of_the_jobs_code_to_the_trainer(outputs: Path) -> None:
    # The factory is the trainer's to import, from the job's code: the spec checks its form only,
    # and lets such a model be sharded (the trainer checks it has blocks).
    flags = ["--model", "own_models.mixer:factory", "--parallel", "fsdp", "--code-path", "/mnt/data/code"]
    lines: list[str] = []
    argv = ["--outputs", str(outputs), "submit", "mixer", "--image-tag", "v1.4.0", *flags, "--dry-run"]
    assert run(argv, out=lines.append) == 0
    (master,) = yaml.safe_load("\n".join(lines))["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"][
        "containers"
    ]
    command = " ".join(master["command"] + master.get("args", []))
    assert "-m trainer --model own_models.mixer:factory" in command and "--parallel fsdp" in command
    # `python -m` puts the working directory, the job's code, first on the import path.
    assert master["workingDir"] == "/mnt/data/code"


def test_submit_carries_the_mesh_to_the_trainer(outputs: Path) -> None:
    flags = ["--nodes", "2", "--model", "llama", "--llama-size", "8b", "--tp", "8", "--pp", "2", "--image-tag", "v1"]
    lines: list[str] = []
    assert run(["--outputs", str(outputs), "submit", "llama", *flags, "--dry-run"], out=lines.append) == 0
    job = yaml.safe_load("\n".join(lines))
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        command = replica["template"]["spec"]["containers"][0]["command"]
        assert command[command.index("--model") + 1] == "llama"
        assert command[command.index("--llama-size") :] == ["--llama-size", "8b", "--tp", "8", "--pp", "2"]


DEV_NODE = {"millicpu": 8000, "memory": 30 * 2**30, "exact": False, "source": "ecs.gn7i-c8g1.2xlarge"}
"""What one node of the dev stack's pool offers, as its jobDefaults export it."""


@pytest.fixture
def dev_outputs(tmp_path: Path) -> Path:
    """The outputs of a stack with one-A10 nodes of 8 vCPUs and 30 GiB, two at most."""
    placement = {**GPU_PLACEMENT, "gpusPerNode": 1, "fabric": None, "maxNodes": 2, "node": DEV_NODE}
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"namespace": NS, "jobDefaults": {**DEFAULTS, "placement": placement}}))
    return path


def dry_run(outputs: Path, *argv: str) -> dict:
    """The manifest ``submit --dry-run`` prints for ``argv`` (a ``--`` tail kept last)."""
    cut = argv.index("--") if "--" in argv else len(argv)
    flags = [*argv[:cut], "--image-tag", "v1.4.0", "--dry-run", *argv[cut:]]
    lines: list[str] = []
    assert run(["--outputs", str(outputs), "submit", *flags], out=lines.append) == 0
    return yaml.safe_load("\n".join(lines))


def resources(manifest: dict) -> list[dict]:
    specs = manifest["spec"]["pytorchReplicaSpecs"].values()
    return [c["resources"]["requests"] for s in specs for c in s["template"]["spec"]["containers"]]


def test_submit_asks_by_default_for_what_the_pools_node_can_give(dev_outputs: Path) -> None:
    # 8 vCPUs and 30 GiB, less the margin left for ACK's reservation: 7 and 27Gi per pod.
    requests = resources(dry_run(dev_outputs, "bert", "--nodes", "2"))
    assert [(r["cpu"], r["memory"]) for r in requests] == [("7", "27Gi"), ("7", "27Gi")]
    # What is given is kept.
    requests = resources(dry_run(dev_outputs, "bert", "--nodes", "2", "--cpu", "6", "--memory", "24Gi"))
    assert {(r["cpu"], r["memory"]) for r in requests} == {("6", "24Gi")}


def test_submit_splits_a_node_among_the_pods_that_share_it(outputs: Path, tmp_path: Path) -> None:
    measured = {"millicpu": 186_000, "memory": 990 * 2**30, "exact": True, "source": "gpuPool.nodeCapacity"}
    placement = {**GPU_PLACEMENT, "node": measured}
    path = tmp_path / "eight.json"
    path.write_text(json.dumps({"namespace": NS, "jobDefaults": {**DEFAULTS, "placement": placement}}))
    # Two 4-GPU pods share an 8-GPU node, and a measured Allocatable is used to the last byte.
    requests = resources(dry_run(path, "half", "--nodes", "2", "--gpus", "4"))
    assert {(r["cpu"], r["memory"]) for r in requests} == {("93", "495Gi")}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--nodes", "2", "--memory", "64Gi"],
            "--memory: memory 64Gi per pod does not fit a node of pool 'gpu': ecs.gn7i-c8g1.2xlarge has 30Gi",
        ),
        (["--cpu", "8"], "--cpu: cpu 8 per pod does not fit a node of pool 'gpu'"),
        (["--nodes", "3"], "--nodes: the job's 3 pods need 3 GPU nodes but gpuPool.maxSize is 2"),
    ],
)
def test_submit_refuses_pods_the_pool_cannot_hold(dev_outputs: Path, capsys, flags, message) -> None:
    argv = ["--outputs", str(dev_outputs), "submit", "bert", *flags, "--image-tag", "v1.4.0", "--dry-run"]
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ack-jobs submit: {message}") and "Traceback" not in err


@pytest.mark.parametrize(
    ("tail", "launcher", "command"),
    [
        (["python", "train.py", "--lr", "0.1"], "torchrun", ["train.py", "--lr", "0.1"]),
        (["python", "-m", "mypkg.train"], "torchrun", ["-m", "mypkg.train"]),
        (["train.py", "--epochs", "3"], "torchrun", ["train.py", "--epochs", "3"]),
        (["accelerate", "train.py"], "accelerate", ["train.py"]),
        (["accelerate", "launch", "train.py"], "accelerate", ["train.py"]),
        (["--launcher", "python", "--", "python", "train.py"], "python", ["train.py"]),
        (["--launcher", "torchrun", "--", "python3", "train.py"], "torchrun", ["train.py"]),
        (["--launcher", "python", "--", "python", "-u", "train.py"], "python", ["-u", "train.py"]),
    ],
)
def test_the_command_after_the_flags_runs_with_a_launcher(outputs: Path, tail, launcher, command) -> None:
    built = dry_run(outputs, "mine", *([] if "--" in tail else ["--"]), *tail)
    spec = TrainingJobSpec.model_validate(
        {"name": "mine", "imageTag": "v1.4.0", "launcher": launcher, "command": command}
    )
    assert built == pytorch_job(spec, gpu_context("v1"))
    # The bundled trainer is not started with the command as its arguments.
    (container,) = built["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    assert "trainer" not in container["command"] + container.get("args", [])


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        (["bash", "run.sh"], "--: 'bash' is not a Python program: give the script after --"),
        (["torchrun", "--nproc-per-node", "8", "train.py"], "--: the platform gives torchrun the job's world"),
        (["python", "-u", "train.py"], "--: torchrun starts Python itself, so python's option -u would reach"),
        (["--launcher", "python", "--", "torchrun", "train.py"], "--: the command starts with torchrun but --launcher"),
    ],
)
def test_a_command_no_launcher_runs_is_refused(outputs: Path, capsys, tail, message) -> None:
    tail = tail if "--" in tail else ["--", *tail]
    argv = ["--outputs", str(outputs), "submit", "mine", "--image-tag", "v1.4.0", "--dry-run", *tail]
    assert run(argv) == 2
    assert capsys.readouterr().err.startswith(f"ack-jobs submit: {message}")


def test_arenas_flag_names_set_the_same_keys(outputs: Path) -> None:
    arena = dry_run(
        outputs,
        "a",
        *("--workers", "3", "--priority", "high", "--retry", "2", "--selector", "zone=k"),
        *("--working-dir", "/mnt/data/code"),
        "--",
        "python",
        "train.py",
    )
    ours = dry_run(
        outputs,
        "a",
        *("--nodes", "3", "--priority-class", "high", "--backoff-limit", "2"),
        *("--node-selector", "zone=k", "--code-path", "/mnt/data/code"),
        "--",
        "python",
        "train.py",
    )
    assert arena == ours
    spec = ours["spec"]
    assert spec["runPolicy"]["backoffLimit"] == 2 and spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["priorityClassName"] == "high"


def test_arenas_name_flag_names_the_job(outputs: Path, capsys) -> None:
    # arena requires --name and takes no positional name.
    assert dry_run(outputs, "--name", "a", "--", "python", "train.py") == dry_run(
        outputs, "a", "--", "python", "train.py"
    )
    base = ["--outputs", str(outputs), "submit", "--image-tag", "v1", "--dry-run"]
    assert run([*base, "--name", "a", "b"]) == 2
    assert capsys.readouterr().err.startswith("ack-jobs submit: --name: the job is named 'b' already (NAME)")
    assert run(base) == 2
    assert capsys.readouterr().err.startswith("ack-jobs submit: NAME: the job needs a name")
    # A refused arena flag before the name is refused as itself, not as a missing name.
    assert run([*base, "--tensorboard", "a"]) == 2
    assert capsys.readouterr().err.startswith("ack-jobs submit: --tensorboard: the stack runs TensorBoard")


def test_a_priority_a_trainjob_cannot_carry_is_refused(tmp_path: Path, capsys) -> None:
    # Without Kueue a TrainJob has nowhere to put it (the stack file refuses the same job).
    unqueued = tmp_path / "outputs.json"
    unqueued.write_text(json.dumps({"namespace": NS, "jobDefaults": {**DEFAULTS, "queue": None}}))
    argv = ["--outputs", str(unqueued), "submit", "a", "--backend", "v2", "--image-tag", "v1", "--dry-run"]
    assert run([*argv, "--priority", "high"]) == 2
    assert capsys.readouterr().err.startswith(
        "ack-jobs submit: --priority-class: 'high': a TrainJob's priority is a Kueue WorkloadPriorityClass"
    )
    # A queued TrainJob carries it as Kueue's label.
    lines: list[str] = []
    queued = ["--outputs", str(outputs_with_queue(tmp_path)), *argv[2:], "--priority", "high"]
    assert run(queued, out=lines.append) == 0
    assert yaml.safe_load("\n".join(lines))["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high"


def outputs_with_queue(tmp_path: Path) -> Path:
    path = tmp_path / "queued.json"
    path.write_text(json.dumps({"namespace": NS, "jobDefaults": DEFAULTS}))
    return path


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--data-dir", "/data"], "--data-dir: jobs mount the stack's data volume read-only at /mnt/data"),
        (["--logdir", "/logs"], "--logdir: the trainer writes TensorBoard events to /mnt/output/<job>/tensorboard"),
        (["--sync-mode", "git"], "--sync-mode: code comes from a git commit with --git-url and --commit"),
        (["--tensorboard"], "--tensorboard: the stack runs TensorBoard over every job's"),
    ],
)
def test_arenas_flags_without_an_equivalent_are_refused_naming_ours(outputs: Path, capsys, flags, message) -> None:
    assert run(["--outputs", str(outputs), "submit", "a", *flags, "--image-tag", "v1", "--dry-run"]) == 2
    assert capsys.readouterr().err.startswith(f"ack-jobs submit: {message}")


def test_dry_run_takes_the_offline_plans_outputs(tmp_path: Path, capsys) -> None:
    # No deployed stack: the dev stack's offline plan gives the job defaults, its pool's node included.
    from components.plan import command as plan

    assert plan.main(["--stack", "dev", "--json"]) == 0
    planned = tmp_path / "plan.json"
    planned.write_text(capsys.readouterr().out)
    manifest = dry_run(planned, "bert", "--nodes", "2")
    assert [(r["cpu"], r["memory"]) for r in resources(manifest)] == [("7", "27Gi"), ("7", "27Gi")]
    (container,) = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    assert container["image"] == "<registry host, known after deploy>/ml/trainer:v1.4.0"
    assert run(["--outputs", str(planned), "submit", "bert", "--nodes", "3", "--image-tag", "v1", "--dry-run"]) == 2
    assert "--nodes: the job's 3 pods need 3 GPU nodes but gpuPool.maxSize is 2" in capsys.readouterr().err
    # A real job needs a deployed stack's values.
    assert run(["--outputs", str(planned), "submit", "bert", "--image-tag", "v1.4.0"]) == 2
    assert capsys.readouterr().err.startswith("ack-jobs submit: --outputs: an offline plan's outputs hold placeholders")


def pod_specs(manifest: dict) -> list[dict]:
    """Every pod spec (or runtime patch of one) in a job manifest: the dicts that hold containers."""
    found = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            if "containers" in value:
                found.append(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(manifest)
    return found


@pytest.mark.parametrize("backend", ["v1", "v2"])
def test_data_mounts_another_claim_in_every_pod_as_arenas_does(outputs: Path, backend: str) -> None:
    manifest = dry_run(
        outputs, "bert", "--backend", backend, "--data", "imagenet:/mnt/imagenet", "-d", "scratch:/scratch/"
    )
    pods = pod_specs(manifest)
    assert pods
    for pod in pods:
        assert {"name": "volume-0", "persistentVolumeClaim": {"claimName": "imagenet"}} in pod["volumes"]
        assert {"name": "volume-1", "persistentVolumeClaim": {"claimName": "scratch"}} in pod["volumes"]
        for container in pod["containers"]:
            mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
            assert (mounts["volume-0"], mounts["volume-1"], mounts["data"]) == (
                "/mnt/imagenet",
                "/scratch/",
                "/mnt/data",
            )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("imagenet", "--data 'imagenet': give CLAIM:PATH, e.g. --data imagenet:/mnt/imagenet"),
        ("imagenet:mnt/imagenet", "--data: 'mnt/imagenet' is not a plain absolute path"),
        ("imagenet:/mnt/../etc", "--data: '/mnt/../etc' is not a plain absolute path"),
        ("imagenet:/mnt/data/imagenet", "--data: '/mnt/data/imagenet' would cover or sit inside /mnt/data"),
        ("imagenet:/mnt", "--data: '/mnt' would cover or sit inside /mnt/data, which the platform mounts"),
        ("imagenet:/dev/shm/x", "--data: '/dev/shm/x' would cover or sit inside /dev"),
        ("imagenet:/etc/mpi", "--data: '/etc/mpi' would cover or sit inside /etc/mpi"),
        ("imagenet:/home/mpiuser", "--data: '/home/mpiuser' would cover or sit inside /home/mpiuser/.ssh"),
        ("ImageNet:/mnt/imagenet", "--data: 'ImageNet' is not a valid Kubernetes name"),
    ],
)
def test_data_that_cannot_be_mounted_is_refused_naming_data(outputs: Path, capsys, data: str, message: str) -> None:
    assert run(["--outputs", str(outputs), "submit", "a", "--data", data, "--image-tag", "v1", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ack-jobs submit: {message}") and "Traceback" not in err


def test_data_paths_of_one_job_must_not_overlap(outputs: Path, capsys) -> None:
    argv = ["--outputs", str(outputs), "submit", "a", "--image-tag", "v1", "--dry-run"]
    assert run([*argv, "--data", "a:/srv/a", "--data", "b:/srv/a/b"]) == 2
    assert capsys.readouterr().err.startswith("ack-jobs submit: --data: /srv/a/b and /srv/a overlap")


def test_data_in_a_teams_namespace_mounts_only_the_claims_its_policy_admits(tmp_path: Path, capsys) -> None:
    # A team's admission policy admits pods that mount its own claims only (manifests/admission.py).
    team = tmp_path / "outputs.json"
    team.write_text(json.dumps({"namespace": NS, "jobDefaults": {**DEFAULTS, "claims": ["datasets", "checkpoints"]}}))
    argv = ["--outputs", str(team), "submit", "a", "--image-tag", "v1.4.0", "--dry-run"]
    assert run([*argv, "--data", "mine:/mnt/mine"]) == 2
    assert capsys.readouterr().err.startswith(
        "ack-jobs submit: --data: mine: the namespace admits pods that mount only its own claims (datasets, checkpoints)"
    )
    assert run([*argv, "--data", "checkpoints:/mnt/earlier"], out=lambda _: None) == 0


@pytest.mark.parametrize("backend", ["v1", "v2"])
def test_the_data_claim_mounted_again_stays_read_only(outputs: Path, backend: str) -> None:
    manifest = dry_run(outputs, "bert", "--backend", backend, "--data", f"{DEFAULTS['dataClaim']}:/mnt/more")
    pods = pod_specs(manifest)
    assert pods
    for pod in pods:
        claim = {"claimName": DEFAULTS["dataClaim"], "readOnly": True}
        assert {"name": "volume-0", "persistentVolumeClaim": claim} in pod["volumes"]


@pytest.mark.parametrize("backend", ["v1", "v2"])
def test_a_stack_jobs_read_only_volume_is_mounted_read_only(backend: str) -> None:
    spec = TrainingJobSpec.model_validate(
        {**SPEC, "name": "bert", "volumes": [{"claim": "imagenet", "mountPath": "/mnt/imagenet", "readOnly": True}]}
    )
    build = train_job if backend == "v2" else pytorch_job
    pods = pod_specs(build(spec, gpu_context(backend)))
    assert pods
    for pod in pods:
        assert {
            "name": "volume-0",
            "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True},
        } in pod["volumes"]
        for container in pod["containers"]:
            assert {"name": "volume-0", "mountPath": "/mnt/imagenet", "readOnly": True} in container["volumeMounts"]


def test_the_mpi_runtimes_ssh_key_path_is_kept_clear_of_job_volumes() -> None:
    from components.config.job_settings import PLATFORM_MOUNTS
    from components.manifests.jobs.mpi_runtime import SSH_AUTH_MOUNT

    assert SSH_AUTH_MOUNT in PLATFORM_MOUNTS


@pytest.fixture
def unsized_outputs(tmp_path: Path) -> Path:
    """The outputs of a stack whose GPU pool's types the platform's table does not list, without
    gpuPool.nodeCapacity: its jobDefaults say so with ``node: null``."""
    placement = {**GPU_PLACEMENT, "gpusPerNode": 2, "fabric": None, "maxNodes": 2, "node": None}
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"namespace": NS, "jobDefaults": {**DEFAULTS, "placement": placement}}))
    return path


@pytest.mark.parametrize(
    ("flags", "unset"),
    [([], "--cpu, --memory"), (["--cpu", "8"], "--memory"), (["--memory", "64Gi"], "--cpu")],
)
def test_submit_on_a_pool_nothing_describes_needs_cpu_and_memory(unsized_outputs: Path, capsys, flags, unset) -> None:
    argv = ["--outputs", str(unsized_outputs), "submit", "bert", *flags, "--image-tag", "v1.4.0", "--dry-run"]
    assert run(argv) == 2
    assert capsys.readouterr().err == (
        f"ack-jobs submit: {unset}: the stack does not say what a node of GPU pool 'gpu' offers (its instance "
        "types are not in the platform's table and it gives no gpuPool.nodeCapacity), so no default can follow "
        "one: give --cpu and --memory per pod, which nothing checks before the scheduler, or give "
        "gpuPool.nodeCapacity in the stack\n"
    )


def test_submit_on_a_pool_nothing_describes_takes_what_is_given(unsized_outputs: Path, capsys) -> None:
    requests = resources(dry_run(unsized_outputs, "bert", "--nodes", "2", "--cpu", "30", "--memory", "180Gi"))
    assert {(r["cpu"], r["memory"]) for r in requests} == {("30", "180Gi")}
    # The pool's other limits still hold.
    argv = ["--outputs", str(unsized_outputs), "submit", "bert", "--nodes", "3", "--cpu", "8", "--memory", "64Gi"]
    assert run([*argv, "--image-tag", "v1.4.0", "--dry-run"]) == 2
    assert "--nodes: the job's 3 pods need 3 GPU nodes but gpuPool.maxSize is 2" in capsys.readouterr().err


def test_submit_on_a_planned_pool_of_a_type_outside_the_table(tmp_path: Path, capsys) -> None:
    # The offline plan of a stack whose pool is of a family the table leaves out exports node: null.
    from components.plan import command as plan

    stack = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    stack["config"]["ack-training-platform:gpuPool"].update(instanceTypes=["ecs.gu8tf.8xlarge"], gpusPerNode=2)
    stack["config"]["ack-training-platform:training"]["gpuQuota"] = 2
    stack_file = tmp_path / "Pulumi.unsized.yaml"
    stack_file.write_text(yaml.safe_dump(stack))
    assert plan.main(["--stack-file", str(stack_file), "--json"]) == 0
    planned = tmp_path / "plan.json"
    planned.write_text(capsys.readouterr().out)
    assert run(["--outputs", str(planned), "submit", "bert", "--image-tag", "v1.4.0", "--dry-run"]) == 2
    assert capsys.readouterr().err.startswith("ack-jobs submit: --cpu, --memory: the stack does not say what a node")

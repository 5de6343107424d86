"""The component package other Pulumi languages use: its input types are the specs', its
schema is what Pulumi's analyzer infers, and a YAML program runs through its provider."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import typing

import grpc
import pytest
import sdk_examples
import yaml
import yaml_program
from conftest import ROOT, stack_config
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc
from pydantic import BaseModel

from components.config.base import model_of
from components.package import codegen as package_codegen
from components.package import provider as package
from components.plan.runner import run_program

YAML_STACK = ROOT / "examples" / "yaml-stack"
CONFIG = {
    "clusterId": "c-0123456789abcdef",
    "vswitchIds": ["vsw-0123456789abcdef"],
    "kubeconfig": "apiVersion: v1\nkind: Config\n",
}


def yaml_stack() -> dict:
    return yaml.safe_load((YAML_STACK / "Pulumi.yaml").read_text())


def test_the_input_types_are_generated_from_the_specs() -> None:
    assert package_codegen.TYPES_MODULE.read_text() == package_codegen.input_types_source(), (
        "components/package/input_types.py is stale: run python -m components.package.codegen --write"
    )


def spec_models(model: type[BaseModel], seen: dict[str, type[BaseModel]]) -> dict[str, type[BaseModel]]:
    """``model`` and the models its fields hold, except inside a value of several shapes
    (text or a model), which the package takes as any JSON value."""
    seen[model.__name__] = model
    for field in model.model_fields.values():
        values = typing.get_args(field.annotation) if typing.get_origin(field.annotation) is dict else ()
        shapes = [a for a in typing.get_args(values[-1] if values else field.annotation) if a is not type(None)]
        nested = model_of(field.annotation)
        if nested is not None and nested.__name__ not in seen and len(shapes) <= 1:
            spec_models(nested, seen)
    return seen


def test_every_spec_field_is_an_input_of_the_package() -> None:
    schema = package.schema()
    models: dict[str, type[BaseModel]] = {}
    for spec in package_codegen.SPECS:
        spec_models(spec, models)
    for name, model in models.items():
        kind = schema["types"][f"{package.PACKAGE}:index:{name}"]
        assert set(kind["properties"]) == {field.alias for field in model.model_fields.values()}, name
        required = {f.alias for f in model.model_fields.values() if f.is_required()}
        assert set(kind.get("required", [])) == required, name


def test_a_literal_is_an_enum_of_its_values() -> None:
    schema = package.schema()
    strategy = schema["types"][f"{package.PACKAGE}:index:GpuPoolSpotStrategy"]
    assert [member["value"] for member in strategy["enum"]] == ["NoSpot", "SpotWithPriceLimit", "SpotAsPriceGo"]


def test_the_yaml_example_matches_the_schema() -> None:
    yaml_program.check_program(yaml_stack(), CONFIG)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p["variables"]["a10"].update(gpusPerNode="1"), "pool.pool.gpusPerNode: '1' is not of type integer"),
        (
            lambda p: p["variables"]["a10"].update(spotStrategy="Spot"),
            "pool.pool.spotStrategy: 'Spot' is not one of ['NoSpot', 'SpotWithPriceLimit', 'SpotAsPriceGo']",
        ),
        (lambda p: p["resources"]["team"]["properties"].pop("namespace"), "team.namespace: required property"),
        (lambda p: p["resources"]["team"]["properties"]["jobs"][0].update(gpus=1), "team.jobs[0].gpus: no such"),
    ],
)
def test_the_schema_check_catches_a_wrong_program(change, message) -> None:
    program = copy.deepcopy(yaml_stack())
    change(program)
    with pytest.raises(yaml_program.SchemaMismatch, match=message.replace("[", r"\[").replace("]", r"\]")):
        yaml_program.check_program(program, CONFIG)


def run_yaml(tmp_path, monkeypatch, program: dict):
    source = tmp_path / "Pulumi.yaml"
    source.write_text(yaml.safe_dump(program))
    python = tmp_path / "python"
    python.mkdir()
    (python / "Pulumi.yaml").write_text("name: team-training-yaml\nruntime: python\n")
    (python / "__main__.py").write_text("import yaml_program\n\nyaml_program.run()\n")
    monkeypatch.setenv(yaml_program.PROGRAM_ENV, str(source))
    config = {
        "team-training-yaml:clusterId": CONFIG["clusterId"],
        "team-training-yaml:vswitchIds": CONFIG["vswitchIds"],
        "team-training-yaml:kubeconfig": {"secure": "v1:AAAA"},
    }
    return run_program(config, stack="dev", project_dir=python)


def test_the_yaml_example_builds_the_team_through_the_provider(tmp_path, monkeypatch) -> None:
    plan = run_yaml(tmp_path, monkeypatch, yaml_stack())
    pool = plan.one("alicloud:cs/nodePool:NodePool").inputs
    assert (pool["clusterId"], pool["vswitchIds"], pool["spotStrategy"]) == (
        "c-0123456789abcdef",
        ["vsw-0123456789abcdef"],
        "SpotAsPriceGo",
    )
    job = plan.one("kubernetes:kubeflow.org/v1:PyTorchJob").inputs
    pod = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert pod["nodeSelector"] == {"ack-training-platform/pool": "a10"}
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert pod["containers"][0]["resources"]["limits"]["memory"] == "24Gi"
    assert job["metadata"]["namespace"] == "team-a"
    claims = [c for c in plan.of_type("kubernetes:core/v1:PersistentVolumeClaim") if "SharedVolumes" in c.urn]
    assert claims and all(claim.retain_on_delete for claim in claims)
    assert plan.one("pulumi:providers:kubernetes").inputs["kubeconfig"] == "[secret]"
    quota = plan.one("kubernetes:core/v1:ResourceQuota").inputs
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "4"
    # The dataset: copied into the team's data claim, read from OSS as the named role.
    imported = plan.one("kubernetes:batch/v1:Job").inputs
    assert (imported["metadata"]["name"], imported["metadata"]["namespace"]) == ("import-instructions", "team-a")
    claim_names = {
        volume["persistentVolumeClaim"]["claimName"] for volume in imported["spec"]["template"]["spec"]["volumes"]
    }
    # The team's data claim, written; the bucket's own read-only claim, read.
    assert claim_names == {"training-data", "import-instructions-source"}
    assert "training-data" in {claim.inputs["metadata"]["name"] for claim in claims}
    source = plan.one("kubernetes:core/v1:PersistentVolume").inputs["spec"]["csi"]["volumeAttributes"]
    assert (source["bucket"], source["url"], source["roleName"]) == (
        "team-a-corpus",
        "oss-cn-hangzhou-internal.aliyuncs.com",
        "team-a-dataset-reader",
    )


def test_a_bad_spec_value_names_its_argument(tmp_path, monkeypatch) -> None:
    program = copy.deepcopy(yaml_stack())
    program["resources"]["team"]["properties"]["jobs"][0]["memory"] = "24"
    with pytest.raises(Exception, match=r"jobs\[0\]\.memory: '24' has no unit, so it means 24 bytes"):
        run_yaml(tmp_path, monkeypatch, program)


def _on_pool(instance_type: str, **job: str) -> dict:
    """The YAML example with its pool (the GpuNodePool's and TeamTraining's) of ``instance_type``
    and its job's ``cpu`` and ``memory`` as given, the others left to the defaults."""
    program = copy.deepcopy(yaml_stack())
    program["variables"]["a10"]["instanceTypes"] = [instance_type]
    finetune = program["resources"]["team"]["properties"]["jobs"][0]
    for key in ("cpu", "memory"):
        finetune.pop(key)
    finetune.update(job)
    return program


@pytest.mark.parametrize(
    ("program", "message"),
    [
        (
            # No figures for gu8tf and no nodeCapacity: no default can follow its nodes.
            _on_pool("ecs.gu8tf.8xlarge", memory="24Gi"),
            "jobs[0].cpu: the GPU job leaves cpu to the default, and no default can follow a node of pool 'a10', "
            "whose instance types the platform's table does not list",
        ),
        (
            _on_pool("ecs.gn7i-c8g1.2xlarge", cpu="64", memory="24Gi"),
            "jobs[0].cpu: cpu 64 per pod does not fit a node of pool 'a10'",
        ),
    ],
)
def test_team_trainings_jobs_are_checked_against_its_pool(tmp_path, monkeypatch, program, message) -> None:
    with pytest.raises(Exception, match=re.escape(message)) as raised:
        run_yaml(tmp_path, monkeypatch, program)
    assert str(raised.value).rstrip().endswith("(the pool input)")


def test_team_trainings_job_on_a_pool_outside_the_table_runs_with_its_own_sizes(tmp_path, monkeypatch) -> None:
    plan = run_yaml(tmp_path, monkeypatch, _on_pool("ecs.gu8tf.8xlarge", cpu="6", memory="24Gi"))
    job = plan.one("kubernetes:kubeflow.org/v1:PyTorchJob").inputs
    (container,) = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "1"}


def _second_dataset(team: dict) -> None:
    first = {key: value for key, value in team["datasets"][0].items() if key != "ossRoleName"}
    team["datasets"].append({**first, "source": "https://data.example.com/other/"})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_second_dataset, "datasets[1].name: 'instructions' is used twice"),
        (lambda team: team["jobs"].append(dict(team["jobs"][0])), "jobs[1].name: 'finetune' is used twice"),
        (lambda team: team["datasets"][0].update(team="llm"), "datasets[0].team: a stack file's key"),
        (lambda team: team.pop("region"), "datasets[0].ossEndpoint: an oss:// source needs its endpoint, or region"),
        (lambda team: team["datasets"][0].pop("ossRoleName"), "datasets[0].ossRoleName: an oss:// source is read as"),
        (
            lambda team: team["datasets"][0].update(image=None, imageTag="v1.4.2"),
            "datasets[0].imageTag: imageTag needs a registry",
        ),
    ],
)
def test_datasets_that_cannot_work_are_refused_naming_the_argument(tmp_path, monkeypatch, change, message) -> None:
    program = copy.deepcopy(yaml_stack())
    change(program["resources"]["team"]["properties"])
    with pytest.raises(Exception, match=re.escape(message)):
        run_yaml(tmp_path, monkeypatch, program)


def test_the_schema_is_valid_json_for_pulumi_package_add() -> None:
    schema = package.schema()
    assert json.loads(json.dumps(schema)) == schema
    assert set(schema["resources"]) == {f"{package.PACKAGE}:index:{c.__name__}" for c in package.COMPONENTS}


def test_the_plugin_serves_the_schema_over_grpc() -> None:
    """What ``pulumi package add`` does first: start ``package/`` as a plugin and ask for its schema."""
    # The engine address is only dialled for logs; nothing listens on it here.
    plugin = subprocess.Popen(
        [sys.executable, str(ROOT / "package" / "__main__.py"), "127.0.0.1:9"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(plugin.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            answer = provider_pb2_grpc.ResourceProviderStub(channel).GetSchema(
                provider_pb2.GetSchemaRequest(version=0), timeout=60
            )
        assert json.loads(answer.schema) == package.schema()
    finally:
        plugin.kill()
        plugin.wait()


YAML_PLATFORM = ROOT / "examples" / "yaml-platform"


def run_yaml_program(tmp_path, monkeypatch, program: dict, project: str, config: dict):
    """``program`` through the package provider under the mock engine, as project ``project``."""
    source = tmp_path / "Pulumi.yaml"
    source.write_text(yaml.safe_dump(program))
    python = tmp_path / "python"
    python.mkdir()
    (python / "Pulumi.yaml").write_text(f"name: {project}\nruntime: python\n")
    (python / "__main__.py").write_text("import yaml_program\n\nyaml_program.run()\n")
    monkeypatch.setenv(yaml_program.PROGRAM_ENV, str(source))
    return run_program(config, stack="local", project_dir=python)


def test_the_yaml_platform_is_the_local_stacks_platform(run_stack, fixture_pins, tmp_path, monkeypatch) -> None:
    program = yaml.safe_load((YAML_PLATFORM / "Pulumi.yaml").read_text())
    yaml_program.check_program(program, {})
    local = run_stack(stack_config("local"), "local")
    plan = run_yaml_program(tmp_path, monkeypatch, program, "training-platform-yaml", {})
    assert plan.kubernetes_objects() == local.kubernetes_objects()
    assert len(plan.kubernetes_objects()) > 10
    kinds = {r.type for r in plan.resources if r.custom}
    assert kinds == {r.type for r in local.resources if r.custom}


def test_the_yaml_platform_sets_what_the_local_stack_sets() -> None:
    program = yaml.safe_load((YAML_PLATFORM / "Pulumi.yaml").read_text())
    keys = {key.removeprefix("ack-training-platform:"): value for key, value in stack_config("local").items()}
    assert program["resources"]["platform"]["properties"]["platform"] == keys


def test_a_bad_platform_value_names_its_argument(tmp_path, monkeypatch) -> None:
    program = yaml.safe_load((YAML_PLATFORM / "Pulumi.yaml").read_text())
    program["resources"]["platform"]["properties"]["platform"]["jobs"][0]["memory"] = "4"
    with pytest.raises(Exception, match=r"platform\.jobs\[0\]\.memory: '4' has no unit"):
        run_yaml_program(tmp_path, monkeypatch, program, "training-platform-yaml", {})


def test_team_training_takes_a_kubernetes_provider_of_the_program(tmp_path, monkeypatch) -> None:
    plan = run_yaml(tmp_path, monkeypatch, yaml_stack())
    (provider,) = plan.of_type("pulumi:providers:kubernetes")
    assert provider.name == "cluster" and provider.parent.endswith("pulumi:pulumi:Stack::team-training-yaml-dev")
    job = plan.one("kubernetes:kubeflow.org/v1:PyTorchJob")
    assert job.provider == provider.urn


def test_a_kubeconfig_still_makes_the_teams_own_provider_under_its_old_name(tmp_path, monkeypatch) -> None:
    program = copy.deepcopy(yaml_stack())
    del program["resources"]["cluster"]
    team = program["resources"]["team"]["properties"]
    del team["provider"]
    team["kubeconfig"] = "${kubeconfig}"
    plan = run_yaml(tmp_path, monkeypatch, program)
    (provider,) = plan.of_type("pulumi:providers:kubernetes")
    assert provider.urn.endswith("ack-training-platform:index:TeamTraining$pulumi:providers:kubernetes::team-cluster")
    assert provider.inputs["kubeconfig"] == "[secret]"


@pytest.mark.parametrize("both", [True, False])
def test_team_training_needs_one_provider(tmp_path, monkeypatch, both: bool) -> None:
    program = copy.deepcopy(yaml_stack())
    team = program["resources"]["team"]["properties"]
    if both:
        team["kubeconfig"] = "${kubeconfig}"
    else:
        del team["provider"]
    with pytest.raises(Exception, match="provider: give the cluster's Kubernetes provider"):
        run_yaml(tmp_path, monkeypatch, program)


def _descriptions(value) -> list[str]:
    if isinstance(value, dict):
        found = [value["description"]] if isinstance(value.get("description"), str) else []
        return found + [d for key, item in value.items() if key != "description" for d in _descriptions(item)]
    return [d for item in value for d in _descriptions(item)] if isinstance(value, list) else []


def test_descriptions_are_markdown_without_paths_of_this_repository() -> None:
    descriptions = _descriptions(package.schema())
    assert len(descriptions) > 200
    for text in descriptions:
        assert "``" not in text and not re.search(r":\w+:`", text), text
        assert not re.search(r"\b(?:docs|trainer|stacks|components|tests)/", text), text


def test_the_schema_carries_the_specs_defaults() -> None:
    types = package.schema()["types"]
    job = types[f"{package.PACKAGE}:index:TrainingJobSpec"]["properties"]
    assert (job["nodes"]["default"], job["restartPolicy"].get("default")) == (1, None)
    written = 0
    for spec in package_codegen.SPECS:
        for name, model in spec_models(spec, {}).items():
            properties = types[f"{package.PACKAGE}:index:{name}"]["properties"]
            for field_name, field in model.model_fields.items():
                prop = properties[field.alias or field_name]
                if "default" in prop:
                    assert prop["default"] == field.default, f"{name}.{field_name}"
                    written += 1
    assert written > 50


def _with_outputs(program: dict) -> dict:
    """The team's job with its image and a token read from secret config: outputs, as a
    repository's URL or a secret of another resource would be."""
    program = copy.deepcopy(program)
    program["config"]["trainingImage"] = {"type": "string", "secret": True}
    program["config"]["hfToken"] = {"type": "string", "secret": True}
    job = program["resources"]["team"]["properties"]["jobs"][0]
    job["image"] = "${trainingImage}"
    job["env"] = {"HF_TOKEN": "${hfToken}", "STEPS_LOG": "10"}
    return program


def _team_config(**extra: str) -> dict:
    return {
        "team-training-yaml:clusterId": CONFIG["clusterId"],
        "team-training-yaml:vswitchIds": CONFIG["vswitchIds"],
        "team-training-yaml:kubeconfig": {"secure": "v1:AAAA"},
        **{f"team-training-yaml:{key}": {"secure": value} for key, value in extra.items()},
    }


def test_a_jobs_image_and_env_may_be_outputs_of_other_resources(tmp_path, monkeypatch) -> None:
    program = _with_outputs(yaml_stack())
    yaml_program.check_program(program, {**CONFIG, "trainingImage": "r/x:1", "hfToken": "t"})
    plan = run_yaml_program(
        tmp_path, monkeypatch, program, "team-training-yaml", _team_config(trainingImage="v1:A", hfToken="v1:B")
    )
    job = plan.one("kubernetes:kubeflow.org/v1:PyTorchJob")
    container = job.inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    # A secret in the env makes the whole env secret, as it makes the image.
    assert container["image"] == "[secret]" and {e["name"] for e in container["env"]} == {"[secret]"}


PLAIN_OUTPUTS = """
import pulumi
import yaml
from components.package.provider import PackageProvider

team = yaml.safe_load(open({program!r}))["resources"]["team"]["properties"]
team["provider"] = None
team["kubeconfig"] = "apiVersion: v1"
team["pool"] = yaml.safe_load(open({program!r}))["variables"]["a10"]
job = team["jobs"][0]
job["image"] = pulumi.Output.from_input("registry.example.com/team-a/trainer").apply(lambda repo: repo + ":v2")
job["env"] = {{"DATA_URL": pulumi.Output.from_input("https://data.example.com/v3")}}
built = PackageProvider().construct("team", "ack-training-platform:index:TeamTraining", team, pulumi.ResourceOptions())
pulumi.export("team", built.state)
"""


def test_outputs_in_a_jobs_image_and_env_reach_the_applied_job(tmp_path) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: team-training-py\nruntime: python\n")
    (tmp_path / "__main__.py").write_text(PLAIN_OUTPUTS.format(program=str(YAML_STACK / "Pulumi.yaml")))
    plan = run_program({}, stack="dev", project_dir=tmp_path)
    job = plan.one("kubernetes:kubeflow.org/v1:PyTorchJob").inputs
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/team-a/trainer:v2"
    assert {"name": "DATA_URL", "value": "https://data.example.com/v3"} in container["env"]
    assert "known after deploy>" not in json.dumps(job) and "stand-in.invalid" not in json.dumps(job)
    team = plan.outputs["team"]
    assert team["jobCommands"]["finetune"]["status"] == "kubectl -n team-a get pytorchjob finetune -w"
    assert team["jobDefaults"]["namespace"] == "team-a" and team["jobs"] == ["finetune"]


def test_an_output_where_a_value_must_be_known_is_refused_naming_it(tmp_path, monkeypatch) -> None:
    program = _with_outputs(yaml_stack())
    program["resources"]["team"]["properties"]["jobs"][0]["name"] = "${hfToken}"
    with pytest.raises(Exception, match=re.escape("jobs[0].name: must be known when the program runs")):
        run_yaml_program(
            tmp_path, monkeypatch, program, "team-training-yaml", _team_config(trainingImage="v1:A", hfToken="v1:B")
        )


def test_every_nested_input_takes_an_output() -> None:
    plain = []

    def walk(value, path: str) -> None:
        if isinstance(value, dict):
            if value.get("plain"):
                plain.append(path)
            for key, item in value.items():
                walk(item, f"{path}/{key}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]")

    walk(package.schema(), "")
    assert plain == []


TS_EXAMPLE = ROOT / "examples" / "typescript-team" / "index.ts"
GO_EXAMPLE = ROOT / "examples" / "go-team" / "main.go"
TS_PLATFORM = ROOT / "examples" / "typescript-platform" / "index.ts"


def _written(node: tuple) -> object:
    """A value as the example's source writes it: literals, objects and arrays of them; an
    expression (a config read, a variable) as its kind."""
    kind, _type, value = node
    if kind == "object":
        return {key: _written(item) for key, item in value.items()}
    if kind == "array":
        return [_written(item) for item in value]
    return value if kind == "literal" else kind


def test_the_typescript_platform_is_the_dev_stack_and_matches_the_schema() -> None:
    source = TS_PLATFORM.read_text()
    assert sdk_examples.check_source(source, "typescript", package.schema()) == ["TrainingPlatform"]
    [(_, (_shape, _typed, given))] = sdk_examples.uses(source, "typescript")
    prefix = "ack-training-platform:"
    dev = {key.removeprefix(prefix): value for key, value in stack_config("dev").items() if key.startswith(prefix)}
    assert _written(given["platform"]) == dev
    assert "registryPassword" in given


@pytest.mark.parametrize(("path", "language"), [(TS_EXAMPLE, "typescript"), (GO_EXAMPLE, "go")])
def test_the_typescript_and_go_examples_match_the_schema(path, language) -> None:
    assert sdk_examples.check_source(path.read_text(), language, package.schema()) == ["TeamTraining"]


@pytest.mark.parametrize(
    ("path", "language", "old", "new", "message"),
    [
        (TS_EXAMPLE, "typescript", "gpuQuota: 4", "gpuQuotas: 4", "TeamTraining.namespace.gpuQuotas: no such property"),
        (
            TS_EXAMPLE,
            "typescript",
            "gpusPerNode: 1",
            'gpusPerNode: "1"',
            "pool.gpusPerNode: '1' is not of type integer",
        ),
        (TS_EXAMPLE, "typescript", '"SpotAsPriceGo"', '"Spot"', "pool.spotStrategy: 'Spot' is not one of"),
        (TS_EXAMPLE, "typescript", "TeamTraining(", "TeamTrainings(", "the package has no resource"),
        (
            GO_EXAMPLE,
            "go",
            "GpuQuota:  pulumi.Int(4)",
            'GpuQuota: pulumi.String("4")',
            "Namespace.GpuQuota: '4' is not",
        ),
        (
            GO_EXAMPLE,
            "go",
            "platform.StorageSpecArgs",
            "platform.GpuPoolSpecArgs",
            "Storage: platform.StorageSpecArgs is",
        ),
        (
            GO_EXAMPLE,
            "go",
            "platform.TrainerArgsParallelFSDP",
            "platform.TrainerArgsParallelZero",
            "Parallel: 'platform.Trainer",
        ),
        # The Go generator names a constant after the member's name, not its value.
        (
            GO_EXAMPLE,
            "go",
            "platform.TrainerArgsParallelFSDP",
            "platform.TrainerArgsParallelFsdp",
            "Parallel: 'platform.Trainer",
        ),
        (GO_EXAMPLE, "go", 'Name:   pulumi.String("finetune"),', "", "Jobs[0].name: required property is missing"),
    ],
)
def test_the_example_check_catches_a_wrong_program(path, language, old, new, message) -> None:
    source = path.read_text()
    assert old in source
    with pytest.raises(yaml_program.SchemaMismatch, match=re.escape(message)):
        sdk_examples.check_source(source.replace(old, new, 1), language, package.schema())


def test_go_enum_constants_are_named_as_the_go_generator_names_them() -> None:
    types = package.schema()["types"]
    constants = {
        name.rsplit(":", 1)[-1]: [sdk_examples.go_enum_constant(name.rsplit(":", 1)[-1], m) for m in kind["enum"]]
        for name, kind in types.items()
        if "enum" in kind
    }
    assert constants["TrainerArgsParallel"] == [
        "TrainerArgsParallelDDP",
        "TrainerArgsParallelFSDP",
        "TrainerArgsParallelHSDP",
        "TrainerArgsParallelAUTO",
    ]
    assert constants["GpuPoolSpotStrategy"][2] == "GpuPoolSpotStrategy_SPOT_AS_PRICE_GO"
    assert constants["TrainerArgsLlamaSize"][1] == "TrainerArgsLlamaSize_SIZE_1B"
    assert sdk_examples.go_enum_constant("T", {"value": "8.3"}) == "T_8_3"
    assert sdk_examples.go_enum_constant("T", {"value": "a-b c"}) == "T_A_B_c"


def test_a_kubeconfig_and_a_registry_password_are_secret_inputs() -> None:
    resources = package.schema()["resources"]
    secret = {
        (token.rsplit(":", 1)[-1], name)
        for token, resource in resources.items()
        for name, prop in resource["inputProperties"].items()
        if prop.get("secret")
    }
    assert secret == {("TeamTraining", "kubeconfig"), ("TrainingPlatform", "registryPassword")}
    assert "give provider instead" in resources[f"{package.PACKAGE}:index:TeamTraining"]["inputProperties"][
        "kubeconfig"
    ].get("deprecationMessage", "")

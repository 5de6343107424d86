"""The offline plan of a team's own program that uses the components: it runs as the
project its Pulumi.yaml names, with its own stack file's config."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT

from components.plan import command as plan_module

# The program imports the components as installed, under their namespace.
pytestmark = pytest.mark.usefixtures("with_installed_package")

OWN_STACK = ROOT / "examples" / "own-stack"
OWN_STACK_FILE = OWN_STACK / "Pulumi.example.yaml"


def plan_json(capsys, *argv: str) -> dict:
    assert plan_module.main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def inputs_of(plan: dict, type_: str) -> list[dict]:
    return [r["inputs"] for r in plan["resources"] if r["type"] == type_]


def test_the_program_reads_its_own_projects_config(capsys) -> None:
    plan = plan_json(capsys, "--program", str(OWN_STACK), "--stack-file", str(OWN_STACK_FILE))
    (pool,) = inputs_of(plan, "alicloud:cs/nodePool:NodePool")
    assert pool["clusterId"] == "c-0123456789abcdef"
    assert pool["vswitchIds"] == ["vsw-0123456789abcdef"]
    (provider,) = inputs_of(plan, "pulumi:providers:kubernetes")
    assert provider["kubeconfig"] == "[secret]"
    assert plan["stack"] == "example"


def test_the_stack_name_picks_the_programs_stack_file(capsys, tmp_path: Path) -> None:
    program = tmp_path / "own-stack"
    shutil.copytree(OWN_STACK, program)
    (program / "Pulumi.example.yaml").rename(program / "Pulumi.staging.yaml")
    plan = plan_json(capsys, "--program", str(program), "--stack", "staging")
    assert plan["stack"] == "staging"
    assert inputs_of(plan, "alicloud:cs/nodePool:NodePool")[0]["clusterId"] == "c-0123456789abcdef"


def test_the_tree_and_manifests_are_the_platform_plans(capsys, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert plan_module.main(["--program", str(OWN_STACK), "--stack-file", str(OWN_STACK_FILE), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "stack example: " in printed
    assert "  kubernetes:kubeflow.org/v1:PyTorchJob  finetune" in printed
    assert any(path.name.endswith("-pytorchjob-finetune.yaml") for path in out.iterdir())


def test_a_directory_without_a_program_is_named(capsys, tmp_path: Path) -> None:
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    assert plan_module.main(["--program", str(tmp_path), "--stack", "dev"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {tmp_path}: a Pulumi Python program needs Pulumi.yaml and __main__.py there"
    )


def test_a_component_refusal_is_one_line(capsys, tmp_path: Path) -> None:
    program = tmp_path / "own-stack"
    shutil.copytree(OWN_STACK, program)
    main = program / "__main__.py"
    main.write_text(
        main.read_text().replace('cluster_id = config.get("clusterId")', 'cluster_id = config.require("nope")')
    )
    assert plan_module.main(["--program", str(program), "--stack-file", str(OWN_STACK_FILE)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Missing required configuration variable 'team-training:nope'")

"""Existing stacks keep their resources: every URN the program's earlier shape gave a stack is
still produced, or is taken over through an alias as the engine resolves them.

``tests/golden/urns/<stack>.txt`` holds the URNs the local, dev and prod stacks had when each
component was a child of the stack itself (recorded with the engine's URN rules, before the
components became children of one ``TrainingPlatform``); ``<stack>.outputs.json`` the stack
outputs then.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, stack_config
from engine_aliases import DuplicateAlias, aliases_of, match

from components.plan.runner import run_program

GOLDEN = ROOT / "tests" / "golden" / "urns"


def _program(tmp_path: Path, body: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "Pulumi.yaml").write_text("name: demo\nruntime: python\n")
    (tmp_path / "__main__.py").write_text(
        "import pulumi\nfrom pulumi import Alias, ComponentResource, ResourceOptions, ROOT_STACK_RESOURCE\n"
        "class C(ComponentResource):\n"
        "    def __init__(self, t, name, opts=None):\n"
        "        super().__init__(f'demo:index:{t}', name, None, opts)\n" + body
    )
    return tmp_path


OLD = "a = C('A', 'a')\nb = C('B', 'a-b', ResourceOptions(parent=a))\nc = C('Cc', 'c', ResourceOptions(parent=b))\n"


def _urns(tmp_path: Path, body: str) -> set[str]:
    return {r.urn for r in run_program({}, stack="s", project_dir=_program(tmp_path, body)).resources}


def test_the_urns_recorded_are_the_engines_whole_type_chain_without_the_stack(tmp_path) -> None:
    # deployment.go generateURN: "don't use the root stack type; otherwise, use the full qualified type"
    assert _urns(tmp_path, OLD) == {
        "urn:pulumi:s::demo::demo:index:A::a",
        "urn:pulumi:s::demo::demo:index:A$demo:index:B::a-b",
        "urn:pulumi:s::demo::demo:index:A$demo:index:B$demo:index:Cc::c",
    }


def test_a_moved_component_takes_its_children_along_at_any_depth(tmp_path) -> None:
    olds = _urns(tmp_path / "old", OLD)
    moved = (
        "p = C('P', 'p')\n"
        "a = C('A', 'a', ResourceOptions(parent=p, aliases=[Alias(parent=ROOT_STACK_RESOURCE)]))\n"
        "b = C('B', 'a-b', ResourceOptions(parent=a))\nc = C('Cc', 'c', ResourceOptions(parent=b))\n"
    )
    plan = run_program({}, stack="s", project_dir=_program(tmp_path / "new", moved))
    assert set(match(olds, plan)) == olds
    assert not olds & {r.urn for r in plan.resources}


def test_without_an_alias_nothing_is_taken_over(tmp_path) -> None:
    olds = _urns(tmp_path / "old", OLD)
    moved = (
        "p = C('P', 'p')\na = C('A', 'a', ResourceOptions(parent=p))\n"
        "b = C('B', 'a-b', ResourceOptions(parent=a))\nc = C('Cc', 'c', ResourceOptions(parent=b))\n"
    )
    assert match(olds, run_program({}, stack="s", project_dir=_program(tmp_path / "new", moved))) == {}


def test_a_child_named_after_a_renamed_parent_follows_its_old_name(tmp_path) -> None:
    # inheritedChildAlias: a child named "{parent}-..." gets the parent's old name as prefix.
    olds = _urns(tmp_path / "old", OLD)
    renamed = (
        "a = C('A', 'a2', ResourceOptions(aliases=[Alias(name='a')]))\n"
        "b = C('B', 'a2-b', ResourceOptions(parent=a))\nc = C('Cc', 'c', ResourceOptions(parent=b))\n"
    )
    plan = run_program({}, stack="s", project_dir=_program(tmp_path / "new", renamed))
    assert set(match(olds, plan)) == olds
    b = next(r for r in plan.resources if r.name == "a2-b")
    assert "urn:pulumi:s::demo::demo:index:A$demo:index:B::a-b" in aliases_of(
        b, {b.parent: "urn:pulumi:s::demo::demo:index:A::a"}
    )


def test_two_resources_claiming_one_old_one_are_refused(tmp_path) -> None:
    olds = _urns(tmp_path / "old", "a = C('A', 'a')\n")
    twice = (
        "p = C('P', 'p')\na = C('A', 'a', ResourceOptions(parent=p, aliases=[Alias(parent=ROOT_STACK_RESOURCE)]))\n"
        "q = C('Q', 'q')\nx = C('A', 'a', ResourceOptions(parent=q, aliases=[Alias(parent=ROOT_STACK_RESOURCE)]))\n"
    )
    with pytest.raises(DuplicateAlias):
        match(olds, run_program({}, stack="s", project_dir=_program(tmp_path / "new", twice)))


def recorded_config(stack: str) -> dict:
    """The stack's configuration as it was when its URNs were recorded: prod has since had its
    mirror filled during ``up``, which adds the copies and a registry user (so a pull secret
    among the outputs) and keeps every resource it had."""
    config = stack_config(stack)
    if stack == "prod":
        del config["ack-training-platform:mirrorFill"]
        del config["ack-training-platform:registry"]["username"]
    return config


@pytest.mark.parametrize("stack", ["local", "dev", "prod"])
def test_an_existing_stack_keeps_every_resource_and_output(run_stack, fixture_pins, stack: str) -> None:
    olds = set((GOLDEN / f"{stack}.txt").read_text().split())
    plan = run_stack(recorded_config(stack), stack)
    taken = match(olds, plan)
    assert sorted(olds - set(taken)) == []
    assert plan.outputs == json.loads((GOLDEN / f"{stack}.outputs.json").read_text())


def test_a_stack_from_before_the_operator_dropped_its_kustomize_directory_keeps_the_operator(
    run_stack, fixture_pins
) -> None:
    # Then the operator's objects were children of a kubernetes:kustomize:Directory under the
    # operator, itself the stack's child; the Directory goes (a component), its objects stay.
    operator = "ack-training-platform:components:TrainingOperator$"
    olds = {
        urn.replace(operator, operator + "kubernetes:kustomize:Directory$") if operator + "kubernetes:" in urn else urn
        for urn in (GOLDEN / "local.txt").read_text().split()
    }
    assert any("kustomize:Directory$kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition" in u for u in olds)
    taken = match(olds, run_stack(stack_config("local"), "local"))
    assert sorted(olds - set(taken)) == []


def test_prod_with_its_mirror_filled_during_up_keeps_every_resource(run_stack, fixture_pins) -> None:
    olds = set((GOLDEN / "prod.txt").read_text().split())
    taken = match(olds, run_stack(stack_config("prod"), "prod"))
    assert sorted(olds - set(taken)) == []

"""A second ``pulumi up`` changes nothing: each cloud resource answered with what the
provider's read puts in state (:mod:`fixtures.readback`), and every field the cloud fills
either set by the program to the same value or left to the cloud with ``ignore_changes``;
and the options that destroy and upgrades rely on."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, cfg, stack_config
from fixtures.readback import READ_BACK, ReadBack
from test_platform import bought_instance

from components.plan.command import with_unset_credentials
from components.plan.records import HELM_RELEASE, Plan
from components.plan.runner import run_program

ELEMENTS = "[*]"
POOL = "alicloud:cs/nodePool:NodePool"


def at(value: Any, path: str) -> list[Any]:
    """The values at an engine path (``a.b``, ``a[*].b``); a missing one reads as ``None``."""
    found = [value]
    for part in re.split(r"\.(?![^\[]*\])", path):
        name, each = (part[: -len(ELEMENTS)], True) if part.endswith(ELEMENTS) else (part, False)
        found = [v.get(name) if isinstance(v, dict) else None for v in found]
        if each:
            found = [item for v in found if isinstance(v, list) for item in v]
    return found


def filled(read_back: ReadBack) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The state after a read: the inputs, with each field the cloud fills where the
    program sent none (inside a block only where the program sent the block)."""

    def read(inputs: dict[str, Any]) -> dict[str, Any]:
        state = copy.deepcopy(inputs)
        for path, value in read_back.fills.items():
            *parents, leaf = path.rsplit(".", 1) if "." in path else [path]
            holders = at(state, parents[0]) if parents else [state]
            for holder in holders:
                if isinstance(holder, dict):
                    holder.setdefault(leaf, value)
        return state

    return read


def diskless_pool() -> dict:
    """dev with no data disk on its GPU pool."""
    config = stack_config("dev")
    config[cfg("gpuPool")]["dataDiskGib"] = 0
    return config


def fixed_pool() -> dict:
    """prod with a fixed-size GPU pool of four (no autoscaling)."""
    config = stack_config("prod")
    config[cfg("gpuPool")]["minSize"] = config[cfg("gpuPool")]["maxSize"] = 4
    return config


VARIANTS = {
    "dev": (lambda: stack_config("dev"), "dev"),
    "dev-no-data-disk": (diskless_pool, "dev"),
    "prod": (lambda: stack_config("prod"), "prod"),
    "prod-fixed-pool": (fixed_pool, "prod"),
    "prod-new-registry": (bought_instance, "prod"),
}


def read_back_run(config: dict, stack: str) -> Plan:
    """The program under mocks, each cloud resource answered with its read-back state."""
    answers = {t: filled(rb) for t, rb in READ_BACK.items()}
    return run_program(with_unset_credentials(config)[0], stack=stack, project_dir=ROOT, read_back=answers)


@pytest.fixture(params=sorted(VARIANTS))
def read_back_plan(request, run_stack) -> Plan:
    """One variant's read-back plan; ``run_stack`` gives it a clean directory and no prepared sources."""
    make, stack = VARIANTS[request.param]
    return read_back_run(make(), stack)


def test_every_cloud_resource_type_has_its_read_back_row(read_back_plan: Plan) -> None:
    created = {r.type for r in read_back_plan.resources if r.type.startswith("alicloud:")}
    assert created and created <= set(READ_BACK), sorted(created - set(READ_BACK))


def test_a_second_up_shows_no_change_after_a_read(read_back_plan: Plan) -> None:
    changes = [
        f"{r.type} {r.name}: {path} {at(r.inputs, path)} -> {at(r.state, path)} ({READ_BACK[r.type].source})"
        for r in read_back_plan.resources
        if r.type in READ_BACK
        for path in READ_BACK[r.type].fills
        if path not in r.ignore_changes and at(r.inputs, path) != at(r.state, path)
    ]
    assert not changes, "\n".join(changes)


def test_each_ignored_list_path_names_a_list_the_program_sends(read_back_plan: Plan) -> None:
    """The engine refuses an ignored ``[*]`` path whose list changed length: a pool that
    gains or loses its data disk must not be ignoring paths inside it."""
    for r in read_back_plan.resources:
        for path in r.ignore_changes:
            if ELEMENTS in path:
                assert at(r.inputs, path.split(ELEMENTS)[0]) != [None], f"{r.name}: {path}"


def test_the_read_back_answers_reach_the_state(run_stack) -> None:
    """The check above compares something: without the program's ignore_changes, the pool's
    filled disk fields and size differ from its inputs."""
    pool = read_back_run(stack_config("dev"), "dev").one(POOL, "gpu")
    assert at(pool.inputs, "dataDisks[*].performanceLevel") == [None]
    assert at(pool.state, "dataDisks[*].performanceLevel") == ["PL1"]
    assert "dataDisks[*].performanceLevel" in pool.ignore_changes
    # An autoscaled pool leaves its size to the autoscaler; a fixed one owns it.
    assert pool.inputs.get("desiredSize") is None and pool.state["desiredSize"] == "3"
    assert "desiredSize" in pool.ignore_changes
    fixed = read_back_run(fixed_pool(), "prod").one(POOL, "gpu-erdma")
    assert fixed.inputs["desiredSize"] == fixed.state["desiredSize"] == "4"
    assert "desiredSize" not in fixed.ignore_changes


def test_helm_releases_carry_no_checksum_and_ignore_nothing(run_stack, fixture_pins) -> None:
    """pulumi-kubernetes dropped the release ``checksum`` (PR #2672; helm_release.go Diff
    deletes it from old inputs): a release diffs only on its inputs, so none ignores any and
    a changed value still upgrades it."""
    config = stack_config("prod")
    config[cfg("trainerV2")] = {"install": True, "kueue": {"enabled": True}}
    config[cfg("jobs")][1]["backend"] = "v2"
    del config[cfg("jobs")][1]["restartPolicy"]
    releases = run_stack(config, "prod").of_type(HELM_RELEASE)
    assert sorted(r.name for r in releases) == ["kubeflow-trainer", "kueue"]
    for release in releases:
        assert "checksum" not in release.inputs and not release.ignore_changes


def test_objects_answered_as_sent_get_what_the_mocks_would_answer(run_stack, fixture_pins) -> None:
    """The engine answers most registrations with the request as it was sent (the operator's
    CRDs are megabytes): the inputs and answers recorded are those of the mocks' own path,
    which a read-back of every type forces, and a plan that reads no inputs reads none."""
    config = with_unset_credentials(stack_config("dev"))[0]
    sent = run_program(config, stack="dev", project_dir=ROOT)
    crds = sent.of_type("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
    assert crds and not any("inputs" in vars(crd) or "state" in vars(crd) for crd in crds)
    assert sent.tree()
    assert not any("inputs" in vars(crd) for crd in crds)
    every_type = {r.type: dict for r in sent.resources}
    read = run_program(config, stack="dev", project_dir=ROOT, read_back=every_type)
    assert [r.urn for r in sorted(sent.resources, key=lambda r: r.urn)] == sorted(r.urn for r in read.resources)
    by_urn = {r.urn: r for r in read.resources}
    for r in sent.resources:
        assert (r.inputs, r.state) == (by_urn[r.urn].inputs, by_urn[r.urn].state), r.urn
    assert sent.outputs == read.outputs
    assert any(crd.state["metadata"]["uid"] == "(known after deploy)" for crd in crds)


def test_a_reference_to_a_resource_answered_as_sent_is_read(tmp_path: Path) -> None:
    """A resource given as another's input travels as a reference, which the mock engine reads
    by asking for the resource it names: one that was answered as sent."""
    (tmp_path / "Pulumi.yaml").write_text("name: holder\nruntime: python\n")
    (tmp_path / "__main__.py").write_text(
        "import pulumi\nimport pulumi_kubernetes as k8s\n"
        'held = k8s.core.v1.ConfigMap("held", metadata={"name": "held"}, data={"k": "v"})\n'
        'pulumi.CustomResource("test:index:Holder", "holder", {"held": held})\n'
    )
    plan = run_program({}, stack="dev", project_dir=tmp_path)
    held = plan.one("kubernetes:core/v1:ConfigMap")
    assert held.state["data"] == {"k": "v"}
    assert type(plan.one("test:index:Holder").inputs["held"]).__name__ == "ConfigMap"

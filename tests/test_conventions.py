"""House conventions of the Python components, which their users read as one API."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pulumi
import pytest
from conftest import ROOT

import components


def public_components() -> list[type[pulumi.ComponentResource]]:
    exported = (getattr(components, name) for name in components.__all__)
    return [c for c in exported if inspect.isclass(c) and issubclass(c, pulumi.ComponentResource)]


@pytest.mark.parametrize("component", public_components(), ids=lambda c: c.__name__)
def test_a_component_takes_its_name_and_spec_then_keywords(component) -> None:
    parameters = list(inspect.signature(component.__init__).parameters.values())[1:]
    positional = [p.name for p in parameters if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    assert positional in (["name"], ["name", "spec"]), f"{component.__name__}: positional {positional}"


@pytest.mark.parametrize("component", public_components(), ids=lambda c: c.__name__)
def test_what_a_component_waits_for_is_its_depends_on(component) -> None:
    parameters = inspect.signature(component.__init__).parameters
    waits = [name for name in parameters if name.endswith("_after") or name.startswith("wait")]
    assert not waits, f"{component.__name__}: name {waits} depends_on, like pulumi.ResourceOptions"


def test_specs_builders_and_the_job_commands_load_no_pulumi_sdk() -> None:
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, components.config, components.manifests, components.upstream.crd_schema, components.jobs.cli\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pulumi', 'pulumi_alicloud', 'pulumi_kubernetes', 'torch')))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.strip() == "[]"


def test_the_quickstart_puts_ack_jobs_on_the_venvs_path(tmp_path) -> None:
    # ./dev sets up the venv the tests run in, ack-jobs included.
    shown = subprocess.run(
        [str(Path(sys.prefix) / "bin" / "ack-jobs"), "--help"], cwd=tmp_path, capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("usage: ack-jobs")

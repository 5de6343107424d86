"""The GitHub workflow, read as policy: what runs is pinned, and no step holds a
long-lived cloud key."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml
from conftest import ROOT

from components.config import pins

WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"


def steps() -> list[tuple[str, dict]]:
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    return [(name, step) for name, job in jobs.items() for step in job["steps"]]


def test_every_action_is_pinned_by_commit() -> None:
    used = [step["uses"] for _, step in steps() if "uses" in step]
    assert used
    assert [u for u in used if not re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u)] == []


def test_no_download_is_piped_unverified() -> None:
    runs = "\n".join(step.get("run", "") for _, step in steps())
    assert not re.search(r"\b(curl|wget)\b", runs)


def test_cloud_credentials_are_short_lived_and_never_for_forks() -> None:
    text = WORKFLOW.read_text()
    assert "ACCESS_KEY" not in text
    workflow = yaml.safe_load(text)
    preview = workflow["jobs"]["preview"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in preview["if"]
    assert preview["permissions"]["id-token"] == "write"
    assert workflow["permissions"] == {"contents": "read"}
    credentials = [s for _, s in steps() if s.get("uses", "").startswith("aliyun/configure-aliyun-credentials-action@")]
    assert [s["with"]["role-to-assume"] for s in credentials] == ["${{ vars.ALIBABA_CLOUD_PREVIEW_ROLE_ARN }}"]


def job(name: str) -> dict:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"][name]


def test_the_test_job_runs_the_suite_as_ci_does_with_what_ci_requires() -> None:
    runs = [step.get("run", "") for step in job("test")["steps"]]
    # .ci/run sets CI, under which a missing promtool, mpirun or TensorFlow fails the tests
    # rather than skipping them; it installs promtool and TensorFlow's environment itself.
    assert ".ci/run" in runs
    ci = (ROOT / ".ci" / "run").read_text()
    assert "export CI=1" in ci and "apt-get download prometheus" in ci and "requirements-tf.txt" in ci
    assert any("apt-get install -y -qq openmpi-bin" in run for run in runs)


DOWNLOADING_ACTIONS = (
    "actions/setup-python@",
    "azure/setup-kubectl@",
    "azure/setup-helm@",
    "actions/setup-go@",
    "pulumi/actions@",
)


def test_a_self_hosted_runner_downloads_nothing_from_outside_china() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    # Every job runs on the self-hosted runner when one is named.
    for name, spec in workflow["jobs"].items():
        assert "vars.CI_RUNNER" in spec["runs-on"], name
    # Actions that fetch a toolchain from GitHub or Pulumi's servers are skipped there.
    for name, step in steps():
        if step.get("uses", "").startswith(DOWNLOADING_ACTIONS):
            assert "!vars.CI_RUNNER" in step.get("if", ""), (name, step["uses"])
    # pip, Go and the upstream copies go to the mirrors the variables name.
    assert workflow["env"]["PIP_INDEX_URL"] == "${{ vars.PIP_INDEX_URL || 'https://pypi.org/simple' }}"
    assert workflow["env"]["GOPROXY"].startswith("${{ vars.GOPROXY ||")
    prepares = [step["run"] for _, step in steps() if "components.upstream prepare" in step.get("run", "")]
    assert len(prepares) == 2 and all('${UPSTREAM_MIRROR:+--from "$UPSTREAM_MIRROR"}' in run for run in prepares)
    plugins = [step for _, step in steps() if "components.upstream.plugins" in step.get("run", "")]
    assert [p["run"] for p in plugins] == [
        '.venv/bin/python -m components.upstream.plugins --commands --server "$PULUMI_PLUGIN_SERVER" | sh -e'
    ]


def lock_step() -> dict:
    return next(step for step in job("preview")["steps"] if step.get("id") == "lock")


@pytest.mark.parametrize(
    ("stack", "committed", "previewed"),
    [("prod", False, "false"), ("prod", True, "true"), ("dev", False, "true")],
)
def test_a_stack_is_previewed_only_with_the_lock_it_requires(tmp_path, stack, committed, previewed) -> None:
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks", ignore=shutil.ignore_patterns("images.*.lock.json"))
    if committed:
        (tmp_path / "stacks" / f"images.{stack}.lock.json").write_text("{}")
    output = tmp_path / "github-output"
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", lock_step()["run"]],
        cwd=tmp_path,
        env={**os.environ, "STACK": stack, "GITHUB_OUTPUT": str(output)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert output.read_text() == f"preview={previewed}\n"
    assert ("not previewed" in done.stdout) == (previewed == "false")
    for step in job("preview")["steps"][job("preview")["steps"].index(lock_step()) + 1 :]:
        assert "steps.lock.outputs.preview == 'true'" in step["if"]


def test_ack_ram_tool_is_built_where_its_replace_directive_resolves() -> None:
    # `go install module@version` refuses a module whose go.mod has replace directives, and
    # ack-ram-tool's has one (v0.19.3-dev.1 go.mod, for pkg/credentials/provider): it is built
    # in a checkout of the tag, pinned by its commit like the actions.
    step = next(s for s in job("preview")["steps"] if "ack-ram-tool" in s.get("name", ""))
    assert "ack-ram-tool@" not in step["run"]
    assert 'rev-parse HEAD)" = a46a3d1e4fa9775f8c69026a97da620b101ece30' in step["run"]
    assert "go install ./cmd/ack-ram-tool" in step["run"]


def test_the_workflows_kubectl_renders_the_overlay_as_its_pin_was_rendered() -> None:
    # kubectl bundles kustomize by minor release (1.32 carries v5.5.0, 1.33 v5.6.0); another one
    # renders other bytes, which prepare refuses.
    kubectl = [
        step["with"]["version"] for _, step in steps() if step.get("uses", "").startswith("azure/setup-kubectl@")
    ]
    assert kubectl and all(version.startswith("v1.32.") for version in kubectl), kubectl
    assert {overlay.kustomize for overlay in pins.OPERATOR_OVERLAYS.values()} == {"v5.5.0"}

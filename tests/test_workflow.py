"""The GitHub workflow, read as policy: what runs is pinned, and no step holds a
long-lived cloud key."""

from __future__ import annotations

import re

import yaml
from conftest import ROOT

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

"""The Pulumi plugins a runner must have are read from the installed packages that
``requirements.txt`` pulls in, so none is missing from the list a China runner installs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

from components.upstream.plugins import DEFAULT_SERVER, main, plugins


def provider_pins() -> set[tuple[str, str]]:
    """``(plugin name, version)`` for each Pulumi provider package requirements.txt pins."""
    text = (ROOT / "requirements.txt").read_text()
    return {(name, version) for name, version in re.findall(r"^pulumi-([a-z0-9-]+)==([0-9.]+)$", text, re.M)}


def test_every_provider_package_the_program_requires_brings_its_plugin() -> None:
    found = plugins()
    assert {(p.name, p.version) for p in found} == provider_pins()
    assert ("random", "4.21.4") in {(p.name, p.version) for p in found}
    random = next(p for p in found if p.name == "random")
    assert random.server == DEFAULT_SERVER
    assert random.install_command("/opt/plugins") == (
        "pulumi plugin install resource random 4.21.4 --file /opt/plugins/pulumi-resource-random-v4.21.4-linux-amd64.tar.gz"
    )


def fake_distribution(site: Path, name: str, requires: list[str]) -> None:
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", "Version: 1.0", *(f"Requires-Dist: {r}" for r in requires)]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    (info / "RECORD").write_text("")


def test_a_plugin_a_dependency_pulls_in_is_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    fake_distribution(site, "team-stack", ["pulumi-random==4.21.4", 'pulumi-alicloud; extra == "cloud"'])
    monkeypatch.syspath_prepend(str(site))
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# a consumer's program\nteam-stack==1.0\n")
    assert [(p.name, p.package) for p in plugins(requirements)] == [("random", "pulumi_random==4.21.4")]


def test_a_requirement_that_is_not_installed_is_named(tmp_path: Path, capsys) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("pulumi-nonexistent-provider==1.0\n")
    assert main(["--requirements", str(requirements)]) == 2
    assert capsys.readouterr().err == (
        f"error: pulumi-nonexistent-provider is required by {requirements} but not installed\n"
    )


def test_a_runner_installs_them_from_a_mirror(capsys) -> None:
    assert main(["--commands", "--server", "https://mirror.example.cn/pulumi-plugins"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"pulumi plugin install resource {name} {version} --server https://mirror.example.cn/pulumi-plugins"
        for name, version in sorted(provider_pins())
    ]

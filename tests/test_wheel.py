"""The built wheel installs under one namespace, beside a consumer's own ``components`` and
``trainer`` packages, and its ``ack-jobs`` runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def consumer(tmp_path: Path) -> Path:
    """A Pulumi project with its own ``components`` and ``trainer`` packages."""
    project = tmp_path / "team-stack"
    for package in ("components", "trainer"):
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text(f"OWNER = 'team: {package}'\n")
    return project


def run_in(project: Path, site: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True)


def test_the_install_holds_only_its_namespace(installed_package: Path) -> None:
    assert sorted(p.name for p in installed_package.iterdir() if not p.name.endswith(".dist-info")) == [
        "ack_training_platform",
        "bin",
    ]
    # A namespace package: another distribution of this project may add to it.
    assert not (installed_package / "ack_training_platform" / "__init__.py").exists()


def test_the_install_carries_its_license(installed_package: Path) -> None:
    (info,) = installed_package.glob("ack_training_platform-*.dist-info")
    (license_file,) = info.rglob("LICENSE")
    assert license_file.read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "License-Expression: Apache-2.0" in (info / "METADATA").read_text()


def test_it_coexists_with_the_consumers_own_packages(installed_package: Path, tmp_path: Path) -> None:
    result = run_in(
        consumer(tmp_path),
        installed_package,
        "import components, trainer\n"
        "from ack_training_platform.components import TrainingJob, GpuNodePool\n"
        "from ack_training_platform.components.manifests.monitoring import alerts\n"
        "from ack_training_platform.trainer.telemetry import metric_names\n"
        "print(components.OWNER, trainer.OWNER, TrainingJob.__module__, alerts.trainer.__name__)\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "team:",
        "components",
        "team:",
        "trainer",
        "ack_training_platform.components.training_job",
        "ack_training_platform.trainer.telemetry.metric_names",
    ]


def test_its_ack_jobs_runs_beside_them(installed_package: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(installed_package / "bin" / "ack-jobs"), "--help"],
        cwd=consumer(tmp_path),
        env={**os.environ, "PYTHONPATH": str(installed_package)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: ack-jobs")


def test_its_offline_plan_runs_by_its_module_path(installed_package: Path, tmp_path: Path) -> None:
    # As docs/components.md shows: a team's project plans its own program with the installed copy.
    project = consumer(tmp_path)
    shutil.copytree(ROOT / "examples" / "own-stack", project, dirs_exist_ok=True)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ack_training_platform.components.plan",
            "--program",
            ".",
            "--stack-file",
            "Pulumi.example.yaml",
        ],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(installed_package)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "alicloud:cs/nodePool:NodePool" in result.stdout

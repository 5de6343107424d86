"""The built wheel installs under one namespace, beside a consumer's own ``components`` and
``trainer`` packages, and its ``ack-jobs`` runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


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


def test_it_coexists_with_the_consumers_own_packages(installed_package: Path, tmp_path: Path) -> None:
    result = run_in(
        consumer(tmp_path),
        installed_package,
        "import components, trainer\n"
        "from ack_training_platform.components import TrainingJob, GpuNodePool\n"
        "from ack_training_platform.components.manifests import alerts\n"
        "from ack_training_platform.trainer import metric_names\n"
        "print(components.OWNER, trainer.OWNER, TrainingJob.__module__, alerts.trainer.__name__)\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "team:",
        "components",
        "team:",
        "trainer",
        "ack_training_platform.components.training_job",
        "ack_training_platform.trainer.metric_names",
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

"""Shared fixtures: stack configs and the mock-engine harness."""

from __future__ import annotations

import copy
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml
from fixtures.upstream import CHARTS, fixture_mirror, git_tree_of, write_tree
from loopback_api import FakeApi, loopback

from components.config import pins
from components.plan.command import with_unset_credentials
from components.plan.records import Plan
from components.plan.runner import run_program
from components.stack import IMAGE_LOCK_ENV, UPSTREAM_ENV
from components.upstream.fetch import prepare
from components.upstream.local_sources import CACHE_ENV, objects_sha256

ROOT = Path(__file__).resolve().parents[1]
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


TRAINER_SUITE = (
    "test_trainer",
    "test_checkpoint_safety",
    "test_checkpoint_faults",
    "test_launchers",
    "test_dataset_import",
    "test_image",
    "test_checkout",
)
"""Modules whose tests start real multi-process trainer runs: ``-m trainer`` runs them,
``-m "not trainer"`` the fast infrastructure suite."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Marked by module rather than per test, so a new test in these files joins its suite.
    for item in items:
        if item.path.stem.startswith(TRAINER_SUITE):
            item.add_marker(pytest.mark.trainer)


@pytest.fixture(autouse=True, scope="session")
def _cache_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> None:
    """What the code keeps in the user's cache folder (the verified operator rendering as JSON)
    goes to the session's own folder, never into the home of whoever runs the tests."""
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("cache"))


def stack_config(stack: str) -> dict[str, Any]:
    """A fresh copy of ``stacks/Pulumi.<stack>.yaml``'s config section."""
    return copy.deepcopy(yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"])


@pytest.fixture
def run_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Plan]:
    """Run the real program for a config under Pulumi's mocks and return what it
    registered (types, names, parents, inputs and options)."""
    # Nothing the program does may depend on the directory it runs in, or on copies a
    # developer prepared in this checkout.
    monkeypatch.chdir(tmp_path)
    if UPSTREAM_ENV not in os.environ:
        monkeypatch.setenv(UPSTREAM_ENV, str(tmp_path / "not-prepared"))
    monkeypatch.setenv(IMAGE_LOCK_ENV, str(tmp_path / "images.lock.json"))

    def run(config: dict[str, Any], stack: str = "test", invokes: dict[str, Any] | None = None) -> Plan:
        return run_program(with_unset_credentials(config)[0], stack=stack, project_dir=ROOT, invokes=invokes)

    return run


NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", ".upstream", ".tools", ".whl", "out", "build", "*.egg-info", "__pycache__", ".pytest_cache"
)


@pytest.fixture(scope="session")
def installed_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of this checkout, installed into a folder of its own
    (``--target``, without dependencies: this interpreter has them): what a consumer's
    ``pip install`` puts on their path."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", str(source), "--no-deps", "--no-build-isolation", "-w", str(work)], check=True)
    (wheel,) = work.glob("ack_training_platform-*.whl")
    site = work / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    return site


@pytest.fixture
def with_installed_package(installed_package: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The installed package importable here, as a consumer's program imports it."""
    monkeypatch.syspath_prepend(str(installed_package))
    yield installed_package
    for name in [m for m in sys.modules if m == "ack_training_platform" or m.startswith("ack_training_platform.")]:
        del sys.modules[name]


def missing(what: str, *, ci: str, install: str) -> NoReturn:
    """A test's tool or package is not here: under CI, which installs it (``ci`` says how),
    that is a failure; elsewhere the test is skipped with how to ``install`` it."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing: {ci}")
    pytest.skip(f"{what} is not installed ({install})")


def free_port() -> int:
    """A TCP port nothing on this host listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cfg(key: str) -> str:
    return f"ack-training-platform:{key}"


def with_pull_secret(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with registry login credentials (the password as an encrypted value)."""
    config[cfg("registry")]["username"] = "ml-pull@example.com"
    config[cfg("registryPassword")] = {"secure": "v1:AAAA"}
    return config


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeApi, Path]]:
    """A stand-in Kubernetes API server on 127.0.0.1 and a kubeconfig pointing at it."""
    with loopback(tmp_path) as served:
        yield served


def _apply(monkeypatch: pytest.MonkeyPatch, catalogue: dict[str, dict]) -> None:
    for attribute, entries in catalogue.items():
        for key, value in entries.items():
            # The dicts are shared with every module that imported them: change them in place.
            monkeypatch.setitem(getattr(pins, attribute), key, value)


@pytest.fixture(scope="session")
def upstream_mirror(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, dict], Path]:
    """Local git repositories standing in for the pinned upstream ones, the pins of what they
    hold, and a ``.upstream/`` prepared from them by the real command (git, kubectl)."""
    base = tmp_path_factory.mktemp("mirror")
    catalogue = fixture_mirror(base / "git")
    overlay = catalogue["OPERATOR_OVERLAYS"]["v1.9.4"]
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(base / "git/work/kubeflow/trainer/v1.9.4/manifests/overlays/standalone")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    digest = objects_sha256([obj for obj in yaml.safe_load_all(rendered) if obj])
    catalogue["OPERATOR_OVERLAYS"]["v1.9.4"] = type(overlay)(overlay.name, overlay.source, overlay.overlay, digest)
    assembled = base / "assembled"
    write_tree(assembled, CHARTS["kubeflow-trainer"])
    write_tree(assembled / "charts/jobset", CHARTS["jobset"])
    write_tree(assembled / "charts/lws", {**CHARTS["lws"], "Chart.yaml": "apiVersion: v2\nname: lws\nversion: 0.8.0\n"})
    trainer = catalogue["TRAINER_V2_CHARTS"]["v2.3.0"]
    catalogue["TRAINER_V2_CHARTS"]["v2.3.0"] = type(trainer)(
        trainer.name, trainer.chart, trainer.dependencies, git_tree_of(assembled)
    )
    prepared = base / "prepared"
    with pytest.MonkeyPatch.context() as patch:
        _apply(patch, catalogue)
        prepare(prepared, git_base=f"file://{base / 'git'}")
    return f"file://{base / 'git'}", catalogue, prepared


@pytest.fixture
def fixture_pins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, upstream_mirror) -> Path:
    """The fixture repositories' pins in place of the real ones, and a fresh copy of the
    prepared ``.upstream/`` the program reads."""
    _, catalogue, prepared = upstream_mirror
    _apply(monkeypatch, catalogue)
    copy_dir = tmp_path / "upstream"
    shutil.copytree(prepared, copy_dir, symlinks=True)
    monkeypatch.setenv(UPSTREAM_ENV, str(copy_dir))
    return copy_dir

"""Shared fixtures: stack configs and the mock-engine harness."""

from __future__ import annotations

import copy
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from loopback_api import FakeApi, loopback

from components.offline import Plan, run_program
from components.plan import with_unset_credentials

ROOT = Path(__file__).resolve().parents[1]
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


def stack_config(stack: str) -> dict[str, Any]:
    """A fresh copy of ``stacks/Pulumi.<stack>.yaml``'s config section."""
    return copy.deepcopy(yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"])


@pytest.fixture
def run_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Plan]:
    """Run the real program for a config under Pulumi's mocks and return what it
    registered (types, names, parents, inputs and options)."""
    # Nothing the program does may depend on the directory it runs in.
    monkeypatch.chdir(tmp_path)

    def run(config: dict[str, Any], stack: str = "test", invokes: dict[str, Any] | None = None) -> Plan:
        return run_program(with_unset_credentials(config)[0], stack=stack, project_dir=ROOT, invokes=invokes)

    return run


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

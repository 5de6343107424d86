"""Reads the running stack's configuration into a validated spec."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import settings
from pulumi.runtime.config import CONFIG, is_config_secret
from pulumi.runtime.mocks import MockEngine

from .config import PROJECT, ConfigError, PlatformSpec, load_spec
from .local_sources import UPSTREAM_DIR, LocalSources, SourceError, required_copies

UPSTREAM_ENV = "ACK_TRAINING_UPSTREAM"
"""Where the prepared copies are, when not in the project's ``.upstream/``."""


def _decode(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def stack_spec() -> PlatformSpec:
    """The stack's validated spec.

    Every configured key is read, not only the known ones, so a misspelled top-level
    key fails instead of being ignored.

    Raises:
        pulumi.RunError: the config is invalid; Pulumi prints the message without a traceback.
    """
    raw = {key: _decode(value) for key, value in CONFIG.get().items()}
    try:
        return load_spec(raw, [key for key in raw if is_config_secret(key)])
    except ConfigError as err:
        raise pulumi.RunError(str(err)) from None


def is_secret_section(key: str) -> bool:
    """Whether the stack key ``key`` (one of ``SECRET_SECTIONS``) is encrypted, wholly or
    in part: what is built from it must be a Pulumi secret."""
    return is_config_secret(f"{PROJECT}:{key}")


def stack_secret(key: str) -> pulumi.Output[str] | None:
    """A secret stack key (``pulumi config set --secret KEY``), kept secret."""
    return pulumi.Config(PROJECT).get_secret(key)


def local_sources(project_dir: Path, spec: PlatformSpec) -> LocalSources:
    """The prepared upstream copies of the project in ``project_dir``, each one ``spec``
    installs verified before any resource is registered.

    Under Pulumi's mock engine (the offline plan, tests) nothing is deployed, so a copy that
    is missing is reported rather than refused; a real preview or update refuses it.

    Raises:
        pulumi.RunError: a copy is missing or is not the pinned one; Pulumi prints the message
            without a traceback.
    """
    root = Path(os.environ.get(UPSTREAM_ENV) or project_dir / UPSTREAM_DIR)
    offline = isinstance(settings.SETTINGS.engine, MockEngine)
    sources = LocalSources(root, project_dir=project_dir, missing_ok=offline)
    try:
        sources.verify(required_copies(spec))
    except SourceError as err:
        raise pulumi.RunError(str(err)) from None
    return sources

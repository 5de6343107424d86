"""Reads the running stack's configuration into a validated spec."""

from __future__ import annotations

import json
from typing import Any

import pulumi
from pulumi.runtime.config import CONFIG, is_config_secret

from .config import PROJECT, ConfigError, PlatformSpec, load_spec


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

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
from .manifests.platform.images import stack_images
from .upstream.digests import DigestError, lock_path, missing, read_lock
from .upstream.local_sources import UPSTREAM_DIR, LocalSources, SourceError, required_copies

UPSTREAM_ENV = "ACK_TRAINING_UPSTREAM"
"""Where the prepared copies are, when not in the project's ``.upstream/``."""
IMAGE_LOCK_ENV = "ACK_TRAINING_IMAGE_LOCK"
"""The image lock to read, when not the stack's ``stacks/images.<stack>.lock.json``."""


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


def image_lock(project_dir: Path, spec: PlatformSpec) -> dict[str, str]:
    """The stack's image lock (digests by image as pulled), checked against every
    third-party image the stack pulls before any resource is registered.

    An image the lock lacks is pulled by tag: with ``imageLock: require`` that stops the
    program, with ``warn`` it is a warning, with ``tag`` (local clusters) nothing is said. Under Pulumi's mock engine (the offline plan,
    tests) a stack without any lock file is only warned about, as a missing upstream copy is
    (:func:`local_sources`); a lock that exists and lacks an image refuses there too.

    Raises:
        pulumi.RunError: the lock is not one, or lacks an image while ``imageLock`` is ``require``.
    """
    stack = pulumi.get_stack()
    path = Path(os.environ.get(IMAGE_LOCK_ENV) or lock_path(project_dir, stack))
    try:
        digests = read_lock(path)
        pulled = [image for _, image in stack_images(spec)]
    except DigestError as err:
        raise pulumi.RunError(f"imageLock: {err}") from None
    except ValueError as err:
        pulumi.log.warn(f"imageLock: the stack's images are not checked against {path.name}: {err}")
        return digests
    absent = missing(pulled, digests)
    if not absent or spec.image_lock == "tag":
        return digests
    message = (
        f"imageLock: {path.name} has no digest for {', '.join(absent)}: run python -m components.upstream "
        f"lock-images --stack {stack}"
    )
    offline = isinstance(settings.SETTINGS.engine, MockEngine)
    if spec.image_lock == "require" and (path.is_file() or not offline):
        raise pulumi.RunError(f"{message}, or set imageLock: warn to pull them by tag")
    pulumi.log.warn(f"{message}; pulled by tag until then")
    return digests

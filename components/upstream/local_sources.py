"""The verified local copies of the pinned upstream sources (``.upstream/``), as the
components read them.

Every read checks the copy against its pin (:mod:`components.config.pins`): a chart folder by its
git tree id, Volcano's manifest by its git blob id, the rendered operator overlay by the
digest of its objects. What is applied is then the pinned release byte for byte on every
machine, and ``pulumi up`` reads no network.
Pure: no Pulumi.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..config import PROJECT, PlatformSpec
from ..config.pins import KUEUE_CHARTS, OPERATOR_OVERLAYS, TRAINER_V2_CHARTS, VOLCANO_MANIFESTS
from .treehash import blob_id, tree_id
from .yamlio import LOADER

UPSTREAM_DIR = ".upstream"
PREPARE_COMMAND = "python -m components.upstream prepare"


class SourceError(Exception):
    """A local copy is missing, or is not the pinned one."""


def canonical_json(objects: list[dict[str, Any]]) -> bytes:
    """Kubernetes objects as canonical JSON (keys sorted, no spaces): what their digest is of."""
    return json.dumps(objects, sort_keys=True, separators=(",", ":")).encode()


def objects_sha256(objects: list[dict[str, Any]]) -> str:
    """sha256 of Kubernetes objects as canonical JSON (keys sorted, no spaces)."""
    return hashlib.sha256(canonical_json(objects)).hexdigest()


def read_objects(path: Path) -> list[dict[str, Any]]:
    """The objects of a multi-document YAML file, empty documents left out."""
    return [obj for obj in yaml.load_all(path.read_text(), Loader=LOADER) if obj]


def _missing(path: Path) -> SourceError:
    return SourceError(f"{path} is missing: run `{PREPARE_COMMAND}` (see the deploy checklist in docs/deploying.md)")


def verified_tree(path: Path, tree: str) -> Path:
    """``path``, once its files are checked to be git tree ``tree``.

    Raises:
        SourceError: ``path`` is missing or holds other files.
    """
    if not path.is_dir():
        raise _missing(path)
    found = tree_id(path)
    if found != tree:
        raise SourceError(
            f"{path} is not the pinned copy (git tree {found}, pinned {tree}): delete it and run `{PREPARE_COMMAND}`"
        )
    return path


def verified_file(path: Path, blob: str) -> list[dict[str, Any]]:
    """The objects in the file ``path``, once its bytes are checked to be git blob ``blob``.

    Raises:
        SourceError: ``path`` is missing or holds other bytes.
    """
    if not path.is_file():
        raise _missing(path)
    found = blob_id(path.read_bytes())
    if found != blob:
        raise SourceError(
            f"{path} is not the pinned copy (git blob {found}, pinned {blob}): delete it and run `{PREPARE_COMMAND}`"
        )
    return read_objects(path)


CACHE_ENV = "ACK_TRAINING_CACHE"
"""The folder :func:`objects_cache` keeps files in, instead of ``$XDG_CACHE_HOME/ack-training-platform``."""


def objects_cache(path: Path, text: bytes) -> Path:
    """Where the objects of the rendering ``path``, whose bytes are ``text``, are kept as
    canonical JSON once read and verified: JSON loads in a fraction of the time the operator's
    3.7 MB of YAML take, even with libyaml. In the user's cache folder (``$XDG_CACHE_HOME``,
    else ``~/.cache``), so ``.upstream/`` holds the pinned copies alone; named by the YAML's own
    digest, so an edited rendering is read and refused again."""
    root = os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / PROJECT
    return Path(root) / f"{path.name}.{hashlib.sha256(text).hexdigest()}.json"


def verified_objects(path: Path, sha256: str) -> list[dict[str, Any]]:
    """The objects in ``path``, once their digest is checked to be ``sha256``.

    The first read keeps them in the user's cache folder as canonical JSON (:func:`objects_cache`); later
    reads of the same YAML take that file when its bytes hash to ``sha256``, which is the same
    check, as the digest is of those bytes.

    Raises:
        SourceError: ``path`` is missing or holds other objects.
    """
    if not path.is_file():
        raise _missing(path)
    text = path.read_bytes()
    cache = objects_cache(path, text)
    try:
        kept = cache.read_bytes()
        if hashlib.sha256(kept).hexdigest() == sha256:
            return json.loads(kept)
    except OSError:
        pass
    objects = [obj for obj in yaml.load_all(text, Loader=LOADER) if obj]
    data = canonical_json(objects)
    found = hashlib.sha256(data).hexdigest()
    if found != sha256:
        raise SourceError(
            f"{path} is not the pinned rendering (objects sha256 {found}, pinned {sha256}): "
            f"delete it and run `{PREPARE_COMMAND}`"
        )
    try:
        # Written whole under another name, then renamed: a concurrent reader sees all or nothing.
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        partial.write_bytes(data)
        partial.replace(cache)
    except OSError:
        pass  # without a writable cache folder the YAML is read each time
    return objects


def required_copies(spec: PlatformSpec) -> list[str]:
    """The local copies what ``spec`` installs is made from (names under ``.upstream/``)."""
    names = []
    if spec.operator.install:
        names.append(OPERATOR_OVERLAYS[spec.operator.version].name)
        if spec.operator.volcano.enabled:
            names.append(VOLCANO_MANIFESTS[spec.operator.volcano.version].name)
    if spec.installs_trainer_v2:
        names.append(TRAINER_V2_CHARTS[spec.trainer_v2.version].name)
    kueue = spec.trainer_v2.kueue
    if spec.uses_trainer_v2 and kueue.enabled and kueue.install:
        names.append(KUEUE_CHARTS[kueue.version].name)
    return names


def _chart_trees() -> dict[str, str]:
    charts = [*KUEUE_CHARTS.values(), *TRAINER_V2_CHARTS.values()]
    return {chart.name: chart.tree for chart in charts}


@dataclass
class LocalSources:
    """The ``.upstream/`` folder of a project.

    Args:
        root: the folder.
        project_dir: the Pulumi project's directory, where Pulumi runs the program and the
            kubernetes provider; a chart under it is named by a ``./`` path relative to it,
            the same on every machine.
        missing_ok: answer for a copy that is missing instead of refusing it (the offline
            plan, which deploys nothing); a copy that differs from its pin is refused either way.

    Attributes:
        missing: the copies that were asked for and missing, for the plan to say what it cannot show.
    """

    root: Path
    project_dir: Path | None = None
    missing_ok: bool = False
    missing: list[str] = field(default_factory=list)
    _verified: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of_project(cls, project_dir: Path, *, missing_ok: bool = False) -> LocalSources:
        """The ``.upstream/`` folder of the Pulumi project in ``project_dir``."""
        return cls(project_dir / UPSTREAM_DIR, project_dir=project_dir, missing_ok=missing_ok)

    def _read(self, name: str, read: Any) -> Any:
        if name in self._verified:
            return self._verified[name]
        try:
            self._verified[name] = read(self.root / name)
            return self._verified[name]
        except SourceError:
            if self.missing_ok and not (self.root / name).exists():
                self.missing.append(name)
                return None
            raise

    def verify(self, names: list[str]) -> None:
        """Check the copies ``names`` (from :func:`required_copies`) before anything uses them.

        Raises:
            SourceError: one is missing (unless ``missing_ok``), or is not the pinned one.
        """
        overlays = {overlay.name: overlay for overlay in OPERATOR_OVERLAYS.values()}
        files = {pinned.name: pinned for pinned in VOLCANO_MANIFESTS.values()}
        for name in names:
            if name in overlays:
                self._read(name, lambda path, pin=overlays[name].objects_sha256: verified_objects(path, pin))
            elif name in files:
                self._read(name, lambda path, pin=files[name].blob: verified_file(path, pin))
            else:
                self.chart_input(name)

    def operator_objects(self, version: str) -> list[dict[str, Any]] | None:
        """The Training Operator's standalone overlay at ``version``, rendered; ``None`` when
        missing and ``missing_ok``.

        Raises:
            SourceError: the rendering is missing, or is not the pinned one.
        """
        overlay = OPERATOR_OVERLAYS[version]
        return self._read(overlay.name, lambda path: verified_objects(path, overlay.objects_sha256))

    def volcano_objects(self, version: str) -> list[dict[str, Any]] | None:
        """Volcano's manifest at ``version``, as objects; ``None`` when missing and ``missing_ok``.

        Raises:
            SourceError: the copy is missing, or is not the pinned one.
        """
        pinned = VOLCANO_MANIFESTS[version]
        return self._read(pinned.name, lambda path: verified_file(path, pinned.blob))

    def chart_input(self, name: str) -> str:
        """The ``chart`` of a Helm release for the pinned chart folder ``name``, once verified.

        Raises:
            SourceError: the folder is missing (unless ``missing_ok``), or is not the pinned one.
        """
        tree = _chart_trees()[name]
        self._read(name, lambda path: verified_tree(path, tree))
        path = self.root / name
        if self.project_dir is not None and path.is_relative_to(self.project_dir):
            return f"./{path.relative_to(self.project_dir)}"
        return str(path)

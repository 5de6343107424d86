"""Fetching the pinned upstream sources into ``.upstream/`` once, verified.

From GitHub (or another git host holding the same repositories), each pinned directory (or
file) is read out of the tag's tree blob by blob, so the copy has exactly git's bytes, modes and
links; from a mirror (a folder holding another machine's ``.upstream/``, or a URL serving
the archives :func:`pack` writes), every item is copied as it is. Either way each copy is
checked against its pin before it is kept, and what is derived from the sources (the
rendered operator overlay, the Trainer chart with its dependencies) is checked against its
own pin.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from ..config.pins import (
    OPERATOR_OVERLAYS,
    TRAINER_V2_CHARTS,
    VOLCANO_MANIFESTS,
    AssembledChart,
    PinnedFile,
    RenderedOverlay,
    Source,
    all_sources,
)
from .local_sources import SourceError, verified_file, verified_objects, verified_tree

GITHUB = "https://github.com"
KUSTOMIZE_ENV = "KUSTOMIZE"
"""A standalone kustomize binary to render overlays with (``kustomize build``), instead of
the one built into kubectl (``kubectl kustomize``)."""


def _git(*args: str, cwd: Path, stdin: bytes | None = None) -> bytes:
    result = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, check=False)
    if result.returncode != 0:
        raise SourceError(f"git {' '.join(args)} failed: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def _fetch_tag(repo: Path, repository: str, tag: str, base: str) -> str:
    """Fetch ``tag`` of ``<base>/<repository>.git`` into a new bare repository ``repo``; its URL."""
    _git("init", "--quiet", "--bare", cwd=repo)
    url = f"{base.rstrip('/')}/{repository}.git"
    _git("fetch", "--quiet", "--depth=1", url, f"refs/tags/{tag}:refs/tags/{tag}", cwd=repo)
    return url


def _pinned_id(repo: Path, url: str, tag: str, path: str, pinned: str, kind: str) -> str:
    """Git's id of ``path`` at ``tag`` in ``repo``, which must be ``pinned``.

    Raises:
        SourceError: it is another ``kind`` (blob or tree) than the one pinned.
    """
    found = _git("rev-parse", f"{tag}^{{tree}}:{path}", cwd=repo).decode().strip()
    if found != pinned:
        raise SourceError(f"{url} {tag}:{path} is git {kind} {found}, pinned {pinned}")
    return found


def fetch_file_from_git(pinned: PinnedFile, dest: Path, *, base: str = GITHUB) -> None:
    """Copy the file ``pinned`` from ``<base>/<owner>/<name>.git`` at its tag to ``dest``.

    Raises:
        SourceError: git failed, or the tag's file is not the pinned blob.
    """
    with tempfile.TemporaryDirectory() as scratch:
        repo = Path(scratch)
        url = _fetch_tag(repo, pinned.repository, pinned.tag, base)
        blob = _pinned_id(repo, url, pinned.tag, pinned.path, pinned.blob, "blob")
        dest.write_bytes(_git("cat-file", "blob", blob, cwd=repo))
    verified_file(dest, pinned.blob)


def fetch_from_git(source: Source, dest: Path, *, base: str = GITHUB) -> None:
    """Copy ``source`` from ``<base>/<owner>/<name>.git`` at its tag into ``dest``.

    Raises:
        SourceError: git failed, or the tag's directory is not the pinned tree.
    """
    with tempfile.TemporaryDirectory() as scratch:
        repo = Path(scratch)
        url = _fetch_tag(repo, source.repository, source.tag, base)
        tree = _pinned_id(repo, url, source.tag, source.path, source.tree, "tree")
        listing = _git("ls-tree", "-r", "-z", tree, cwd=repo).split(b"\0")
        entries = [entry.decode().split(maxsplit=3) for entry in listing if entry]
        blobs = _git("cat-file", "--batch", cwd=repo, stdin="".join(f"{e[2]}\n" for e in entries).encode())
        for mode, _, oid, name in entries:
            header, _, blobs = blobs.partition(b"\n")
            size = int(header.split()[2])
            data, blobs = blobs[:size], blobs[size + 1 :]
            if header.split()[0].decode() != oid:
                raise SourceError(f"git cat-file answered {header!r} for {oid}")
            path = dest / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if mode == "120000":
                path.symlink_to(data.decode())
            else:
                path.write_bytes(data)
                path.chmod(0o755 if mode == "100755" else 0o644)
    verified_tree(dest, source.tree)


def render_overlay(overlay: RenderedOverlay, root: Path) -> None:
    """Render ``overlay`` from its verified source in ``root`` with ``kubectl kustomize``, or
    with the kustomize binary ``$KUSTOMIZE`` names.

    Raises:
        SourceError: the renderer failed, or rendered other objects than the pinned ones (the
            message names the kustomize version found and the one the pin was made with).
    """
    directory = verified_tree(root / overlay.source.name, overlay.source.tree) / overlay.overlay
    kustomize = os.environ.get(KUSTOMIZE_ENV)
    render, version = (
        ([kustomize, "build", str(directory)], [kustomize, "version"])
        if kustomize
        else (["kubectl", "kustomize", str(directory)], ["kubectl", "version", "--client"])
    )
    result = subprocess.run(render, capture_output=True, check=False)
    if result.returncode != 0:
        raise SourceError(f"{' '.join(render)} failed: {result.stderr.decode(errors='replace').strip()}")
    target = root / overlay.name
    target.write_bytes(result.stdout)
    try:
        verified_objects(target, overlay.objects_sha256)
    except SourceError as err:
        target.unlink()
        found = _kustomize_version(version)
        if found == overlay.kustomize:
            raise
        raise SourceError(
            f"{err}. The pin was rendered with kustomize {overlay.kustomize}, and {render[0]} has kustomize "
            f"{found or '(version unknown)'}: render with kubectl 1.32, or install kustomize {overlay.kustomize} "
            f"(go install sigs.k8s.io/kustomize/kustomize/v5@{overlay.kustomize}) and set {KUSTOMIZE_ENV} to it"
        ) from None


def _kustomize_version(command: list[str]) -> str | None:
    """The kustomize version ``command`` reports (kubectl's "Kustomize Version: v5.5.0" line,
    or kustomize's own ``version``)."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = done.stdout.splitlines()
    line = next((line for line in lines if "Kustomize" in line), lines[0] if len(lines) == 1 else "")
    match = re.search(r"v\d+\.\d+\.\d+", line)
    return match.group(0) if match else None


def assemble_chart(chart: AssembledChart, root: Path) -> None:
    """Lay out ``chart`` with its dependencies in ``charts/`` from the verified sources in ``root``.

    A dependency's ``Chart.yaml`` gets the version the chart requires, as its project's
    release packaging sets it; Helm drops a dependency of another version from the
    conditions and renders it unconditionally (helm v3 ``pkg/chartutil/dependencies.go``).

    Raises:
        SourceError: a source is not its pin, or the result is not the pinned tree.
    """
    target = root / chart.name
    shutil.copytree(verified_tree(root / chart.chart.name, chart.chart.tree), target, symlinks=True)
    for name, version, source in chart.dependencies:
        placed = target / "charts" / name
        shutil.copytree(verified_tree(root / source.name, source.tree), placed, symlinks=True)
        meta = placed / "Chart.yaml"
        meta.write_text(re.sub(r"(?m)^version: .*$", f"version: {version}", meta.read_text(), count=1))
    try:
        verified_tree(target, chart.tree)
    except SourceError:
        shutil.rmtree(target)
        raise


def _items() -> list[str]:
    return [
        *(source.name for source in all_sources()),
        *(pinned.name for pinned in VOLCANO_MANIFESTS.values()),
        *(overlay.name for overlay in OPERATOR_OVERLAYS.values()),
        *(chart.name for chart in TRAINER_V2_CHARTS.values()),
    ]


def _verify_item(root: Path, name: str) -> None:
    for source in all_sources():
        if source.name == name:
            verified_tree(root / name, source.tree)
    for pinned in VOLCANO_MANIFESTS.values():
        if pinned.name == name:
            verified_file(root / name, pinned.blob)
    for overlay in OPERATOR_OVERLAYS.values():
        if overlay.name == name:
            verified_objects(root / name, overlay.objects_sha256)
    for chart in TRAINER_V2_CHARTS.values():
        if chart.name == name:
            verified_tree(root / name, chart.tree)


def _copy_from_mirror(mirror: str, name: str, staging: Path) -> None:
    if re.match(r"^(https?|file)://", mirror):
        with urllib.request.urlopen(f"{mirror.rstrip('/')}/{name}.tar.gz") as response, tempfile.TemporaryFile() as f:
            shutil.copyfileobj(response, f)
            f.seek(0)
            if not hasattr(tarfile, "data_filter"):
                raise SourceError("unpacking archives safely needs Python 3.11.4 or later: use --from <folder>")
            with tarfile.open(fileobj=f, mode="r:gz") as archive:
                archive.extractall(staging, filter="data")
        return
    source = Path(mirror) / name
    if source.is_dir():
        shutil.copytree(source, staging / name, symlinks=True)
    elif source.is_file():
        shutil.copyfile(source, staging / name)
    else:
        raise SourceError(f"the mirror {mirror} has no {name}")


def prepare(root: Path, *, mirror: str | None = None, git_base: str = GITHUB) -> list[str]:
    """Fill ``root`` with every pinned item that is not there yet, each verified.

    Args:
        root: the ``.upstream/`` folder.
        mirror: a folder, or an ``https://``/``file://`` URL of archives, holding the
            items; ``None``: fetch the sources from ``git_base`` and derive the rest here
            (``kubectl`` on the PATH).
        git_base: where the pinned repositories are, as ``<git_base>/<owner>/<name>.git``.

    Returns:
        The items added.

    Raises:
        SourceError: something could not be fetched, or is not its pin (nothing is kept then).
    """
    root.mkdir(parents=True, exist_ok=True)
    added: list[str] = []
    for name in _items():
        if (root / name).exists():
            _verify_item(root, name)
            continue
        with tempfile.TemporaryDirectory(dir=root) as scratch:
            staging = Path(scratch)
            if mirror is not None:
                _copy_from_mirror(mirror, name, staging)
                _verify_item(staging, name)
                (staging / name).rename(root / name)
            else:
                _derive_or_fetch(name, root, staging, git_base)
        added.append(name)
    return added


def _derive_or_fetch(name: str, root: Path, staging: Path, git_base: str) -> None:
    for source in all_sources():
        if source.name == name:
            fetch_from_git(source, staging / name, base=git_base)
            (staging / name).rename(root / name)
    for pinned in VOLCANO_MANIFESTS.values():
        if pinned.name == name:
            fetch_file_from_git(pinned, staging / name, base=git_base)
            (staging / name).rename(root / name)
    for overlay in OPERATOR_OVERLAYS.values():
        if overlay.name == name:
            render_overlay(overlay, root)
    for chart in TRAINER_V2_CHARTS.values():
        if chart.name == name:
            assemble_chart(chart, root)


def pack(root: Path, out: Path) -> list[Path]:
    """Write one ``<item>.tar.gz`` per verified item of ``root`` into ``out``, for a mirror
    served over HTTPS (an OSS bucket, for instance).

    Raises:
        SourceError: an item is missing or is not its pin.
    """
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in _items():
        if not (root / name).exists():
            raise SourceError(f"{root / name} is missing: prepare it first")
        _verify_item(root, name)
        archive = out / f"{name}.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(root / name, arcname=name)
        written.append(archive)
    return written

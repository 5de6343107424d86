"""The upstream sources the platform installs, pinned by content.

Each source is one directory (or one file) of a public repository at a release tag, named
by the id git gives that directory's tree (or that file's blob) there (``git rev-parse
<tag>:<path>``): a copy with any other id is not the pinned release. ``python -m components.upstream prepare`` copies them into
``.upstream/`` and derives from them what the stacks apply; the components read only those
verified copies. Pure data: no Pulumi, no network.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """One pinned upstream directory.

    Args:
        name: its folder under ``.upstream/``.
        repository: ``owner/name`` on GitHub.
        tag: the release tag.
        path: the directory inside the repository.
        tree: git's tree id of ``path`` at ``tag``.
    """

    name: str
    repository: str
    tag: str
    path: str
    tree: str


@dataclass(frozen=True)
class PinnedFile:
    """One pinned upstream file.

    Args:
        name: its file under ``.upstream/``.
        repository: ``owner/name`` on GitHub.
        tag: the release tag.
        path: the file inside the repository.
        blob: git's blob id of ``path`` at ``tag``.
    """

    name: str
    repository: str
    tag: str
    path: str
    blob: str


@dataclass(frozen=True)
class RenderedOverlay:
    """A kustomize overlay of a source, rendered once by ``kubectl kustomize``.

    Args:
        name: its file under ``.upstream/``.
        source: the manifests directory.
        overlay: the overlay's path inside ``source``.
        objects_sha256: sha256 of the rendered objects as canonical JSON (keys sorted, no
            spaces), so that the digest does not depend on how a kubectl version lays out YAML.
        kustomize: the kustomize version the pin was rendered with; another version may
            render other objects (a field it adds or drops), which the digest refuses.
    """

    name: str
    source: Source
    overlay: str
    objects_sha256: str
    kustomize: str = "v5.5.0"


@dataclass(frozen=True)
class AssembledChart:
    """A chart with its dependencies in ``charts/``, as ``helm dependency build`` would lay it out.

    Args:
        name: its folder under ``.upstream/``.
        chart: the chart's directory.
        dependencies: the dependency charts' directories, each placed at ``charts/<its folder
            name's chart>`` with its ``Chart.yaml`` version set to the one the chart requires.
        tree: git's tree id of the assembled folder.
    """

    name: str
    chart: Source
    dependencies: tuple[tuple[str, str, Source], ...]
    tree: str


OPERATOR_MANIFESTS = {
    "v1.9.4": Source(
        "trainer-v1.9.4-manifests",
        "kubeflow/trainer",
        "v1.9.4",
        "manifests",
        "4aed050ca9c1e7e0e4d4220563b4c57e9a903759",
    ),
}
"""kubeflow/training-operator was renamed kubeflow/trainer; its v1 tags live on there."""
OPERATOR_OVERLAYS = {
    "v1.9.4": RenderedOverlay(
        "training-operator-v1.9.4.yaml",
        OPERATOR_MANIFESTS["v1.9.4"],
        "overlays/standalone",
        "14843c9446baf40505cffd5a5889b32fa54ee542e1d030de5035b37f39847f98",
    ),
}
"""The standalone overlay (namespace ``kubeflow``); rendered by kubectl 1.32, whose kustomize is v5.5.0."""

VOLCANO_MANIFESTS = {
    "1.12.1": PinnedFile(
        "volcano-v1.12.1.yaml",
        "volcano-sh/volcano",
        "v1.12.1",
        "installer/volcano-development.yaml",
        "e764287e644097a042e8f8cefa015abd482abd4b",
    ),
}
"""Volcano's chart as its release renders it (v1.12.1 ``hack/generate-yaml.sh``: ``helm template``
of ``installer/helm/chart/volcano`` with release name ``volcano`` in namespace ``volcano-system``,
its admission-init hook included, and the ``jobflow`` CRDs), after the two namespaces of
``installer/namespace.yaml``. Its images are tagged, not digested: the platform pins them."""

KUEUE_CHARTS = {
    "0.19.2": Source(
        "kueue-v0.19.2-chart",
        "kubernetes-sigs/kueue",
        "v0.19.2",
        "charts/kueue",
        "34a4b53bc55558f47b5db36f8bbfa4db9993e0be",
    ),
}

_TRAINER_V2_CHART = Source(
    "kubeflow-trainer-v2.3.0-chart",
    "kubeflow/trainer",
    "v2.3.0",
    "charts/kubeflow-trainer",
    "dbdf2f304c8dd664ba45d4439cbbd6d72f5b3986",
)
_JOBSET_CHART = Source(
    "jobset-v0.12.0-chart",
    "kubernetes-sigs/jobset",
    "v0.12.0",
    "charts/jobset",
    "322e86f854571a91b64432d5cbcec78edc3507bc",
)
_LWS_CHART = Source(
    "lws-v0.8.0-chart", "kubernetes-sigs/lws", "v0.8.0", "charts/lws", "5ab3e701912bf204341638a7422c120907dccfba"
)
TRAINER_V2_CHARTS = {
    "v2.3.0": AssembledChart(
        "kubeflow-trainer-v2.3.0",
        _TRAINER_V2_CHART,
        # (chart name, version Chart.yaml requires, source): v2.3.0 Chart.yaml depends on
        # jobset 0.12.0 (jobset.install) and lws 0.8.0 (dataCache.enabled, off here). Helm
        # refuses a chart whose dependencies are missing from charts/, whatever their
        # condition (helm v3.21.4 pkg/action/install.go CheckDependencies, which the kubernetes
        # provider calls for a release, provider/pkg/provider/helm_release.go).
        (("jobset", "0.12.0", _JOBSET_CHART), ("lws", "0.8.0", _LWS_CHART)),
        "a76186c790b65c137c5e5b330bd34f433512d20c",
    ),
}


def all_sources() -> list[Source]:
    """Every pinned upstream directory, each once."""
    found: dict[str, Source] = {}
    for overlay in OPERATOR_OVERLAYS.values():
        found[overlay.source.name] = overlay.source
    for source in KUEUE_CHARTS.values():
        found[source.name] = source
    for chart in TRAINER_V2_CHARTS.values():
        found[chart.chart.name] = chart.chart
        for _, _, dependency in chart.dependencies:
            found[dependency.name] = dependency
    return list(found.values())

"""The Kubeflow Training Operator (v1), optionally with Volcano for gang scheduling."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from ._k8s import TOKEN, typed_resource
from .config import OperatorSpec
from .crd_schema import crd_schemas
from .local_sources import LocalSources
from .manifests import VOLCANO_NAMESPACE, customized_operator_objects, pod_spec, volcano_values
from .pins import OPERATOR_OVERLAYS, VOLCANO_CHARTS

RELEASE_TIMEOUT_S = 900
"""Volcano's pods may wait for a system node and for their images."""


def object_name(obj: dict) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object: the names the objects had
    as children of a kustomize ``Directory``, kept so that they are adopted, not replaced."""
    metadata = obj["metadata"]
    return f"{metadata['namespace']}/{metadata['name']}" if metadata.get("namespace") else metadata["name"]


class TrainingOperator(pulumi.ComponentResource):
    """Installs the Training Operator from its standalone kustomize overlay at a pinned
    release (namespace ``kubeflow``), and Volcano from its Helm chart when gang scheduling
    is on, both from the verified local copies in ``.upstream/``.

    Each object of the rendered overlay passes through
    :func:`~components.manifests.customized_operator_objects` and becomes one resource, so
    each gets its own dependencies: the operator's Deployment waits for the overlay's other
    objects, for Volcano (started with ``--gang-scheduler-name=volcano`` the operator exits
    unless Volcano's PodGroup CRD exists, v1.9.4 ``cmd/training-operator.v1/main.go``
    ``validateCRD``) and for what its image pull needs. A ``kustomize.Directory`` cannot do
    that: its objects get only ``parent`` (pulumi-kubernetes ``kustomize/kustomize.py``,
    ``yaml/yaml.py`` ``_get_child_options``), so ``depends_on`` never reaches them. Volcano
    is a Helm release, not a ``helm.v4.Chart``: its admission secret comes from a
    pre-install hook, which only a release runs.

    Args:
        name: Pulumi resource name.
        spec: the operator's spec.
        provider: the cluster's kubernetes provider.
        sources: the verified local copies of the overlay and the chart (default: the
            ``.upstream/`` folder of the directory Pulumi runs the program in).
        image_mirror: registry path the third-party images were copied to.
        image_digests: the stack's image lock: each image it has is pulled by digest.
        node_selector: labels of the nodes for the operator and Volcano (the system pool).
        depends_on: what must exist before their images can be pulled (the mirror
            registry's VPC link and credential helper): the objects with pods wait for it.

    Attributes:
        ready: what a PyTorchJob must wait for (the operator's objects and CRDs, Volcano);
            empty when the cluster already runs an operator.
        gang_scheduling: whether Volcano gang scheduling is available.
        crd_schemas: the schemas of the CRDs in the verified rendering, by ``(apiVersion,
            kind)``, which each v1 job is checked against before it registers; empty when the
            operator is not installed or its rendering is not prepared (the offline plan).
    """

    def __init__(
        self,
        name: str,
        spec: OperatorSpec,
        *,
        provider: k8s.Provider,
        sources: LocalSources | None = None,
        image_mirror: str | None = None,
        image_digests: Mapping[str, str] | None = None,
        node_selector: dict[str, str] | None = None,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ):
        sources = sources or LocalSources.of_project(Path.cwd())
        rendered = sources.operator_objects(spec.version) if spec.install else None
        overlay = OPERATOR_OVERLAYS[spec.version]
        props = {
            "overlay": f"{overlay.source.repository} {overlay.source.tag} {overlay.source.path}/{overlay.overlay}",
            "objectsSha256": overlay.objects_sha256,
            "prepared": rendered is not None,
        }
        super().__init__(f"{TOKEN}:TrainingOperator", name, props if spec.install else None, opts)
        self.gang_scheduling = spec.volcano.enabled
        self.crd_schemas = crd_schemas(rendered or [])
        self.ready: list[pulumi.Resource] = []
        if not spec.install:
            self.register_outputs({})
            return
        pulls = list(depends_on)
        volcano: list[pulumi.Resource] = []
        if spec.volcano.enabled:
            volcano.append(
                k8s.helm.v3.Release(
                    "volcano",
                    name="volcano",
                    chart=sources.chart_input(VOLCANO_CHARTS[spec.volcano.version].name),
                    version=spec.volcano.version,
                    namespace=VOLCANO_NAMESPACE,
                    create_namespace=True,
                    values=volcano_values(mirror=image_mirror, node_selector=node_selector),
                    timeout=RELEASE_TIMEOUT_S,
                    # Kept when the stack drops it: the chart renders its CRDs from templates/
                    # (v1.12.1 installer/helm/chart/volcano/templates), which helm uninstall deletes,
                    # and a deleted CRD deletes every object of its kind.
                    opts=pulumi.ResourceOptions(
                        parent=self, provider=provider, depends_on=pulls, retain_on_delete=True
                    ),
                )
            )
        objects = customized_operator_objects(
            rendered or [], spec, mirror=image_mirror, node_selector=node_selector, digests=image_digests
        )
        # The objects were children of a kustomize Directory of this name before.
        was_in = pulumi.Alias(parent=pulumi.create_urn(name, "kubernetes:kustomize:Directory", parent=self))

        def apply(obj: dict, depends_on: list[pulumi.Resource]) -> pulumi.Resource:
            options = pulumi.ResourceOptions(
                parent=self,
                provider=provider,
                aliases=[was_in],
                depends_on=depends_on,
                # A deleted CRD deletes every PyTorchJob: CRDs stay when they leave the program.
                retain_on_delete=obj["kind"] == "CustomResourceDefinition",
            )
            return typed_resource(object_name(obj), obj, options)

        namespaces = {obj["metadata"]["name"]: apply(obj, []) for obj in objects if obj["kind"] == "Namespace"}
        others = [
            apply(obj, [namespaces[ns]] if (ns := obj["metadata"].get("namespace")) in namespaces else [])
            for obj in objects
            if obj["kind"] != "Namespace" and pod_spec(obj) is None
        ]
        workloads = [
            apply(obj, [*namespaces.values(), *others, *volcano, *pulls])
            for obj in objects
            if pod_spec(obj) is not None
        ]
        self.ready = [*volcano, *namespaces.values(), *others, *workloads]
        self.register_outputs({})

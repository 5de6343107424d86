"""The Kubeflow Training Operator (v1), optionally with Volcano for gang scheduling."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from ._k8s import TOKEN, typed_resource
from .config import OperatorSpec
from .config.pins import OPERATOR_OVERLAYS, VOLCANO_MANIFESTS
from .manifests import (
    customized_operator_objects,
    customized_volcano_objects,
    is_admission,
    pod_spec,
    waits_for_admission,
)
from .upstream.crd_schema import crd_schemas
from .upstream.local_sources import LocalSources

WORKLOAD_TIMEOUT = "15m"
"""How long a workload may take to become ready (the provider's default is 10 minutes): its pods
may wait for a system node to start and for their images; the Helm releases of
:mod:`components.trainer_v2` get the same 900 s."""


def object_name(obj: dict) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object: the names the objects had
    as children of a kustomize ``Directory``, kept so that they are adopted, not replaced."""
    metadata = obj["metadata"]
    return f"{metadata['namespace']}/{metadata['name']}" if metadata.get("namespace") else metadata["name"]


class TrainingOperator(pulumi.ComponentResource):
    """Installs the Training Operator from its standalone kustomize overlay at a pinned
    release (namespace ``kubeflow``), and Volcano from its release manifest when gang
    scheduling is on, both from the verified local copies in ``.upstream/``.

    Each object of the rendered overlay passes through
    :func:`~components.manifests.customized_operator_objects`, each of Volcano's through
    :func:`~components.manifests.customized_volcano_objects`, and becomes one resource, so
    each gets its own dependencies: namespaces first, then the objects that run no pods
    (CRDs, RBAC, configuration, webhooks), then Jobs, then the other workloads. The
    operator's Deployment also waits for every Volcano object (started with
    ``--gang-scheduler-name=volcano`` the operator exits unless Volcano's PodGroup CRD
    exists, v1.9.4 ``cmd/training-operator.v1/main.go`` ``validateCRD``) and for what its
    image pull needs. A ``kustomize.Directory`` cannot do that: its objects get only
    ``parent`` (pulumi-kubernetes ``kustomize/kustomize.py``, ``yaml/yaml.py``
    ``_get_child_options``), so ``depends_on`` never reaches them. Volcano's Job,
    ``volcano-admission-init``, writes the Secret its admission Deployment mounts; it was a
    pre-install hook of the chart, run before the chart's other objects, hence Jobs before
    the other workloads (a Job resource is ready once it has completed, pulumi-kubernetes
    4.34.2 ``batch/v1/Job.py``). Volcano's scheduler and controllers also wait for its
    admission Deployment, ready once its webhooks serve
    (:func:`~components.manifests.platform.volcano.waits_for_admission`; a Deployment resource is
    ready once it is Available, ``apps/v1/Deployment.py``).

    Args:
        name: Pulumi resource name.
        spec: the operator's spec.
        provider: the cluster's kubernetes provider.
        sources: the verified local copies of the overlay and of Volcano's manifest
            (default: the ``.upstream/`` folder of the directory Pulumi runs the program in).
        image_mirror: registry path the third-party images were copied to.
        image_digests: the stack's image lock: each image it has is pulled by digest.
        node_selector: labels of the nodes for the operator and Volcano (the system pool).
        depends_on: what must exist before their images can be pulled (the mirror
            registry's VPC link and credential helper): the objects with pods wait for it.

    Attributes:
        ready: what a PyTorchJob must wait for (the operator's objects and CRDs, Volcano's);
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
        gang = spec.volcano.enabled
        rendered = sources.operator_objects(spec.version) if spec.install else None
        manifest = sources.volcano_objects(spec.volcano.version) if spec.install and gang else None
        overlay = OPERATOR_OVERLAYS[spec.version]
        props = {
            "overlay": f"{overlay.source.repository} {overlay.source.tag} {overlay.source.path}/{overlay.overlay}",
            "objectsSha256": overlay.objects_sha256,
            "prepared": rendered is not None,
        }
        if gang:
            pinned = VOLCANO_MANIFESTS[spec.volcano.version]
            props |= {
                "volcano": f"{pinned.repository} {pinned.tag} {pinned.path}",
                "volcanoBlob": pinned.blob,
                "volcanoPrepared": manifest is not None,
            }
        super().__init__(f"{TOKEN}:TrainingOperator", name, props if spec.install else None, opts)
        self.gang_scheduling = gang
        self.crd_schemas = crd_schemas(rendered or [])
        self.ready: list[pulumi.Resource] = []
        if not spec.install:
            self.register_outputs({})
            return
        pulls = list(depends_on)
        images = {"mirror": image_mirror, "node_selector": node_selector, "digests": image_digests}
        volcano = (
            self._apply(
                customized_volcano_objects(manifest, version=spec.volcano.version, **images),
                provider=provider,
                waits=pulls,
                serves_first=is_admission,
                waits_for_first=waits_for_admission,
            )
            if manifest is not None
            else []
        )
        # The objects were children of a kustomize Directory of this name before, when the
        # operator was the stack's own child. The engine follows a moved parent only to a parent
        # it has seen registered (pulumi/pulumi pkg/resource/deploy/step_generator.go,
        # collapseAliasToUrn), never to this Directory: its old URN is named whole as well.
        directory = "kubernetes:kustomize:Directory"
        was_in = [
            pulumi.Alias(parent=pulumi.create_urn(name, directory, parent=self)),
            pulumi.Alias(
                parent=pulumi.create_urn(name, directory, parent=pulumi.create_urn(name, f"{TOKEN}:TrainingOperator"))
            ),
        ]
        operator = self._apply(
            customized_operator_objects(rendered or [], spec, **images),
            provider=provider,
            waits=[*volcano, *pulls],
            aliases=was_in,
        )
        self.ready = [*volcano, *operator]
        self.register_outputs({})

    def _apply(
        self,
        objects: list[dict],
        *,
        provider: k8s.Provider,
        waits: list[pulumi.Resource],
        aliases: list[pulumi.Alias] | None = None,
        serves_first: Callable[[dict], bool] | None = None,
        waits_for_first: Callable[[dict], bool] | None = None,
    ) -> list[pulumi.Resource]:
        """One resource per object, in layers: namespaces; the objects without pods; Jobs;
        the other workloads, which also wait for ``waits``; of those, the ones
        ``waits_for_first`` picks also wait for the ones ``serves_first`` picks (Volcano's
        scheduler and controllers for its admission webhook). Returns them all."""

        def apply(obj: dict, depends_on: list[pulumi.Resource]) -> pulumi.Resource:
            runs_pods = pod_spec(obj) is not None
            options = pulumi.ResourceOptions(
                parent=self,
                provider=provider,
                aliases=aliases,
                depends_on=depends_on,
                custom_timeouts=(
                    pulumi.CustomTimeouts(create=WORKLOAD_TIMEOUT, update=WORKLOAD_TIMEOUT) if runs_pods else None
                ),
                # A deleted CRD deletes every object of its kind (every PyTorchJob, PodGroup,
                # Queue): CRDs stay when they leave the program.
                retain_on_delete=obj["kind"] == "CustomResourceDefinition",
            )
            return typed_resource(object_name(obj), obj, options)

        namespaces = {obj["metadata"]["name"]: apply(obj, []) for obj in objects if obj["kind"] == "Namespace"}
        others = [
            apply(obj, [namespaces[ns]] if (ns := obj["metadata"].get("namespace")) in namespaces else [])
            for obj in objects
            if obj["kind"] != "Namespace" and pod_spec(obj) is None
        ]
        setup = [*namespaces.values(), *others]
        jobs = [apply(obj, [*setup, *waits]) for obj in objects if obj["kind"] == "Job"]
        workloads = [obj for obj in objects if obj["kind"] != "Job" and pod_spec(obj) is not None]
        first = [apply(obj, [*setup, *jobs, *waits]) for obj in workloads if serves_first and serves_first(obj)]
        rest = [
            apply(obj, [*setup, *jobs, *waits, *(first if waits_for_first and waits_for_first(obj) else [])])
            for obj in workloads
            if not (serves_first and serves_first(obj))
        ]
        return [*setup, *jobs, *first, *rest]

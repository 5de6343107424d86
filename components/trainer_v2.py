"""Kubeflow Trainer v2 (TrainJobs), the platform's runtimes for it and, optionally, Kueue's
queue for its jobs. It can run beside the v1 Training Operator."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from ._k8s import IMAGE_PLACEHOLDER, TOKEN, resource_args, typed_resource, with_image
from .config import TrainerV2Spec
from .config.kinds import V2_FRAMEWORKS
from .config.pins import KUEUE_CHARTS, TRAINER_V2_CHARTS
from .manifests import BASELINE, FabricProfile, JobContext, Manifest, Placement, training_runtime
from .manifests.base import pod_security_labels
from .manifests.jobs.namespace_runtime import namespace_runtime
from .manifests.jobs.pool_runtime import gpu_runtime_name, placed_runtime
from .manifests.platform.trainer_v2 import (
    KUEUE_NAMESPACE,
    TRAINER_V2_NAMESPACE,
    kueue_values,
    trainer_v2_chart_version,
    trainer_v2_values,
)
from .upstream.local_sources import LocalSources

RELEASE_TIMEOUT_S = 900
"""The controllers may wait for a system node and for their images."""


class TrainerV2(pulumi.ComponentResource):
    """Installs Kubeflow Trainer v2 from its Helm chart at a pinned release (CRDs,
    controller, webhooks, and JobSet as its dependency, in ``kubeflow-system``), then the
    platform's ClusterTrainingRuntimes (PyTorch, JAX, XGBoost), and Kueue's queue when one is given, with Kueue
    itself from its OCI chart when ``spec.kueue.install``.

    The charts are Helm releases, like Volcano, of the verified local copies in
    ``.upstream/`` (the Trainer chart with JobSet in its ``charts/``): the kubernetes provider
    renders them at deploy time, and hooks run. The runtimes wait for Trainer's release and the queue for
    Kueue's, whose CRDs and webhooks they need; a job waits for all of it, since a TrainJob
    created before Kueue's webhook would start without being admitted.

    Args:
        name: Pulumi resource name.
        spec: the Trainer v2 settings; ``install: false`` creates only the runtimes (and
            the queue), for a cluster that runs Trainer v2 already.
        provider: the cluster's kubernetes provider.
        sources: the verified local copies of the charts (default: the ``.upstream/`` folder
            of the directory Pulumi runs the program in).
        fabrics: the distinct networks jobs run over (``None``: the pod network); one runtime
            each for every framework with a v2 runtime (``V2_FRAMEWORKS``), so that a job
            submitted later finds its framework's.
        queue_objects: Kueue's ResourceFlavor, ClusterQueue and LocalQueue, or none (then
            Kueue is not installed either).
        queue: the LocalQueue in ``queue_objects`` that admits the jobs.
        image_mirror: registry path the third-party images were copied to.
        image_digests: the stack's image lock: each image it has is pulled by digest.
        node_selector: labels of the nodes for the controllers (the system pool).
        depends_on: what must exist before their images can be pulled (the mirror
            registry's VPC link and credential helper): the objects with pods wait for it.
        runtime_image: the image the runtimes give a TrainJob that names none, or ``None``.
        namespaces: each namespace jobs run in, as the context its jobs get, with what must
            exist first (the namespace, its claims): every pod-network runtime once more there, as
            a TrainingRuntime with the namespace's claims and identity (:func:`namespace_runtime`).
        gpu_placement: the GPU pool's placement, or ``None`` without a pool: each pod-network
            runtime gets a variant on the pool (:func:`gpu_runtime_name`), there and in each
            namespace, asking Kueue for an unconstrained topology where the queue places GPU jobs
            by one, and a fabric's runtimes carry it (:func:`placed_runtime`).

    Attributes:
        ready: what a TrainJob must wait for (the release, the runtimes, the queue).
        queue: the LocalQueue jobs are labelled with, or ``None``.
        topology_levels: the levels over which Kueue places the queue's GPU jobs, or none.
    """

    def __init__(
        self,
        name: str,
        spec: TrainerV2Spec,
        *,
        provider: k8s.Provider,
        sources: LocalSources | None = None,
        fabrics: Sequence[FabricProfile | None] = (None,),
        queue_objects: Sequence[Manifest] = (),
        queue: str | None = None,
        image_mirror: str | None = None,
        image_digests: Mapping[str, str] | None = None,
        depends_on: Sequence[pulumi.Resource] = (),
        node_selector: dict[str, str] | None = None,
        runtime_image: pulumi.Input[str] | None = None,
        namespaces: Sequence[tuple[JobContext, Sequence[pulumi.Resource]]] = (),
        gpu_placement: Placement | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:TrainerV2", name, None, opts)
        sources = sources or LocalSources.of_project(Path.cwd())
        pulls = list(depends_on)
        installed: list[pulumi.Resource] = []
        if spec.install is not False:
            installed.append(
                k8s.helm.v3.Release(
                    "kubeflow-trainer",
                    name="kubeflow-trainer",
                    chart=sources.chart_input(TRAINER_V2_CHARTS[spec.version].name),
                    version=trainer_v2_chart_version(spec),
                    namespace=TRAINER_V2_NAMESPACE,
                    create_namespace=True,
                    values=trainer_v2_values(
                        spec, mirror=image_mirror, node_selector=node_selector, digests=image_digests
                    ),
                    timeout=RELEASE_TIMEOUT_S,
                    # Kept when the stack drops it: its CRDs are in templates/ (kubeflow/trainer v2.3.0
                    # charts/kubeflow-trainer/templates/crd, kueue v0.19.2 charts/kueue/templates/crd),
                    # which helm uninstall deletes, and a deleted CRD deletes every object of its kind.
                    opts=pulumi.ResourceOptions(
                        parent=self, provider=provider, depends_on=pulls, retain_on_delete=True
                    ),
                )
            )
        installed += self._pod_security(TRAINER_V2_NAMESPACE, installed, provider)
        after_install = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=installed)
        default_image = IMAGE_PLACEHOLDER if runtime_image is not None else None
        topology_levels = spec.kueue.topology_levels if queue is not None else ()
        runtimes = [
            (fabric, training_runtime(fabric, framework, image=default_image, pip_index_url=spec.pip_index_url))
            for fabric in fabrics
            for framework in V2_FRAMEWORKS
        ]
        if gpu_placement is not None:
            runtimes = [
                (fabric, runtime if fabric is None else placed_runtime(runtime, gpu_placement))
                for fabric, runtime in runtimes
            ] + [
                (
                    None,
                    placed_runtime(
                        runtime,
                        gpu_placement,
                        name=gpu_runtime_name(runtime["metadata"]["name"]),
                        topology=bool(topology_levels),
                    ),
                )
                for fabric, runtime in runtimes
                if fabric is None
            ]
        self.runtimes = [
            k8s.apiextensions.CustomResource(
                runtime["metadata"]["name"], **resource_args(with_image(runtime, runtime_image)), opts=after_install
            )
            for _, runtime in runtimes
        ]
        # Over the pod network only (the GPU pool's variants too): a fabric's pods ask for its
        # devices, which only a team with ``rdma`` may (the team's admission policy), so the
        # fabric's runtimes stay cluster-wide.
        self.runtimes += [
            k8s.apiextensions.CustomResource(
                f"{ctx.namespace}-{runtime['metadata']['name']}",
                **resource_args(with_image(namespace_runtime(runtime, ctx), runtime_image)),
                opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[*installed, *ready]),
            )
            for ctx, ready in namespaces
            for fabric, runtime in runtimes
            if fabric is None
        ]
        kueue: list[pulumi.Resource] = []
        if queue_objects and spec.kueue.install:
            kueue.append(
                k8s.helm.v3.Release(
                    "kueue",
                    name="kueue",
                    chart=sources.chart_input(KUEUE_CHARTS[spec.kueue.version].name),
                    version=spec.kueue.version,
                    namespace=KUEUE_NAMESPACE,
                    create_namespace=True,
                    values=kueue_values(
                        spec.kueue, mirror=image_mirror, node_selector=node_selector, digests=image_digests
                    ),
                    timeout=RELEASE_TIMEOUT_S,
                    # Kept for the same reason: Kueue's CRDs (its Workloads) go with an uninstall.
                    opts=pulumi.ResourceOptions(
                        parent=self, provider=provider, depends_on=pulls, retain_on_delete=True
                    ),
                )
            )
        kueue += self._pod_security(KUEUE_NAMESPACE, kueue, provider)
        after_kueue = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=kueue)
        self.queue_resources = [typed_resource(_queue_resource_name(obj), obj, after_kueue) for obj in queue_objects]
        self.queue = queue
        self.topology_levels = topology_levels
        self.ready: list[pulumi.Resource] = [*installed, *self.runtimes, *kueue, *self.queue_resources]
        self.register_outputs({"queue": queue})

    def _pod_security(
        self, namespace: str, releases: list[pulumi.Resource], provider: k8s.Provider
    ) -> list[pulumi.Resource]:
        """Pod Security ``baseline`` on the namespace a release created (Helm's ``create_namespace``
        labels nothing), patched in by server-side apply so that a namespace an earlier ``up``
        created is labelled too. Their controllers pass it: kubeflow/trainer v2.3.0
        ``charts/kubeflow-trainer/values.yaml`` ``manager.securityContext``, jobset v0.12.0
        ``charts/jobset/values.yaml``, kueue v0.19.2 ``charts/kueue/values.yaml`` (``hostNetwork: false``)."""
        if not releases:
            return []
        return [
            k8s.core.v1.NamespacePatch(
                f"{namespace}-pod-security",
                metadata={"name": namespace, "labels": pod_security_labels(BASELINE)},
                opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=list(releases)),
            )
        ]


def _queue_resource_name(obj: Manifest) -> str:
    """``<kind>-<name>``, with the namespace too where LocalQueues of one name live in several."""
    meta = obj["metadata"]
    where = meta.get("namespace", meta["name"])
    return "-".join([obj["kind"].lower(), *([where] if where != meta["name"] else []), meta["name"]])

"""DatasetImport: one dataset copied onto the data volume by a one-shot Job."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from ._k8s import IMAGE_PLACEHOLDER, TOKEN, resource_args
from .config import DatasetImportSpec
from .manifests import Manifest, import_job, oss_source_objects
from .namespace import TrainingNamespace
from .registry import ContainerRegistry, pinned_image
from .storage import SharedVolumes


class DatasetImport(pulumi.ComponentResource):
    """The Job ``import-<name>`` that copies ``spec.source`` into ``<data claim>/<name>``
    (:func:`import_job`), and for an ``oss://`` source the read-only OSS volume and claim it
    reads (:func:`oss_source_objects`).

    The Job is not awaited (``skipAwait``): a copy of terabytes outlasts any deployment, and
    its progress is in its log (``kubectl logs job/import-<name> -f``).

    Args:
        name: Pulumi resource name.
        spec: the import.
        namespace: where the data claim is.
        storage: the shared volumes; the dataset goes into their data claim.
        registry: the registry (``spec.imageTag``'s repository, its pull secret); ``None``
            for a full ``spec.image``.
        provider: the cluster's kubernetes provider.
        region: the region, for an OSS source's default internal endpoint.
        oss_role: the RAM role the OSS CSI plugin reads an ``oss://`` source as
            (``spec.ossRoleName`` when set).
        security_context: the pod's security context (a team's uid), or ``None``.
        node_selector: where the Job runs (the system nodes), or ``None``.
        depends_on: what the Job waits for besides the claims and the registry.

    Attributes:
        job_name: the Job's name, ``import-<name>``.
        namespace: the Job's namespace.

    Raises:
        ValueError: an ``oss://`` source without a role or without an endpoint or region, a data
            volume that is read-only, or an ``imageTag`` without a registry.
    """

    def __init__(
        self,
        name: str,
        spec: DatasetImportSpec,
        *,
        namespace: TrainingNamespace,
        storage: SharedVolumes,
        provider: k8s.Provider,
        registry: ContainerRegistry | None = None,
        region: str | None = None,
        oss_role: pulumi.Input[str] | None = None,
        security_context: Manifest | None = None,
        node_selector: dict[str, str] | None = None,
        depends_on: list[pulumi.Resource] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:DatasetImport", name, None, opts)
        if storage.data_read_only:
            raise ValueError(f"dataset {spec.name}: the data volume is a read-only OSS bucket (storage.oss)")
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        image = pinned_image(spec.image, spec.image_tag, registry, f"dataset {spec.name!r}")
        waits: list[pulumi.Resource] = [*storage.claims, *(registry.ready if registry else []), *(depends_on or [])]
        if spec.oss is not None:
            role = spec.oss_role_name or oss_role
            if role is None:
                raise ValueError(
                    f"dataset {spec.name}: an oss:// source needs ossRoleName, or the role given as oss_role"
                )
            if spec.oss_endpoint is None and region is None:
                raise ValueError(f"dataset {spec.name}: an oss:// source needs ossEndpoint, or the region as region")
            endpoint = spec.oss_endpoint or f"oss-{region}-internal.aliyuncs.com"
            waits.extend(self._source(spec, namespace.name, endpoint, role, child))
        manifest = import_job(
            spec,
            namespace=namespace.name,
            data_claim=storage.data_claim,
            image=IMAGE_PLACEHOLDER,
            security_context=security_context,
            node_selector=node_selector,
            image_pull_secret=registry.pull_secret if registry is not None else None,
        )
        manifest["metadata"]["annotations"] = {"pulumi.com/skipAwait": "true"}
        manifest["spec"]["template"]["spec"]["containers"][0]["image"] = image
        self.job = k8s.batch.v1.Job(
            f"{name}-import",
            **resource_args(manifest),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=waits)),
        )
        self.job_name = manifest["metadata"]["name"]
        self.namespace = namespace.name
        self.register_outputs({"jobName": self.job_name})

    def _source(
        self, spec: DatasetImportSpec, namespace: str, endpoint: str, role: pulumi.Input[str], child
    ) -> list[pulumi.Resource]:
        """The OSS volume and its claim (the role may be an output: Pulumi resolves it inside the spec)."""
        volume, claim = oss_source_objects(spec, namespace=namespace, endpoint=endpoint, role_name=role)
        pv = k8s.core.v1.PersistentVolume(f"{spec.name}-source", **resource_args(volume), opts=child)
        after_pv = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[pv]))
        pvc = k8s.core.v1.PersistentVolumeClaim(f"{spec.name}-source", **resource_args(claim), opts=after_pv)
        return [pv, pvc]

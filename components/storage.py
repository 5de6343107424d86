"""Shared storage for datasets and checkpoints: NAS, its access rules, the CSI
StorageClass and the volume claims every training pod mounts."""

from __future__ import annotations

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from ._k8s import TOKEN, resource_args
from .config import StorageSpec
from .manifests import MANAGED_BY, nas_storage_class, oss_persistent_volume, persistent_volume_claim
from .namespace import TrainingNamespace
from .network import Network

OSS_SECRET = "oss-credentials"


class SharedVolumes(pulumi.ComponentResource):
    """The data and output claims, kept when the stack is destroyed.

    The data claim comes from the StorageClass, or from a static read-only OSS volume
    when ``spec.oss`` is set.

    Attributes:
        data_claim: claim name of the training data volume.
        output_claim: claim name of the checkpoint/output volume.
        claims: the claim resources (jobs depend on them).
    """

    def __init__(
        self,
        name: str,
        spec: StorageSpec,
        *,
        namespace: TrainingNamespace,
        provider: k8s.Provider,
        depends_on: list[pulumi.Resource] | None = None,
        region: str | None = None,
        oss_credentials: tuple[pulumi.Input[str], pulumi.Input[str]] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:SharedVolumes", name, None, opts)
        self.data_claim = spec.data.claim_name
        self.output_claim = spec.output.claim_name
        # retain_on_delete: `pulumi destroy` or a replacement leaves the claim, and so the
        # data, in the cluster.
        keep = pulumi.ResourceOptions(
            parent=self, provider=provider, retain_on_delete=True, depends_on=[namespace.namespace, *(depends_on or [])]
        )
        volumes = [spec.output]
        self.claims: list[pulumi.Resource] = []
        if spec.oss is None:
            volumes.insert(0, spec.data)
        else:
            if oss_credentials is None:
                raise ValueError("storage.oss needs the ossAccessKeyId and ossAccessKeySecret secrets")
            key_id, key_secret = oss_credentials
            secret = k8s.core.v1.Secret(
                f"{name}-oss",
                metadata={"name": OSS_SECRET, "namespace": namespace.name, "labels": dict(MANAGED_BY)},
                string_data={"akId": pulumi.Output.secret(key_id), "akSecret": pulumi.Output.secret(key_secret)},
                opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[namespace.namespace]),
            )
            pv_name = f"{namespace.name}-{spec.data.claim_name}"
            endpoint = spec.oss.endpoint or f"oss-{region}-internal.aliyuncs.com"
            volume = k8s.core.v1.PersistentVolume(
                pv_name,
                **resource_args(
                    oss_persistent_volume(pv_name, spec.oss, endpoint, spec.data.size, OSS_SECRET, namespace.name)
                ),
                opts=pulumi.ResourceOptions(parent=self, provider=provider, retain_on_delete=True, depends_on=[secret]),
            )
            self.claims.append(
                k8s.core.v1.PersistentVolumeClaim(
                    spec.data.claim_name,
                    **resource_args(
                        persistent_volume_claim(
                            spec.data.claim_name,
                            namespace.name,
                            "",
                            spec.data.size,
                            "ReadOnlyMany",
                            volume_name=pv_name,
                        )
                    ),
                    opts=pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(depends_on=[volume])),
                )
            )
        self.claims += [
            k8s.core.v1.PersistentVolumeClaim(
                volume.claim_name,
                **resource_args(
                    persistent_volume_claim(
                        volume.claim_name, namespace.name, spec.storage_class_name, volume.size, spec.access_mode
                    )
                ),
                opts=keep,
            )
            for volume in volumes
        ]
        self.register_outputs({"dataClaim": self.data_claim, "outputClaim": self.output_claim})


class NasStorage(pulumi.ComponentResource):
    """A NAS file system reachable only from the VPC, its CSI StorageClass and the
    StorageClass over it; or the StorageClass over an adopted file system. The claims
    are :class:`SharedVolumes`, which depend on :attr:`ready`.

    The file system is ``protect``ed: neither ``pulumi destroy`` nor a change that would
    replace it can delete it.

    Attributes:
        server: the NFS server (mount target domain).
        ready: what claims must wait for (the StorageClass, when created here).
    """

    def __init__(
        self,
        name: str,
        spec: StorageSpec,
        *,
        network: Network,
        provider: k8s.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:NasStorage", name, None, opts)
        nas = spec.nas
        if nas is None:
            raise ValueError("NasStorage needs storage.nas")
        child = pulumi.ResourceOptions(parent=self)
        if nas.existing_file_system_id is not None:
            self.file_system_id = pulumi.Output.from_input(nas.existing_file_system_id)
            self.server = pulumi.Output.from_input(nas.existing_mount_target_domain)
        else:
            file_system = alicloud.nas.FileSystem(
                name,
                protocol_type="NFS",
                file_system_type=nas.file_system_type,
                storage_type=nas.storage_type,
                capacity=nas.capacity_gib,
                zone_id=nas.zone_id,
                description="ack-training-platform datasets and checkpoints",
                opts=pulumi.ResourceOptions(parent=self, protect=True),
            )
            group = alicloud.nas.AccessGroup(
                name,
                access_group_name=f"{name}-vpc",
                access_group_type="Vpc",
                file_system_type=nas.file_system_type,
                opts=child,
            )
            rule = alicloud.nas.AccessRule(
                name,
                access_group_name=group.access_group_name,
                file_system_type=nas.file_system_type,
                source_cidr_ip=str(nas.access_cidr or network.vpc_cidr),
                rw_access_type="RDWR",
                # Training images often run as root; squashing it would make checkpoints unwritable.
                user_access_type="no_squash",
                priority=1,
                opts=child,
            )
            mount = alicloud.nas.MountTarget(
                name,
                file_system_id=file_system.id,
                access_group_name=group.access_group_name,
                vswitch_id=network.first_vswitch_id,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[rule]),
            )
            self.file_system_id = file_system.id
            self.server = mount.mount_target_domain
        self.ready: list[pulumi.Resource] = []
        if spec.create_storage_class:
            server_path = pulumi.Output.concat(self.server, ":", nas.base_path.rstrip("/"), "/")
            manifest = nas_storage_class(spec.storage_class_name, server_path)
            self.ready.append(
                k8s.storage.v1.StorageClass(
                    spec.storage_class_name,
                    **resource_args(manifest),
                    opts=pulumi.ResourceOptions(parent=self, provider=provider),
                )
            )
        self.register_outputs({"server": self.server, "fileSystemId": self.file_system_id})

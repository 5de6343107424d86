"""Shared storage for datasets and checkpoints: NAS, its access rules, the CSI
StorageClass and the volume claims every training pod mounts."""

from __future__ import annotations

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from ._k8s import TOKEN, resource_args
from .config import StorageSpec
from .manifests import nas_storage_class, persistent_volume_claim
from .namespace import TrainingNamespace
from .network import Network


class SharedVolumes(pulumi.ComponentResource):
    """The data and output claims, kept when the stack is destroyed.

    Attributes:
        data_claim: claim name of the training data volume.
        output_claim: claim name of the checkpoint/output volume.
        claims: the claim resources (jobs depend on them).
    """

    def __init__(self, name: str, spec: StorageSpec, *, namespace: TrainingNamespace, provider: k8s.Provider,
                 depends_on: list[pulumi.Resource] | None = None, opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"{TOKEN}:SharedVolumes", name, None, opts)
        self.data_claim = spec.data.claim_name
        self.output_claim = spec.output.claim_name
        # retain_on_delete: `pulumi destroy` or a replacement leaves the claim, and so the
        # data, in the cluster.
        keep = pulumi.ResourceOptions(parent=self, provider=provider, retain_on_delete=True,
                                      depends_on=[namespace.namespace, *(depends_on or [])])
        self.claims = [
            k8s.core.v1.PersistentVolumeClaim(
                volume.claim_name,
                **resource_args(persistent_volume_claim(volume.claim_name, namespace.name, spec.storage_class_name,
                                                        volume.size, spec.access_mode)),
                opts=keep,
            )
            for volume in (spec.data, spec.output)
        ]
        self.register_outputs({"dataClaim": self.data_claim, "outputClaim": self.output_claim})


class NasStorage(pulumi.ComponentResource):
    """A NAS file system reachable only from the VPC, its CSI StorageClass and the
    shared claims; or the StorageClass and claims over an adopted file system.

    The file system is ``protect``ed: neither ``pulumi destroy`` nor a change that would
    replace it can delete it.

    Attributes:
        server: the NFS server (mount target domain).
        volumes: the shared claims.
    """

    def __init__(self, name: str, spec: StorageSpec, *, network: Network, namespace: TrainingNamespace,
                 provider: k8s.Provider, opts: pulumi.ResourceOptions | None = None):
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
            group = alicloud.nas.AccessGroup(name, access_group_name=f"{name}-vpc", access_group_type="Vpc",
                                             file_system_type=nas.file_system_type, opts=child)
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
            mount = alicloud.nas.MountTarget(name, file_system_id=file_system.id, access_group_name=group.access_group_name,
                                             vswitch_id=network.first_vswitch_id,
                                             opts=pulumi.ResourceOptions(parent=self, depends_on=[rule]))
            self.file_system_id = file_system.id
            self.server = mount.mount_target_domain
        storage_class: list[pulumi.Resource] = []
        if spec.create_storage_class:
            server_path = pulumi.Output.concat(self.server, ":", nas.base_path.rstrip("/"), "/")
            manifest = nas_storage_class(spec.storage_class_name, server_path)
            storage_class.append(k8s.storage.v1.StorageClass(spec.storage_class_name, **resource_args(manifest),
                                                             opts=pulumi.ResourceOptions(parent=self, provider=provider)))
        self.volumes = SharedVolumes(name, spec, namespace=namespace, provider=provider, depends_on=storage_class,
                                     opts=child)
        self.register_outputs({"server": self.server, "fileSystemId": self.file_system_id})

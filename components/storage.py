"""Shared storage for datasets and checkpoints: NAS, its access rules, the CSI
StorageClass and the volumes every training pod mounts."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from ._k8s import IMAGE_PLACEHOLDER, TOKEN, resource_args, with_image
from .config import StorageSpec, TeamSpec, VolumeSpec
from .manifests import (
    Manifest,
    claim_ref,
    directory_owner_job,
    nas_persistent_volume,
    nas_storage_class,
    oss_persistent_volume,
    persistent_volume_claim,
    shared_volume_path,
)
from .namespace import TrainingNamespace
from .network import Network


class SharedVolumes(pulumi.ComponentResource):
    """The data and output claims, whose data no deletion in the cluster can lose.

    On NAS each claim is bound to a volume at a fixed directory,
    ``<basePath>/<namespace>/<claim>``; with ``spec.oss`` the data claim is a read-only OSS
    volume, which the OSS CSI plugin reads as the RAM role ``oss_role`` (RRSA). The volumes are kept on delete, and each names its claim by uid, so a claim
    recreated after ``pulumi destroy`` or after its namespace was deleted binds to the same
    data on the next ``pulumi up``. On a cluster without NAS (a local stack) the claims come
    from the configured StorageClass.

    Attributes:
        data_claim: claim name of the training data volume.
        data_read_only: whether that volume is the read-only OSS bucket (``spec.oss``).
        output_claim: claim name of the checkpoint/output volume.
        claims: the claim resources, and the Job that hands a team its directories (jobs
            depend on them).
    """

    def __init__(
        self,
        name: str,
        spec: StorageSpec,
        *,
        namespace: TrainingNamespace,
        provider: k8s.Provider,
        nas_server: pulumi.Input[str] | None = None,
        depends_on: list[pulumi.Resource] | None = None,
        region: str | None = None,
        oss_role: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:SharedVolumes", name, None, opts)
        self.data_claim = spec.data.claim_name
        self.data_read_only = spec.oss is not None
        self.output_claim = spec.output.claim_name
        self._namespace = namespace
        self._provider = provider
        # retain_on_delete: `pulumi destroy` or a replacement leaves claims and volumes, and
        # so the data, in the cluster.
        self._keep = pulumi.ResourceOptions(
            parent=self, provider=provider, retain_on_delete=True, depends_on=[namespace.namespace, *(depends_on or [])]
        )
        self.claims: list[pulumi.Resource] = []
        if spec.oss is not None:
            if oss_role is None:
                raise ValueError("storage.oss needs the RAM role the OSS CSI plugin reads the bucket as")
            self._oss_volume(spec, region, oss_role)
        shared = [spec.output] if spec.oss is not None else [spec.data, spec.output]
        for volume in shared:
            if nas_server is None:
                self.claims.append(self._claim(volume, spec.storage_class_name, spec.access_mode, None))
                continue
            path = shared_volume_path(spec.nas.volume_root if spec.nas else "/", namespace.name, volume.claim_name)
            name_ = self._volume_name(volume)
            self._bound(
                volume,
                spec.access_mode,
                partial(nas_persistent_volume, name_, nas_server, path, volume.size, spec.access_mode),
            )
        self.register_outputs({"dataClaim": self.data_claim, "outputClaim": self.output_claim})

    def hand_to(
        self,
        team: TeamSpec,
        *,
        image: pulumi.Input[str],
        node_selector: dict[str, str] | None = None,
        image_pull_secret: str | None = None,
        depends_on: list[pulumi.Resource] | None = None,
    ) -> None:
        """Give ``team`` its directories with a one-shot Job (:func:`directory_owner_job`),
        which the team's jobs then wait for.

        NAS has no per-directory owner setting and its access points, which create a root
        directory for a POSIX user, exist on general-purpose file systems only (NAS API
        ``CreateAccessPoint``); a Job run while the access rule trusts root works on both kinds.
        """
        manifest = with_image(
            directory_owner_job(
                team,
                image=IMAGE_PLACEHOLDER,
                data_claim=self.data_claim,
                output_claim=self.output_claim,
                node_selector=node_selector,
                image_pull_secret=image_pull_secret,
            ),
            image,
        )
        self.claims.append(
            k8s.batch.v1.Job(
                f"{team.name}-own-directories",
                **resource_args(manifest),
                opts=pulumi.ResourceOptions(
                    parent=self, provider=self._provider, depends_on=[*self.claims, *(depends_on or [])]
                ),
            )
        )

    def _volume_name(self, volume: VolumeSpec) -> str:
        return f"{self._namespace.name}-{volume.claim_name}"

    def _claim(
        self, volume: VolumeSpec, storage_class: str, access_mode: str, volume_name: str | None
    ) -> pulumi.Resource:
        manifest = persistent_volume_claim(
            volume.claim_name, self._namespace.name, storage_class, volume.size, access_mode, volume_name=volume_name
        )
        # Teams' claims share names; the training namespace's keep the names they always had.
        resource_name = (
            volume.claim_name if self._namespace.team is None else f"{self._namespace.name}-{volume.claim_name}"
        )
        return k8s.core.v1.PersistentVolumeClaim(resource_name, **resource_args(manifest), opts=self._keep)

    def _bound(
        self,
        volume: VolumeSpec,
        access_mode: str,
        build: Callable[[Manifest], Manifest],
    ) -> None:
        """A claim, and the static volume ``build(claim reference)`` reserved for it."""
        claim = self._claim(volume, "", access_mode, self._volume_name(volume))
        uid = claim.metadata.apply(lambda meta: (meta or {}).get("uid"))
        k8s.core.v1.PersistentVolume(
            self._volume_name(volume),
            **resource_args(build(claim_ref(self._namespace.name, volume.claim_name, uid))),
            opts=pulumi.ResourceOptions(parent=self, provider=self._provider, retain_on_delete=True),
        )
        self.claims.append(claim)

    def _oss_volume(self, spec: StorageSpec, region: str | None, role: pulumi.Input[str]) -> None:
        oss = spec.oss
        endpoint = oss.endpoint or f"oss-{region}-internal.aliyuncs.com"
        pv_name = self._volume_name(spec.data)
        self._bound(
            spec.data,
            "ReadOnlyMany",
            lambda ref: oss_persistent_volume(pv_name, oss, endpoint, spec.data.size, role, ref),
        )


class NasStorage(pulumi.ComponentResource):
    """A NAS file system reachable only from the node vSwitches, its mount target and the CSI
    StorageClass over it; or the StorageClass over an adopted file system. The shared
    claims are :class:`SharedVolumes`, given :attr:`server`.

    The file system is ``protect``ed: neither ``pulumi destroy`` nor a change that would
    replace it can delete it.

    Args:
        name: Pulumi resource name.
        spec: the storage spec (``spec.nas`` is required).
        network: the VPC and vSwitches.
        provider: the cluster's kubernetes provider.
        zone_id: the zone of an extreme file system.
        mount_vswitch_index: which of the network's vSwitches the mount target uses.
        access_cidrs: the source ranges that may mount it (the node vSwitches').

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
        zone_id: str | None = None,
        mount_vswitch_index: int = 0,
        access_cidrs: list[str],
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
                zone_id=zone_id,
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
            # One rule per node vSwitch rather than the whole VPC. root_squash: root on a client is
            # the anonymous user on the file system, so only the uids that own a directory write
            # there (``user_access_type`` takes no_squash, root_squash or all_squash: NAS API
            # CreateAccessRule, ``UserAccessType``, help.aliyun.com/zh/nas/api-createaccessrule).
            rules = [
                alicloud.nas.AccessRule(
                    name if i == 0 else f"{name}-{i}",
                    access_group_name=group.access_group_name,
                    file_system_type=nas.file_system_type,
                    source_cidr_ip=cidr,
                    rw_access_type="RDWR",
                    user_access_type=nas.user_access,
                    priority=1,
                    opts=child,
                )
                for i, cidr in enumerate(access_cidrs)
            ]
            mount = alicloud.nas.MountTarget(
                name,
                file_system_id=file_system.id,
                access_group_name=group.access_group_name,
                vswitch_id=network.vswitch_ids.apply(lambda ids: ids[mount_vswitch_index]),
                opts=pulumi.ResourceOptions(parent=self, depends_on=rules),
            )
            self.file_system_id = file_system.id
            self.server = mount.mount_target_domain
        self.ready: list[pulumi.Resource] = []
        if spec.create_storage_class:
            server_path = pulumi.Output.concat(self.server, ":", nas.volume_root, "/")
            manifest = nas_storage_class(spec.storage_class_name, server_path, quota=nas.file_system_type == "standard")
            self.ready.append(
                k8s.storage.v1.StorageClass(
                    spec.storage_class_name,
                    **resource_args(manifest),
                    opts=pulumi.ResourceOptions(parent=self, provider=provider),
                )
            )
        self.register_outputs({"server": self.server, "fileSystemId": self.file_system_id})

"""The whole platform spec and the rules that cross areas."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from .base import Spec, field_error
from .cluster import PRIVATE_ACCESS, ClusterSpec, NetworkSpec, check_kubernetes_needs
from .costs import CostsSpec, check_costs, spot_pools
from .datasets import DatasetImportSpec, check_datasets
from .fit import job_gpus, pool_problem, quota_problem
from .job_rules import check_jobs, check_teams
from .monitoring import ARMS_AGENT_NAMESPACE, MonitoringScope, MonitoringSpec, PrometheusMode, check_monitoring
from .node_health import check_node_health, trainer_image
from .operator import OperatorSpec, TrainerV2Spec, TrainingNamespaceSpec, check_kueue_topology
from .pools import GpuPoolSpec
from .registry import RegistrySpec, check_mirror
from .storage import StorageSpec
from .teams import TeamSpec
from .training_job import Backend, TrainingJobSpec

# --- the platform --------------------------------------------------------------------


IMAGE_MIRROR = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9][a-z0-9._-]*)+$")


class PlatformSpec(Spec):
    """Everything one stack deploys. Each field is a stack config key."""

    region: str | None = None
    """Alibaba Cloud region, read from the provider's own key ``alicloud:region``."""
    network: NetworkSpec | None = None
    """VPC and vSwitches (ACK stacks; adopt with ``vpcId``)."""
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    gpu_pool: GpuPoolSpec | None = Field(default=None)
    """GPU node pool; CPU-only when unset."""
    storage: StorageSpec = Field(default_factory=StorageSpec)
    registry: RegistrySpec | None = None
    """Container registry for the training image; jobs must then give full image references."""
    image_mirror: str | None = Field(default=None)
    """Pull third-party images (the operator, Volcano, the operator's init container, Trainer v2, JobSet) from
    this registry path instead, e.g. ``registry-vpc.cn-hangzhou.aliyuncs.com/mirror``:
    ``<mirror>/<last path part>:<tag>``. ``python -m components.upstream images`` lists what to copy there."""
    image_lock: Literal["require", "warn", "tag"] = Field(default="warn")
    """What a third-party image missing from the stack's image lock (``stacks/images.<stack>.lock.json``,
    written by ``python -m components.upstream lock-images``) does: ``require`` stops the preview naming it,
    ``warn`` (the default) pulls it by tag with a warning, ``tag`` pulls it by tag without one (a local
    cluster only, which pulls the upstream images as a developer's own tools do)."""
    mirror_fill: Literal["none", "subscription", "copy"] = Field(default="none")
    """How ``imageMirror`` gets its copies: ``none`` (the default), copied before ``pulumi up``; ``subscription``,
    in the same ``up``, by the enterprise instance's artifact subscription for each image from Docker Hub, GCR or
    Quay and by ``pulumi up`` itself, by digest, for the others (ghcr.io, registry.k8s.io); ``copy``, every image by
    ``pulumi up`` itself. ``imageMirror`` is then a namespace of its own in ``registry``'s enterprise instance, and
    ``registry.username`` the user the copies are pushed as."""
    operator: OperatorSpec = Field(default_factory=OperatorSpec)
    trainer_v2: TrainerV2Spec = Field(default_factory=TrainerV2Spec, alias="trainerV2")
    training: TrainingNamespaceSpec = Field(default_factory=TrainingNamespaceSpec)
    teams: list[TeamSpec] = Field(default_factory=list)
    """Teams sharing the platform, each in a namespace of its own; jobs then name their team. Without teams every
    job runs in ``training.namespace``."""
    jobs: list[TrainingJobSpec] = Field(default_factory=list)
    """Training jobs to run; each becomes a PyTorchJob (backend v1) or a TrainJob (backend v2)."""
    datasets: list[DatasetImportSpec] = Field(default_factory=list)
    """Datasets copied onto a data volume, each by a one-shot Job ``import-<name>`` (docs/data.md); jobs read
    them from ``/mnt/data/<name>``."""
    monitoring: MonitoringSpec = Field(default_factory=MonitoringSpec)
    costs: CostsSpec | None = None
    """Hourly prices per instance type, with their date and source: cost recording rules, team budgets and
    ``ack-jobs cost`` (docs/monitoring.md, "Cost"). Unset: no cost rules, and ``ack-jobs cost`` needs ``--prices``."""

    @property
    def prometheus(self) -> PrometheusMode:
        """The Prometheus that watches the jobs: as configured, else ARMS on ACK and none locally."""
        if self.monitoring.prometheus is not None:
            return self.monitoring.prometheus
        return "none" if self.is_local else "arms"

    @property
    def scraper_namespace(self) -> str | None:
        """The namespace whose pods may scrape the teams' trainers: as configured, else ARMS's agent's
        with ``arms``; ``None`` where no Prometheus scrapes."""
        if self.prometheus == "none":
            return None
        if self.monitoring.scraper_namespace is not None:
            return self.monitoring.scraper_namespace
        return ARMS_AGENT_NAMESPACE if self.prometheus == "arms" else None

    def tensorboard_image(self) -> tuple[str | None, str | None]:
        """TensorBoard's image as ``(full reference, tag in the registry)``: its own, else the first
        job's; neither set in a stack without jobs that gives TensorBoard no image."""
        board = self.monitoring.tensorboard
        if board.image is not None or board.image_tag is not None:
            return board.image, board.image_tag
        first = self.jobs[0] if self.jobs else None
        return (first.image, first.image_tag) if first is not None else (None, None)

    def runtime_image(self) -> tuple[str | None, str | None]:
        """The platform runtimes' image as ``(full reference, tag in the registry)``: ``trainerV2``'s,
        else the first job's, else neither (the runtimes then name no image)."""
        v2 = self.trainer_v2
        if v2.runtime_image is not None or v2.runtime_image_tag is not None:
            return v2.runtime_image, v2.runtime_image_tag
        first = self.jobs[0] if self.jobs else None
        return (first.image, first.image_tag) if first is not None else (None, None)

    def monitoring_scope(self) -> MonitoringScope:
        """What the stack's monitoring watches: every namespace its jobs run in."""
        return MonitoringScope(
            monitoring=self.monitoring,
            prometheus=self.prometheus,
            namespaces=(self.training.namespace, *(team.name for team in self.teams)),
            v1_operator=self.operator.install,
            trainer_v2=self.uses_trainer_v2,
            tensorboard_image=self.tensorboard_image(),
            costs=self.costs,
            spot_pools=spot_pools(self.gpu_pool),
            budgets=tuple((team.name, team.budget) for team in self.teams if team.budget is not None),
            gpu_pool=self.gpu_pool.name if self.gpu_pool is not None else None,
            trainer_image=trainer_image(self.monitoring.node_health, self.jobs),
        )

    def job_backend(self, job: TrainingJobSpec) -> Backend:
        """The API that runs ``job``: its own ``backend``, else the stack's ``training.backend``."""
        return job.backend or self.training.backend

    @property
    def uses_trainer_v2(self) -> bool:
        """Whether the stack sets up Trainer v2: a job runs on it, or its install is asked for."""
        if self.trainer_v2.install is not None:
            return self.trainer_v2.install or any(self.job_backend(job) == "v2" for job in self.jobs)
        return any(self.job_backend(job) == "v2" for job in self.jobs)

    @property
    def installs_trainer_v2(self) -> bool:
        """Whether the stack installs Trainer v2's chart (not when the cluster has it already)."""
        return self.uses_trainer_v2 and self.trainer_v2.install is not False

    @property
    def is_local(self) -> bool:
        return self.cluster.local is not None

    @property
    def nas_zone(self) -> str | None:
        """Zone of an extreme file system: its own, else the first vSwitch's."""
        nas = self.storage.nas
        if nas is None or nas.file_system_type != "extreme":
            return None
        if nas.zone_id is not None:
            return nas.zone_id
        return self.network.vswitches[0].zone_id if self.network and self.network.vswitches else None

    @property
    def nas_vswitch(self) -> int:
        """Index of the vSwitch the NAS mount target uses: one in an extreme file system's zone."""
        zones = [vsw.zone_id for vsw in self.network.vswitches] if self.network else []
        return zones.index(self.nas_zone) if self.nas_zone in zones else 0

    @property
    def nas_access_cidrs(self) -> list[str]:
        """Source ranges of the NAS access rules: the configured one, else each node vSwitch's block."""
        nas = self.storage.nas
        if nas is not None and nas.access_cidr is not None:
            return [str(nas.access_cidr)]
        return [str(vsw.cidr) for vsw in self.network.vswitches] if self.network else []

    @property
    def network_policies(self) -> bool:
        """Whether team namespaces get NetworkPolicies: on a Terway cluster, where they are enforced."""
        return bool(self.teams) and not self.is_local and self.cluster.network == "terway"

    @property
    def autoscaler_enabled(self) -> bool:
        """Whether the stack configures ACK's cluster autoscaler (needed by an autoscaling pool)."""
        if self.cluster.autoscaler.enabled is not None:
            return self.cluster.autoscaler.enabled
        return self.cluster.creates_cluster and self.gpu_pool is not None and self.gpu_pool.autoscaling

    @model_validator(mode="after")
    def _check(self) -> PlatformSpec:
        if self.image_mirror is not None and not IMAGE_MIRROR.match(self.image_mirror):
            raise field_error(
                "imageMirror",
                f"{self.image_mirror!r} is not a registry path: write host/namespace without scheme or tag, "
                "e.g. 'registry-vpc.cn-hangzhou.aliyuncs.com/mirror'",
            )
        if self.image_lock == "tag" and not self.is_local:
            raise field_error(
                "imageLock",
                "tag pulls third-party images by tag without a word, which only a local cluster may: use warn, or "
                "require once python -m components.upstream lock-images has locked them",
            )
        check_mirror(self.mirror_fill, self.image_mirror, self.registry, self.region)
        if self.is_local:
            for key, value in (
                ("network", self.network),
                ("gpuPool", self.gpu_pool),
                ("registry", self.registry),
                ("storage.nas", self.storage.nas),
                ("storage.oss", self.storage.oss),
            ):
                if value is not None:
                    raise field_error(key, f"a local cluster (cluster.local) creates no cloud resources: remove {key}")
        else:
            self._check_cloud()
        self._check_trainer_v2()
        check_teams(
            self.teams,
            namespace=self.training.namespace,
            storage=self.storage,
            cluster=self.cluster,
            jobs=self.jobs,
            job_gpus=self.job_gpus,
            quota_problem=quota_problem,
        )
        check_jobs(
            self.jobs,
            job_backend=self.job_backend,
            job_gpus=self.job_gpus,
            pool=self.gpu_pool,
            namespace=self.training.namespace,
            gpu_quota=self.training.gpu_quota,
            registry=self.registry is not None,
            kueue=self.trainer_v2.kueue.enabled,
            kueue_priorities=self.trainer_v2.kueue.priorities,
            volcano=self.operator.volcano.enabled,
            node_health=self.monitoring.node_health,
            pool_problem=pool_problem,
            quota_problem=quota_problem,
        )
        check_datasets(
            self.datasets,
            teams=[team.name for team in self.teams],
            storage=self.storage,
            registry=self.registry is not None,
            local=self.is_local,
        )
        check_kueue_topology(
            self.trainer_v2.kueue,
            pool=self.gpu_pool,
            jobs=self.jobs,
            job_backend=self.job_backend,
            job_gpus=self.job_gpus,
        )
        check_monitoring(
            self.monitoring,
            local=self.is_local,
            prometheus=self.prometheus,
            tensorboard_image=self.tensorboard_image,
            registry=self.registry is not None,
            costs=self.costs is not None,
            scraped=(self.training.namespace, *(team.name for team in self.teams)),
        )
        check_node_health(
            self.monitoring.node_health,
            jobs=self.jobs,
            registry=self.registry is not None,
            gpu_pool=self.gpu_pool is not None,
        )
        check_costs(
            self.costs, pool=self.gpu_pool, budgets=[team.budget for team in self.teams], prometheus=self.prometheus
        )
        return self

    def _check_trainer_v2(self) -> None:
        if self.trainer_v2.kueue.enabled and not self.uses_trainer_v2:
            raise field_error(
                "trainerV2.kueue.enabled",
                "Kueue queues v2 jobs only and no job runs on backend v2: set training.backend: v2 (or a job's "
                "backend: v2), or drop kueue",
            )
        if self.trainer_v2.runtime_image_tag is not None and self.registry is None:
            raise field_error(
                "trainerV2.runtimeImageTag",
                "runtimeImageTag needs a registry; without one give a full image reference in runtimeImage",
            )
        kueue = self.trainer_v2.kueue
        pending = self.monitoring.alerts.pending_minutes
        if kueue.enabled and self.prometheus != "none" and pending >= kueue.pods_ready_timeout_minutes:
            raise field_error(
                "monitoring.alerts.pendingMinutes",
                f"{pending} minutes would never pass: Kueue evicts and requeues a job whose pods wait "
                f"trainerV2.kueue.podsReadyTimeoutMinutes ({kueue.pods_ready_timeout_minutes}), so give less than that",
            )
        check_kubernetes_needs(
            self.cluster.version,
            trainer_v2=self.uses_trainer_v2,
            teams=bool(self.teams),
            node_health=self.monitoring.node_health.enabled,
        )

    def _check_cloud(self) -> None:
        if self.region is None:
            raise PydanticCustomError(
                "platform",
                "ACK stacks need the region: pulumi config set alicloud:region cn-hangzhou",
                {"key": "<region>"},
            )
        if self.network is None:
            raise field_error(
                "network",
                "ACK stacks need a network for nodes and NAS: give network.vswitches, "
                "or adopt a VPC with network.vpcId and network.vswitchIds",
            )
        self._check_zones()
        oss = self.storage.oss
        if oss is not None and oss.role_name is None and not self.cluster.creates_cluster:
            raise field_error(
                "storage.oss.roleName",
                "the stack cannot read an adopted cluster's RRSA OIDC provider: give the RAM role the OSS CSI plugin "
                "assumes (trusted for service account ack-csi-fuse/csi-fuse-ossfs, allowed to read the bucket)",
            )
        api = self.cluster.api_server
        # A public API server without allowedCidrs is refused by load_spec: each deployer sets their own.
        if self.cluster.creates_cluster and not api.public and api.private_access is None:
            raise field_error(
                "cluster.apiServer",
                "Pulumi applies every in-cluster object through the API server, which is private by default: "
                "set public: true with allowedCidrs, or keep it private and set privateAccess to how this "
                f"machine reaches the VPC ({', '.join(PRIVATE_ACCESS)})",
            )
        if self.cluster.existing_cluster_id is not None and self.network.vpc_id is None:
            raise field_error(
                "network.vswitches",
                "an adopted cluster (cluster.existingClusterId) lives in a VPC already: adopt it with "
                "network.vpcId and network.vswitchIds instead of creating vSwitches",
            )
        if self.gpu_pool is not None and self.gpu_pool.autoscaling and self.cluster.autoscaler.enabled is False:
            raise field_error(
                "cluster.autoscaler.enabled",
                "the GPU pool autoscales, which ACK does only with the cluster autoscaler configured: drop "
                "enabled: false, or give the pool a fixed size (minSize == maxSize)",
            )
        if self.storage.nas is None:
            raise field_error(
                "storage.nas", "ACK stacks keep data on NAS: add storage.nas (may be {} for the defaults)"
            )
        nas = self.storage.nas
        if nas.access_cidr is None and nas.existing_file_system_id is None and self.network.vpc_id is not None:
            raise field_error(
                "storage.nas.accessCidr",
                "with an adopted VPC the stack does not know the node vSwitches' blocks, to which NAS access is "
                "limited: give the block that holds them, e.g. '10.0.0.0/16'",
            )
        if nas.access_cidr is not None and not nas.access_cidr.subnet_of(self.network.vpc_cidr):
            raise field_error(
                "storage.nas.accessCidr",
                f"{nas.access_cidr} is wider than the VPC ({self.network.vpc_cidr}): NAS access is limited to the VPC",
            )
        if nas.file_system_type == "extreme" and nas.existing_file_system_id is None:
            zones = [vsw.zone_id for vsw in self.network.vswitches]
            if self.nas_zone is None:
                raise field_error(
                    "storage.nas.zoneId",
                    "an extreme file system lives in one zone: give the zone of the vSwitch its mount target uses "
                    "(network.vswitchIds[0])",
                )
            if zones and self.nas_zone not in zones:
                raise field_error(
                    "storage.nas.zoneId",
                    f"{self.nas_zone!r} has no vSwitch for the mount target; use one of {zones}",
                )

    def _check_zones(self) -> None:
        # A zone id is its region's id and a letter: after a dash where the region ends in a name
        # (cn-hangzhou-k), directly where it ends in a number (ap-southeast-1c, eu-central-1a,
        # cn-shanghai-finance-1z): ECS "Regions and zones", and the zone ids of
        # aliyun/terraform-provider-alicloud's tests (resource_alicloud_gpdb_db_instance_plan_test.go).
        region = self.region or ""
        sep = "" if region[-1:].isdigit() else "-"
        zones = [(f"network.vswitches[{i}].zoneId", vsw.zone_id) for i, vsw in enumerate(self.network.vswitches)]
        if self.storage.nas is not None and self.storage.nas.zone_id is not None:
            zones.append(("storage.nas.zoneId", self.storage.nas.zone_id))
        for key, zone in zones:
            if not re.fullmatch(re.escape(region + sep) + "[a-z]", zone):
                raise field_error(
                    key,
                    f"{zone!r} is not a zone of {region} (alicloud:region): use one such as '{region}{sep}a'",
                )

    def job_gpus(self, job: TrainingJobSpec) -> int:
        """GPUs per pod of ``job``: its own setting, else the whole node of the GPU pool."""
        return job_gpus(job, self.gpu_pool.gpus_per_node if self.gpu_pool is not None else 0)

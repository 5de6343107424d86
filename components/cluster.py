"""The Kubernetes cluster: managed ACK Pro with its system nodes, add-ons and autoscaler,
an adopted ACK cluster, or a local one."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from ._k8s import TOKEN
from .api_server import LOOKUP_MINUTES, ListenerAcl, cluster_kubeconfig, exec_kubeconfig, restrict_api_server
from .config import AutoscalerSpec, ClusterSpec, LocalClusterSpec, NetworkSpec
from .identity import METADATA_TOKENS_REQUIRED, node_role, node_role_name
from .manifests import POOL_LABEL, SYSTEM_POOL, creation_addons
from .network import Network

AUTOSCALER_TYPE = "cluster-autoscaler"
"""The autoscaler ACK runs for the cluster; the SDK also offers ``goatscaler``, whose expander
settings differ (pulumi-alicloud 4.0.0 ``cs/autoscaling_config.py``)."""
AUTOSCALER_CLOUD_DEFAULTS = (
    "skipNodesWithSystemPods",
    "skipNodesWithLocalStorage",
    "daemonsetEvictionForNodes",
    "maxGracefulTerminationSec",
    "minReplicaCount",
    "recycleNodeDeletionEnabled",
)
"""Autoscaler settings left at ACK's own values. The provider reads each back whenever the
add-on's config has the key (Optional, no default: terraform-provider-alicloud
resource_alicloud_cs_autoscaling_config.go, resourceAlicloudCSAutoscalingConfigRead), so
unset they show as a change on every preview; and its update sends one only when it is
not false or 0 (``d.GetOk``, resourceAlicloudCSAutoscalingConfigUpdate), so the stack could
not put any of them back to false or 0 if it owned them."""


class AckCluster(pulumi.ComponentResource):
    """A managed ACK cluster with untainted system nodes and the add-ons the platform needs,
    or an adopted cluster with those add-ons.

    Args:
        name: Pulumi resource name.
        spec: the cluster's spec.
        network: the VPC and vSwitches.
        network_spec: the network's spec (pod and service ranges, the VPC's block).
        region: the region, for the API calls that guard the API server and fetch the kubeconfig.
        addons: add-ons managed as resources of their own (``cluster_addons``).
        autoscaler: configure ACK's cluster autoscaler with these settings; ``None`` leaves it alone.

    Attributes:
        cluster_id: the ACK cluster id.
        kubeconfig: the providers' kubeconfig, naming the internal endpoint of a private
            cluster this stack creates, with ACK's credential plugin in place of a credential
            (:func:`~components.api_server.exec_kubeconfig`): the same text on every run; a
            Pulumi secret all the same.
        provider: a kubernetes provider for the cluster. Every object applied through it
            waits for the system nodes, the add-ons and the API server's whitelist. Its
            ``cluster_identifier`` is the cluster id, so a kubeconfig that changes (a rotated
            CA, a new endpoint) replaces no Kubernetes object.
        kept_provider: the same, for objects kept on delete (the shared volumes): it
            updates such an object when it is created again rather than failing because it
            exists (pulumi-kubernetes 4.29 and later refuse by default).
        addons: the add-on resources.
        adopted: whether the cluster existed before this stack.
        autoscaler: the autoscaler configuration, which autoscaling pools must wait for.
        rrsa: the cluster's RRSA OIDC provider and issuer, for roles its service accounts
            assume; ``None`` for an adopted cluster.
        api_server_access: a public API server's whitelist on its load balancer, or ``None``.
    """

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        network: Network,
        network_spec: NetworkSpec,
        region: str,
        addons: Sequence[str],
        autoscaler: AutoscalerSpec | None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:AckCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.api_server_access: ListenerAcl | None = None
        self.rrsa: pulumi.Output[alicloud.cs.outputs.ManagedKubernetesRrsaMetadata] | None = None
        nodes: list[pulumi.Resource] = []
        if spec.existing_cluster_id is not None:
            self.cluster_id = pulumi.Output.from_input(spec.existing_cluster_id)
        else:
            cluster = alicloud.cs.ManagedKubernetes(
                name,
                name=spec.name,
                cluster_spec=spec.cluster_spec,
                version=spec.version,
                vswitch_ids=network.vswitch_ids,
                # Terway gives pods addresses from the node vSwitches instead of an overlay.
                pod_cidr=str(network_spec.pod_cidr) if spec.network == "flannel" else None,
                pod_vswitch_ids=network.vswitch_ids if spec.network == "terway" else None,
                service_cidr=str(network_spec.service_cidr),
                # An adopted VPC has its own egress; a new one needs a NAT gateway to pull images.
                new_nat_gateway=not network.adopted,
                slb_internet_enabled=spec.api_server.public,
                deletion_protection=spec.deletion_protection,
                is_enterprise_security_group=True,
                # Pods get cloud credentials for their own service account (RRSA) rather than
                # the node's role; once on, ACK cannot turn it off (SDK: enable_rrsa).
                enable_rrsa=True,
                addons=[
                    alicloud.cs.ManagedKubernetesAddonArgs(name=addon, config=config)
                    for addon, config in creation_addons(spec.network)
                ],
                opts=child,
            )
            self.cluster_id = cluster.id
            self.rrsa = cluster.rrsa_metadata
            if spec.api_server.allowed_cidrs:
                self.api_server_access = restrict_api_server(
                    f"{name}-api-server",
                    acl_name=f"{spec.name}-api-server",
                    allowed=[str(block) for block in spec.api_server.allowed_cidrs],
                    vpc_cidr=str(network_spec.vpc_cidr),
                    region=region,
                    load_balancer_id=cluster.slb_id,
                    parent=self,
                )
        if spec.has_system_pool:
            nodes.append(self._system_pool(name, spec, network))
        self.autoscaler: alicloud.cs.AutoscalingConfig | None = None
        if autoscaler is not None:
            self.autoscaler = alicloud.cs.AutoscalingConfig(
                f"{name}-autoscaler",
                cluster_id=self.cluster_id,
                # The Terraform provider reads cool_down_duration back from the add-on's
                # ScaleDownUnneededTime (how long a node stays unneeded before it goes) and
                # unneeded_duration from ScaleDownDelayAfterAdd (the pause after a scale-out):
                # terraform-provider-alicloud resource_alicloud_cs_autoscaling_config.go.
                scaler_type=AUTOSCALER_TYPE,
                scale_up_from_zero=True,
                scale_down_enabled=True,
                cool_down_duration=f"{autoscaler.idle_minutes}m",
                gpu_utilization_threshold=str(autoscaler.gpu_utilization_threshold),
                opts=pulumi.ResourceOptions(
                    parent=self, depends_on=list(nodes), ignore_changes=list(AUTOSCALER_CLOUD_DEFAULTS)
                ),
            )
        # An adopted cluster's add-ons were there before this stack and stay after it.
        addon_options = pulumi.ResourceOptions(
            parent=self, depends_on=list(nodes), retain_on_delete=spec.existing_cluster_id is not None
        )
        self.adopted = spec.existing_cluster_id is not None
        self.addons: list[pulumi.Resource] = [
            alicloud.cs.KubernetesAddon(f"{name}-{addon}", cluster_id=self.cluster_id, name=addon, opts=addon_options)
            for addon in addons
        ]
        # It holds no credential, but it is derived from one ACK issued, which neither the
        # SDK's lookup nor the apply marks secret: kept secret, as stacks have it in state.
        self.kubeconfig = pulumi.Output.secret(self._kubeconfig(spec, region))
        guarded = [self.api_server_access] if self.api_server_access is not None else []
        ready = pulumi.ResourceOptions(parent=self, depends_on=[*nodes, *self.addons, *guarded])
        self.provider = k8s.Provider(
            f"{name}-k8s", kubeconfig=self.kubeconfig, cluster_identifier=self.cluster_id, opts=ready
        )
        self.kept_provider = k8s.Provider(
            f"{name}-k8s-kept",
            kubeconfig=self.kubeconfig,
            cluster_identifier=self.cluster_id,
            upsert_existing_objects=True,
            opts=ready,
        )
        self.register_outputs({"clusterId": self.cluster_id, "kubeconfig": self.kubeconfig})

    def _kubeconfig(self, spec: ClusterSpec, region: str) -> pulumi.Output[str]:
        """The providers' kubeconfig (:func:`exec_kubeconfig`), from the API server's address
        and CA in one ACK issues now."""
        if spec.creates_cluster and not spec.api_server.public:
            # The SDK's lookup always asks for the public endpoint, which this cluster lacks.
            issued = self.cluster_id.apply(lambda cluster_id: cluster_kubeconfig(region, cluster_id, private=True))
        else:
            issued = alicloud.cs.get_cluster_credential_output(
                cluster_id=self.cluster_id,
                temporary_duration_minutes=LOOKUP_MINUTES,
                opts=pulumi.InvokeOptions(parent=self),
            ).kube_config
        return pulumi.Output.all(issued, self.cluster_id).apply(
            lambda args: exec_kubeconfig(args[0], cluster_id=args[1], region=region)
        )

    def _system_pool(self, name: str, spec: ClusterSpec, network: Network) -> alicloud.cs.NodePool:
        pool = spec.system_pool
        role, policy = node_role(f"{name}-{SYSTEM_POOL}", role_name=node_role_name(spec.name, SYSTEM_POOL), parent=self)
        return alicloud.cs.NodePool(
            f"{name}-{SYSTEM_POOL}",
            cluster_id=self.cluster_id,
            node_pool_name=SYSTEM_POOL,
            vswitch_ids=network.vswitch_ids,
            instance_types=list(pool.instance_types),
            multi_az_policy="BALANCE",
            desired_size=str(pool.size),
            labels=[alicloud.cs.NodePoolLabelArgs(key=POOL_LABEL, value=SYSTEM_POOL)],
            # Auto-repair needs add-ons whose pods run on these very nodes: off here.
            management=alicloud.cs.NodePoolManagementArgs(enable=True, auto_repair=False),
            system_disk_category="cloud_essd",
            system_disk_size=pool.system_disk_gib,
            install_cloud_monitor=True,
            ram_role_name=role.role_name,
            instance_metadata_options=alicloud.cs.NodePoolInstanceMetadataOptionsArgs(
                http_tokens=METADATA_TOKENS_REQUIRED
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
        )


def local_providers(
    spec: LocalClusterSpec, opts: pulumi.ResourceOptions | None = None
) -> tuple[k8s.Provider, k8s.Provider]:
    """Kubernetes providers for a non-ACK cluster, or ones that only render YAML: one for
    all objects, one for objects kept on delete (see :class:`AckCluster`); ``opts`` for both."""
    settings = {"context": spec.context, "render_yaml_to_directory": spec.render_yaml_to_directory}
    return (
        k8s.Provider("local-k8s", **settings, opts=opts),
        k8s.Provider("local-k8s-kept", upsert_existing_objects=True, **settings, opts=opts),
    )

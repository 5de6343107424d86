"""The Kubernetes cluster: managed ACK Pro, an adopted ACK cluster, or a local one."""

from __future__ import annotations

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from ._k8s import TOKEN
from .config import ClusterSpec, LocalClusterSpec, NetworkSpec
from .network import Network

NETWORK_PLUGIN = "flannel"


class AckCluster(pulumi.ComponentResource):
    """A managed ACK Pro cluster created with no workers (node pools add them), or an
    adopted one.

    Attributes:
        cluster_id: the ACK cluster id.
        kubeconfig: admin kubeconfig, a Pulumi secret.
        provider: a kubernetes provider for the cluster. Its ``cluster_identifier`` is the
            cluster id, so rotating credentials does not replace every Kubernetes object.
    """

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        network: Network,
        network_spec: NetworkSpec,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:AckCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        if spec.existing_cluster_id is not None:
            self.cluster_id = pulumi.Output.from_input(spec.existing_cluster_id)
        else:
            cluster = alicloud.cs.ManagedKubernetes(
                name,
                name=spec.name,
                cluster_spec=spec.cluster_spec,
                version=spec.version,
                vswitch_ids=network.vswitch_ids,
                pod_cidr=str(network_spec.pod_cidr),
                service_cidr=str(network_spec.service_cidr),
                # An adopted VPC has its own egress; a new one needs a NAT gateway to pull images.
                new_nat_gateway=not network.adopted,
                slb_internet_enabled=spec.public_api_endpoint,
                deletion_protection=spec.deletion_protection,
                is_enterprise_security_group=True,
                # pod_cidr means Flannel; ACK requires exactly one network plugin add-on.
                addons=[alicloud.cs.ManagedKubernetesAddonArgs(name=addon) for addon in (NETWORK_PLUGIN, *spec.addons)],
                opts=child,
            )
            self.cluster_id = cluster.id
        credential = alicloud.cs.get_cluster_credential_output(
            cluster_id=self.cluster_id, opts=pulumi.InvokeOptions(parent=self)
        )
        # The SDK does not mark the credential secret; without this it would land in plain state.
        self.kubeconfig = pulumi.Output.secret(credential.kube_config)
        self.provider = k8s.Provider(
            f"{name}-k8s", kubeconfig=self.kubeconfig, cluster_identifier=self.cluster_id, opts=child
        )
        self.register_outputs({"clusterId": self.cluster_id, "kubeconfig": self.kubeconfig})


def local_provider(spec: LocalClusterSpec) -> k8s.Provider:
    """A kubernetes provider for a non-ACK cluster, or one that only renders YAML."""
    return k8s.Provider("local-k8s", context=spec.context, render_yaml_to_directory=spec.render_yaml_to_directory)

"""How Pulumi reaches the API server of a cluster the stack creates: the access list that
guards it, switched on in the same ``pulumi up`` before anything is applied through it, and
the short-lived kubeconfig of the stack's kubernetes providers.

ACK serves the API server through a load balancer of its own and applies API server access
control as a whitelist on that load balancer's port-6443 listener; the list must hold ACK's
control plane range ``100.104.0.0/16`` and the VPC, and one list covers the internal and
the public endpoint (ACK: "Configure API server access control",
https://www.alibabacloud.com/help/en/ack/cluster-access-control). The load balancer is
``cs.ManagedKubernetes.slb_id`` ("The ID of APIServer load balancer", pulumi-alicloud
4.0.0 ``cs/managed_kubernetes.py``). pulumi-alicloud 4.0.0 cannot switch a list on for a
listener it did not create: ``slb.Listener`` creates and deletes a listener of its own, and
nothing else in ``slb/`` or ``cs/`` sets a listener's access control:
:class:`~components.listener_acl.ListenerAcl` does.

The kubeconfig call takes credentials from the environment through the SDK's default chain
(``ALIBABA_CLOUD_ACCESS_KEY_ID``/``ALIBABA_CLOUD_ACCESS_KEY_SECRET``, a credentials profile,
an ECS RAM role, OIDC).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_alicloud as alicloud
from alibabacloud_cs20151215 import models as cs_models
from alibabacloud_cs20151215.client import Client as CsClient

# ListenerAclProvider stays importable here: the state of a stack first deployed when the
# provider lived in this module names it by this path, and refreshes and destroys it so.
from .listener_acl import ListenerAcl, ListenerAclProvider

API_SERVER_PORT = 6443
ACK_CONTROL_PLANE_CIDR = "100.104.0.0/16"
"""ACK's control plane reaches the API server from here; a whitelist without it breaks the
cluster (ACK: "Configure API server access control")."""
KUBECONFIG_MINUTES = 180
"""Lifetime of the kubeconfig the stack's kubernetes providers use (ACK allows 15 to 4320
minutes: pulumi-alicloud 4.0.0 ``cs/get_cluster_credential.py``
``temporary_duration_minutes``): longer than one ``pulumi up`` of a new cluster, far shorter
than ACK's default of years."""


def restrict_api_server(
    name: str,
    *,
    acl_name: str,
    allowed: Sequence[str],
    vpc_cidr: str,
    region: str,
    load_balancer_id: pulumi.Input[str],
    parent: pulumi.Resource,
) -> ListenerAcl:
    """The API server's whitelist: an SLB access list of ``allowed``, the VPC and ACK's
    control plane, switched on for the API server's listener once every entry is in it (an
    empty whitelist lets every source through, per the SLB API's ``AclType``).

    Returns:
        The binding; whatever goes through the API server must wait for it.
    """
    child = pulumi.ResourceOptions(parent=parent)
    acl = alicloud.slb.Acl(name, name=acl_name, ip_version="ipv4", opts=child)
    entries = [
        alicloud.slb.AclEntryAttachment(
            f"{name}-{i}", acl_id=acl.id, entry=entry, comment="ack-training-platform", opts=child
        )
        for i, entry in enumerate(dict.fromkeys([*allowed, vpc_cidr, ACK_CONTROL_PLANE_CIDR]))
    ]
    return ListenerAcl(
        f"{name}-binding",
        region=region,
        load_balancer_id=load_balancer_id,
        listener_port=API_SERVER_PORT,
        acl_id=acl.id,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=entries),
    )


def cluster_kubeconfig(
    region: str,
    cluster_id: str,
    *,
    private: bool,
    minutes: int = KUBECONFIG_MINUTES,
    endpoint: str | None = None,
    protocol: str = "https",
) -> str:
    """A kubeconfig for ``cluster_id`` from ACK's ``DescribeClusterUserKubeconfig``
    (``GET /k8s/{ClusterId}/user_config``; https://www.alibabacloud.com/help/en/ack/
    ack-managed-and-ack-dedicated/developer-reference/api-cs-2015-12-15-describeclusteruserkubeconfig),
    valid for ``minutes``, naming the internal endpoint when ``private``.

    ``cs.get_cluster_credential`` cannot ask for the internal endpoint: the Terraform provider
    it wraps always sends ``PrivateIpAddress: false``
    (terraform-provider-alicloud v1.289.0 ``alicloud/service_alicloud_cs.go``
    ``DescribeClusterKubeConfigWithExpiration``).

    Args:
        region: the cluster's region.
        cluster_id: the ACK cluster.
        private: name the API server's internal endpoint (a cluster without a public one).
        minutes: lifetime of the credential, 15 to 4320.
        endpoint: CS API host (``host[:port]``); the region's public endpoint when unset.
        protocol: ``https``, or ``http`` for a local stand-in.

    Returns:
        The kubeconfig, as YAML text.
    """
    client = CsClient(ListenerAclProvider.sdk_config(region, endpoint, protocol))
    # The API reference's spelling, "true" (ACK: DescribeClusterUserKubeconfig); the SDK would
    # send a bool as Python's str(True), "True".
    request = cs_models.DescribeClusterUserKubeconfigRequest(
        private_ip_address="true" if private else "false", temporary_duration_minutes=minutes
    )
    return client.describe_cluster_user_kubeconfig(cluster_id, request).body.config

"""How Pulumi reaches the API server of a cluster the stack creates: the access list that
guards it, switched on in the same ``pulumi up`` before anything is applied through it, and
the kubeconfig of the stack's kubernetes providers, which holds no credential: each use
fetches a short-lived one through ACK's credential plugin.

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
import yaml

# ListenerAclProvider stays importable here: the state of a stack first deployed when the
# provider lived in this module names it by this path, and refreshes and destroys it so.
from .listener_acl import ListenerAcl, ListenerAclProvider

API_SERVER_PORT = 6443
ACK_CONTROL_PLANE_CIDR = "100.104.0.0/16"
"""ACK's control plane reaches the API server from here; a whitelist without it breaks the
cluster (ACK: "Configure API server access control")."""
KUBECONFIG_MINUTES = 180
"""Lifetime of each credential the providers' credential plugin fetches: longer than one
``pulumi up`` of a new cluster, far shorter than ACK's default of years."""
LOOKUP_MINUTES = 15
"""Lifetime of the credential in the kubeconfig the stack reads the API server's address
and CA from, and drops: ACK's shortest (15 to 4320 minutes: pulumi-alicloud 4.0.0
``cs/get_cluster_credential.py`` ``temporary_duration_minutes``)."""
CREDENTIAL_PLUGIN = "ack-ram-tool"
"""ACK's credential plugin for kubectl and client-go (AliyunContainerService/ack-ram-tool;
ACK: "ack-ram-authenticator" and "Clean up user permissions with ack-ram-tool")."""


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
    minutes: int = LOOKUP_MINUTES,
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
    # Imported here: only a deployment that creates a cluster asks for its kubeconfig.
    from alibabacloud_cs20151215 import models as cs_models
    from alibabacloud_cs20151215.client import Client as CsClient

    client = CsClient(ListenerAclProvider.sdk_config(region, endpoint, protocol))
    # The API reference's spelling, "true" (ACK: DescribeClusterUserKubeconfig); the SDK would
    # send a bool as Python's str(True), "True".
    request = cs_models.DescribeClusterUserKubeconfigRequest(
        private_ip_address="true" if private else "false", temporary_duration_minutes=minutes
    )
    return client.describe_cluster_user_kubeconfig(cluster_id, request).body.config


def exec_kubeconfig(kubeconfig: str, *, cluster_id: str, region: str, minutes: int = KUBECONFIG_MINUTES) -> str:
    """The providers' kubeconfig: the API server and CA of ``kubeconfig`` (one ACK issued),
    and instead of its client certificate an exec credential plugin.

    The plugin is ACK's ``ack-ram-tool credential-plugin get-credential``, as its own
    ``credential-plugin get-kubeconfig`` writes it in certificate mode: on each use it asks
    ACK (``DescribeClusterUserKubeconfig``, with the caller's Alibaba Cloud credentials from
    the environment, a profile or a role) for a certificate valid ``minutes``, cached until
    it nears expiry (ack-ram-tool v0.19.3-dev.1 ``pkg/ctl/credentialplugin/getkubeconfig.go``,
    ``getcredential.go``; ``--region-id`` is a root flag, ``cmd/ack-ram-tool/main.go``). The
    text depends only on the cluster, so the providers' inputs are the same on every run and a
    second ``pulumi up`` shows no change; and it never expires, so ``refresh`` and ``destroy``
    work from state alone, however long after.

    Args:
        kubeconfig: a kubeconfig ACK issued for the cluster (its credential is dropped).
        cluster_id: the ACK cluster.
        region: the cluster's region.
        minutes: lifetime of each credential the plugin fetches.

    Returns:
        The kubeconfig, as YAML text.

    Raises:
        ValueError: ``kubeconfig`` names no cluster.
    """
    issued = yaml.safe_load(kubeconfig) or {}
    contexts = {c.get("name"): c.get("context", {}) for c in issued.get("contexts") or []}
    clusters = {c.get("name"): c.get("cluster", {}) for c in issued.get("clusters") or []}
    wanted = contexts.get(issued.get("current-context"), {}).get("cluster")
    cluster = clusters.get(wanted) or next(iter(clusters.values()), None)
    if not cluster or not cluster.get("server"):
        raise ValueError(f"ACK's kubeconfig for cluster {cluster_id} names no API server")
    user = f"{cluster_id}-{CREDENTIAL_PLUGIN}"
    plugin = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": CREDENTIAL_PLUGIN,
        "args": [
            "credential-plugin",
            "get-credential",
            "--cluster-id",
            cluster_id,
            "--api-version",
            "v1",
            "--expiration",
            f"{minutes}m",
            "--region-id",
            region,
            "--log-level",
            "error",
        ],
        "provideClusterInfo": False,
        "interactiveMode": "Never",
        "installHint": f"install {CREDENTIAL_PLUGIN} (docs/deploying.md, step 2)",
    }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster_id,
                "cluster": {k: cluster[k] for k in ("server", "certificate-authority-data") if k in cluster},
            }
        ],
        "users": [{"name": user, "user": {"exec": plugin}}],
        "contexts": [{"name": cluster_id, "context": {"cluster": cluster_id, "user": user}}],
        "current-context": cluster_id,
    }
    return yaml.safe_dump(config, sort_keys=False)

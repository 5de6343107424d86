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
nothing else in ``slb/`` or ``cs/`` sets a listener's access control. :class:`ListenerAcl`
does, through Alibaba Cloud's SLB SDK (``SetLoadBalancerTCPListenerAttribute`` with
``AclStatus``, ``AclType`` and ``AclId``), as a Pulumi dynamic resource.

Both cloud calls here take credentials from the environment through the SDK's default chain
(``ALIBABA_CLOUD_ACCESS_KEY_ID``/``ALIBABA_CLOUD_ACCESS_KEY_SECRET``, a credentials profile,
an ECS RAM role, OIDC). Pulumi keeps the dynamic provider object in the stack's state, so it
holds an endpoint at most, never a credential.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pulumi
import pulumi_alicloud as alicloud
from alibabacloud_credentials.client import Client as Credentials
from alibabacloud_cs20151215 import models as cs_models
from alibabacloud_cs20151215.client import Client as CsClient
from alibabacloud_slb20140515 import models as slb_models
from alibabacloud_slb20140515.client import Client as SlbClient
from alibabacloud_tea_openapi.exceptions import ClientException
from alibabacloud_tea_openapi.utils_models import Config
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

API_SERVER_PORT = 6443
ACK_CONTROL_PLANE_CIDR = "100.104.0.0/16"
"""ACK's control plane reaches the API server from here; a whitelist without it breaks the
cluster (ACK: "Configure API server access control")."""
KUBECONFIG_MINUTES = 180
"""Lifetime of the kubeconfig the stack's kubernetes providers use (ACK allows 15 to 4320
minutes: pulumi-alicloud 4.0.0 ``cs/get_cluster_credential.py``
``temporary_duration_minutes``): longer than one ``pulumi up`` of a new cluster, far shorter
than ACK's default of years."""

GONE = ("InvalidLoadBalancerId.NotFound", "The specified resource does not exist")
"""How the SLB API says a load balancer or listener is gone, by code or message (the
Terraform provider's listener reads, terraform-provider-alicloud v1.289.0
``alicloud/service_alicloud_slb.go``)."""
BUSY = ("SystemBusy", "OperationBusy", "ServiceIsStopping", "ServiceIsConfiguring")
"""Codes of a load balancer busy with another change, worth a retry (same provider,
``alicloud/errors.go`` ``SlbIsBusy``): ACK may still be configuring a new cluster's."""

T = TypeVar("T")


def _config(region: str, endpoint: str | None, protocol: str) -> Config:
    return Config(credential=Credentials(), region_id=region, endpoint=endpoint, protocol=protocol)


def _matches(err: ClientException, signs: Sequence[str]) -> bool:
    return err.code in signs or any(sign in (err.message or "") for sign in signs)


class ListenerAclProvider(ResourceProvider):
    """Binds an SLB access list as a whitelist to a TCP listener that another owner created.

    The resource's id is ``<load balancer id>:<port>``; its inputs are ``region``,
    ``load_balancer_id``, ``listener_port`` and ``acl_id``; its outputs add ``acl_status`` and
    ``acl_type`` as the load balancer reports them, so ``pulumi refresh`` sees a list switched
    off by hand and the next ``pulumi up`` switches it on again.

    Args:
        endpoint: SLB API host (``host[:port]``); the region's public endpoint when unset.
        protocol: ``https``, or ``http`` for a local stand-in.
        retries: attempts while the load balancer is busy.
        retry_seconds: pause between them.
    """

    def __init__(
        self, endpoint: str | None = None, protocol: str = "https", retries: int = 10, retry_seconds: float = 3.0
    ):
        super().__init__()
        self.endpoint = endpoint
        self.protocol = protocol
        self.retries = retries
        self.retry_seconds = retry_seconds

    def _call(self, attempt: Callable[[], T]) -> T:
        for _ in range(self.retries - 1):
            try:
                return attempt()
            except ClientException as err:
                if not _matches(err, BUSY):
                    raise
            time.sleep(self.retry_seconds)
        return attempt()

    def _client(self, props: dict[str, Any]) -> SlbClient:
        return SlbClient(_config(props["region"], self.endpoint, self.protocol))

    def _describe(self, props: dict[str, Any]) -> dict[str, Any] | None:
        """The listener's access control as the API reports it; ``None`` when it is gone."""
        request = slb_models.DescribeLoadBalancerTCPListenerAttributeRequest(
            region_id=props["region"],
            load_balancer_id=props["load_balancer_id"],
            listener_port=int(props["listener_port"]),
        )
        try:
            body = self._call(lambda: self._client(props).describe_load_balancer_tcplistener_attribute(request)).body
        except ClientException as err:
            if _matches(err, GONE):
                return None
            raise
        return {
            "region": props["region"],
            "load_balancer_id": props["load_balancer_id"],
            "listener_port": int(props["listener_port"]),
            "acl_id": body.acl_id or "",
            "acl_status": body.acl_status or "off",
            "acl_type": body.acl_type or "",
        }

    def _set(self, props: dict[str, Any], *, on: bool) -> None:
        request = slb_models.SetLoadBalancerTCPListenerAttributeRequest(
            region_id=props["region"],
            load_balancer_id=props["load_balancer_id"],
            listener_port=int(props["listener_port"]),
            acl_status="on" if on else "off",
            **({"acl_type": "white", "acl_id": props["acl_id"]} if on else {}),
        )
        self._call(lambda: self._client(props).set_load_balancer_tcplistener_attribute(request))

    def _bind(self, props: dict[str, Any]) -> dict[str, Any]:
        if not props.get("load_balancer_id"):
            # The provider only logs a failed look-up of the API server's load balancer and
            # leaves slb_id empty (terraform-provider-alicloud resource_alicloud_cs_kubernetes.go
            # getApiServerSlbID), which SLB would refuse with an unhelpful message.
            raise RuntimeError(
                "ACK reported no load balancer for the cluster's API server (its slb_id is empty), so its "
                "access list cannot be switched on: check the cluster in the ACK console, then run pulumi up again"
            )
        self._set(props, on=True)
        state = self._describe(props)
        if state is None:
            raise RuntimeError(
                f"load balancer {props['load_balancer_id']} has no TCP listener on {props['listener_port']}"
            )
        return state

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"{props['load_balancer_id']}:{int(props['listener_port'])}", outs=self._bind(props))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        state = self._describe(props)
        return ReadResult(id_=id_ if state is not None else None, outs=state or {})

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [key for key in ("region", "load_balancer_id", "listener_port") if olds.get(key) != news.get(key)]
        drifted = (olds.get("acl_status"), olds.get("acl_type"), olds.get("acl_id")) != ("on", "white", news["acl_id"])
        return DiffResult(changes=bool(replaces) or drifted, replaces=replaces, delete_before_replace=False)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self._bind(news))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        # Unbound, the list can be deleted; a load balancer already gone has nothing to unbind.
        try:
            self._set(props, on=False)
        except ClientException as err:
            if not _matches(err, GONE):
                raise


class ListenerAcl(pulumi.dynamic.Resource, module="slb", name="ListenerAcl"):
    """An access list switched on as the whitelist of an existing TCP listener (see
    :class:`ListenerAclProvider`).

    Args:
        name: Pulumi resource name.
        region: the load balancer's region.
        load_balancer_id: the load balancer.
        listener_port: the TCP listener's port.
        acl_id: the access list.
        provider: the implementation; the default calls the region's public SLB endpoint.
    """

    acl_id: pulumi.Output[str]
    acl_status: pulumi.Output[str]
    """``on`` once bound, as the load balancer last reported it."""

    def __init__(
        self,
        name: str,
        *,
        region: pulumi.Input[str],
        load_balancer_id: pulumi.Input[str],
        listener_port: int,
        acl_id: pulumi.Input[str],
        provider: ListenerAclProvider | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        props = {
            "region": region,
            "load_balancer_id": load_balancer_id,
            "listener_port": listener_port,
            "acl_id": acl_id,
            "acl_status": None,
            "acl_type": None,
        }
        super().__init__(provider or ListenerAclProvider(), name, props, opts)


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
    client = CsClient(_config(region, endpoint, protocol))
    # The API reference's spelling, "true" (ACK: DescribeClusterUserKubeconfig); the SDK would
    # send a bool as Python's str(True), "True".
    request = cs_models.DescribeClusterUserKubeconfigRequest(
        private_ip_address="true" if private else "false", temporary_duration_minutes=minutes
    )
    return client.describe_cluster_user_kubeconfig(cluster_id, request).body.config

"""An SLB access list switched on as the whitelist of a TCP listener that another owner
created (the API server's, which ACK owns), as a Pulumi dynamic resource.

pulumi-alicloud 4.0.0 cannot switch a list on for a listener it did not create:
``slb.Listener`` creates and deletes a listener of its own, and nothing else in ``slb/`` or
``cs/`` sets a listener's access control. :class:`ListenerAcl` does, through Alibaba Cloud's
SLB SDK (``SetLoadBalancerTCPListenerAttribute`` with ``AclStatus``, ``AclType`` and
``AclId``).

Pulumi keeps the provider object in the stack's state, pickled with dill, and the engine's
dynamic provider process loads it from there for every later refresh, update and destroy
(pulumi 3.272 ``pulumi/dynamic/dynamic.py`` ``serialize_provider``: ``dill.dumps(provider,
recurse=True)``). dill stores a class by reference, as ``module.name``, whenever it can find
it there again, and by value (its code) when it cannot (dill 0.4.1 ``_dill.py``:
``save_type`` and ``_locate_function``); dill has no switch to force by value
(uqfoundation/dill#424, raised for pulumi/pulumi#7453). By reference, state would hold this
module's path, which a program that installs the platform under another name, or a later
rename, could not load, and the stack could no longer be refreshed or destroyed. So the
provider class is built inside a function: dill finds no ``<locals>`` class in any module and
stores the class and its methods by value, with only the installed SDKs (Pulumi, Alibaba
Cloud's clients) imported by name when state is loaded. Everything the methods use is
therefore in the class itself or in those SDKs, never a helper of this package.

The provider takes credentials from the environment through the SDK's default chain
(``ALIBABA_CLOUD_ACCESS_KEY_ID``/``ALIBABA_CLOUD_ACCESS_KEY_SECRET``, a credentials profile,
an ECS RAM role, OIDC), so what state holds is an endpoint at most, never a credential.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import ResourceProvider


def _provider_type() -> type[ResourceProvider]:
    """The provider class, built where dill cannot find it by name (see the module's docstring)."""
    import time
    from collections.abc import Callable, Sequence

    from pulumi.dynamic import CreateResult, DiffResult, ReadResult, UpdateResult

    class ListenerAclProvider(ResourceProvider):
        """Binds an SLB access list as a whitelist to a TCP listener that another owner created.

        The resource's id is ``<load balancer id>:<port>``; its inputs are ``region``,
        ``load_balancer_id``, ``listener_port`` and ``acl_id``; its outputs add ``acl_status``
        and ``acl_type`` as the load balancer reports them, so ``pulumi refresh`` sees a list
        switched off by hand and the next ``pulumi up`` switches it on again.

        Args:
            endpoint: SLB API host (``host[:port]``); the region's public endpoint when unset.
            protocol: ``https``, or ``http`` for a local stand-in.
            retries: attempts while the load balancer is busy or the API throttles or fails.
            retry_seconds: pause between them.
        """

        GONE = ("InvalidLoadBalancerId.NotFound", "The specified resource does not exist")
        """How the SLB API says a load balancer or listener is gone, by code or message (the
        Terraform provider's listener reads, terraform-provider-alicloud v1.289.0
        ``alicloud/service_alicloud_slb.go``)."""
        BUSY = ("SystemBusy", "OperationBusy", "ServiceIsStopping", "ServiceIsConfiguring")
        """Codes of a load balancer busy with another change, worth a retry (same provider,
        ``alicloud/errors.go`` ``SlbIsBusy``): ACK may still be configuring a new cluster's."""
        THROTTLED = ("Throttling", "ServiceUnavailable")
        """Codes, or parts of codes, of a call refused for the rate of calls or a service
        that is briefly down, which the Terraform provider retries (``alicloud/errors.go``
        ``NeedRetry``: ``ServiceUnavailable``, any code containing ``Throttling``). The SDK
        raises a throttled call as ``ThrottlingException`` only when the answer carries
        ``x-acs-retry-after``, otherwise as ``ClientException`` with the code, and a 5xx as
        ``ServerException`` (alibabacloud_tea_openapi 0.4.6 ``client.py``)."""

        def __init__(
            self, endpoint: str | None = None, protocol: str = "https", retries: int = 10, retry_seconds: float = 3.0
        ):
            super().__init__()
            self.endpoint = endpoint
            self.protocol = protocol
            self.retries = retries
            self.retry_seconds = retry_seconds

        @staticmethod
        def sdk() -> Any:
            """Alibaba Cloud's SDK modules, imported when the provider first calls the API: a
            plan or a preview only registers the resource, and never pays for loading them."""
            from types import SimpleNamespace

            from alibabacloud_credentials.client import Client as Credentials
            from alibabacloud_slb20140515 import models as slb_models
            from alibabacloud_slb20140515.client import Client as SlbClient
            from alibabacloud_tea_openapi import exceptions
            from alibabacloud_tea_openapi.utils_models import Config

            return SimpleNamespace(
                Config=Config, Credentials=Credentials, SlbClient=SlbClient, models=slb_models, errors=exceptions
            )

        @classmethod
        def sdk_config(cls, region: str, endpoint: str | None, protocol: str) -> Any:
            """An SDK client's configuration, with credentials from the default chain."""
            sdk = cls.sdk()
            return sdk.Config(credential=sdk.Credentials(), region_id=region, endpoint=endpoint, protocol=protocol)

        @staticmethod
        def matches(err: Any, signs: Sequence[str]) -> bool:
            """Whether the API's error (an ``AlibabaCloudException``) has one of ``signs`` in its
            code or message."""
            return err.code in signs or any(sign in (err.message or "") for sign in signs)

        @classmethod
        def transient(cls, err: Any) -> bool:
            """Whether the same call may succeed a little later."""
            errors = cls.sdk().errors
            if isinstance(err, (errors.ThrottlingException, errors.ServerException)):
                return True
            return cls.matches(err, cls.BUSY) or any(sign in (err.code or "") for sign in cls.THROTTLED)

        def call(self, attempt: Callable[[], Any]) -> Any:
            for _ in range(self.retries - 1):
                try:
                    return attempt()
                except self.sdk().errors.AlibabaCloudException as err:
                    if not self.transient(err):
                        raise
                time.sleep(self.retry_seconds)
            return attempt()

        def client(self, props: dict[str, Any]) -> Any:
            return self.sdk().SlbClient(self.sdk_config(props["region"], self.endpoint, self.protocol))

        def describe(self, props: dict[str, Any]) -> dict[str, Any] | None:
            """The listener's access control as the API reports it; ``None`` when it is gone."""
            request = self.sdk().models.DescribeLoadBalancerTCPListenerAttributeRequest(
                region_id=props["region"],
                load_balancer_id=props["load_balancer_id"],
                listener_port=int(props["listener_port"]),
            )
            try:
                body = self.call(lambda: self.client(props).describe_load_balancer_tcplistener_attribute(request)).body
            except self.sdk().errors.AlibabaCloudException as err:
                if self.matches(err, self.GONE):
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

        def set_acl(self, props: dict[str, Any], *, on: bool) -> None:
            request = self.sdk().models.SetLoadBalancerTCPListenerAttributeRequest(
                region_id=props["region"],
                load_balancer_id=props["load_balancer_id"],
                listener_port=int(props["listener_port"]),
                acl_status="on" if on else "off",
                **({"acl_type": "white", "acl_id": props["acl_id"]} if on else {}),
            )
            self.call(lambda: self.client(props).set_load_balancer_tcplistener_attribute(request))

        def bind(self, props: dict[str, Any]) -> dict[str, Any]:
            if not props.get("load_balancer_id"):
                # The provider only logs a failed look-up of the API server's load balancer and
                # leaves slb_id empty (terraform-provider-alicloud resource_alicloud_cs_kubernetes.go
                # getApiServerSlbID), which SLB would refuse with an unhelpful message.
                raise RuntimeError(
                    "ACK reported no load balancer for the cluster's API server (its slb_id is empty), so its "
                    "access list cannot be switched on: check the cluster in the ACK console, then run pulumi up again"
                )
            self.set_acl(props, on=True)
            state = self.describe(props)
            if state is None:
                raise RuntimeError(
                    f"load balancer {props['load_balancer_id']} has no TCP listener on {props['listener_port']}"
                )
            return state

        def create(self, props: dict[str, Any]) -> CreateResult:
            return CreateResult(id_=f"{props['load_balancer_id']}:{int(props['listener_port'])}", outs=self.bind(props))

        def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
            state = self.describe(props)
            return ReadResult(id_=id_ if state is not None else None, outs=state or {})

        def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
            replaces = [
                key for key in ("region", "load_balancer_id", "listener_port") if olds.get(key) != news.get(key)
            ]
            bound = (olds.get("acl_status"), olds.get("acl_type"), olds.get("acl_id"))
            drifted = bound != ("on", "white", news["acl_id"])
            return DiffResult(changes=bool(replaces) or drifted, replaces=replaces, delete_before_replace=False)

        def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
            return UpdateResult(outs=self.bind(news))

        def delete(self, id_: str, props: dict[str, Any]) -> None:
            # Unbound, the list can be deleted; a load balancer already gone has nothing to unbind.
            try:
                self.set_acl(props, on=False)
            except self.sdk().errors.AlibabaCloudException as err:
                if not self.matches(err, self.GONE):
                    raise

    return ListenerAclProvider


ListenerAclProvider = _provider_type()


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
        provider: ResourceProvider | None = None,
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

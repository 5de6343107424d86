"""One run of an ACR artifact subscription rule, waited for until its tag is copied, as a
Pulumi dynamic resource: what pulls the copy depends on it, so nothing pulls before the
copy exists.

pulumi-alicloud 4.0.0 creates rules (``cr.ArtifactSubscriptionRule``) but has no resource
that runs one, and neither has terraform-provider-alicloud v1.289.0 (only
``resource_alicloud_cr_artifact_subscription_rule.go`` under ``alicloud/``). A rule syncs on
ACR's own schedule (ACR: "Sync images from sources outside China using artifact
subscription", https://www.alibabacloud.com/help/en/acr/user-guide/subscribe-to-image-tags);
ACR's API runs one now: ``CreateArtifactSubscriptionTask`` (``InstanceId``, ``RuleId`` →
``TaskId``), and ``GetArtifactSubscriptionTaskResult`` (``InstanceId``, ``TaskId``) lists
each tag the task handled with its ``Status`` and ``Result`` (ACR API reference, cr
2018-12-01: https://help.aliyun.com/zh/acr/developer-reference/api-cr-2018-12-01-createartifactsubscriptiontask
and .../api-cr-2018-12-01-getartifactsubscriptiontaskresult; ``SUCCESS`` is the result they
show). Calls go through the OpenAPI SDK's generic RPC client (alibabacloud_tea_openapi 0.4.6
``client.py`` ``call_api``), as ACR's own SDK would send them, to ``cr.<region>.aliyuncs.com``.

The provider class is built inside a function, so that dill stores it in the stack's state
by value (see :mod:`components.listener_acl` for why); for the same reason its retry rules
are its own, not :class:`~components.listener_acl.ListenerAclProvider`'s. Credentials come
from the SDK's default chain, never from state.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import ResourceProvider

COPIED = "SUCCESS"
"""A tag's ``Result`` once the task copied it."""


def _provider_type() -> type[ResourceProvider]:
    """The provider class, built where dill cannot find it by name."""
    import time

    from alibabacloud_credentials.client import Client as Credentials
    from alibabacloud_tea_openapi import utils_models as open_api
    from alibabacloud_tea_openapi.client import Client as OpenApiClient
    from alibabacloud_tea_openapi.exceptions import AlibabaCloudException, ServerException, ThrottlingException
    from alibabacloud_tea_openapi.utils_models import Config
    from darabonba.runtime import RuntimeOptions
    from pulumi.dynamic import CreateResult, DiffResult, ReadResult

    class SubscriptionTaskProvider(ResourceProvider):
        """Runs a subscription rule once and waits until its tag is copied.

        The resource's id is the task's id; its inputs are ``region``, ``instance_id``,
        ``rule_id``, ``tag`` and ``image`` (the copy, for messages).

        Args:
            endpoint: ACR API host (``host[:port]``); ``cr.<region>.aliyuncs.com`` when unset.
            protocol: ``https``, or ``http`` for a local stand-in.
            wait_seconds: how long a copy may take before the create fails.
            poll_seconds: pause between two looks at the task.
            retries: attempts while the API throttles or fails.
        """

        SUCCESS = COPIED

        def __init__(
            self,
            endpoint: str | None = None,
            protocol: str = "https",
            wait_seconds: float = 1800.0,
            poll_seconds: float = 10.0,
            retries: int = 10,
        ):
            super().__init__()
            self.endpoint = endpoint
            self.protocol = protocol
            self.wait_seconds = wait_seconds
            self.poll_seconds = poll_seconds
            self.retries = retries

        def rpc(self, region: str, action: str, query: dict[str, Any]) -> dict[str, Any]:
            """One call of ACR's 2018-12-01 API; a throttled or failing call is tried again,
            as the Terraform provider does (``alicloud/errors.go`` ``NeedRetry``)."""
            client = OpenApiClient(
                Config(
                    credential=Credentials(),
                    region_id=region,
                    endpoint=self.endpoint or f"cr.{region}.aliyuncs.com",
                    protocol=self.protocol,
                )
            )
            params = open_api.Params(
                action=action,
                version="2018-12-01",
                protocol="HTTPS",
                pathname="/",
                method="POST",
                auth_type="AK",
                style="RPC",
                req_body_type="formData",
                body_type="json",
            )
            request = open_api.OpenApiRequest(query={k: str(v) for k, v in query.items()})

            def attempt() -> dict[str, Any]:
                body = client.call_api(params, request, RuntimeOptions())["body"]
                # ACR may refuse with HTTP 200 and ``IsSuccess: false``, which the SDK does not raise
                # (terraform-provider-alicloud v1.289.0 resource_alicloud_cr_ee_repo.go checks it too).
                if body.get("IsSuccess") is False:
                    raise RuntimeError(
                        f"ACR refused {action} for instance {query['InstanceId']}: {body.get('Code')} "
                        f"{body.get('Message') or ''}".rstrip()
                    )
                return body

            for _ in range(self.retries - 1):
                try:
                    return attempt()
                except (ThrottlingException, ServerException):
                    pass
                except AlibabaCloudException as err:
                    if "Throttling" not in (err.code or "") and err.code != "ServiceUnavailable":
                        raise
                time.sleep(self.poll_seconds)
            return attempt()

        def result(self, props: dict[str, Any], task_id: str) -> dict[str, Any] | None:
            """The task's entry for the rule's tag, once it has one."""
            body = self.rpc(
                props["region"],
                "GetArtifactSubscriptionTaskResult",
                {"InstanceId": props["instance_id"], "TaskId": task_id, "PageNo": 1, "PageSize": 100},
            )
            return next((r for r in body.get("TaskResults") or [] if r.get("Tag") == props["tag"]), None)

        def create(self, props: dict[str, Any]) -> CreateResult:
            body = self.rpc(
                props["region"],
                "CreateArtifactSubscriptionTask",
                {"InstanceId": props["instance_id"], "RuleId": props["rule_id"]},
            )
            task_id = body["TaskId"]
            deadline = time.monotonic() + self.wait_seconds
            while True:
                entry = self.result(props, task_id)
                if entry is not None and entry.get("Result") == self.SUCCESS:
                    return CreateResult(id_=task_id, outs={**props, "task_id": task_id})
                if entry is not None and entry.get("Result"):
                    raise RuntimeError(
                        f"artifact subscription task {task_id} did not copy {props['image']}: {entry.get('Status')} "
                        f"{entry['Result']}; see the instance's Artifact Subscription page, then run pulumi up again"
                    )
                if time.monotonic() >= deadline:
                    raise RuntimeError(
                        f"artifact subscription task {task_id} has not copied {props['image']} after "
                        f"{self.wait_seconds:.0f} s; see the instance's Artifact Subscription page, then run pulumi "
                        "up again"
                    )
                time.sleep(self.poll_seconds)

        def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
            return ReadResult(id_=id_, outs=props)

        def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
            # A new rule or tag is a new copy: run again, and wait for it before anything pulls it.
            replaces = [k for k in ("region", "instance_id", "rule_id", "tag") if olds.get(k) != news.get(k)]
            return DiffResult(changes=bool(replaces), replaces=replaces, delete_before_replace=False)

        def delete(self, id_: str, props: dict[str, Any]) -> None:
            # A finished task has nothing to undo; the copy stays with its repository.
            return None

    return SubscriptionTaskProvider


SubscriptionTaskProvider = _provider_type()


class SubscriptionTask(pulumi.dynamic.Resource, module="cr", name="SubscriptionTask"):
    """A subscription rule run once, done when its tag is copied (see :class:`SubscriptionTaskProvider`).

    Args:
        name: Pulumi resource name.
        region: the instance's region.
        instance_id: the enterprise instance.
        rule_id: the rule (``ArtifactSubscriptionRule.artifact_subscription_rule_id``).
        tag: the tag the rule copies.
        image: the copy as the cluster pulls it.
        provider: the implementation; the default calls the region's public ACR endpoint.
    """

    task_id: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        region: pulumi.Input[str],
        instance_id: pulumi.Input[str],
        rule_id: pulumi.Input[str],
        tag: str,
        image: str,
        provider: ResourceProvider | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        props = {
            "region": region,
            "instance_id": instance_id,
            "rule_id": rule_id,
            "tag": tag,
            "image": image,
            "task_id": None,
        }
        super().__init__(provider or SubscriptionTaskProvider(), name, props, opts)

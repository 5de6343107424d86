"""The RAM policy for ``pulumi up`` is generated from what a stack plans: every cloud
resource type the platform can create has the actions of its calls, and the policy the
deploying docs show is the one prod's plan generates."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pulumi
import pulumi_alicloud as alicloud
import pytest
from conftest import ROOT, cfg, stack_config

from components.manifests.platform.deploy_policy import LOOKUP_SERVICES, RESOURCE_APIS, MissingApis, deploy_policy

DEPLOYMENT_SET = "alicloud:ecs/ecsDeploymentSet:EcsDeploymentSet"


def actions(policy: dict) -> set[str]:
    return {action for statement in policy["Statement"] for action in statement["Action"]}


def constructed_types() -> set[str]:
    """The type token of every pulumi-alicloud resource class the components construct."""
    tokens = set()
    for path in (ROOT / "components").rglob("*.py"):
        for module, name in re.findall(r"\balicloud\.([a-z]+)\.([A-Z][A-Za-z]+)\b(?!Args)", path.read_text()):
            cls = getattr(getattr(alicloud, module), name)
            if isinstance(cls, type) and issubclass(cls, pulumi.CustomResource):
                tokens.update(re.findall(r"'(alicloud:[a-z]+/[A-Za-z]+:[A-Za-z]+)'", inspect.getsource(cls)))
    return tokens


def test_every_cloud_resource_the_components_create_has_actions() -> None:
    constructed = constructed_types()
    assert DEPLOYMENT_SET in constructed and "alicloud:cs/managedKubernetes:ManagedKubernetes" in constructed
    assert sorted(constructed - set(RESOURCE_APIS)) == []


def test_prods_low_latency_pool_may_create_its_deployment_set(run_stack) -> None:
    plan = run_stack(stack_config("prod"), "prod")
    assert plan.of_type(DEPLOYMENT_SET)
    assert {"ecs:CreateDeploymentSet", "ecs:ModifyDeploymentSetAttribute", "ecs:DeleteDeploymentSet"} <= actions(
        plan.deploy_policy()
    )


def bought_registry() -> dict:
    config = stack_config("prod")
    for key in ("enterpriseInstanceId", "linkVpc", "namespaceExists", "repositoryExists"):
        del config[cfg("registry")][key]
    del config[cfg("imageMirror")]
    del config[cfg("mirrorFill")]
    return config


def with_oss() -> dict:
    config = stack_config("dev")
    config[cfg("storage")]["oss"] = {"bucket": "team-datasets", "path": "/imagenet"}
    return config


@pytest.mark.parametrize(
    ("config", "stack"),
    [(stack_config("dev"), "dev"), (stack_config("prod"), "prod"), (bought_registry(), "prod"), (with_oss(), "dev")],
    ids=["dev", "prod", "prod-buying-its-registry", "dev-with-oss"],
)
def test_every_planned_type_and_lookup_has_actions(run_stack, config: dict, stack: str) -> None:
    plan = run_stack(config, stack)
    policy = plan.deploy_policy()
    granted = actions(policy)
    planned = {r.type for r in plan.resources if r.type in RESOURCE_APIS}
    assert planned and plan.lookups
    for type_ in planned:
        apis = RESOURCE_APIS[type_]
        assert {f"{apis.service}:{write}" for write in apis.writes} <= granted, type_
    for lookup in plan.lookups:
        assert f"{LOOKUP_SERVICES[lookup]}:Describe*" in granted, lookup
    # RAM is granted only on the roles and policies the stack creates.
    ram = [s for s in policy["Statement"] if any(a.startswith("ram:") for a in s["Action"])]
    roles = sorted(r.inputs["roleName"] for r in plan.of_type("alicloud:ram/role:Role"))
    assert [s["Resource"] for s in ram] == [
        [f"acs:ram:*:*:role/{name}" for name in roles] + [f"acs:ram:*:*:policy/{name}" for name in roles]
    ]
    assert all(s["Resource"] == "*" for s in policy["Statement"] if s not in ram)


def test_a_type_without_actions_is_named() -> None:
    with pytest.raises(MissingApis) as raised:
        deploy_policy(["alicloud:ecs/instance:Instance", "kubernetes:core/v1:Namespace"], ["alicloud:oss/getBuckets"])
    assert str(raised.value) == (
        "no RAM actions known for alicloud:ecs/instance:Instance, alicloud:oss/getBuckets: add the API calls of its "
        "create, read, update and delete (components/manifests/platform/deploy_policy.py)"
    )


def test_the_deploying_docs_show_prods_generated_policy(run_stack) -> None:
    page = (ROOT / "docs" / "deploying.md").read_text()
    section = page.split("### Least privilege for `pulumi up`", 1)[1].split("\n### ", 1)[0]
    shown = re.search(r"```json\n(.*?)\n```", section, re.S).group(1)
    assert json.loads(shown) == run_stack(stack_config("prod"), "prod").deploy_policy()


def test_the_plan_prints_the_policy(capsys, monkeypatch) -> None:
    from components.plan.command import main

    monkeypatch.chdir(Path(ROOT))
    assert main(["--stack", "dev", "--ram-policy"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert "vpc:CreateVpc" in actions(printed) and "ecs:CreateDeploymentSet" not in actions(printed)


def test_reads_outside_the_wildcards_are_granted(run_stack) -> None:
    # Every read of a managed cluster asks for its control plane's log settings
    # (terraform-provider-alicloud v1.289.0 resource_alicloud_cs_managed_kubernetes.go
    # checkControlPlaneLogEnable), and of a bought registry for its subscription
    # (service_alicloud_cr_v2.go DescribeInstanceQueryAvailableInstances): neither is a
    # Describe, Get or List call, and a refused read fails the create that ends in it.
    granted = actions(run_stack(bought_registry(), "prod").deploy_policy())
    assert {"cs:CheckControlPlaneLogEnable", "bssapi:QueryAvailableInstances"} <= granted


def test_the_mirrors_copies_need_no_cloud_api(run_stack) -> None:
    # pulumi up pushes them with the registry user's password: the policy is the one without them.
    plan = run_stack(stack_config("prod"), "prod")
    copies = {r.type for r in plan.of_type("pulumi-python:dynamic/cr:ImageCopy")}
    assert copies
    others = {r.type for r in plan.resources} - copies
    roles = [r.inputs["roleName"] for r in plan.of_type("alicloud:ram/role:Role")]
    policies = [r.inputs["policyName"] for r in plan.of_type("alicloud:ram/policy:Policy")]
    assert plan.deploy_policy() == deploy_policy(others, plan.lookups, roles=roles, policies=policies)

"""The RAM policy of the identity that runs ``pulumi up``, generated from what a stack plans:
each cloud resource type maps to the API calls the provider makes to create, update and
delete it, and to the service whose read calls it makes; each cloud look-up to its service.
Pure: a JSON-ready dict, no Pulumi.

RAM names an action ``<service>:<API name>``. The API names come from the Terraform
provider that pulumi-alicloud 4.0.0 wraps (terraform-provider-alicloud v1.289.0, the
``alicloud/`` file named per type), and for ACK's REST paths from the CS SDK that names them
(alibabacloud_cs20151215 7.2.3 ``client.py``). Reads are granted per service as
``Describe*``, ``Get*`` and ``List*``: each resource reads through several (tags, state
waits); a read call outside them is listed with its type.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..base import Manifest
from .ram import RAM_POLICY_VERSION

READS = ("Describe*", "Get*", "List*")
"""The read-only API families granted on each service a stack uses."""
DYNAMIC_PREFIX = "pulumi-python:dynamic/"


@dataclass(frozen=True)
class CloudApis:
    """What one resource type calls.

    Args:
        service: the RAM service code of its API.
        writes: the API names of its create, update and delete calls.
        source: where they are named (terraform-provider-alicloud v1.289.0 ``alicloud/``
            unless another source is given).
        extra: other actions it needs, with their service (``ram:PassRole``).
    """

    service: str
    writes: tuple[str, ...]
    source: str
    extra: tuple[str, ...] = ()


RESOURCE_APIS: dict[str, CloudApis] = {
    "alicloud:vpc/network:Network": CloudApis(
        "vpc", ("CreateVpc", "ModifyVpcAttribute", "DeleteVpc"), "resource_alicloud_vpc.go"
    ),
    "alicloud:vpc/switch:Switch": CloudApis(
        "vpc", ("CreateVSwitch", "ModifyVSwitchAttribute", "DeleteVSwitch"), "resource_alicloud_vswitch.go"
    ),
    "alicloud:cs/managedKubernetes:ManagedKubernetes": CloudApis(
        "cs",
        ("CreateCluster", "ModifyCluster", "ModifyClusterTags", "UpgradeCluster", "MigrateCluster", "DeleteCluster"),
        "resource_alicloud_cs_managed_kubernetes.go and resource_alicloud_cs_kubernetes.go (DeleteCluster)",
        # Its read looks up the NAT gateway ACK created in the VPC, and asks for the control
        # plane's log settings on every read (checkControlPlaneLogEnable in
        # resource_alicloud_cs_managed_kubernetes.go), a call no read wildcard covers.
        extra=("vpc:DescribeNatGateways", "cs:CheckControlPlaneLogEnable"),
    ),
    "alicloud:cs/nodePool:NodePool": CloudApis(
        "cs",
        (
            "CreateClusterNodePool",
            "ModifyClusterNodePool",
            "ModifyNodePoolNodeConfig",
            "UpgradeClusterNodepool",
            "RemoveNodePoolNodes",
            "DeleteClusterNodepool",
        ),
        "resource_alicloud_cs_kubernetes_node_pool.go (REST paths; their names: alibabacloud_cs20151215 client.py)",
        # A pool given a worker role passes it to ACK (ACK: "Use custom worker RAM roles").
        extra=("ram:PassRole",),
    ),
    "alicloud:cs/kubernetesAddon:KubernetesAddon": CloudApis(
        "cs",
        ("InstallClusterAddons", "ModifyClusterAddon", "UpgradeClusterAddons", "UnInstallClusterAddons"),
        "resource_alicloud_cs_kubernetes_addon.go and service_alicloud_cs.go",
    ),
    "alicloud:cs/autoscalingConfig:AutoscalingConfig": CloudApis(
        "cs", ("CreateAutoscalingConfig",), "resource_alicloud_cs_autoscaling_config.go"
    ),
    "alicloud:ecs/ecsDeploymentSet:EcsDeploymentSet": CloudApis(
        "ecs",
        ("CreateDeploymentSet", "ModifyDeploymentSetAttribute", "DeleteDeploymentSet"),
        "resource_alicloud_ecs_deployment_set.go",
    ),
    "alicloud:nas/fileSystem:FileSystem": CloudApis(
        "nas", ("CreateFileSystem", "ModifyFileSystem", "DeleteFileSystem"), "resource_alicloud_nas_file_system.go"
    ),
    "alicloud:nas/accessGroup:AccessGroup": CloudApis(
        "nas", ("CreateAccessGroup", "ModifyAccessGroup", "DeleteAccessGroup"), "resource_alicloud_nas_access_group.go"
    ),
    "alicloud:nas/accessRule:AccessRule": CloudApis(
        "nas", ("CreateAccessRule", "ModifyAccessRule", "DeleteAccessRule"), "resource_alicloud_nas_access_rule.go"
    ),
    "alicloud:nas/mountTarget:MountTarget": CloudApis(
        "nas", ("CreateMountTarget", "ModifyMountTarget", "DeleteMountTarget"), "resource_alicloud_nas_mount_target.go"
    ),
    "alicloud:slb/acl:Acl": CloudApis(
        "slb",
        (
            "CreateAccessControlList",
            "SetAccessControlListAttribute",
            "AddAccessControlListEntry",
            "RemoveAccessControlListEntry",
            "DeleteAccessControlList",
        ),
        "resource_alicloud_slb_acl.go",
    ),
    "alicloud:slb/aclEntryAttachment:AclEntryAttachment": CloudApis(
        "slb",
        ("AddAccessControlListEntry", "RemoveAccessControlListEntry"),
        "resource_alicloud_slb_acl_entry_attachment.go",
    ),
    f"{DYNAMIC_PREFIX}slb:ListenerAcl": CloudApis(
        "slb", ("SetLoadBalancerTCPListenerAttribute",), "components/listener_acl.py (this platform)"
    ),
    "alicloud:cr/namespace:Namespace": CloudApis(
        "cr", ("CreateNamespace", "UpdateNamespace", "DeleteNamespace"), "resource_alicloud_cr_namespace.go"
    ),
    "alicloud:cr/repo:Repo": CloudApis(
        "cr", ("CreateRepo", "UpdateRepo", "DeleteRepo"), "resource_alicloud_cr_repo.go"
    ),
    "alicloud:cr/registryEnterpriseInstance:RegistryEnterpriseInstance": CloudApis(
        "cr",
        ("ResetLoginPassword", "ChangeResourceGroup"),
        "resource_alicloud_cr_ee_instance.go",
        # Bought and refunded through the billing API (BssOpenApi CreateInstance, RefundInstance),
        # which every read also asks for the subscription (QueryAvailableInstances,
        # service_alicloud_cr_v2.go DescribeInstanceQueryAvailableInstances).
        extra=("bssapi:CreateInstance", "bssapi:QueryAvailableInstances", "bssapi:RefundInstance"),
    ),
    "alicloud:cs/registryEnterpriseNamespace:RegistryEnterpriseNamespace": CloudApis(
        "cr", ("CreateNamespace", "UpdateNamespace", "DeleteNamespace"), "resource_alicloud_cr_ee_namespace.go"
    ),
    "alicloud:cs/registryEnterpriseRepo:RegistryEnterpriseRepo": CloudApis(
        "cr", ("CreateRepository", "UpdateRepository", "DeleteRepository"), "resource_alicloud_cr_ee_repo.go"
    ),
    "alicloud:cr/artifactSubscriptionRule:ArtifactSubscriptionRule": CloudApis(
        "cr",
        ("CreateArtifactSubscriptionRule", "UpdateArtifactSubscriptionRule", "DeleteArtifactSubscriptionRule"),
        # Read through GetArtifactSubscriptionRule (service_alicloud_cr_v2.go DescribeCrArtifactSubscriptionRule).
        "resource_alicloud_cr_artifact_subscription_rule.go",
    ),
    f"{DYNAMIC_PREFIX}cr:SubscriptionTask": CloudApis(
        # Then GetArtifactSubscriptionTaskResult until the tag is copied.
        "cr",
        ("CreateArtifactSubscriptionTask",),
        "components/images/subscription_task.py (this platform)",
    ),
    "alicloud:cr/vpcEndpointLinkedVpc:VpcEndpointLinkedVpc": CloudApis(
        "cr",
        ("CreateInstanceVpcEndpointLinkedVpc", "DeleteInstanceVpcEndpointLinkedVpc"),
        "resource_alicloud_cr_vpc_endpoint_linked_vpc.go",
    ),
    "alicloud:arms/prometheusMonitoring:PrometheusMonitoring": CloudApis(
        "arms",
        (
            "CreatePrometheusMonitoring",
            "UpdatePrometheusMonitoring",
            "UpdatePrometheusMonitoringStatus",
            "DeletePrometheusMonitoring",
        ),
        "resource_alicloud_arms_prometheus_monitoring.go",
    ),
    "alicloud:arms/prometheusAlertRule:PrometheusAlertRule": CloudApis(
        "arms",
        ("CreatePrometheusAlertRule", "UpdatePrometheusAlertRule", "DeletePrometheusAlertRule"),
        "resource_alicloud_arms_prometheus_alert_rule.go",
    ),
    "alicloud:ram/role:Role": CloudApis(
        "ram", ("CreateRole", "UpdateRole", "DeleteRole"), "resource_alicloud_ram_role.go"
    ),
    "alicloud:ram/policy:Policy": CloudApis(
        "ram",
        ("CreatePolicy", "CreatePolicyVersion", "DeletePolicyVersion", "UpdatePolicyDescription", "DeletePolicy"),
        "resource_alicloud_ram_policy.go",
    ),
    "alicloud:ram/rolePolicyAttachment:RolePolicyAttachment": CloudApis(
        "ram", ("AttachPolicyToRole", "DetachPolicyFromRole"), "resource_alicloud_ram_role_policy_attachment.go"
    ),
}
"""Each cloud resource type the platform creates, and what it calls."""

LOOKUP_SERVICES: dict[str, str] = {
    "alicloud:cs/getKubernetesVersion:getKubernetesVersion": "cs",
    "alicloud:cs/getClusters:getClusters": "cs",
    "alicloud:cs/getClusterCredential:getClusterCredential": "cs",
    "alicloud:cs/getRegistryEnterpriseInstances:getRegistryEnterpriseInstances": "cr",
    "alicloud:cs/getRegistryEnterpriseNamespaces:getRegistryEnterpriseNamespaces": "cr",
    "alicloud:cs/getRegistryEnterpriseRepos:getRegistryEnterpriseRepos": "cr",
    "alicloud:cr/getRepos:getRepos": "cr",
    "alicloud:ecs/getInstanceTypes:getInstanceTypes": "ecs",
    "alicloud:nas/getZones:getZones": "nas",
    "alicloud:vpc/getSwitches:getSwitches": "vpc",
}
"""Each cloud look-up the platform makes, and the service whose reads it calls."""


class MissingApis(ValueError):
    """A planned resource type or look-up whose API calls are not known."""


REGISTRY_PUSHES = frozenset({f"{DYNAMIC_PREFIX}cr:ImageCopy"})
"""Resource types made through a registry's own API with the registry user's password
(components/images/image_copy.py), not through an Alibaba Cloud API: no RAM action grants or refuses them."""


def cloud_type(type_: str) -> bool:
    """Whether a resource of ``type_`` is created through a cloud API (not through Kubernetes
    or a registry's push API)."""
    return type_.startswith(("alicloud:", DYNAMIC_PREFIX)) and type_ not in REGISTRY_PUSHES


def deploy_policy(
    resource_types: Iterable[str], lookups: Iterable[str], *, roles: Iterable[str] = (), policies: Iterable[str] = ()
) -> Manifest:
    """The least-privilege policy for ``pulumi up``, ``refresh`` and ``destroy`` of a stack
    that plans ``resource_types`` and calls ``lookups``.

    Args:
        resource_types: the type tokens of what the stack plans.
        lookups: the tokens of the provider functions it calls.
        roles: the RAM roles it creates, by name: RAM calls are limited to them.
        policies: the RAM policies it creates, by name.

    Raises:
        MissingApis: a cloud resource type or look-up this module does not know, by name.
    """
    types = sorted({t for t in resource_types if cloud_type(t)})
    calls = sorted({t for t in lookups if t.startswith("alicloud:")})
    unknown = [t for t in types if t not in RESOURCE_APIS] + [t for t in calls if t not in LOOKUP_SERVICES]
    if unknown:
        raise MissingApis(
            "no RAM actions known for " + ", ".join(unknown) + ": add the API calls of its create, read, update "
            "and delete (components/manifests/platform/deploy_policy.py)"
        )
    actions: set[str] = set()
    services = {LOOKUP_SERVICES[call] for call in calls}
    for type_ in types:
        apis = RESOURCE_APIS[type_]
        actions.update(f"{apis.service}:{write}" for write in apis.writes)
        actions.update(apis.extra)
        services.add(apis.service)
    wildcards = {f"{service}:{read}" for service in services - {"ram"} for read in READS}
    # An action a service's read wildcard already grants is not listed again.
    actions = {a for a in actions if not any(a.startswith(w[:-1]) for w in wildcards)} | wildcards
    anywhere = sorted(a for a in actions if not a.startswith("ram:"))
    ram = sorted(a for a in actions if a.startswith("ram:"))
    if "ram" in services:
        ram = sorted({*ram, *(f"ram:{read}" for read in ("Get*", "List*"))})
    statements = [{"Effect": "Allow", "Resource": "*", "Action": anywhere}] if anywhere else []
    if ram:
        named = [f"acs:ram:*:*:role/{name}" for name in sorted(set(roles))]
        named += [f"acs:ram:*:*:policy/{name}" for name in sorted(set(policies))]
        statements.append({"Effect": "Allow", "Resource": named, "Action": ram})
    return {"Version": RAM_POLICY_VERSION, "Statement": statements}

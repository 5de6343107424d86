"""RAM identities the platform creates: a worker role per node pool with only what nodes
need, and roles that a service account assumes through RRSA instead of an AccessKey."""

from __future__ import annotations

import json

import pulumi
import pulumi_alicloud as alicloud

from .config import OssSpec
from .manifests import (
    OSS_RRSA_SERVICE_ACCOUNT,
    Manifest,
    ecs_trust_policy,
    node_policy,
    oss_read_policy,
    service_account_trust_policy,
)

METADATA_TOKENS_REQUIRED = "required"
"""ECS instance metadata in security hardening mode only (IMDSv2): a request without a
session token is refused (pulumi-alicloud 4.0.0 ``cs.NodePoolInstanceMetadataOptionsArgs``;
ACK clusters 1.28 and later)."""


def role_with_policy(
    name: str,
    *,
    role_name: str,
    trust: pulumi.Input[Manifest],
    policy: Manifest,
    description: str,
    parent: pulumi.Resource,
) -> tuple[alicloud.ram.Role, alicloud.ram.RolePolicyAttachment]:
    """A RAM role, a custom policy of its own and the attachment between them.

    Args:
        name: Pulumi resource name (the role's; the policy and attachment add suffixes).
        role_name: the role's and the policy's name in RAM (both unique in the account).
        trust: who may assume the role (a trust policy document).
        policy: what the role may do.
        description: what the role is for, shown in the RAM console.
        parent: the component the three belong to.

    Returns:
        The role, and the attachment whatever acts as the role must wait for.
    """
    child = pulumi.ResourceOptions(parent=parent)
    role = alicloud.ram.Role(
        name,
        role_name=role_name,
        assume_role_policy_document=pulumi.Output.from_input(trust).apply(json.dumps),
        description=description,
        opts=child,
    )
    custom = alicloud.ram.Policy(
        name, policy_name=role_name, policy_document=json.dumps(policy), description=description, opts=child
    )
    attachment = alicloud.ram.RolePolicyAttachment(
        name, policy_name=custom.policy_name, policy_type="Custom", role_name=role.role_name, opts=child
    )
    return role, attachment


def node_role(
    name: str, *, role_name: str, parent: pulumi.Resource
) -> tuple[alicloud.ram.Role, alicloud.ram.RolePolicyAttachment]:
    """The worker role of one node pool: trusted by ECS, allowed only :func:`node_policy`.
    ACK takes a custom worker role only when the pool is created (``ram_role_name``,
    create-only)."""
    return role_with_policy(
        f"{name}-node-role",
        role_name=role_name,
        trust=ecs_trust_policy(),
        policy=node_policy(),
        description="ack-training-platform: what the nodes of one pool need",
        parent=parent,
    )


def node_role_name(cluster: str, pool: str) -> str:
    """A pool's worker role name: unique per cluster and pool, at most 64 characters, never
    ``KubernetesWorkerRole-...`` (a prefix ACK reserves)."""
    return f"{cluster[:30]}-{pool[:24]}-nodes"


def dataset_reader_role(
    name: str,
    *,
    role_name: str,
    bucket: str,
    rrsa: pulumi.Output[alicloud.cs.outputs.ManagedKubernetesRrsaMetadata],
    parent: pulumi.Resource,
) -> pulumi.Output[str]:
    """The role the OSS CSI plugin reads a dataset bucket as: assumable only with an RRSA
    token of this cluster for the plugin's ossfs pods (:data:`OSS_RRSA_SERVICE_ACCOUNT`),
    allowed only to read ``bucket``.

    Returns:
        The role's name, known once it and its policy are attached.
    """
    namespace, service_account = OSS_RRSA_SERVICE_ACCOUNT
    trust = rrsa.apply(
        lambda meta: service_account_trust_policy(
            meta.ram_oidc_provider_arn, meta.rrsa_oidc_issuer_url, namespace, service_account
        )
    )
    role, attachment = role_with_policy(
        name,
        role_name=role_name,
        trust=trust,
        policy=oss_read_policy(bucket),
        description=f"ack-training-platform: read the dataset bucket {bucket} (OSS CSI plugin, RRSA)",
        parent=parent,
    )
    return pulumi.Output.all(role.role_name, attachment.id).apply(lambda values: values[0])


def oss_reader(
    cluster_name: str, oss: OssSpec, rrsa: pulumi.Output | None, *, parent: pulumi.Resource
) -> pulumi.Input[str]:
    """The RAM role the OSS dataset volume names: ``oss.roleName``, or one created for this
    cluster (:func:`dataset_reader_role`).

    Raises:
        ValueError: no role is given and the cluster's RRSA provider is unknown (adopted).
    """
    if oss.role_name is not None:
        return oss.role_name
    if rrsa is None:
        raise ValueError("storage.oss on an adopted cluster needs storage.oss.roleName")
    return dataset_reader_role(
        f"{cluster_name}-dataset-reader",
        role_name=f"{cluster_name[:40]}-dataset-reader",
        bucket=oss.bucket,
        rrsa=rrsa,
        parent=parent,
    )

"""RAM policy documents: what the nodes may do, who may assume the platform's roles, and
what the OSS dataset role may read. Pure: JSON-ready dicts, no Pulumi."""

from __future__ import annotations

from ..base import Manifest

RAM_POLICY_VERSION = "1"

NODE_ACTIONS = ("ecs:DescribeInstanceAttribute", "ecs:DescribeInstanceTypesNew", "ecs:DescribeInstances")
"""The ECS statement of ACK's default worker policy after ACK narrowed it (ACK: "[Product
Change] Announcement: RAM Role Permission Convergence for ACK Managed Clusters"). That
policy also grants ``log:Get*`` for the Logtail add-on and ``cr:GetAuthorizationToken``,
``cr:ListInstanceEndpoint`` and ``cr:PullRepository`` on every registry of the account;
this platform installs no Logtail, and its nodes pull through a pull secret (personal ACR)
or the managed credential helper, which acts as its own role (AliyunCSManagedAcrRole), so
neither is granted: a pod that reaches the node's role cannot pull the account's images."""

OIDC_AUDIENCE = "sts.aliyuncs.com"
"""The audience ACK's RRSA tokens carry (ACK: "Use RRSA to authorize different pods to
access different cloud services"; AliyunContainerService/ack-ram-tool v0.19.3-dev.1
``pkg/types/ram.go``)."""


def ecs_trust_policy() -> Manifest:
    """Who may assume a node role: ECS instances, the trust ACK requires of a custom worker
    role (ACK: "Use custom worker RAM roles for fine-grained permission control in node pools")."""
    return {
        "Version": RAM_POLICY_VERSION,
        "Statement": [{"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": ["ecs.aliyuncs.com"]}}],
    }


def node_policy() -> Manifest:
    """What a node's own processes need from the cloud (see :data:`NODE_ACTIONS`)."""
    return {
        "Version": RAM_POLICY_VERSION,
        "Statement": [{"Action": list(NODE_ACTIONS), "Effect": "Allow", "Resource": ["*"]}],
    }


def service_account_trust_policy(
    oidc_provider_arn: str, issuer_url: str, namespace: str, service_account: str
) -> Manifest:
    """Who may assume a role through RRSA: tokens the cluster's OIDC issuer signed for one
    service account, and only for STS (the shape of ACK's RRSA trust policy: ``Federated``
    principal, ``oidc:aud``, ``oidc:iss`` and ``oidc:sub`` conditions)."""
    return {
        "Version": RAM_POLICY_VERSION,
        "Statement": [
            {
                "Action": "sts:AssumeRole",
                "Effect": "Allow",
                "Principal": {"Federated": [oidc_provider_arn]},
                "Condition": {
                    "StringEquals": {
                        "oidc:aud": OIDC_AUDIENCE,
                        "oidc:iss": issuer_url,
                        "oidc:sub": f"system:serviceaccount:{namespace}:{service_account}",
                    }
                },
            }
        ],
    }


def oss_read_policy(bucket: str) -> Manifest:
    """Reading one bucket: the OSS CSI plugin's documented read-only policy, ``oss:Get*``
    and ``oss:List*`` on the bucket and its objects (alibaba-cloud-csi-driver v1.37.1
    ``docs/oss.md``). Whether ossfs mounts a directory with objects narrowed to that
    directory is not documented, so the whole bucket is readable."""
    return {
        "Version": RAM_POLICY_VERSION,
        "Statement": [
            {
                "Action": ["oss:Get*", "oss:List*"],
                "Effect": "Allow",
                "Resource": [f"acs:oss:*:*:{bucket}", f"acs:oss:*:*:{bucket}/*"],
            }
        ],
    }

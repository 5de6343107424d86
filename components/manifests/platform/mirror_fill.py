"""Which mirrored images an ACR Enterprise Edition artifact subscription can copy, and the
rule that copies each. Pure: no Pulumi.

A rule names its source by provider, namespace and repository, and the tags it copies by a
regular expression and a count (pulumi-alicloud 4.0.0 ``cr/artifact_subscription_rule.py``;
terraform-provider-alicloud v1.289.0 ``alicloud/resource_alicloud_cr_artifact_subscription_rule.go``,
which calls ``CreateArtifactSubscriptionRule``). The API knows three providers, ``DOCKER_HUB``,
``GCR`` and ``QUAY`` (ACR API reference, GetArtifactSubscriptionRule and
UpdateArtifactSubscriptionRule, ``SourceProvider``:
https://help.aliyun.com/zh/acr/developer-reference/api-cr-2018-12-01-getartifactsubscriptionrule);
the console's custom source (a domain name) has no field in the create call the provider
makes, so an image from any other registry (ghcr.io, registry.k8s.io) is copied by hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

SOURCE_PROVIDERS = {"docker.io": "DOCKER_HUB", "gcr.io": "GCR", "quay.io": "QUAY"}
"""The registries a subscription copies from, by the host an image reference names."""
ALL_PLATFORMS = "*/*"
"""Every OS/architecture of a multi-platform image (the API's ``Platform`` values, same
reference): a subset would be a new index, with a digest upstream never served."""


@dataclass(frozen=True)
class Subscription:
    """One subscription rule: an upstream repository's pinned tag copied into the mirror.

    Attributes:
        source: the upstream image, ``<host>/<namespace>/<repository>:<tag>``.
        target: the image as the cluster pulls it, ``<mirror host>/<namespace>/<repository>:<tag>``.
        provider: the API's ``SourceProvider``.
        source_namespace: the upstream namespace (``library`` for Docker Hub's official images).
        source_repository: the upstream repository.
        namespace: the mirror's namespace.
        repository: the mirror's repository.
        tag: the pinned tag, the only one the rule copies.
    """

    source: str
    target: str
    provider: str
    source_namespace: str
    source_repository: str
    namespace: str
    repository: str
    tag: str

    @property
    def tag_regexp(self) -> str:
        """The rule's tag filter: the pinned tag and nothing else."""
        return f"^{re.escape(self.tag)}$"


def subscription(source: str, target: str) -> Subscription | None:
    """The rule copying ``source`` to ``target``, or ``None`` when no provider serves its registry
    (or its path is not ``<namespace>/<repository>``, the only form a rule names)."""
    name, _, tag = source.partition("@")[0].rpartition(":")
    host, _, path = name.partition("/")
    provider = SOURCE_PROVIDERS.get(host)
    parts = path.split("/")
    if provider is None or len(parts) != 2 or not tag:
        return None
    namespace, repository = target.rpartition(":")[0].split("/")[-2:]
    return Subscription(source, target, provider, parts[0], parts[1], namespace, repository, tag)


def split_by_fill(copies: Iterable[tuple[str, str]]) -> tuple[list[Subscription], list[tuple[str, str]]]:
    """(the rules for the copies a subscription can make, the (source, target) copies it cannot)."""
    rules, by_hand = [], []
    for source, target in copies:
        rule = subscription(source, target)
        if rule is None:
            by_hand.append((source, target))
        else:
            rules.append(rule)
    return rules, by_hand

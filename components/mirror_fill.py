"""The image mirror filled in the same ``pulumi up`` by ACR Enterprise Edition's artifact
subscription (stack key ``mirrorFill: subscription``).

For each mirrored image whose registry a subscription serves (:mod:`components.manifests.mirror_fill`):
a public repository in the mirror's namespace, a rule copying the pinned tag into it, and a
run of the rule that ends once the tag is copied (:class:`~components.subscription_task.SubscriptionTask`);
what pulls mirrored images waits for those runs. The mirror's namespace is made here unless
images copied by hand are to be in it already. The namespace and the repositories stay on
destroy, with their copies, as the registry's do. A rule's destination repository is made
first, as the provider's own example does (pulumi-alicloud 4.0.0
``cr/artifact_subscription_rule.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_alicloud as alicloud

from ._k8s import TOKEN
from .config import PlatformSpec
from .manifests.mirror_fill import ALL_PLATFORMS, Subscription, split_by_fill
from .mirror import PUBLIC


class MirrorNotFillable(pulumi.RunError):
    """``mirrorFill: subscription`` where a mirrored image cannot be subscribed to, and cannot be
    copied by hand before the operator pulls it either (an instance the stack buys is empty)."""


def subscribed_copies(spec: PlatformSpec) -> list[tuple[str, str]]:
    """The (upstream, mirrored) images the stack fills by subscription: every mirrored image
    when ``mirrorFill`` is ``subscription`` (those no subscription serves are left out by
    :class:`MirrorFill` and checked as copied by hand), none otherwise. Called before any
    resource is registered, so that a refusal buys and creates nothing.

    Raises:
        MirrorNotFillable: the mirror is in an instance the stack buys, which is empty, so an
            image no subscription serves could be there neither by subscription nor by hand
            before it is pulled.
    """
    from .digests import stack_images

    if spec.mirror_fill != "subscription":
        return []
    copies = stack_images(spec)
    by_hand = copied_by_hand(copies)
    if spec.registry is not None and spec.registry.enterprise_instance_id is None and by_hand:
        raise MirrorNotFillable(
            "mirrorFill: a subscription copies from Docker Hub, GCR and Quay only, so "
            + ", ".join(by_hand)
            + " cannot be in the instance this stack buys before they are pulled: adopt the instance "
            "(registry.enterpriseInstanceId) and copy them first (python -m components.upstream images), or "
            "mirror into another registry"
        )
    return copies


class MirrorFill(pulumi.ComponentResource):
    """The mirror's namespace, and per subscribable image its repository, rule and run.

    Args:
        name: Pulumi resource name.
        copies: (upstream, mirrored) images; those no subscription serves are ignored here.
        instance_id: the enterprise instance holding the mirror.
        region: its region.

    Attributes:
        rules: the subscription rules, by mirrored image.
        copied: the runs; done once every tag is copied. What pulls mirrored images waits for them.
    """

    def __init__(
        self,
        name: str,
        copies: Sequence[tuple[str, str]],
        *,
        instance_id: pulumi.Input[str],
        region: str,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:MirrorFill", name, None, opts)
        subscriptions, by_hand = split_by_fill(copies)
        self.rules: dict[str, alicloud.cr.ArtifactSubscriptionRule] = {}
        self.copied: list[pulumi.Resource] = []
        if not subscriptions:
            self.register_outputs({})
            return
        # Imported lazily: the dynamic provider needs Alibaba Cloud's SDKs only when there is a copy.
        from .subscription_task import SubscriptionTask

        kept = pulumi.ResourceOptions(parent=self, retain_on_delete=True)
        made: list[pulumi.Resource] = []
        # Images copied by hand are in the namespace before the first up, so it exists then;
        # otherwise the stack makes it.
        if not by_hand:
            made.append(
                alicloud.cs.RegistryEnterpriseNamespace(
                    name,
                    instance_id=instance_id,
                    name=subscriptions[0].namespace,
                    auto_create=False,
                    default_visibility=PUBLIC,
                    opts=kept,
                )
            )
        for sub in subscriptions:
            self._fill(name, sub, instance_id=instance_id, region=region, after=made, task=SubscriptionTask)
        self.register_outputs({"rules": {image: rule.id for image, rule in self.rules.items()}})

    def _fill(
        self,
        name: str,
        sub: Subscription,
        *,
        instance_id: pulumi.Input[str],
        region: str,
        after: list[pulumi.Resource],
        task: type,
    ) -> None:
        child = f"{name}-{sub.repository}"
        repo = alicloud.cs.RegistryEnterpriseRepo(
            child,
            instance_id=instance_id,
            namespace=sub.namespace,
            name=sub.repository,
            # Pulled without credentials (components.mirror).
            repo_type=PUBLIC,
            summary=f"copy of {sub.source}",
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True, depends_on=after),
        )
        rule = alicloud.cr.ArtifactSubscriptionRule(
            child,
            instance_id=instance_id,
            source_provider=sub.provider,
            source_namespace_name=sub.source_namespace,
            source_repo_name=sub.source_repository,
            namespace_name=sub.namespace,
            repo_name=sub.repository,
            tag_regexp=sub.tag_regexp,
            tag_count=1,
            platforms=[ALL_PLATFORMS],
            # A copied tag is never replaced: the lock pins what was copied.
            override=False,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[repo]),
        )
        self.rules[sub.target] = rule
        self.copied.append(
            task(
                f"{child}-copy",
                region=region,
                instance_id=instance_id,
                rule_id=rule.artifact_subscription_rule_id,
                tag=sub.tag,
                image=sub.target,
                opts=pulumi.ResourceOptions(parent=self),
            )
        )


def copied_by_hand(copies: Sequence[tuple[str, str]]) -> list[str]:
    """The mirrored images among ``copies`` that no subscription serves."""
    return [target for _, target in split_by_fill(copies)[1]]

"""The image mirror filled in the same ``pulumi up`` (stack key ``mirrorFill``), so that no
image is copied by hand.

For each mirrored image: a public repository in the mirror's namespace, then its copy. With
``subscription``, an image whose registry ACR Enterprise Edition's artifact subscription
serves (:mod:`components.manifests.platform.mirror_fill`) is copied by a rule for its pinned tag and a
run of the rule that ends once the tag is copied
(:class:`~components.images.subscription_task.SubscriptionTask`); every other image (ghcr.io,
registry.k8s.io), and every image with ``copy``, is copied by ``pulumi up`` itself, by its
locked digest (:class:`~components.images.image_copy.ImageCopy`). What pulls mirrored images waits
for the copies. The namespace and the repositories stay on destroy, with their copies, as the
registry's do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_alicloud as alicloud

from .._k8s import TOKEN
from ..manifests.platform.mirror_fill import ALL_PLATFORMS, Subscription, split_by_fill
from .mirror import PUBLIC


class MirrorFill(pulumi.ComponentResource):
    """The mirror's namespace (unless it exists), and per image its public repository and its copy: a subscription
    rule and its run (``subscription``, an image a subscription serves), or the image copied by
    ``pulumi up`` itself by digest (:class:`~components.images.image_copy.ImageCopy`).

    Args:
        name: Pulumi resource name.
        copies: (upstream, mirrored) images.
        mode: ``mirrorFill``: ``subscription`` or ``copy``.
        instance_id: the enterprise instance holding the mirror.
        region: its region.
        public_host: the instance's public registry host, which the copies are pushed to.
        digests: the image lock (digests by image as pulled); an image it lacks is copied as its tag is.
        username: the registry user the copies are pushed as.
        password: its password, a secret.
        namespace_exists: the mirror's namespace is in the instance already: it is used, not made.

    Attributes:
        rules: the subscription rules, by mirrored image.
        copied: the runs and copies; done once every image is in the mirror. What pulls mirrored
            images waits for them.
    """

    def __init__(
        self,
        name: str,
        copies: Sequence[tuple[str, str]],
        *,
        mode: str,
        instance_id: pulumi.Input[str],
        region: str,
        public_host: str,
        digests: Mapping[str, str],
        username: str,
        password: pulumi.Input[str],
        namespace_exists: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:MirrorFill", name, None, opts)
        subscriptions, by_runner = split_by_fill(copies) if mode == "subscription" else ([], list(copies))
        self.rules: dict[str, alicloud.cr.ArtifactSubscriptionRule] = {}
        self.copied: list[pulumi.Resource] = []
        if not copies:
            self.register_outputs({})
            return
        # Imported lazily: the providers are needed only when there is a copy.
        from .image_copy import ImageCopy
        from .subscription_task import SubscriptionTask

        namespace = mirror_namespace(copies)
        made = []
        if not namespace_exists:
            made.append(
                alicloud.cs.RegistryEnterpriseNamespace(
                    name,
                    instance_id=instance_id,
                    name=namespace,
                    auto_create=False,
                    default_visibility=PUBLIC,
                    opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True),
                )
            )
        for sub in subscriptions:
            repo = self._repository(
                name, sub.repository, sub.source, instance_id=instance_id, namespace=namespace, after=made
            )
            self._subscribe(name, sub, instance_id=instance_id, region=region, repo=repo, task=SubscriptionTask)
        for source, target in by_runner:
            repository = target.rpartition(":")[0].split("/")[-1]
            repo = self._repository(name, repository, source, instance_id=instance_id, namespace=namespace, after=made)
            vpc_host = target.split("/", 1)[0]
            self.copied.append(
                ImageCopy(
                    f"{name}-{repository}-copy",
                    source=source,
                    target=f"{public_host}{target.removeprefix(vpc_host)}",
                    digest=digests.get(target),
                    image=target,
                    username=username,
                    password=password,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[repo]),
                )
            )
        self.register_outputs({"rules": {image: rule.id for image, rule in self.rules.items()}})

    def _repository(
        self, name: str, repository: str, source: str, *, instance_id: pulumi.Input[str], namespace: str, after: list
    ) -> pulumi.Resource:
        """A copy's public repository, made before anything copies into it, as the provider's own
        example does for a rule (pulumi-alicloud 4.0.0 ``cr/artifact_subscription_rule.py``)."""
        return alicloud.cs.RegistryEnterpriseRepo(
            f"{name}-{repository}",
            instance_id=instance_id,
            namespace=namespace,
            name=repository,
            # Pulled without credentials (components.images.mirror).
            repo_type=PUBLIC,
            summary=f"copy of {source}",
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True, depends_on=after),
        )

    def _subscribe(
        self,
        name: str,
        sub: Subscription,
        *,
        instance_id: pulumi.Input[str],
        region: str,
        repo: pulumi.Resource,
        task: type,
    ) -> None:
        child = f"{name}-{sub.repository}"
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


def mirror_namespace(copies: Sequence[tuple[str, str]]) -> str:
    """The namespace the mirrored images of ``copies`` are in (``<host>/<namespace>/<repository>:<tag>``)."""
    return copies[0][1].rpartition(":")[0].split("/")[-2]

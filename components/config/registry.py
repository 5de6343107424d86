"""The container registry the training image is pulled from."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import DnsLabel, Spec, field_error, set_but_unused

# --- registry ------------------------------------------------------------------------


class RegistrySpec(Spec):
    """Where the training image lives: Alibaba Cloud Container Registry (ACR)."""

    edition: Literal["personal", "enterprise"] = "personal"
    """ACR personal edition (namespace + repository) or an enterprise instance."""
    namespace: DnsLabel = "ml"
    """ACR namespace."""
    repository: DnsLabel = "trainer"
    """Image repository in the namespace."""
    enterprise_instance_id: str | None = Field(default=None)
    """Use this existing enterprise instance (edition enterprise) instead of buying one."""
    enterprise_instance_name: DnsLabel | None = Field(default=None)
    """Name of the enterprise instance (its registry host is ``<name>-registry-vpc.<region>.cr.aliyuncs.com``)."""
    link_vpc: bool | None = Field(default=None)
    """Link the enterprise instance's VPC endpoint to the stack's VPC, without which nodes cannot reach it. On for
    an instance the stack buys; with ``enterpriseInstanceId`` the stack must say: ``false`` when the instance is
    linked to this VPC already (the link is then neither made again nor removed on destroy)."""
    namespace_exists: bool = False
    """The namespace exists already (another stack's, or made by hand): use it, create nothing."""
    repository_exists: bool = False
    """The repository exists already: use it, create nothing (needs ``namespaceExists``)."""
    existing_repository_url: str | None = Field(default=None)
    """Adopt any registry: create nothing and pull from this repository URL."""
    username: str | None = None
    """Login for an image pull secret; its password is the secret key ``registryPassword``. Required for the
    personal edition, which the password-free ACR credential helper does not cover. With an enterprise instance,
    also the user ``pulumi up`` pushes ``imageMirror``'s copies as (``mirrorFill``)."""

    @model_validator(mode="after")
    def _check(self) -> RegistrySpec:
        if self.edition == "personal":
            set_but_unused(
                self, ("enterprise_instance_id", "enterprise_instance_name", "link_vpc"), "with the personal edition"
            )
            if self.username is None and self.existing_repository_url is None:
                raise field_error(
                    "username",
                    "nodes pull from a personal-edition registry with a password: the ACR credential helper serves "
                    "enterprise instances (and personal ones created on or before 2024-09-08) only; set username "
                    "and run: pulumi config set --secret registryPassword <password>",
                )
        if self.existing_repository_url is not None:
            set_but_unused(
                self,
                ("namespace", "repository", "link_vpc", "namespace_exists", "repository_exists"),
                "with existingRepositoryUrl",
            )
        if self.repository_exists and not self.namespace_exists:
            raise field_error(
                "namespaceExists",
                f"repositoryExists says {self.namespace}/{self.repository} exists, so its namespace does: set "
                "namespaceExists: true",
            )
        if self.edition == "enterprise" and self.existing_repository_url is None:
            if self.enterprise_instance_id is None:
                set_but_unused(
                    self, ("namespace_exists", "repository_exists"), "with an instance the stack buys (it is empty)"
                )
            elif self.link_vpc is None:
                raise field_error(
                    "linkVpc",
                    f"say whether instance {self.enterprise_instance_id} is linked to the stack's VPC: linkVpc: false "
                    "when it is (the link is used as it is), true to link it in this stack",
                )
        if (
            self.edition == "enterprise"
            and self.existing_repository_url is None
            and self.enterprise_instance_name is None
        ):
            raise field_error(
                "enterpriseInstanceName", "the enterprise edition needs enterpriseInstanceName (its registry host name)"
            )
        if self.existing_repository_url is not None and (
            "://" in self.existing_repository_url or ":" in self.existing_repository_url.split("/")[-1]
        ):
            raise field_error(
                "existingRepositoryUrl",
                f"{self.existing_repository_url!r} must be a repository without scheme or tag, e.g. 'registry-vpc.cn-hangzhou.aliyuncs.com/ml/trainer'",
            )
        return self


def check_mirror(mirror_fill: str, image_mirror: str | None, registry: RegistrySpec | None, region: str | None) -> None:
    """Refuse an ``imageMirror`` that cannot be filled before it is pulled: one copied by hand
    inside an instance the stack buys (empty until then), or a ``mirrorFill`` outside a namespace
    of the enterprise instance ``registry`` names or buys, the only place a subscription copies to
    (ACR: "Sync images from sources outside China using artifact subscription", available only
    for Enterprise Edition instances, https://www.alibabacloud.com/help/en/acr/user-guide/subscribe-to-image-tags)
    and where the stack makes the copies' repositories, or without the user the runner pushes
    the copies as (:mod:`components.images.image_copy`)."""
    if mirror_fill == "none":
        if (
            image_mirror is not None
            and registry is not None
            and registry.edition == "enterprise"
            and registry.enterprise_instance_id is None
            and registry.existing_repository_url is None
            and image_mirror.startswith(f"{registry.enterprise_instance_name}-registry")
        ):
            raise field_error(
                "imageMirror",
                "the mirror is in the enterprise instance this stack buys, so its images cannot be copied before "
                "the operator and Volcano pull them: set mirrorFill: subscription or copy, adopt the instance "
                "(registry.enterpriseInstanceId) once it exists, or mirror into another registry",
            )
        return
    if registry is None or registry.edition != "enterprise" or registry.existing_repository_url is not None:
        raise field_error(
            "mirrorFill",
            f"{mirror_fill} copies images into an ACR enterprise instance: give registry.edition: enterprise "
            "(an instance the stack buys, or registry.enterpriseInstanceId), or set mirrorFill: none and copy the "
            "images before pulumi up",
        )
    host = f"{registry.enterprise_instance_name}-registry-vpc.{region}.cr.aliyuncs.com"
    if image_mirror is None or image_mirror.count("/") != 1 or not image_mirror.startswith(f"{host}/"):
        raise field_error(
            "mirrorFill",
            f"{mirror_fill} fills a namespace of instance {registry.enterprise_instance_name!r}: set imageMirror "
            f"to {host}/<namespace>, e.g. {host}/mirror (it is {image_mirror!r})",
        )
    namespace = image_mirror.split("/")[1]
    if namespace == registry.namespace:
        raise field_error(
            "mirrorFill",
            f"the mirror's namespace {namespace!r} is the training image's (registry.namespace), which is private; "
            "the mirror is public and the stack creates it: give imageMirror a namespace of its own, e.g. "
            f"{host}/mirror",
        )
    if registry.username is None:
        raise field_error(
            "mirrorFill",
            f"with {mirror_fill}, pulumi up pushes the images "
            + ("no subscription serves (ghcr.io, registry.k8s.io) " if mirror_fill == "subscription" else "")
            + f"into instance {registry.enterprise_instance_name!r} as a registry user: set registry.username "
            "(the instance's access credential user) and run: pulumi config set --secret registryPassword <password>",
        )

"""The container registry the training image is pulled from."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import DnsLabel, Spec, field_error

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
    existing_repository_url: str | None = Field(default=None)
    """Adopt any registry: create nothing and pull from this repository URL."""
    username: str | None = None
    """Login for an image pull secret, for registries the ACR credential helper does not cover;
    its password is the secret key ``registryPassword``."""

    @model_validator(mode="after")
    def _check(self) -> RegistrySpec:
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

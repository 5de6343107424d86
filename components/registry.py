"""The container registry for the training image, and its pull secret."""

from __future__ import annotations

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from ._k8s import TOKEN
from .config import RegistrySpec
from .manifests import MANAGED_BY, docker_config_json
from .namespace import TrainingNamespace

PULL_SECRET = "registry-pull"


def registry_host(spec: RegistrySpec, region: str) -> str:
    """The registry's VPC endpoint: pulls stay inside the VPC, free and fast."""
    if spec.existing_repository_url is not None:
        return spec.existing_repository_url.split("/", 1)[0]
    if spec.edition == "enterprise":
        return f"{spec.enterprise_instance_name}-registry-vpc.{region}.cr.aliyuncs.com"
    return f"registry-vpc.{region}.aliyuncs.com"


class ContainerRegistry(pulumi.ComponentResource):
    """An ACR namespace and repository (personal or enterprise edition), or an adopted
    registry, plus an image pull secret in the training namespace.

    Attributes:
        repository_url: where to push and pull the training image (no tag).
        pull_secret: name of the image pull secret, or ``None`` without credentials.
    """

    def __init__(
        self,
        name: str,
        spec: RegistrySpec,
        *,
        region: str,
        namespace: TrainingNamespace,
        provider: k8s.Provider,
        password: pulumi.Output[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:ContainerRegistry", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        host = registry_host(spec, region)
        if spec.existing_repository_url is not None:
            self.repository_url = spec.existing_repository_url
        else:
            self.repository_url = f"{host}/{spec.namespace}/{spec.repository}"
            summary = "ack-training-platform training image"
            if spec.edition == "personal":
                namespace_ = alicloud.cr.Namespace(
                    name, name=spec.namespace, auto_create=False, default_visibility="PRIVATE", opts=child
                )
                alicloud.cr.Repo(
                    name,
                    namespace=namespace_.name,
                    name=spec.repository,
                    repo_type="PRIVATE",
                    summary=summary,
                    opts=child,
                )
            else:
                if spec.enterprise_instance_id is not None:
                    instance_id: pulumi.Input[str] = spec.enterprise_instance_id
                else:
                    instance = alicloud.cr.RegistryEnterpriseInstance(
                        name,
                        instance_name=spec.enterprise_instance_name,
                        instance_type="Basic",
                        payment_type="Subscription",
                        period=1,
                        renewal_status="AutoRenewal",
                        opts=pulumi.ResourceOptions(parent=self, protect=True),
                    )
                    instance_id = instance.id
                namespace_ = alicloud.cs.RegistryEnterpriseNamespace(
                    name,
                    instance_id=instance_id,
                    name=spec.namespace,
                    auto_create=False,
                    default_visibility="PRIVATE",
                    opts=child,
                )
                alicloud.cs.RegistryEnterpriseRepo(
                    name,
                    instance_id=instance_id,
                    namespace=namespace_.name,
                    name=spec.repository,
                    repo_type="PRIVATE",
                    summary=summary,
                    opts=child,
                )
        self.pull_secret: str | None = None
        if spec.username is not None:
            if password is None:
                raise ValueError("registry.username needs the registryPassword secret")
            config_json = pulumi.Output.secret(
                pulumi.Output.from_input(password).apply(lambda pw: docker_config_json(host, spec.username, pw))
            )
            k8s.core.v1.Secret(
                f"{name}-pull",
                metadata={"name": PULL_SECRET, "namespace": namespace.name, "labels": dict(MANAGED_BY)},
                type="kubernetes.io/dockerconfigjson",
                string_data={".dockerconfigjson": config_json},
                opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[namespace.namespace]),
            )
            self.pull_secret = PULL_SECRET
        self.register_outputs({"repositoryUrl": self.repository_url})

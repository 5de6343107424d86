"""The container registry for the training image, how nodes reach it, and its pull secret."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from ._k8s import TOKEN
from .config import RegistrySpec
from .manifests import ACR_HELPER_ADDON, MANAGED_BY, acr_helper_config, docker_config_json
from .namespace import TrainingNamespace

PULL_SECRET = "registry-pull"


def enterprise_hosts(instance_name: str, region: str) -> tuple[str, str]:
    """An enterprise instance's (public, VPC) registry hosts (ACR: instance domain names)."""
    return (
        f"{instance_name}-registry.{region}.cr.aliyuncs.com",
        f"{instance_name}-registry-vpc.{region}.cr.aliyuncs.com",
    )


class ContainerRegistry(pulumi.ComponentResource):
    """An ACR repository (personal or enterprise edition), or an adopted registry, and
    everything nodes need to pull from it.

    - Enterprise edition: the instance's VPC endpoint is linked to the cluster's VPC, and
      the password-free credential helper add-on is configured for the instance and the
      namespaces that pull from it.
    - Personal edition: the repository's domains come from ACR itself (instances created
      after 2024-09-08 have ``crpi-...`` hosts), and pulls use a pull secret.

    Args:
        name: Pulumi resource name.
        spec: the registry's spec.
        region: the region.
        namespace: the training namespace (the pull secret goes there).
        provider: the cluster's kubernetes provider.
        cluster_id: the cluster the credential helper is configured in.
        vpc_id: the VPC an enterprise instance's endpoint is linked to.
        vswitch_id: the vSwitch of that endpoint.
        pulling_namespaces: every namespace whose pods pull from this registry.
        secret_namespaces: more namespaces whose jobs need the pull secret (the teams').
        keep_addons: leave the credential helper installed when the registry goes (an adopted cluster).
        password: the ``registryPassword`` secret, for ``spec.username``.

    Attributes:
        repository_url: where nodes pull the training image from (no tag), inside the VPC.
        push_url: where CI pushes it to, over the internet.
        pull_secret: name of the image pull secret, or ``None`` without credentials.
        ready: what a job must wait for (the VPC link, the credential helper).
    """

    def __init__(
        self,
        name: str,
        spec: RegistrySpec,
        *,
        region: str,
        namespace: TrainingNamespace,
        provider: k8s.Provider,
        cluster_id: pulumi.Input[str],
        vpc_id: pulumi.Input[str],
        vswitch_id: pulumi.Input[str],
        pulling_namespaces: Sequence[str] = (),
        secret_namespaces: Sequence[TrainingNamespace] = (),
        keep_addons: bool = False,
        password: pulumi.Output[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:ContainerRegistry", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.ready: list[pulumi.Resource] = []
        summary = "ack-training-platform training image"
        if spec.existing_repository_url is not None:
            pull_host = push_host = pulumi.Output.from_input(spec.existing_repository_url.split("/", 1)[0])
            path = spec.existing_repository_url.split("/", 1)[1]
        elif spec.edition == "personal":
            namespace_ = alicloud.cr.Namespace(
                name, name=spec.namespace, auto_create=False, default_visibility="PRIVATE", opts=child
            )
            repo = alicloud.cr.Repo(
                name, namespace=namespace_.name, name=spec.repository, repo_type="PRIVATE", summary=summary, opts=child
            )
            domains = repo.domain_lists.apply(lambda found: found[0] if found else None)
            pull_host = domains.apply(lambda d: d.vpc if d else None)
            push_host = domains.apply(lambda d: d.public if d else None)
            path = f"{spec.namespace}/{spec.repository}"
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
                    # Required with AutoRenewal (pulumi-alicloud 4.0.0).
                    renew_period=1,
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
            if spec.link_vpc:
                # A new instance is reachable from no VPC until one is linked.
                self.ready.append(
                    alicloud.cr.VpcEndpointLinkedVpc(
                        f"{name}-vpc",
                        instance_id=instance_id,
                        vpc_id=vpc_id,
                        vswitch_id=vswitch_id,
                        module_name="Registry",
                        enable_create_dns_record_in_pvzt=True,
                        opts=child,
                    )
                )
            self.ready.append(
                alicloud.cs.KubernetesAddon(
                    f"{name}-{ACR_HELPER_ADDON}",
                    cluster_id=cluster_id,
                    name=ACR_HELPER_ADDON,
                    config=pulumi.Output.from_input(instance_id).apply(
                        lambda id_: acr_helper_config(id_, region, sorted({namespace.name, *pulling_namespaces}))
                    ),
                    opts=pulumi.ResourceOptions(parent=self, retain_on_delete=keep_addons),
                )
            )
            public, vpc = enterprise_hosts(spec.enterprise_instance_name, region)
            pull_host, push_host = pulumi.Output.from_input(vpc), pulumi.Output.from_input(public)
            path = f"{spec.namespace}/{spec.repository}"
        self.repository_url: pulumi.Output[str] = pulumi.Output.concat(pull_host, "/", path)
        self.push_url: pulumi.Output[str] = pulumi.Output.concat(push_host, "/", path)
        self.pull_secret: str | None = None
        if spec.username is not None:
            if password is None:
                raise ValueError("registry.username needs the registryPassword secret")
            config_json = pulumi.Output.secret(
                pulumi.Output.all(pull_host, password).apply(
                    lambda args: docker_config_json(args[0], spec.username, args[1])
                )
            )
            for where in (namespace, *secret_namespaces):
                k8s.core.v1.Secret(
                    f"{name}-pull" if where is namespace else f"{name}-pull-{where.name}",
                    metadata={"name": PULL_SECRET, "namespace": where.name, "labels": dict(MANAGED_BY)},
                    type="kubernetes.io/dockerconfigjson",
                    string_data={".dockerconfigjson": config_json},
                    opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[where.namespace]),
                )
            self.pull_secret = PULL_SECRET
        self.register_outputs({"repositoryUrl": self.repository_url, "pushUrl": self.push_url})


def pinned_image(
    image: str | None, tag: str | None, registry: ContainerRegistry | None, owner: str
) -> pulumi.Output[str]:
    """An image given as a full reference, or as a tag of the training image in the platform
    registry (the specs make sure exactly one is set).

    Args:
        image: the full reference, or ``None``.
        tag: the tag in the registry, used when ``image`` is ``None``.
        registry: the platform registry, or ``None``.
        owner: what the image is for, for the error (``job 'x'``, ``TensorBoard``).

    Raises:
        ValueError: only a tag is given and there is no registry.
    """
    if image is not None:
        return pulumi.Output.from_input(image)
    if registry is None:
        raise ValueError(f"{owner} gives image tag {tag!r} but no registry was passed")
    return pulumi.Output.concat(registry.repository_url, ":", tag)

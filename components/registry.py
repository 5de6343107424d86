"""The container registry for the training image, how nodes reach it, and its pull secret."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s
from pulumi.output import UNKNOWN

from ._k8s import TOKEN
from .config import RegistrySpec
from .images.mirror import check_enterprise_mirror, enterprise_namespace_exists, exact_name
from .images.mirror_fill import MirrorFill, mirror_namespace
from .manifests import ACR_HELPER_ADDON, MANAGED_BY, acr_helper_config, docker_config_json
from .namespace import TrainingNamespace
from .preflight import warn_only

PULL_SECRET = "registry-pull"


class NotInRegistry(pulumi.RunError):
    """ACR lacks what the stack says exists: a repository, or a tag a job or TensorBoard pulls."""


@dataclass(frozen=True)
class PushedTags:
    """What ACR answered about the training image's repository before anything is created.

    Attributes:
        repository_found: the repository exists.
        tags: its tags.
        push_to: the repository's public URL, for the ``docker push`` in messages, or
            ``None`` while a personal repository's host is unknown.
    """

    repository_found: bool
    tags: frozenset[str]
    push_to: str | None


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
      training namespace. Third-party images mirrored into it are pulled without
      credentials (:mod:`components.images.mirror`).
    - Personal edition: the repository's domains come from ACR itself (instances created
      after 2024-09-08 have ``crpi-...`` hosts), and pulls use a pull secret.
    - Namespaces and repositories the spec says exist are used as they are; those the stack
      creates stay on destroy (``retain_on_delete``), with their images.

    Args:
        name: Pulumi resource name.
        spec: the registry's spec.
        region: the region.
        namespace: the training namespace (the pull secret goes there).
        provider: the cluster's kubernetes provider.
        cluster_id: the cluster the credential helper is configured in.
        vpc_id: the VPC an enterprise instance's endpoint is linked to.
        vswitch_id: the vSwitch of that endpoint.
        mirrored_images: the third-party images copied into ``imageMirror``; checked before
            anything is created when the mirror is in this stack's (adopted) instance.
        mirror_fill: the (upstream, mirrored) images copied into the mirror in this update
            (:mod:`components.images.mirror_fill`); when there are any, nothing is checked as copied beforehand.
        mirror_mode: ``mirrorFill`` (``subscription`` or ``copy``), for ``mirror_fill``.
        image_digests: the image lock, digests by image as pulled: what ``mirror_fill`` copies.
        secret_namespaces: more namespaces whose jobs pull the training image (the teams'): they
            get the pull secret, and the credential helper watches them.
        keep_addons: leave the credential helper installed when the registry goes (an adopted cluster).
        password: the ``registryPassword`` secret, for ``spec.username``: the pull secret's, and
            the mirror's copies are pushed with it.

    Attributes:
        repository_url: where nodes pull the training image from (no tag), inside the VPC.
        push_url: where CI pushes it to, over the internet.
        pull_secret: name of the image pull secret, or ``None`` without credentials.
        pushed: the training image's tags as ACR listed them before anything was created, or
            ``None`` where it was not asked (an adopted registry URL, the offline plan).
        ready: what a job must wait for (the VPC link, the credential helper).
        reachable: what must exist before nodes reach the registry at all (the VPC link the
            stack makes), and before they pull from the public mirror, which needs no
            credentials: the mirror's copies, when the stack fills it.
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
        mirrored_images: Sequence[str] = (),
        mirror_fill: Sequence[tuple[str, str]] = (),
        mirror_mode: str = "none",
        image_digests: Mapping[str, str] | None = None,
        secret_namespaces: Sequence[TrainingNamespace] = (),
        keep_addons: bool = False,
        password: pulumi.Output[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:ContainerRegistry", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOptions(parent=self)
        self.ready: list[pulumi.Resource] = []
        self.reachable: list[pulumi.Resource] = []
        self.pushed: PushedTags | None = None
        summary = "ack-training-platform training image"
        if spec.existing_repository_url is not None:
            pull_host = push_host = pulumi.Output.from_input(spec.existing_repository_url.split("/", 1)[0])
            path = spec.existing_repository_url.split("/", 1)[1]
        elif spec.edition == "personal":
            path = f"{spec.namespace}/{spec.repository}"
            created_namespace = self._namespace(
                alicloud.cr.Namespace, name, spec, name=spec.namespace, auto_create=False, default_visibility="PRIVATE"
            )
            # cr.get_repos lists every tag (GetRepoTags, paged) only with enable_details
            # (terraform-provider-alicloud data_source_alicloud_cr_repos.go).
            answer = alicloud.cr.get_repos(
                namespace=spec.namespace, name_regex=exact_name(spec.repository), enable_details=True, opts=invoke
            ).repos
            repo = _named(answer, spec.repository)
            if spec.repository_exists:
                # Offline (no answer) the hosts are unknown; a missing repository stops the run below.
                found = repo.domain_lists[0] if repo is not None and repo.domain_lists else None
                pull_host = pulumi.Output.from_input(found.vpc if found else UNKNOWN)
                push_host = pulumi.Output.from_input(found.public if found else UNKNOWN)
            else:
                domains = alicloud.cr.Repo(
                    name,
                    namespace=spec.namespace,
                    name=spec.repository,
                    repo_type="PRIVATE",
                    summary=summary,
                    opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True, depends_on=created_namespace),
                ).domain_lists.apply(lambda found: found[0] if found else None)
                pull_host = domains.apply(lambda d: d.vpc if d else None)
                push_host = domains.apply(lambda d: d.public if d else None)
            if answer is not None:
                public = repo.domain_lists[0].public if repo is not None and repo.domain_lists else None
                self.pushed = PushedTags(
                    repository_found=repo is not None,
                    tags=_tags(repo),
                    push_to=f"{public}/{path}" if public else None,
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
                    # Required with AutoRenewal (pulumi-alicloud 4.0.0).
                    renew_period=1,
                    opts=pulumi.ResourceOptions(parent=self, protect=True),
                )
                instance_id = instance.id
            created_namespace = self._namespace(
                alicloud.cs.RegistryEnterpriseNamespace,
                name,
                spec,
                instance_id=instance_id,
                name=spec.namespace,
                auto_create=False,
                default_visibility="PRIVATE",
            )
            if not spec.repository_exists:
                alicloud.cs.RegistryEnterpriseRepo(
                    name,
                    instance_id=instance_id,
                    namespace=spec.namespace,
                    name=spec.repository,
                    repo_type="PRIVATE",
                    summary=summary,
                    # A pushed tag names one image for good: a job restarted next month pulls what
                    # was tested, and a stolen push credential cannot replace it in place.
                    tag_immutability=True,
                    opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True, depends_on=created_namespace),
                )
            if spec.link_vpc is not False:
                # A new instance is reachable from no VPC until one is linked.
                self.reachable.append(
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
            public, vpc = enterprise_hosts(spec.enterprise_instance_name, region)
            if mirror_fill:
                if spec.username is None or password is None:
                    raise ValueError("mirrorFill needs registry.username and the registryPassword secret")
                # An adopted instance may hold the namespace already (images copied there before);
                # where ACR was not asked (the offline plan) it is taken to.
                namespace_exists = spec.enterprise_instance_id is not None and (
                    enterprise_namespace_exists(spec.enterprise_instance_id, mirror_namespace(mirror_fill), opts=invoke)
                    is not False
                )
                fill = MirrorFill(
                    f"{name}-mirror",
                    mirror_fill,
                    mode=mirror_mode,
                    instance_id=instance_id,
                    region=region,
                    public_host=public,
                    digests=image_digests or {},
                    username=spec.username,
                    password=password,
                    namespace_exists=namespace_exists,
                    opts=child,
                )
                self.reachable.extend(fill.copied)
            else:
                # Images copied by hand are checked before anything is created.
                by_hand = [image for image in mirrored_images if image.startswith(f"{vpc}/")]
                if spec.enterprise_instance_id is not None and by_hand:
                    check_enterprise_mirror(spec.enterprise_instance_id, by_hand, opts=invoke)
            self.ready.extend(self.reachable)
            self.ready.append(
                alicloud.cs.KubernetesAddon(
                    f"{name}-{ACR_HELPER_ADDON}",
                    cluster_id=cluster_id,
                    name=ACR_HELPER_ADDON,
                    config=pulumi.Output.from_input(instance_id).apply(
                        lambda id_: acr_helper_config(
                            id_, region, sorted({namespace.name, *(team.name for team in secret_namespaces)})
                        )
                    ),
                    opts=pulumi.ResourceOptions(parent=self, retain_on_delete=keep_addons),
                )
            )
            pull_host, push_host = pulumi.Output.from_input(vpc), pulumi.Output.from_input(public)
            path = f"{spec.namespace}/{spec.repository}"
            self.pushed = self._look_up_enterprise(spec, f"{public}/{path}", opts=invoke)
        if spec.repository_exists and self.pushed is not None and not self.pushed.repository_found:
            raise NotInRegistry(
                f"registry.repositoryExists: ACR has no repository {path}: create it, or drop repositoryExists "
                "to let the stack create it"
            )
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

    def _namespace(self, resource: type, resource_name: str, spec: RegistrySpec, **args) -> list[pulumi.Resource]:
        """The registry namespace, created unless it exists; it stays on destroy, with every
        image in it, like the repository."""
        if spec.namespace_exists:
            return []
        return [resource(resource_name, **args, opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True))]

    def _look_up_enterprise(self, spec: RegistrySpec, push_to: str, *, opts: pulumi.InvokeOptions) -> PushedTags | None:
        """The repository's tags in an enterprise instance, ``None`` where there was no answer
        (the offline plan). An instance the stack buys is found by name once it exists."""
        instance_id = spec.enterprise_instance_id
        if instance_id is None:
            instances = alicloud.cs.get_registry_enterprise_instances(
                name_regex=exact_name(spec.enterprise_instance_name), opts=opts
            ).instances
            if instances is None:
                return None
            if not instances:
                return PushedTags(repository_found=False, tags=frozenset(), push_to=push_to)
            instance_id = instances[0].id
        if not spec.namespace_exists:
            exists = enterprise_namespace_exists(instance_id, spec.namespace, opts=opts)
            if exists is None:
                return None
            if not exists:
                return PushedTags(repository_found=False, tags=frozenset(), push_to=push_to)
        # With enable_details the data source pages through ListRepoTag for every tag
        # (terraform-provider-alicloud data_source_alicloud_cr_ee_repos.go).
        answer = alicloud.cs.get_registry_enterprise_repos(
            instance_id=instance_id,
            namespace=spec.namespace,
            name_regex=exact_name(spec.repository),
            enable_details=True,
            opts=opts,
        ).repos
        if answer is None:
            return None
        repo = _named(answer, spec.repository)
        return PushedTags(repository_found=repo is not None, tags=_tags(repo), push_to=push_to)


def _named(repos: Sequence | None, name: str):
    return next((r for r in repos or [] if r.name == name), None)


def _tags(repo) -> frozenset[str]:
    return frozenset(t.tag for t in (repo.tags or [])) if repo is not None else frozenset()


def image_pushed(registry: ContainerRegistry | None, tag: str | None, owner: str) -> bool:
    """Whether what pulls tag ``tag`` of the training image can be created now.

    Nothing waits on an image that cannot be pulled: while the repository this stack creates
    does not exist yet (its first ``up``), ``owner`` is left out with a warning saying what to
    push before the next ``up``; a repository without the tag stops the run before anything
    is created. (An adopted repository that is missing stops the run in
    :class:`ContainerRegistry`.)

    Args:
        registry: the platform registry, or ``None``.
        tag: the tag ``owner`` pulls, or ``None`` for a full image reference (not checked).
        owner: what pulls it, for the messages (``job 'x'``, ``TensorBoard``).

    Returns:
        ``True`` to create ``owner``; also when ACR was not asked (the offline plan, an
        adopted registry URL).

    Raises:
        NotInRegistry: the repository exists without the tag (a warning, and ``owner`` kept, under
            ``ACK_CLOUD_CHECKS=warn``: a teardown must not wait for a push).
    """
    if registry is None or tag is None or registry.pushed is None or tag in registry.pushed.tags:
        return True
    pushed = registry.pushed
    push = (
        f"docker push {pushed.push_to}:{tag}"
        if pushed.push_to
        else f"push the image as tag {tag} to the pushUrl of: pulumi stack output registry"
    )
    if not pushed.repository_found:
        pulumi.log.warn(
            f"{owner} waits for its image: the registry's repository is created by this update; then "
            f"{push} and run pulumi up again"
        )
        return False
    message = f"{owner} pulls tag {tag!r}, which the repository does not have: {push} first"
    if warn_only():
        pulumi.log.warn(message)
        return True
    raise NotInRegistry(message)


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

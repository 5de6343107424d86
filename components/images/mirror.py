"""The image mirror: where the operator, Volcano and Trainer v2 pull third-party images from.

Their pods are pulled without credentials, from public repositories: ACR serves a public
repository's images to anyone, without a login (ACR: "Main features of a repository",
https://www.alibabacloud.com/help/zh/acr/user-guide/main-features-of-a-repository). The
credential helper add-on instead adds its secret to service accounts after they exist, and
a pod gets its service account's pull secrets once, when it is created (Kubernetes
``plugin/pkg/admission/serviceaccount/admission.go``), so a chart that creates a service
account and its pods back to back may leave pods without credentials for good. The mirror
holds copies of public upstream images, so making it public discloses nothing.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

import pulumi
import pulumi_alicloud as alicloud

PUBLIC = "PUBLIC"
"""A repository's ``repo_type`` when anyone may pull from it (pulumi-alicloud 4.0.0
``cs/outputs.py`` ``GetRegistryEnterpriseReposRepoResult``)."""


class MirrorNotReady(pulumi.RunError):
    """A mirrored image is missing from the mirror, or needs credentials to pull."""


def exact_name(name: str) -> str:
    """A look-up's ``name_regex`` matching ``name`` only."""
    return f"^{re.escape(name)}$"


def enterprise_namespace_exists(
    instance_id: str, namespace: str, *, opts: pulumi.InvokeOptions | None = None
) -> bool | None:
    """Whether ACR has ``namespace`` in instance ``instance_id``; ``None`` without an answer
    (the offline plan). Asked before its repositories are listed, since that list is asked
    for by namespace name (ListRepository) and is not documented for a missing one; the
    namespace list is every namespace, filtered by the provider
    (terraform-provider-alicloud data_source_alicloud_cr_ee_namespaces.go)."""
    answer = alicloud.cs.get_registry_enterprise_namespaces(
        instance_id=instance_id, name_regex=exact_name(namespace), opts=opts
    ).namespaces
    return None if answer is None else any(n.name == namespace for n in answer)


def mirror_problems(mirrored: Sequence[str], repositories: dict[str, list]) -> list[str]:
    """What stops each mirrored image from being pulled without credentials.

    Args:
        mirrored: the mirrored images, ``<host>/<namespace>/<repository>:<tag>``.
        repositories: per mirror namespace, the repositories ACR lists there (with tags).

    Returns:
        One line per image that is not copied, or not public; empty when all can be pulled.
    """
    problems = []
    for image in mirrored:
        path, tag = image.rsplit(":", 1)
        namespace, name = path.split("/")[-2:]
        repo = next((r for r in repositories.get(namespace, []) if r.name == name), None)
        if repo is None or tag not in {t.tag for t in repo.tags or []}:
            problems.append(f"{image} is not copied")
        elif repo.repo_type != PUBLIC:
            problems.append(f"{namespace}/{name} is {repo.repo_type.lower()}: make it public")
    return problems


def check_enterprise_mirror(
    instance_id: str, mirrored: Sequence[str], *, opts: pulumi.InvokeOptions | None = None
) -> None:
    """Before anything is created, ask ACR whether every mirrored image is in the enterprise
    instance ``instance_id``, in a public repository. Nothing is checked where ACR gives no
    answer (the offline plan).

    Raises:
        MirrorNotReady: naming each image to copy or repository to make public.
    """
    by_namespace: dict[str, list[str]] = defaultdict(list)
    for image in mirrored:
        by_namespace[image.rsplit(":", 1)[0].split("/")[-2]].append(image)
    repositories = {}
    for namespace in by_namespace:
        exists = enterprise_namespace_exists(instance_id, namespace, opts=opts)
        if exists is None:
            return
        if not exists:
            repositories[namespace] = []
            continue
        # enable_details pages through ListRepoTag for every repository's tags
        # (terraform-provider-alicloud data_source_alicloud_cr_ee_repos.go).
        answer = alicloud.cs.get_registry_enterprise_repos(
            instance_id=instance_id, namespace=namespace, enable_details=True, opts=opts
        ).repos
        if answer is None:
            return
        repositories[namespace] = answer
    problems = mirror_problems(mirrored, repositories)
    if problems:
        raise MirrorNotReady(
            "imageMirror: the operator, Volcano and Trainer v2 pull these without credentials, from public "
            "repositories: " + "; ".join(problems) + ". Copy what python -m components.upstream images lists, "
            "into repositories of type public"
        )

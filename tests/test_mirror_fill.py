"""The mirror filled by ACR's artifact subscription (``mirrorFill: subscription``): which images a
rule can copy, the rules and runs prod plans, what waits for them, what is still checked as
copied by hand, the refused configurations, and the run itself against a stand-in of ACR's API
(``loopback_cr.py``) through the real OpenAPI client."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from conftest import ROOT, cfg, stack_config
from loopback_cloud import Fault
from loopback_cr import INSTANCE, RULE, TASK, CrApi, cr_api
from pulumi.dynamic.dynamic import serialize_provider
from test_platform import ENTERPRISE_NAMESPACES, mirror_repos

from components.config import ConfigError, load_spec
from components.images.subscription_task import SubscriptionTaskProvider
from components.manifests.platform.images import stack_images
from components.manifests.platform.mirror_fill import split_by_fill
from components.plan.records import HELM_RELEASE, SECRET

RULE_TYPE = "alicloud:cr/artifactSubscriptionRule:ArtifactSubscriptionRule"
TASK_TYPE = "pulumi-python:dynamic/cr:SubscriptionTask"
COPY_TYPE = "pulumi-python:dynamic/cr:ImageCopy"
EE_REPO = "alicloud:cs/registryEnterpriseRepo:RegistryEnterpriseRepo"
EE_NAMESPACE = "alicloud:cs/registryEnterpriseNamespace:RegistryEnterpriseNamespace"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
MIRROR = "ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/mirror"
GHCR_IMAGES = [f"{MIRROR}/training-operator:v1-93c5489", f"{MIRROR}/kubectl-delivery:v1-93c5489"]


def test_a_rule_copies_from_docker_hub_gcr_and_quay_only() -> None:
    copies = [
        ("docker.io/library/alpine:3.23.3", f"{MIRROR}/alpine:3.23.3"),
        ("docker.io/volcanosh/vc-scheduler:v1.12.1", f"{MIRROR}/vc-scheduler:v1.12.1"),
        ("quay.io/prometheus/node-exporter:v1.9.1", f"{MIRROR}/node-exporter:v1.9.1"),
        ("gcr.io/google-containers/pause:3.2", f"{MIRROR}/pause:3.2"),
        ("ghcr.io/kubeflow/training-v1/training-operator:v1-93c5489", GHCR_IMAGES[0]),
        ("registry.k8s.io/jobset/jobset:v0.12.0", f"{MIRROR}/jobset:v0.12.0"),
        ("ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0", f"{MIRROR}/trainer-controller-manager:v2.3.0"),
    ]
    rules, by_hand = split_by_fill(copies)
    assert [(r.provider, r.source_namespace, r.source_repository, r.namespace, r.repository, r.tag) for r in rules] == [
        ("DOCKER_HUB", "library", "alpine", "mirror", "alpine", "3.23.3"),
        ("DOCKER_HUB", "volcanosh", "vc-scheduler", "mirror", "vc-scheduler", "v1.12.1"),
        ("QUAY", "prometheus", "node-exporter", "mirror", "node-exporter", "v1.9.1"),
        ("GCR", "google-containers", "pause", "mirror", "pause", "3.2"),
    ]
    # The filter is the pinned tag alone: a dot in it matches a dot, not any character.
    assert rules[0].tag_regexp == r"^3\.23\.3$"
    assert [source for source, _ in by_hand] == [c[0] for c in copies[4:]]


@pytest.fixture
def prod_plan(run_stack):
    return run_stack(stack_config("prod"), "prod", invokes=mirror_repos())


def test_prod_subscribes_to_each_docker_hub_image_at_its_pinned_tag(prod_plan) -> None:
    rules = {r.inputs["repoName"]: r for r in prod_plan.of_type(RULE_TYPE)}
    assert sorted(rules) == ["alpine", "vc-controller-manager", "vc-scheduler", "vc-webhook-manager"]
    assert {k: v for k, v in rules["alpine"].inputs.items() if k != "__defaults"} == {
        "instanceId": "cri-0jl6b5ykcjznb4rb",
        "sourceProvider": "DOCKER_HUB",
        "sourceNamespaceName": "library",
        "sourceRepoName": "alpine",
        "namespaceName": "mirror",
        "repoName": "alpine",
        "tagRegexp": r"^3\.23\.3$",
        "tagCount": 1.0,
        "platforms": ["*/*"],
        "override": False,
    }
    for name in ("vc-controller-manager", "vc-scheduler", "vc-webhook-manager"):
        assert rules[name].inputs["sourceNamespaceName"] == "volcanosh"
        assert rules[name].inputs["tagRegexp"] == r"^v1\.12\.1$"
    # Each image is copied into a public repository made first, kept on destroy with its copies,
    # in the namespace ACR lists already.
    assert not prod_plan.of_type(EE_NAMESPACE)
    repos = {r.inputs["name"]: r for r in prod_plan.of_type(EE_REPO) if r.inputs["namespace"] == "mirror"}
    assert sorted(repos) == sorted([*rules, "kubectl-delivery", "training-operator"])
    for repo in repos.values():
        assert repo.inputs["repoType"] == "PUBLIC" and repo.retain_on_delete
    for name, rule in rules.items():
        assert repos[name].urn in rule.dependencies
    tasks = {r.inputs["image"]: r for r in prod_plan.of_type(TASK_TYPE)}
    assert sorted(tasks) == [
        f"{MIRROR}/alpine:3.23.3",
        f"{MIRROR}/vc-controller-manager:v1.12.1",
        f"{MIRROR}/vc-scheduler:v1.12.1",
        f"{MIRROR}/vc-webhook-manager:v1.12.1",
    ]
    assert {tasks[f"{MIRROR}/alpine:3.23.3"].inputs["tag"]} == {"3.23.3"}
    assert {t.inputs["region"] for t in tasks.values()} == {"cn-wulanchabu"}


def locked(tmp_path, images) -> dict[str, str]:
    """A lock (where ``run_stack`` points the program) with a digest for each of ``images``."""
    from components.upstream.digests import write_lock

    digests = {image: f"sha256:{n:064x}" for n, image in enumerate(images, 1)}
    write_lock(tmp_path / "images.lock.json", digests)
    return digests


def test_pulumi_up_copies_each_image_no_subscription_serves_by_its_locked_digest(run_stack, tmp_path) -> None:
    config = stack_config("prod")
    spec = load_spec(config, credentials=False)
    digests = locked(tmp_path, [target for _, target in stack_images(spec)])
    plan = run_stack(config, "prod", invokes=mirror_repos())
    copies = {r.inputs["image"]: r for r in plan.of_type(COPY_TYPE)}
    assert sorted(copies) == sorted(GHCR_IMAGES)
    public = "http" + "s://ml-registry-registry.cn-wulanchabu.cr.aliyuncs.com"
    operator = copies[GHCR_IMAGES[0]].inputs
    assert {k: operator[k] for k in ("source_registry", "source_name", "target_registry", "target_name", "tag")} == {
        "source_registry": "https://ghcr.io",
        "source_name": "kubeflow/training-v1/training-operator",
        "target_registry": public,
        "target_name": "mirror/training-operator",
        "tag": "v1-93c5489",
    }
    assert operator["digest"] == digests[GHCR_IMAGES[0]]
    assert operator["username"] == config[cfg("registry")]["username"]
    # The password reaches the copy as a secret, never in the clear.
    assert operator["password"] == SECRET
    repos = {r.inputs["name"]: r.urn for r in plan.of_type(EE_REPO)}
    assert repos["training-operator"] in copies[GHCR_IMAGES[0]].dependencies


def test_with_copy_pulumi_up_copies_every_image_itself(run_stack, tmp_path) -> None:
    config = prod_with(mirrorFill="copy")
    spec = load_spec(config, credentials=False)
    pulled = [target for _, target in stack_images(spec)]
    locked(tmp_path, pulled)
    plan = run_stack(config, "prod", invokes=mirror_repos())
    assert sorted(r.inputs["image"] for r in plan.of_type(COPY_TYPE)) == sorted(pulled)
    assert not plan.of_type(RULE_TYPE) and not plan.of_type(TASK_TYPE)
    alpine = next(r for r in plan.of_type(COPY_TYPE) if r.inputs["target_name"] == "mirror/alpine")
    assert alpine.inputs["source_registry"] == "https://registry-1.docker.io"
    assert alpine.inputs["source_name"] == "library/alpine"


def test_what_pulls_mirrored_images_waits_for_the_copies(run_stack, fixture_pins) -> None:
    config = prod_with(trainerV2={"install": True, "kueue": {"enabled": True}})
    prod_plan = run_stack(config, "prod", invokes=mirror_repos())
    copies = {t.urn for t in prod_plan.of_type(TASK_TYPE) + prod_plan.of_type(COPY_TYPE)}
    # Volcano's four, the operator's two, Trainer's, JobSet's and Kueue's.
    assert len(copies) == len(stack_images(load_spec(config, credentials=False))) > 6
    assert len(prod_plan.of_type(COPY_TYPE)) == len(copies) - 4
    pulling = [
        "volcano-system/volcano-scheduler",
        "volcano-system/volcano-admission",
        "kubeflow/training-operator",
    ]
    for name in pulling:
        assert copies <= set(prod_plan.one(DEPLOYMENT, name).dependencies), name
    # Trainer's chart installs JobSet too.
    for release in ("kubeflow-trainer", "kueue"):
        assert copies <= set(prod_plan.one(HELM_RELEASE, release).dependencies), release


def test_nothing_is_checked_as_copied_beforehand(run_stack) -> None:
    # No mirror namespace yet: every image is copied during the update, so none is looked for
    # first, and the namespace is made before the repositories, public, kept on destroy.
    plan = run_stack(stack_config("prod"), "prod", invokes=mirror_repos(existing=("ml",)))
    assert len(plan.of_type(TASK_TYPE)) == 4 and len(plan.of_type(COPY_TYPE)) == 2
    (namespace,) = plan.of_type(EE_NAMESPACE)
    assert namespace.inputs["name"] == "mirror" and namespace.inputs["defaultVisibility"] == "PUBLIC"
    assert namespace.retain_on_delete
    repos = [r for r in plan.of_type(EE_REPO) if r.inputs["namespace"] == "mirror"]
    assert len(repos) == 6 and all(namespace.urn in r.dependencies for r in repos)


def test_an_instance_the_stack_buys_is_filled_too(run_stack) -> None:
    config = stack_config("prod")
    for key in ("enterpriseInstanceId", "linkVpc", "namespaceExists", "repositoryExists"):
        del config[cfg("registry")][key]
    plan = run_stack(config, "prod", invokes={ENTERPRISE_NAMESPACES: {"namespaces": []}})
    assert sorted(r.inputs["image"] for r in plan.of_type(COPY_TYPE)) == sorted(GHCR_IMAGES)
    assert len(plan.of_type(TASK_TYPE)) == 4


def prod_with(**changes) -> dict:
    config = stack_config("prod")
    for key, value in changes.items():
        config[cfg(key)] = value
    return config


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {**stack_config("dev"), cfg("mirrorFill"): "subscription"},
            "subscription copies images into an ACR enterprise instance: give registry.edition: enterprise (an "
            "instance the stack buys, or registry.enterpriseInstanceId), or set mirrorFill: none and copy the images "
            "before pulumi up",
        ),
        (
            prod_with(imageMirror="registry-vpc.cn-wulanchabu.aliyuncs.com/mirror"),
            "subscription fills a namespace of instance 'ml-registry': set imageMirror to "
            "ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/<namespace>, e.g. "
            "ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/mirror (it is "
            "'registry-vpc.cn-wulanchabu.aliyuncs.com/mirror')",
        ),
        (
            prod_with(imageMirror="ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/ml"),
            "the mirror's namespace 'ml' is the training image's (registry.namespace), which is private; the "
            "mirror is public and the stack creates it: give imageMirror a namespace of its own, e.g. "
            "ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/mirror",
        ),
        (
            prod_with(mirrorFill="always"),
            None,
        ),
        (
            prod_with(
                mirrorFill="copy",
                registry={k: v for k, v in stack_config("prod")[cfg("registry")].items() if k != "username"},
            ),
            "with copy, pulumi up pushes the images into instance 'ml-registry' as a registry user: set "
            "registry.username (the instance's access credential user) and run: pulumi config set --secret "
            "registryPassword <password>",
        ),
    ],
    ids=["personal-registry", "another-host", "the-training-namespace", "unknown-value", "no-user"],
)
def test_a_mirror_fill_that_cannot_fill_the_mirror_is_refused(config: dict, message: str | None) -> None:
    with pytest.raises(ConfigError) as raised:
        load_spec(config, credentials=False)
    (problem,) = raised.value.problems
    assert problem.startswith("ack-training-platform:mirrorFill: ")
    if message is not None:
        assert problem == f"ack-training-platform:mirrorFill: {message}"
    else:
        assert "'none'" in problem and "'subscription'" in problem and "'copy'" in problem


@pytest.fixture
def cr(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[CrApi, SubscriptionTaskProvider]]:
    """The stand-in ACR API and a provider pointed at it, with credentials in the environment."""
    from alibabacloud_credentials.utils import auth_util

    for name, value in (("ACCESS_KEY_ID", "LTAI-test-key-id"), ("ACCESS_KEY_SECRET", "test-secret")):
        monkeypatch.setenv(f"ALIBABA_CLOUD_{name}", value)
        monkeypatch.setattr(auth_util, f"environment_{name.lower()}", value)
    with cr_api() as (api, endpoint):
        yield api, SubscriptionTaskProvider(endpoint=endpoint, protocol="http", wait_seconds=5, poll_seconds=0)


PROPS = {
    "region": "cn-wulanchabu",
    "instance_id": INSTANCE,
    "rule_id": RULE,
    "tag": "v1.12.1",
    "image": f"{MIRROR}/vc-scheduler:v1.12.1",
}
RUNNING = {"Tag": "v1.12.1", "Status": "RUNNING"}
COPIED = {"Tag": "v1.12.1", "Status": "COMPLETED", "Result": "SUCCESS"}


def test_a_run_starts_the_rule_and_ends_once_the_tag_is_copied(cr) -> None:
    api, provider = cr
    api.results = [[], [RUNNING], [{"Tag": "v1.12.0", "Status": "COMPLETED", "Result": "SUCCESS"}, COPIED]]
    created = provider.create(dict(PROPS))
    assert created.id == TASK and created.outs["task_id"] == TASK
    assert api.actions() == ["CreateArtifactSubscriptionTask"] + ["GetArtifactSubscriptionTaskResult"] * 3
    assert {k: api.requests[0].params[k] for k in ("InstanceId", "RuleId")} == {"InstanceId": INSTANCE, "RuleId": RULE}
    assert all(r.params["TaskId"] == TASK for r in api.requests[1:])
    assert all("Credential=LTAI-test-key-id," in r.authorization for r in api.requests)


def test_a_tag_the_run_failed_to_copy_fails_the_create_naming_the_image(cr) -> None:
    api, provider = cr
    api.results = [[{"Tag": "v1.12.1", "Status": "COMPLETED", "Result": "FAILED"}]]
    with pytest.raises(RuntimeError) as raised:
        provider.create(dict(PROPS))
    assert str(raised.value).startswith(
        f"artifact subscription task {TASK} did not copy {MIRROR}/vc-scheduler:v1.12.1: COMPLETED FAILED"
    )


@pytest.mark.parametrize("action", ["CreateArtifactSubscriptionTask", "GetArtifactSubscriptionTaskResult"])
def test_a_call_answered_without_success_fails_the_create_at_once_naming_acrs_code(cr, action: str) -> None:
    api, provider = cr
    api.results = [[COPIED]]
    api.unsuccessful = {action: "RULE_NOT_EXIST"}
    with pytest.raises(RuntimeError, match=f"^ACR refused {action} for instance {INSTANCE}: RULE_NOT_EXIST$"):
        provider.create(dict(PROPS))
    assert api.actions()[-1] == action and len(api.requests) <= 2


def test_a_run_that_never_copies_the_tag_fails_the_create_once_the_wait_is_over(cr) -> None:
    api, provider = cr
    provider.wait_seconds = 0
    api.results = [[RUNNING]]
    with pytest.raises(RuntimeError, match=f"task {TASK} has not copied {MIRROR}/vc-scheduler:v1.12.1 after 0 s"):
        provider.create(dict(PROPS))


def test_a_throttled_call_is_tried_again_and_a_refusal_is_not(cr) -> None:
    api, provider = cr
    api.results = [[COPIED]]
    api.faults = [Fault(400, "Throttling.User", "Request was denied due to user flow control.")]
    assert provider.create(dict(PROPS)).id == TASK
    assert api.actions()[:2] == ["CreateArtifactSubscriptionTask"] * 2
    api.requests.clear()
    api.faults = [Fault(403, "Forbidden.RAM", "User not authorized to operate on the specified resource.")]
    with pytest.raises(Exception, match="Forbidden.RAM"):
        provider.create(dict(PROPS))
    assert api.actions() == ["CreateArtifactSubscriptionTask"]


def test_a_new_rule_or_tag_runs_again(cr) -> None:
    _, provider = cr
    assert not provider.diff(TASK, dict(PROPS), dict(PROPS)).changes
    changed = provider.diff(TASK, dict(PROPS), {**PROPS, "tag": "v1.12.2"})
    assert changed.changes and changed.replaces == ["tag"]


def test_the_provider_pickled_into_state_works_without_this_project(cr, tmp_path) -> None:
    api, provider = cr
    api.results = [[COPIED]]
    pickled = serialize_provider(provider)
    assert b"test-secret" not in base64.b64decode(pickled)
    # As the engine's dynamic provider process loads it for a program that installs the platform
    # under another name: nothing of this checkout on the path, credentials from the environment.
    run = (
        "import base64, sys, dill\n"
        "p = dill.loads(base64.b64decode(sys.argv[1]))\n"
        f"print(p.create({PROPS!r}).id)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('components', 'ack_training_platform')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", run, pickled],
        cwd=tmp_path,
        env={
            "ALIBABA_CLOUD_ACCESS_KEY_ID": "LTAI-test-key-id",
            "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "test-secret",
            "PATH": os.environ["PATH"],
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [TASK, "[]"]
    assert api.actions() == ["CreateArtifactSubscriptionTask", "GetArtifactSubscriptionTaskResult"]


def test_the_supply_chain_page_says_how_each_image_is_filled() -> None:
    config = stack_config("prod")
    config[cfg("trainerV2")] = {"install": True, "kueue": {"enabled": True}}
    rules, copied = split_by_fill(stack_images(load_spec(config, credentials=False)))
    expected = {rule.source: f"subscription (`{rule.provider}`)" for rule in rules}
    expected |= {source: "`pulumi up`, by digest" for source, _ in copied}
    page = (ROOT / "docs" / "supply-chain.md").read_text()
    section = page.split("## Filled by artifact subscription")[1].split("\n## ")[0]
    shown = dict(re.findall(r"^\| `([^`]+)` \| (.+?) \|$", section, re.M))
    assert shown == expected

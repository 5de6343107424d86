"""The pinned upstream sources: git's tree id computed here, ``prepare`` against local
repositories and mirrors standing in for the upstream ones (real git and kubectl), the
refusal of a copy that is missing or not its pin, and what the platform changes in the
rendered operator overlay and in Volcano's manifest."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, cfg, stack_config
from fixtures.upstream import OPERATOR_IMAGE, VOLCANO_MANIFEST, git_tree_of, write_tree
from pod_security import baseline_violations, pod_specs

from components.config import load_spec, pins
from components.manifests import (
    VOLCANO_SCHEDULER_CONF,
    customize_operator_object,
    customized_operator_objects,
    customized_volcano_objects,
    mirrored,
)
from components.upstream.command import main
from components.upstream.fetch import pack, prepare
from components.upstream.local_sources import CACHE_ENV, LocalSources, SourceError, objects_sha256, read_objects
from components.upstream.treehash import blob_id, tree_id

MIRROR = "registry-vpc.cn-hangzhou.aliyuncs.com/mirror"
RENDERED = "training-operator-v1.9.4.yaml"
VOLCANO = "volcano-v1.12.1.yaml"
OPERATOR = "ack-training-platform:components:TrainingOperator"
RELEASE = "kubernetes:helm.sh/v3:Release"


def deployment(objects: list[dict]) -> dict:
    return next(o for o in objects if o["kind"] == "Deployment")


def test_tree_id_is_the_one_git_gives(tmp_path: Path) -> None:
    tree = tmp_path / "chart"
    write_tree(tree, {"Chart.yaml": "name: x\n", "crd/bases/a.yaml": "a: 1\n", "hack/run.sh": "#!/bin/sh\n"})
    (tree / "empty").mkdir()  # git records no empty directory
    (tree / "crd-v1").mkdir()
    (tree / "crd-v1" / "link").symlink_to("../crd/bases")
    assert tree_id(tree) == git_tree_of(tree)
    (tree / "hack" / "run.sh").chmod(0o644)
    assert tree_id(tree) == git_tree_of(tree)


def test_blob_id_is_the_one_git_gives(tmp_path: Path) -> None:
    for data in (b"", b"kind: Namespace\n", VOLCANO_MANIFEST.encode()):
        (tmp_path / "file").write_bytes(data)
        hashed = subprocess.run(["git", "hash-object", str(tmp_path / "file")], check=True, capture_output=True)
        assert blob_id(data) == hashed.stdout.decode().strip()


def test_prepare_fetches_each_tag_verified_and_renders_the_overlay(fixture_pins: Path) -> None:
    overlay = pins.OPERATOR_OVERLAYS["v1.9.4"]
    assert tree_id(fixture_pins / overlay.source.name) == overlay.source.tree
    objects = read_objects(fixture_pins / RENDERED)
    assert objects_sha256(objects) == overlay.objects_sha256
    assert sorted(o["kind"] for o in objects) == ["CustomResourceDefinition", "Deployment", "Namespace", "Service"]
    assert deployment(objects)["metadata"]["namespace"] == "kubeflow"
    assert deployment(objects)["spec"]["template"]["spec"]["containers"][0]["image"] == OPERATOR_IMAGE
    # The Trainer chart carries its dependencies, LWS at the version the chart requires.
    chart = fixture_pins / "kubeflow-trainer-v2.3.0"
    assert yaml.safe_load((chart / "charts/lws/Chart.yaml").read_text())["version"] == "0.8.0"
    assert tree_id(chart) == pins.TRAINER_V2_CHARTS["v2.3.0"].tree
    # Volcano's manifest is the tag's file byte for byte.
    assert (fixture_pins / VOLCANO).read_text() == VOLCANO_MANIFEST
    assert blob_id(VOLCANO_MANIFEST.encode()) == pins.VOLCANO_MANIFESTS["1.12.1"].blob


def test_prepare_refuses_a_tag_that_is_not_the_pinned_tree(
    tmp_path: Path, upstream_mirror, fixture_pins: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_base, catalogue, _ = upstream_mirror
    kueue = catalogue["KUEUE_CHARTS"]["0.19.2"]
    monkeypatch.setitem(pins.KUEUE_CHARTS, "0.19.2", replace(kueue, tree="1" * 40))
    with pytest.raises(
        SourceError,
        match=r"kubernetes-sigs/kueue\.git v0\.19\.2:charts/kueue is git tree [0-9a-f]{40}, pinned 1{40}$",
    ):
        prepare(tmp_path / "fresh", git_base=git_base)
    assert not (tmp_path / "fresh" / kueue.name).exists()


def test_prepare_refuses_a_volcano_manifest_that_is_not_the_pinned_blob(
    tmp_path: Path, upstream_mirror, fixture_pins: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_base, catalogue, _ = upstream_mirror
    volcano = catalogue["VOLCANO_MANIFESTS"]["1.12.1"]
    monkeypatch.setitem(pins.VOLCANO_MANIFESTS, "1.12.1", replace(volcano, blob="1" * 40))
    with pytest.raises(
        SourceError,
        match=r"volcano-sh/volcano\.git v1\.12\.1:installer/volcano-development\.yaml is git blob [0-9a-f]{40}, "
        r"pinned 1{40}$",
    ):
        prepare(tmp_path / "fresh", git_base=git_base)
    assert not (tmp_path / "fresh" / VOLCANO).exists()


def test_prepare_from_a_mirror_folder_or_from_archives_needs_no_git_host(tmp_path: Path, fixture_pins: Path) -> None:
    archives = pack(fixture_pins, tmp_path / "archives")
    assert sorted(a.name for a in archives) == sorted(f"{p.name}.tar.gz" for p in fixture_pins.iterdir())
    from_archives = tmp_path / "from-archives"
    from_folder = tmp_path / "from-folder"
    prepare(from_archives, mirror=(tmp_path / "archives").as_uri(), git_base="file:///nowhere")
    prepare(from_folder, mirror=str(fixture_pins), git_base="file:///nowhere")
    for copy in (from_archives, from_folder):
        for item in fixture_pins.iterdir():
            if item.is_dir():
                assert tree_id(copy / item.name) == tree_id(item)
            else:
                assert (copy / item.name).read_bytes() == item.read_bytes()
    assert prepare(from_folder, mirror="/nowhere") == []  # everything there is verified again, nothing fetched


def test_a_mirror_with_one_changed_byte_is_refused(tmp_path: Path, fixture_pins: Path) -> None:
    mirror = tmp_path / "mirror"
    shutil.copytree(fixture_pins, mirror, symlinks=True)
    values = mirror / "kueue-v0.19.2-chart" / "values.yaml"
    values.write_bytes(values.read_bytes().replace(b"staging", b"stagIng"))
    with pytest.raises(
        SourceError, match=r"kueue-v0\.19\.2-chart is not the pinned copy \(git tree [0-9a-f]{40}, pinned"
    ):
        prepare(tmp_path / "fresh", mirror=str(mirror))
    assert not (tmp_path / "fresh" / "kueue-v0.19.2-chart").exists()


def test_a_missing_or_changed_copy_is_refused_with_the_command_that_prepares_it(tmp_path: Path, fixture_pins) -> None:
    with pytest.raises(
        SourceError, match=r"training-operator-v1\.9\.4\.yaml is missing: run `python -m components\.upstream prepare`"
    ):
        LocalSources(tmp_path).operator_objects("v1.9.4")
    with pytest.raises(
        SourceError, match=r"volcano-v1\.12\.1\.yaml is missing: run `python -m components\.upstream prepare`"
    ):
        LocalSources(tmp_path).volcano_objects("1.12.1")
    with pytest.raises(
        SourceError, match=r"kueue-v0\.19\.2-chart is missing: run `python -m components\.upstream prepare`"
    ):
        LocalSources(tmp_path).chart_input("kueue-v0.19.2-chart")
    offline = LocalSources(tmp_path, missing_ok=True)
    assert offline.operator_objects("v1.9.4") is None and offline.volcano_objects("1.12.1") is None
    assert offline.missing == [RENDERED, VOLCANO]
    rendered = fixture_pins / RENDERED
    rendered.write_text(rendered.read_text().replace("replicas: 1", "replicas: 2"))
    # A changed copy is refused even where a missing one is tolerated.
    with pytest.raises(SourceError, match=r"is not the pinned rendering \(objects sha256 [0-9a-f]{64}, pinned"):
        LocalSources(fixture_pins, missing_ok=True).operator_objects("v1.9.4")


def test_a_verified_rendering_is_read_again_from_its_json(
    fixture_pins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    first = LocalSources(fixture_pins).operator_objects("v1.9.4")
    (kept,) = (tmp_path / "cache").glob(f"{RENDERED}.*.json")
    assert json.loads(kept.read_bytes()) == first
    with monkeypatch.context() as no_yaml:
        no_yaml.setattr(yaml, "load_all", lambda *_, **__: pytest.fail("the rendering was parsed again"))
        assert LocalSources(fixture_pins).operator_objects("v1.9.4") == first
    # JSON that is not the pinned objects is not taken, and is replaced.
    kept.write_bytes(json.dumps([{"kind": "Namespace", "metadata": {"name": "other"}}]).encode())
    assert LocalSources(fixture_pins).operator_objects("v1.9.4") == first
    assert json.loads(kept.read_bytes()) == first
    # An edited rendering is refused, its verified JSON beside it or not.
    rendered = fixture_pins / RENDERED
    rendered.write_text(rendered.read_text().replace("replicas: 1", "replicas: 2"))
    with pytest.raises(SourceError, match=r"is not the pinned rendering"):
        LocalSources(fixture_pins).operator_objects("v1.9.4")


def test_a_chart_in_the_project_is_named_relative_to_it(fixture_pins: Path) -> None:
    sources = LocalSources(fixture_pins, project_dir=fixture_pins.parent)
    assert sources.chart_input("kueue-v0.19.2-chart") == f"./{fixture_pins.name}/kueue-v0.19.2-chart"
    assert LocalSources(fixture_pins).chart_input("kueue-v0.19.2-chart") == str(fixture_pins / "kueue-v0.19.2-chart")


def fixture_objects(prepared: Path) -> list[dict]:
    return read_objects(prepared / RENDERED)


def test_flags_are_added_to_a_container_without_args(fixture_pins: Path) -> None:
    objects = fixture_objects(fixture_pins)
    for obj in objects:
        customize_operator_object(obj, gang_scheduler="volcano")
    container = deployment(objects)["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["/manager"] and container["args"] == [
        "--gang-scheduler-name=volcano",
        # The operator's own default init image, alpine:3.10, is long out of support.
        "--pytorch-init-container-image=docker.io/library/alpine:3.23.3",
        # Never the operator's unpinned default, ghcr.io/kubeflow/training-v1/kubectl-delivery:latest.
        "--mpi-kubectl-delivery-image=ghcr.io/kubeflow/training-v1/kubectl-delivery:v1-93c5489",
    ]
    # Objects without pods pass through unchanged, but the namespace, which enforces Pod Security baseline.
    untouched = [o for o in fixture_objects(fixture_pins) if o["kind"] not in ("Deployment", "Namespace")]
    assert [o for o in objects if o["kind"] not in ("Deployment", "Namespace")] == untouched
    (namespace,) = [o for o in objects if o["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"


def test_existing_args_are_kept_and_a_flag_is_never_doubled(fixture_pins: Path) -> None:
    objects = fixture_objects(fixture_pins)
    container = deployment(objects)["spec"]["template"]["spec"]["containers"][0]
    container["args"] = ["--enable-scheme=pytorch", "--gang-scheduler-name=scheduler-plugins"]
    customize_operator_object(deployment(objects), gang_scheduler="volcano", mirror=MIRROR)
    assert container["args"] == [
        "--enable-scheme=pytorch",
        "--gang-scheduler-name=volcano",
        f"--pytorch-init-container-image={MIRROR}/alpine:3.23.3",
        f"--mpi-kubectl-delivery-image={MIRROR}/kubectl-delivery:v1-93c5489",
    ]
    customize_operator_object(deployment(objects), gang_scheduler="volcano", mirror=MIRROR)
    assert container["args"].count("--gang-scheduler-name=volcano") == 1


def test_every_image_comes_from_the_mirror(fixture_pins: Path) -> None:
    objects = fixture_objects(fixture_pins)
    pod = deployment(objects)["spec"]["template"]["spec"]
    pod["initContainers"] = [{"name": "wait", "image": "busybox@sha256:" + "0" * 64}]
    customize_operator_object(deployment(objects), mirror=MIRROR, node_selector={"pool": "system"})
    assert pod["containers"][0]["image"] == f"{MIRROR}/training-operator:v1-93c5489"
    assert pod["initContainers"][0]["image"] == f"{MIRROR}/busybox@sha256:" + "0" * 64
    assert pod["nodeSelector"] == {"pool": "system"}
    assert mirrored("docker.io/volcanosh/vc-scheduler:v1.12.1", MIRROR) == f"{MIRROR}/vc-scheduler:v1.12.1"


def test_an_overlay_whose_operator_container_is_renamed_fails_loudly(fixture_pins: Path) -> None:
    objects = fixture_objects(fixture_pins)
    deployment(objects)["spec"]["template"]["spec"]["containers"][0]["name"] = "manager"
    with pytest.raises(
        ValueError, match=r"^the operator Deployment has no container 'training-operator' \(found \['manager'\]\)$"
    ):
        customize_operator_object(deployment(objects), gang_scheduler="volcano")


def test_the_applied_objects_copy_only_what_the_platform_changes(fixture_pins: Path) -> None:
    # The CRDs are most of the rendering's bytes: applied as rendered, never copied; the verified
    # objects themselves are never changed.
    rendered = fixture_objects(fixture_pins)
    operator = load_spec(stack_config("prod"), credentials=False).operator
    applied = customized_operator_objects(rendered, operator, mirror=MIRROR, node_selector={"pool": "system"})
    assert rendered == fixture_objects(fixture_pins)
    for before, after in zip(rendered, applied, strict=True):
        changed = before["kind"] in ("Namespace", "Deployment")
        assert (after is before) is not changed, before["kind"]
        assert (after == before) is not changed, before["kind"]


def upstream(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "components.upstream", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def canonical(objects: list[dict]) -> list[str]:
    return sorted(json.dumps(o, sort_keys=True) for o in objects)


def shown(capsys, *args: str) -> list[dict]:
    """The objects ``python -m components.upstream <args>`` prints."""
    assert main(list(args)) == 0
    return [obj for obj in yaml.safe_load_all(capsys.readouterr().out) if obj]


def test_the_objects_applied_are_the_verified_copies(
    run_stack, fixture_pins: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = run_stack(stack_config("prod"), "prod")
    monkeypatch.chdir(ROOT)
    operator = plan.one(OPERATOR)
    applied = [r.inputs for r in plan.resources if r.parent == operator.urn]
    rendered = read_objects(fixture_pins / RENDERED)
    assert (
        objects_sha256(rendered) == pins.OPERATOR_OVERLAYS["v1.9.4"].objects_sha256 == operator.inputs["objectsSha256"]
    )
    assert operator.inputs["volcanoBlob"] == pins.VOLCANO_MANIFESTS["1.12.1"].blob
    of_operator = shown(capsys, "operator", "--stack", "prod", "--dir", str(fixture_pins))
    of_volcano = shown(capsys, "volcano", "--stack", "prod", "--dir", str(fixture_pins))
    # What the commands print is what the program applies, and nothing else is applied.
    assert canonical(applied) == canonical(of_operator + of_volcano)
    assert len(of_operator) == len(rendered)
    pod = deployment(of_operator)["spec"]["template"]["spec"]
    mirror = "ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/mirror"
    assert pod["containers"][0]["args"][0] == "--gang-scheduler-name=volcano"
    assert pod["containers"][0]["image"] == mirrored(OPERATOR_IMAGE, mirror)
    assert pod["nodeSelector"] == {"ack-training-platform/pool": "system"}
    # Everything but the pods' workload and the namespace's Pod Security labels is the rendering as it is.
    # (Resources register in the order their dependencies allow, not the rendering's.)
    assert canonical([o for o in of_operator if o["kind"] not in ("Deployment", "Namespace")]) == canonical(
        [o for o in rendered if o["kind"] not in ("Deployment", "Namespace")]
    )
    # Volcano: the manifest less its monitoring namespace; what runs no pod is unchanged but the
    # scheduler's configuration and its namespace's Pod Security labels.
    manifest = read_objects(fixture_pins / VOLCANO)
    kept = [o for o in manifest if o["metadata"]["name"] != "volcano-monitoring"]
    assert len(of_volcano) == len(kept) == len(manifest) - 1

    def without_pods_or_conf(objects: list[dict]) -> list[dict]:
        return [o for o in objects if o["kind"] not in ("Deployment", "Job", "ConfigMap", "Namespace")]

    assert canonical(without_pods_or_conf(of_volcano)) == canonical(without_pods_or_conf(kept))
    for obj in of_volcano:
        if obj["kind"] in ("Deployment", "Job"):
            volcano_pod = obj["spec"]["template"]["spec"]
            assert volcano_pod["nodeSelector"] == {"ack-training-platform/pool": "system"}
            assert all(c["image"].startswith(f"{mirror}/vc-") for c in volcano_pod["containers"])


def test_volcano_runs_the_platform_scheduler_configuration_on_the_system_pool(fixture_pins: Path) -> None:
    manifest = read_objects(fixture_pins / VOLCANO)
    objects = customized_volcano_objects(
        manifest, version="1.12.1", mirror=MIRROR, node_selector={"pool": "system"}, digests=None
    )
    (config,) = [o for o in objects if o["kind"] == "ConfigMap"]
    conf = yaml.safe_load(config["data"]["volcano-scheduler.conf"])
    # Without enqueue a PodGroup goes Inqueue at once, so its pods exist for the autoscaler.
    assert [a.strip() for a in conf["actions"].split(",")] == ["allocate", "backfill"]
    assert config["data"]["volcano-scheduler.conf"] == VOLCANO_SCHEDULER_CONF
    (namespace,) = [o for o in objects if o["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == "volcano-system"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert all(not baseline_violations(pod) for _, pod, _ in pod_specs(objects))
    images = sorted(
        c["image"]
        for o in objects
        if o["kind"] in ("Deployment", "Job")
        for c in o["spec"]["template"]["spec"]["containers"]
    )
    assert images == [
        f"{MIRROR}/vc-controller-manager:v1.12.1",
        f"{MIRROR}/vc-scheduler:v1.12.1",
        f"{MIRROR}/vc-webhook-manager:v1.12.1",
        f"{MIRROR}/vc-webhook-manager:v1.12.1",
    ]
    # The parsed manifest is left as it was.
    assert read_objects(fixture_pins / VOLCANO) == manifest


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda objs: (
                objs[-1]["spec"]["template"]["spec"]
                .setdefault("initContainers", [])
                .append({"name": "wait", "image": "docker.io/library/busybox:1.36"})
            ),
            "Volcano 1.12.1's Deployment volcano-controllers runs docker.io/library/busybox:1.36, not one of "
            "['docker.io/volcanosh/vc-controller-manager:v1.12.1', 'docker.io/volcanosh/vc-scheduler:v1.12.1', "
            "'docker.io/volcanosh/vc-webhook-manager:v1.12.1']: list it in VOLCANO_IMAGES so that the image lock "
            "pins it",
        ),
        (
            lambda objs: objs.remove(next(o for o in objs if o["kind"] == "ConfigMap")),
            "Volcano 1.12.1's manifest has no ConfigMap 'volcano-scheduler-configmap'",
        ),
    ],
    ids=["an image no lock would pin", "no scheduler configuration"],
)
def test_a_volcano_manifest_the_platform_cannot_pin_or_configure_fails_loudly(
    fixture_pins: Path, change, message: str
) -> None:
    objects = read_objects(fixture_pins / VOLCANO)
    change(objects)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        customized_volcano_objects(objects, version="1.12.1", mirror=None, node_selector=None)


def test_the_operator_waits_for_volcano_its_objects_and_its_image_pulls(run_stack, fixture_pins: Path) -> None:
    config = stack_config("prod")
    config["ack-training-platform:registry"]["linkVpc"] = True
    plan = run_stack(config, "prod")
    operator = plan.one(OPERATOR)
    children = {(r.inputs["kind"], r.inputs["metadata"]["name"]): r for r in plan.resources if r.parent == operator.urn}
    workload = children.pop(("Deployment", "training-operator"))
    podgroups = children[("CustomResourceDefinition", "podgroups.scheduling.volcano.sh")]
    # The mirror is public: its pulls wait for the registry's VPC link, which the stack creates here.
    registry_link = plan.one("alicloud:cr/vpcEndpointLinkedVpc:VpcEndpointLinkedVpc")
    # Started with --gang-scheduler-name=volcano, the operator exits without Volcano's PodGroup CRD;
    # it waits for every other object, Volcano's running pods among them.
    assert podgroups.urn in workload.dependencies
    assert {registry_link.urn} | {r.urn for r in children.values()} <= set(workload.dependencies)
    volcano_pods = [r for (kind, _), r in children.items() if kind in ("Deployment", "Job")]
    assert len(volcano_pods) == 4 and all(registry_link.urn in r.dependencies for r in volcano_pods)
    # Volcano's admission-init Job writes the Secret its webhook mounts: it was the chart's
    # pre-install hook, and the Deployments still start after it.
    init = children[("Job", "volcano-admission-init")]
    assert children[("ServiceAccount", "volcano-admission-init")].urn in init.dependencies
    for name in ("volcano-admission", "volcano-scheduler", "volcano-controllers"):
        assert init.urn in children[("Deployment", name)].dependencies
    assert children[("Namespace", "kubeflow")].urn in children[("Service", "training-operator")].dependencies
    assert children[("Namespace", "volcano-system")].urn in init.dependencies
    assert (
        not podgroups.dependencies
        and not children[("CustomResourceDefinition", "pytorchjobs.kubeflow.org")].dependencies
    )
    for job in plan.of_type("kubernetes:kubeflow.org/v1:PyTorchJob"):
        assert {workload.urn} | {r.urn for r in children.values()} <= set(job.dependencies)


@pytest.mark.parametrize(
    ("copy", "old", "new", "refusal"),
    [
        (RENDERED, b"port: 443", b"port: 444", r"training-operator-v1\.9\.4\.yaml is not the pinned rendering"),
        (VOLCANO, b"vc-scheduler:v1.12.1", b"vc-scheduler:v1.12.2", r"volcano-v1\.12\.1\.yaml is not the pinned copy"),
        # A comment changes no object, but it changes the file.
        (
            VOLCANO,
            b"{name: volcano-monitoring}\n",
            b"{name: volcano-monitoring}\n# unpinned\n",
            r"volcano-v1\.12\.1\.yaml is not the pinned copy",
        ),
    ],
    ids=["operator", "volcano image", "volcano comment"],
)
def test_a_copy_with_one_changed_byte_is_never_applied(
    run_stack, fixture_pins: Path, copy: str, old: bytes, new: bytes, refusal: str
) -> None:
    import pulumi

    path = fixture_pins / copy
    assert path.read_bytes().count(old) == 1
    path.write_bytes(path.read_bytes().replace(old, new))
    # Refused by the check the program makes once the stack is loaded, before its first
    # resource (a component meeting the copy would raise SourceError instead).
    with pytest.raises(pulumi.RunError, match=refusal):
        run_stack(stack_config("prod"), "prod")


def test_without_a_prepared_copy_the_plan_says_what_it_cannot_show(run_stack) -> None:
    plan = run_stack(stack_config("prod"), "prod")
    assert not plan.of_type("kubernetes:apps/v1:Deployment") or all(
        r.inputs["metadata"]["namespace"] not in ("kubeflow", "volcano-system")
        for r in plan.of_type("kubernetes:apps/v1:Deployment")
    )
    assert plan.not_shown() == [
        "training-operator: the objects of kubeflow/trainer v1.9.4 manifests/overlays/standalone; "
        "its rendering is not prepared here (python -m components.upstream prepare)",
        "training-operator: Volcano's objects, volcano-sh/volcano v1.12.1 installer/volcano-development.yaml; "
        "its copy is not prepared here (python -m components.upstream prepare)",
    ]


def test_the_volcano_command_needs_a_stack_that_installs_it(fixture_pins: Path, capsys) -> None:
    assert main(["volcano", "--stack", "dev", "--dir", str(fixture_pins)]) == 2
    assert capsys.readouterr().err == ("error: the stack installs no Volcano: set operator.volcano.enabled: true\n")


def test_images_command_lists_what_to_copy() -> None:
    result = upstream("images", "--stack", "prod")
    assert result.returncode == 0, result.stderr
    pairs = [line.split(" ") for line in result.stdout.splitlines()]
    assert [source for source, _ in pairs] == [
        "ghcr.io/kubeflow/training-v1/training-operator:v1-93c5489",
        "docker.io/library/alpine:3.23.3",
        "ghcr.io/kubeflow/training-v1/kubectl-delivery:v1-93c5489",
        "docker.io/volcanosh/vc-controller-manager:v1.12.1",
        "docker.io/volcanosh/vc-scheduler:v1.12.1",
        "docker.io/volcanosh/vc-webhook-manager:v1.12.1",
    ]
    assert all(
        target.startswith("ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/mirror/") for _, target in pairs
    )


def test_dev_on_an_empty_account_pulls_the_operator_from_its_own_registry(run_stack, fixture_pins: Path) -> None:
    # No mirror to fill before the first up: the images as upstream publishes them.
    plan = run_stack(stack_config("dev"))
    pod = plan.one("kubernetes:apps/v1:Deployment", "kubeflow/training-operator").inputs["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["containers"]] == ["ghcr.io/kubeflow/training-v1/training-operator:v1-93c5489"]
    assert pod["containers"][0]["args"] == [
        "--pytorch-init-container-image=docker.io/library/alpine:3.23.3",
        "--mpi-kubectl-delivery-image=ghcr.io/kubeflow/training-v1/kubectl-delivery:v1-93c5489",
    ]


def test_dev_opted_in_to_a_mirror_pulls_the_operator_from_it(run_stack, fixture_pins: Path) -> None:
    mirror = "crpi-abc123-vpc.cn-hangzhou.personal.cr.aliyuncs.com/ml-mirror"
    plan = run_stack({**stack_config("dev"), cfg("imageMirror"): mirror})
    pod = plan.one("kubernetes:apps/v1:Deployment", "kubeflow/training-operator").inputs["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["containers"]] == [f"{mirror}/training-operator:v1-93c5489"]
    # The MPI Launcher's init container comes from the mirror too, or MPIJobs never start there.
    assert pod["containers"][0]["args"] == [
        f"--pytorch-init-container-image={mirror}/alpine:3.23.3",
        f"--mpi-kubectl-delivery-image={mirror}/kubectl-delivery:v1-93c5489",
    ]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("operator", {"version": "v1.9.3"}, "operator.version: operator 'v1.9.3' has no pinned local copy"),
        ("operator", {"volcano": {"enabled": True, "version": "1.12.0"}}, "Volcano '1.12.0' has no pinned local copy"),
        (
            "trainerV2",
            {"version": "v2.2.0"},
            "Trainer 'v2.2.0' has no pinned local copy: this platform installs v2.3.0",
        ),
        ("trainerV2", {"kueue": {"version": "0.19.1"}}, "Kueue '0.19.1' has no pinned local copy"),
    ],
)
def test_a_release_without_a_pin_is_refused_at_load(key: str, value: dict, message: str) -> None:
    from components.config import ConfigError, load_spec

    config = stack_config("dev")
    config[f"ack-training-platform:{key}"] = value
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_spec(config, credentials=False)


def test_prepare_command_fills_a_folder_from_a_mirror(tmp_path: Path, fixture_pins: Path, capsys) -> None:
    target = tmp_path / "from-command"
    assert main(["prepare", "--dir", str(target), "--from", str(fixture_pins)]) == 0
    assert capsys.readouterr().out.endswith("; all verified\n")
    assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in fixture_pins.iterdir())
    (target / RENDERED).write_text("kind: Namespace\n")
    assert main(["prepare", "--dir", str(target), "--from", str(fixture_pins)]) == 2
    assert "is not the pinned rendering" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("stack", "copies"),
    [
        ("prod", ["training-operator-v1.9.4.yaml", "volcano-v1.12.1.yaml"]),
        ("dev", ["training-operator-v1.9.4.yaml"]),
        ("local", ["training-operator-v1.9.4.yaml", "kubeflow-trainer-v2.3.0"]),
    ],
)
def test_each_stack_checks_the_copies_it_installs(stack: str, copies: list[str]) -> None:
    from components.config import load_spec
    from components.upstream.local_sources import required_copies

    assert required_copies(load_spec(stack_config(stack), credentials=False)) == copies


def test_trainer_v2_waits_for_the_mirror_registry_like_the_operator(run_stack) -> None:
    config = stack_config("prod")
    config["ack-training-platform:jobs"][1]["backend"] = "v2"
    del config["ack-training-platform:jobs"][1]["restartPolicy"]
    config["ack-training-platform:registry"]["linkVpc"] = True
    plan = run_stack(config, "prod")
    link = plan.one("alicloud:cr/vpcEndpointLinkedVpc:VpcEndpointLinkedVpc")
    assert link.urn in plan.one(RELEASE, "kubeflow-trainer").dependencies


def test_no_update_or_destroy_deletes_a_crd_and_with_it_every_job(run_stack, fixture_pins: Path) -> None:
    # Deleting a CRD deletes every object of its kind (PyTorchJobs, Volcano's PodGroups); the
    # charts render theirs from templates/, which helm uninstall deletes, so the releases are kept too.
    config = stack_config("prod")
    config["ack-training-platform:trainerV2"] = {"install": True, "kueue": {"enabled": True}}
    config["ack-training-platform:jobs"][1]["backend"] = "v2"
    del config["ack-training-platform:jobs"][1]["restartPolicy"]
    plan = run_stack(config, "prod")
    operator = plan.one(OPERATOR)
    crds = [
        r for r in plan.resources if r.parent == operator.urn and r.inputs.get("kind") == "CustomResourceDefinition"
    ]
    assert sorted(crd.inputs["metadata"]["name"] for crd in crds) == [
        "podgroups.scheduling.volcano.sh",
        "pytorchjobs.kubeflow.org",
    ]
    assert all(crd.retain_on_delete for crd in crds)
    others = [r for r in plan.resources if r.parent == operator.urn and r not in crds]
    assert others and not any(r.retain_on_delete for r in others)
    releases = plan.of_type(RELEASE)
    assert sorted(r.name for r in releases) == ["kubeflow-trainer", "kueue"]
    assert all(release.retain_on_delete for release in releases)


def volcano_workload(objects: list[dict], name: str) -> dict:
    return next(o for o in objects if o["kind"] in ("Deployment", "Job") and o["metadata"]["name"] == name)


def test_volcanos_admission_is_ready_only_once_it_serves(fixture_pins: Path) -> None:
    manifest = read_objects(fixture_pins / VOLCANO)
    objects = customized_volcano_objects(manifest, version="1.12.1", mirror=None, node_selector=None)
    admission = volcano_workload(objects, "volcano-admission")["spec"]["template"]["spec"]["containers"][0]
    # v1.12.1 cmd/webhook-manager/app/options/options.go: `--port` "the port used by
    # admission-controller-server", 8443 by default (the stand-in gives no args).
    assert admission["readinessProbe"] == {"tcpSocket": {"port": 8443}, "periodSeconds": 5, "failureThreshold": 3}
    # The release manifest sets --port=8443 itself; the probe follows whatever it sets.
    volcano_workload(manifest, "volcano-admission")["spec"]["template"]["spec"]["containers"][0]["args"] = [
        "--enable-healthz=true",
        "--port=9443",
    ]
    objects = customized_volcano_objects(manifest, version="1.12.1", mirror=None, node_selector=None)
    admission = volcano_workload(objects, "volcano-admission")["spec"]["template"]["spec"]["containers"][0]
    assert admission["readinessProbe"]["tcpSocket"] == {"port": 9443}
    for name in ("volcano-scheduler", "volcano-controllers", "volcano-admission-init"):
        pod = volcano_workload(objects, name)["spec"]["template"]["spec"]
        assert "readinessProbe" not in pod["containers"][0]


def test_volcanos_scheduler_and_controllers_start_once_admission_serves(run_stack, fixture_pins: Path) -> None:
    plan = run_stack(stack_config("prod"), "prod")
    deployments = {r.name: r for r in plan.of_type("kubernetes:apps/v1:Deployment")}
    admission = deployments["volcano-system/volcano-admission"]
    init = plan.one("kubernetes:batch/v1:Job", "volcano-system/volcano-admission-init")
    assert init.urn in admission.dependencies
    for name in ("volcano-system/volcano-scheduler", "volcano-system/volcano-controllers"):
        assert admission.urn in deployments[name].dependencies, name
    assert not {d.urn for d in deployments.values()} & set(admission.dependencies)


def fake_tool(folder: Path, name: str, script: str) -> None:
    folder.mkdir(exist_ok=True)
    tool = folder / name
    tool.write_text(f"#!/usr/bin/env bash\n{script}\n")
    tool.chmod(0o755)


def test_another_kustomize_is_named_when_its_rendering_differs(
    tmp_path: Path, fixture_pins: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from components.upstream.fetch import render_overlay

    # A kubectl whose kustomize drops the Service: what a kustomize of another version
    # rendering the same overlay differently looks like to the pin.
    real = subprocess.run(["bash", "-c", "command -v kubectl"], capture_output=True, text=True, check=True)
    fake_tool(
        tmp_path / "bin",
        "kubectl",
        'if [ "$1" = version ]; then echo "Client Version: v1.34.1"; echo "Kustomize Version: v5.7.1"; exit 0; fi\n'
        f'{real.stdout.strip()} "$@" | {sys.executable} -c "import sys, yaml; '
        "print(yaml.safe_dump_all([o for o in yaml.safe_load_all(sys.stdin) if o and o['kind'] != 'Service']))\"",
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    overlay = pins.OPERATOR_OVERLAYS["v1.9.4"]
    (fixture_pins / overlay.name).unlink()
    with pytest.raises(SourceError) as raised:
        render_overlay(overlay, fixture_pins)
    assert str(raised.value).endswith(
        "The pin was rendered with kustomize v5.5.0, and kubectl has kustomize v5.7.1: render with kubectl 1.32, or "
        "install kustomize v5.5.0 (go install sigs.k8s.io/kustomize/kustomize/v5@v5.5.0) and set KUSTOMIZE to it"
    )
    assert not (fixture_pins / overlay.name).exists()


def test_a_standalone_kustomize_renders_the_overlay(
    tmp_path: Path, fixture_pins: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from components.upstream.fetch import render_overlay

    # Stands in for kustomize v5.5.0's own binary: `kustomize build DIR` renders as kubectl 1.32's does.
    ran = tmp_path / "ran"
    fake_tool(
        tmp_path / "bin", "kustomize", f'[ "$1" = build ] && touch {ran} && exec kubectl kustomize "$2"; echo v5.5.0'
    )
    monkeypatch.setenv("KUSTOMIZE", str(tmp_path / "bin" / "kustomize"))
    overlay = pins.OPERATOR_OVERLAYS["v1.9.4"]
    (fixture_pins / overlay.name).unlink()
    render_overlay(overlay, fixture_pins)
    assert ran.exists()
    assert objects_sha256(read_objects(fixture_pins / overlay.name)) == overlay.objects_sha256

"""What the platform changes in the upstream operator overlay and Volcano chart, checked
against a fixture with the shape of kubeflow/trainer v1.9.4's rendered overlay, and the
command that applies the same changes to the real rendered overlay."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, stack_config
from fixtures.operator_overlay import OPERATOR_IMAGE, rendered_overlay

from components.manifests import customize_operator_object, mirrored

MIRROR = "registry-vpc.cn-hangzhou.aliyuncs.com/mirror"


def deployment(objects: list[dict]) -> dict:
    return next(o for o in objects if o["kind"] == "Deployment")


def test_flags_are_added_to_a_container_without_args() -> None:
    objects = rendered_overlay()
    for obj in objects:
        customize_operator_object(obj, gang_scheduler="volcano")
    container = deployment(objects)["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["/manager"] and container["args"] == ["--gang-scheduler-name=volcano"]
    # Objects without pods pass through unchanged.
    assert [o for o in objects if o["kind"] != "Deployment"] == [
        o for o in rendered_overlay() if o["kind"] != "Deployment"
    ]


def test_existing_args_are_kept_and_a_flag_is_never_doubled() -> None:
    objects = rendered_overlay()
    container = deployment(objects)["spec"]["template"]["spec"]["containers"][0]
    container["args"] = ["--enable-scheme=pytorch", "--gang-scheduler-name=scheduler-plugins"]
    customize_operator_object(deployment(objects), gang_scheduler="volcano", mirror=MIRROR)
    assert container["args"] == [
        "--enable-scheme=pytorch",
        "--gang-scheduler-name=volcano",
        f"--pytorch-init-container-image={MIRROR}/alpine:3.10",
    ]
    customize_operator_object(deployment(objects), gang_scheduler="volcano", mirror=MIRROR)
    assert container["args"].count("--gang-scheduler-name=volcano") == 1


def test_every_image_comes_from_the_mirror() -> None:
    objects = rendered_overlay()
    pod = deployment(objects)["spec"]["template"]["spec"]
    pod["initContainers"] = [{"name": "wait", "image": "busybox@sha256:" + "0" * 64}]
    customize_operator_object(deployment(objects), mirror=MIRROR, node_selector={"pool": "system"})
    assert pod["containers"][0]["image"] == f"{MIRROR}/training-operator:v1-93c5489"
    assert pod["initContainers"][0]["image"] == f"{MIRROR}/busybox@sha256:" + "0" * 64
    assert pod["nodeSelector"] == {"pool": "system"}
    assert mirrored("docker.io/volcanosh/vc-scheduler:v1.12.1", MIRROR) == f"{MIRROR}/vc-scheduler:v1.12.1"


def test_an_overlay_whose_operator_container_is_renamed_fails_loudly() -> None:
    objects = rendered_overlay()
    deployment(objects)["spec"]["template"]["spec"]["containers"][0]["name"] = "manager"
    with pytest.raises(
        ValueError, match=r"^the operator Deployment has no container 'training-operator' \(found \['manager'\]\)$"
    ):
        customize_operator_object(deployment(objects), gang_scheduler="volcano")


def upstream(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "components.upstream", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_command_customizes_a_rendered_overlay_as_the_stack_would() -> None:
    result = upstream("operator", "--stack", "prod", stdin=yaml.safe_dump_all(rendered_overlay()))
    assert result.returncode == 0, result.stderr
    objects = list(yaml.safe_load_all(result.stdout))
    assert len(objects) == len(rendered_overlay())
    pod = deployment(objects)["spec"]["template"]["spec"]
    mirror = "ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/mirror"
    assert pod["containers"][0]["args"][0] == "--gang-scheduler-name=volcano"
    assert pod["containers"][0]["image"] == mirrored(OPERATOR_IMAGE, mirror)
    assert pod["nodeSelector"] == {"ack-training-platform/pool": "system"}


def test_volcano_values_command_matches_the_release(run_stack) -> None:
    result = upstream("volcano-values", "--stack", "prod")
    assert result.returncode == 0, result.stderr
    release = run_stack(stack_config("prod"), "prod").one("kubernetes:helm.sh/v3:Release")
    assert json.loads(result.stdout) == release.inputs["values"]


def test_images_command_lists_what_to_copy() -> None:
    result = upstream("images", "--stack", "prod")
    assert result.returncode == 0, result.stderr
    pairs = [line.split(" ") for line in result.stdout.splitlines()]
    assert [source for source, _ in pairs] == [
        "ghcr.io/kubeflow/training-v1/training-operator:v1-93c5489",
        "docker.io/library/alpine:3.10",
        "docker.io/volcanosh/vc-controller-manager:v1.12.1",
        "docker.io/volcanosh/vc-scheduler:v1.12.1",
        "docker.io/volcanosh/vc-webhook-manager:v1.12.1",
    ]
    assert all(
        target.startswith("ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/mirror/") for _, target in pairs
    )
    without = upstream("images", "--stack", "dev")
    assert without.returncode == 2 and without.stderr == (
        "error: the stack sets no imageMirror: its images are pulled from their own registries\n"
    )

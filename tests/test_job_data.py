"""``ack-jobs data import``: prints and creates exactly what the component's builders emit
(the bodies the stand-in API server of ``tests/loopback_api.py`` received)."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from loopback_api import NS

from components.config import DatasetImportSpec
from components.jobs.cli import run
from components.manifests import import_job, oss_source_objects

REGISTRY = "registry-vpc.cn-hangzhou.aliyuncs.com/ml/trainer"
TEAM_UID = {"runAsUser": 20001, "runAsGroup": 20001, "runAsNonRoot": True}
DEFAULTS = {
    "namespace": NS,
    "registry": REGISTRY,
    "dataClaim": "training-data",
    "imagePullSecret": "registry-pull",
    "securityContext": TEAM_UID,
}
OSS_FLAGS = ["books", "--from", "oss://corpus/books", "--oss-role", "books-reader", "--region", "cn-hangzhou"]


@pytest.fixture
def outputs(tmp_path: Path) -> Path:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"namespace": NS, "jobDefaults": DEFAULTS}))
    return path


def expected_oss() -> list[dict]:
    spec = DatasetImportSpec(name="books", source="oss://corpus/books", ossRoleName="books-reader", imageTag="v1.4.0")
    return [
        *oss_source_objects(
            spec, namespace=NS, endpoint="oss-cn-hangzhou-internal.aliyuncs.com", role_name="books-reader"
        ),
        import_job(
            spec,
            namespace=NS,
            data_claim="training-data",
            image=f"{REGISTRY}:v1.4.0",
            security_context=TEAM_UID,
            image_pull_secret="registry-pull",
        ),
    ]


def test_dry_run_prints_the_components_objects(outputs: Path) -> None:
    lines: list[str] = []
    argv = ["--outputs", str(outputs), "data", "import", *OSS_FLAGS, "--image-tag", "v1.4.0", "--dry-run"]
    assert run(argv, out=lines.append) == 0
    printed = list(yaml.safe_load_all("\n".join(lines)))
    assert printed == expected_oss()
    # The Kubernetes API's own schemas, strictly (no unknown field, podFailurePolicy included).
    for obj in printed:
        kubernetes_validate.validate(obj, "1.33", strict=True)


def test_import_creates_the_volume_claim_and_job(cluster, outputs: Path) -> None:
    api, kubeconfig = cluster
    paths = ["/api/v1/persistentvolumes", f"/api/v1/namespaces/{NS}/persistentvolumeclaims"]
    paths.append(f"/apis/batch/v1/namespaces/{NS}/jobs")
    for path in paths:
        api.routes[("POST", path)] = lambda _, body: (201, body)
    lines: list[str] = []
    argv = ["--outputs", str(outputs), "--kubeconfig", str(kubeconfig), "data", "import", *OSS_FLAGS]
    assert run([*argv, "--image-tag", "v1.4.0"], out=lines.append) == 0
    assert [(p, b) for m, p, _, b in api.requests if m == "POST"] == list(zip(paths, expected_oss(), strict=True))
    assert lines == [f"Job import-books created in {NS}; follow it: kubectl logs -f job/import-books -n {NS}"]


def test_an_import_that_exists_already_is_a_failure_not_a_traceback(cluster, outputs: Path, capsys) -> None:
    api, kubeconfig = cluster
    conflict = {"kind": "Status", "status": "Failure", "reason": "AlreadyExists", "code": 409}
    api.routes[("POST", f"/apis/batch/v1/namespaces/{NS}/jobs")] = lambda _, __: (409, conflict)
    argv = ["--outputs", str(outputs), "--kubeconfig", str(kubeconfig), "data", "import", "wiki"]
    assert run([*argv, "--from", "https://data.example.com/wiki/", "--image-tag", "v1.4.0"]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"ack-jobs data: Job import-wiki exists already: an import of that name ran or runs; "
        f"see kubectl get job/import-wiki -n {NS}\n"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["wiki", "--from", "http://x/", "--image-tag", "v1"], "--from: 'http://x/' is not an https:// URL"),
        (["wiki", "--from", "https://x/", "--image-tag", "latest"], "--image-tag: 'latest' is not a pinned tag"),
        (["wiki", "--from", "https://x/"], "--image: give exactly one of image (a full reference) or imageTag"),
        (["Wiki", "--from", "https://x/", "--image-tag", "v1"], "NAME: 'Wiki' is not a valid Kubernetes name"),
        (["wiki", "--from", "https://x/", "--image-tag", "v1", "--oss-role", "r"], "--oss-role: ossRoleName has no"),
        (["wiki", "--from", "https://x/", "--image-tag", "v1", "--region", "r"], "--region: only an oss:// source"),
        (["wiki", "--from", "https://x/", "--image-tag", "v1", "--retries", "-1"], "--retries: Input should be"),
        (["b", "--from", "oss://corpus/b", "--image-tag", "v1", "--region", "cn-x"], "--oss-role: an oss:// source"),
        (["b", "--from", "oss://corpus/b", "--image-tag", "v1", "--oss-role", "r"], "--region: an oss:// source needs"),
    ],
)
def test_bad_flags_name_the_flag_and_exit_2(outputs: Path, capsys, flags: list[str], message: str) -> None:
    assert run(["--outputs", str(outputs), "data", "import", *flags, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ack-jobs data: {message}") and "Traceback" not in err

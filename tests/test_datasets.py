"""Dataset imports: what the spec refuses, and what the component gives the cluster (the
real Pulumi SDK under mocks)."""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
from conftest import cfg, stack_config
from pydantic import ValidationError

from components import DatasetImport, SharedVolumes, TrainingNamespace
from components.config import ConfigError, DatasetImportSpec, StorageSpec, load_spec
from components.config.operator import TrainingNamespaceSpec

WIKI = {"name": "wiki", "source": "https://data.example.com/wiki/", "image": "trainer:1"}
BOOKS = {"name": "books", "source": "oss://corpus-bucket/books/v2", "image": "trainer:1"}

INVALID = [
    (
        {**WIKI, "source": "http://data.example.com/wiki/"},
        "source: Value error, 'http://data.example.com/wiki/' is not an https:// URL or oss://bucket/path "
        "(plain http:// is refused: the checksum list must not be alterable in transit)",
    ),
    (
        {**WIKI, "source": "oss://Bad_Bucket/x"},
        "source: Value error, 'oss://Bad_Bucket/x' is not an https:// URL or oss://bucket/path",
    ),
    (
        {**WIKI, "ossEndpoint": "oss-cn-hangzhou.aliyuncs.com"},
        "ossEndpoint: ossEndpoint has no effect with an https:// source",
    ),
    ({**WIKI, "name": "Wiki"}, "name: Value error, 'Wiki' is not a valid Kubernetes name"),
    ({**WIKI, "image": "trainer:latest"}, "image: 'trainer:latest' is not pinned"),
    ({"name": "wiki", "source": WIKI["source"]}, "image: give exactly one of image (a full reference) or imageTag"),
]


@pytest.mark.parametrize(("fields", "message"), INVALID)
def test_a_bad_import_is_refused_naming_the_key(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        DatasetImportSpec.model_validate(fields)
    (error,) = raised.value.errors()
    key = ".".join(map(str, error["loc"])) or (error.get("ctx") or {}).get("key")
    assert f"{key}: {error['msg']}".startswith(message)


def test_an_oss_source_is_a_bucket_and_a_path() -> None:
    oss = DatasetImportSpec.model_validate({**BOOKS, "ossRoleName": "r"}).oss
    assert (oss.bucket, oss.path, oss.role_name, oss.endpoint) == ("corpus-bucket", "/books/v2", "r", None)
    assert DatasetImportSpec.model_validate(WIKI).oss is None


def deploy(spec: DatasetImportSpec, storage: StorageSpec | None = None, **kwargs: Any) -> dict[tuple[str, str], dict]:
    """Create the component under mocks; every Kubernetes object it registered, by (kind, name)."""
    objects: dict[tuple[str, str], dict] = {}

    class Echo(pulumi.runtime.Mocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
            if args.typ.startswith("kubernetes:") and "metadata" in args.inputs:
                objects[(args.typ.rsplit(":", 1)[1], args.inputs["metadata"]["name"])] = dict(args.inputs)
            return f"{args.name}-id", dict(args.inputs)

        def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
            return {}

    pulumi.runtime.settings.set_root_resource(None)
    pulumi.runtime.set_mocks(Echo(), project="ack-training-platform", stack="test", preview=False)

    @pulumi.runtime.test
    def run() -> pulumi.Output:
        provider = k8s.Provider("cluster")
        namespace = TrainingNamespace("training", TrainingNamespaceSpec(), provider=provider)
        given = storage or StorageSpec()
        oss_data = {"region": "cn-hangzhou", "oss_role": "reader"} if given.oss else {}
        volumes = SharedVolumes("shared", given, namespace=namespace, provider=provider, **oss_data)
        component = DatasetImport(spec.name, spec, namespace=namespace, storage=volumes, provider=provider, **kwargs)
        return component.job.id

    run()
    return objects


def test_an_oss_import_reads_its_bucket_as_the_rrsa_role_and_no_key_exists() -> None:
    role = pulumi.Output.from_input("books-reader")
    objects = deploy(DatasetImportSpec.model_validate(BOOKS), region="cn-hangzhou", oss_role=role)
    job = objects[("Job", "import-books")]
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "trainer:1"
    assert container["command"] == ["python", "-m", "trainer.dataset_import"]
    assert container["args"] == ["--name", "books", "--source", "/mnt/source", "--dest", "/mnt/data"]
    assert container["env"] == [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    assert pod["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "training-data"}},
        {"name": "source", "persistentVolumeClaim": {"claimName": "import-books-source", "readOnly": True}},
    ]
    assert pod["automountServiceAccountToken"] is False and pod["restartPolicy"] == "Never"
    # A refusal (exit 2) is final; a failed transfer is retried, and the retry resumes.
    assert job["spec"]["podFailurePolicy"]["rules"] == [
        {"action": "FailJob", "onExitCodes": {"containerName": "import", "operator": "In", "values": [2]}}
    ]
    csi = objects[("PersistentVolume", "training-import-books-source")]["spec"]["csi"]
    assert csi["readOnly"] is True and "nodePublishSecretRef" not in csi
    attributes = csi["volumeAttributes"]
    assert (attributes["bucket"], attributes["path"], attributes["url"]) == (
        "corpus-bucket",
        "/books/v2",
        "oss-cn-hangzhou-internal.aliyuncs.com",
    )
    assert (attributes["authType"], attributes["roleName"]) == ("rrsa", "books-reader")
    claim = objects[("PersistentVolumeClaim", "import-books-source")]["spec"]
    assert (claim["volumeName"], claim["accessModes"]) == ("training-import-books-source", ["ReadOnlyMany"])
    assert not [k for k in objects if k[0] == "Secret"]


def test_an_https_import_mounts_only_the_data_claim() -> None:
    objects = deploy(DatasetImportSpec.model_validate(WIKI))
    pod = objects[("Job", "import-wiki")]["spec"]["template"]["spec"]
    assert pod["containers"][0]["args"] == ["--name", "wiki", "--source", WIKI["source"], "--dest", "/mnt/data"]
    assert [v["name"] for v in pod["volumes"]] == ["data"]
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000}
    assert not [k for k in objects if k[0] == "PersistentVolume"]


@pytest.mark.parametrize(
    ("spec", "storage", "message"),
    [
        (BOOKS, None, "dataset books: an oss:// source needs ossRoleName, or the role given as oss_role"),
        (
            {**BOOKS, "ossRoleName": "reader"},
            None,
            "dataset books: an oss:// source needs ossEndpoint, or the region as region",
        ),
        (
            WIKI,
            StorageSpec.model_validate({"oss": {"bucket": "train-data", "roleName": "reader"}}),
            "dataset wiki: the data volume is a read-only OSS bucket (storage.oss)",
        ),
    ],
)
def test_an_import_that_cannot_work_is_refused_before_anything_exists(
    spec: dict, storage: StorageSpec | None, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        deploy(DatasetImportSpec.model_validate(spec), storage, oss_role=None, region=None)


# --- the stack's datasets --------------------------------------------------------------


def test_the_local_stack_plans_its_import_job(run_stack) -> None:
    plan = run_stack(stack_config("local"), "local")
    (job,) = [obj for obj in plan.kubernetes_objects() if obj["kind"] == "Job"]
    pod = job["spec"]["template"]["spec"]
    assert (job["metadata"]["name"], job["metadata"]["namespace"]) == ("import-mnist-tokens", "training")
    assert pod["containers"][0]["image"] == "trainer:0.1.0"
    assert pod["containers"][0]["args"][:4] == [
        "--name",
        "mnist-tokens",
        "--source",
        "https://data.example.com/mnist-tokens/",
    ]
    assert pod["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "training-data"}}]
    assert job["spec"]["backoffLimit"] == 2
    assert plan.outputs["datasetImports"] == {"import-mnist-tokens": "training"}


def test_a_teams_import_lands_in_its_namespace_as_its_uid(run_stack) -> None:
    config = stack_config("local")
    config[cfg("teams")] = [{"name": "vision", "uid": 2000, "quota": {"gpus": 0, "cpu": "16", "memory": "32Gi"}}]
    for job in config[cfg("jobs")]:
        job["team"] = "vision"
    config[cfg("datasets")][0]["team"] = "vision"
    plan = run_stack(config, "local")
    (job,) = [
        obj
        for obj in plan.kubernetes_objects()
        if obj["kind"] == "Job" and obj["metadata"]["name"].startswith("import-")
    ]
    assert job["metadata"]["namespace"] == "vision"
    assert job["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 2000


OSS_SOURCE = {"source": "oss://corpus-bucket/books"}
BAD_ENTRIES = [
    ({"sourse": "https://x.example.com/"}, "datasets[0].sourse", "unknown key; did you mean 'source'?"),
    ({"source": "http://x.example.com/"}, "datasets[0].source", "plain http:// is refused"),
    ({"team": "vision"}, "datasets[0].team", "'vision' is not a team of this stack"),
    ({"imageTag": "v1", "image": None}, "datasets[0].imageTag", "imageTag needs a registry"),
    (OSS_SOURCE, "datasets[0].source", "a local cluster has no OSS CSI plugin"),
]


@pytest.mark.parametrize(("change", "key", "reason"), BAD_ENTRIES)
def test_a_bad_entry_is_refused_naming_its_key(change: dict[str, Any], key: str, reason: str) -> None:
    config = stack_config("local")
    entry = config[cfg("datasets")][0]
    entry.update(change)
    config[cfg("datasets")][0] = {k: v for k, v in entry.items() if v is not None}
    with pytest.raises(ConfigError) as raised:
        load_spec(config, credentials=False)
    assert any(p.startswith(f"ack-training-platform:{key}") and reason in p for p in raised.value.problems), (
        raised.value.problems
    )


def test_a_name_used_twice_is_refused() -> None:
    config = stack_config("local")
    config[cfg("datasets")].append(dict(config[cfg("datasets")][0]))
    with pytest.raises(ConfigError) as raised:
        load_spec(config, credentials=False)
    assert raised.value.problems == [
        "ack-training-platform:datasets[1].name: dataset name 'mnist-tokens' is used twice"
    ]


@pytest.mark.parametrize(
    ("change", "key", "reason"),
    [
        (OSS_SOURCE, "datasets[0].ossRoleName", "an oss:// source is read as a RAM role through RRSA"),
        ({}, "datasets[0].source", "the data volume is the read-only OSS bucket of storage.oss"),
    ],
)
def test_what_an_ack_stack_refuses(change: dict[str, Any], key: str, reason: str) -> None:
    config = stack_config("dev")
    config[cfg("datasets")] = [{"name": "books", "source": "https://x.example.com/", "imageTag": "v1", **change}]
    if not change:
        config[cfg("storage")]["oss"] = {"bucket": "train-data", "roleName": "reader"}
    with pytest.raises(ConfigError) as raised:
        load_spec(config, credentials=False)
    assert any(p.startswith(f"ack-training-platform:{key}") and reason in p for p in raised.value.problems), (
        raised.value.problems
    )


def test_an_ack_stacks_oss_import_reads_as_its_role_on_the_system_nodes(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("datasets")] = [
        {"name": "books", "source": "oss://corpus-bucket/books", "ossRoleName": "books-reader", "imageTag": "v1.4.0"}
    ]
    plan = run_stack(config, "dev")
    objects = {(obj["kind"], obj["metadata"]["name"]): obj for obj in plan.kubernetes_objects()}
    pod = objects[("Job", "import-books")]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"ack-training-platform/pool": "system"}
    assert pod["imagePullSecrets"] == [{"name": "registry-pull"}]
    attributes = objects[("PersistentVolume", "training-import-books-source")]["spec"]["csi"]["volumeAttributes"]
    assert (attributes["roleName"], attributes["url"]) == ("books-reader", "oss-cn-hangzhou-internal.aliyuncs.com")

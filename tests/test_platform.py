"""The program under Pulumi's mock engine, read as policy.

Each run goes through the real pulumi-alicloud and pulumi-kubernetes SDK classes, which
reject unknown arguments, so a plan that completes is a plan whose arguments exist.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pulumi_alicloud as alicloud
import pytest
import yaml
from conftest import ROOT, STACKS, cfg, stack_config, with_pull_secret

from components.plan import SECRET, UNKNOWN, Plan

FS = "alicloud:nas/fileSystem:FileSystem"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
SC = "kubernetes:storage.k8s.io/v1:StorageClass"
JOB = "kubernetes:kubeflow.org/v1:PyTorchJob"
CLOUD = (
    "alicloud:vpc/network:Network",
    "alicloud:vpc/switch:Switch",
    "alicloud:cs/managedKubernetes:ManagedKubernetes",
    FS,
    "alicloud:nas/mountTarget:MountTarget",
    "alicloud:cr/namespace:Namespace",
    "alicloud:cr/repo:Repo",
    "alicloud:cr/registryEnterpriseInstance:RegistryEnterpriseInstance",
)


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_plans(run_stack, stack: str) -> None:
    plan = run_stack(stack_config(stack), stack)
    assert len(plan.of_type(JOB)) == len(stack_config(stack)[cfg("jobs")])
    for obj in plan.kubernetes_objects():
        assert {"apiVersion", "kind", "metadata"} <= obj.keys()


def test_unknown_sdk_argument_is_rejected() -> None:
    # The safety net every plan relies on: SDK classes have no **kwargs catch-all.
    with pytest.raises(TypeError, match="desired_sise"):
        alicloud.cs.NodePool("x", cluster_id="c", desired_sise="1")


def test_data_is_protected(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    assert plan.one(FS).protect
    claims = plan.of_type(PVC)
    assert {c.name for c in claims} == {"training-data", "training-output"}
    assert all(c.retain_on_delete for c in claims)
    assert all(c.inputs["spec"]["accessModes"] == ["ReadWriteMany"] for c in claims)
    storage_class = plan.one(SC).inputs
    assert storage_class["reclaimPolicy"] == "Retain"
    assert storage_class["parameters"]["archiveOnDelete"] == "true"
    assert storage_class["parameters"]["volumeAs"] == "subpath"
    assert storage_class["mountOptions"] == ["nolock,tcp,noresvport", "vers=3"]


def test_claims_wait_for_their_storage_class_and_namespace(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    sc, ns = plan.one(SC).urn, plan.one("kubernetes:core/v1:Namespace").urn
    for claim in plan.of_type(PVC):
        assert {sc, ns} <= set(claim.dependencies)


def test_secrets_stay_secret(run_stack) -> None:
    plan = run_stack(with_pull_secret(stack_config("dev")))
    assert "kubeconfig" in plan.secret_outputs
    assert plan.outputs["kubeconfig"] == SECRET
    secret = plan.one("kubernetes:core/v1:Secret")
    assert secret.inputs["stringData"] == SECRET
    provider = plan.one("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == SECRET


def test_registry_password_plaintext_never_reaches_a_plain_output(run_stack, monkeypatch, tmp_path) -> None:
    # Run with a real plaintext secret value and search everything the plan exposes.
    import pulumi

    from components import plan as plan_module

    config = stack_config("dev")
    config[cfg("registry")]["username"] = "ml-pull@example.com"
    password = "pw-7f3a9c-plaintext"
    real_set_all_config = pulumi.runtime.set_all_config

    def with_password(values, secret_keys=None):
        values = {**values, cfg("registryPassword"): password}
        return real_set_all_config(values, [*(secret_keys or []), cfg("registryPassword")])

    monkeypatch.setattr(pulumi.runtime, "set_all_config", with_password)
    monkeypatch.setattr(plan_module, "load_spec", lambda raw: None)
    plan = run_stack(config)
    exposed = json.dumps(plan.as_json(), default=str)
    plan_module.write_manifests(plan, tmp_path / "out")
    rendered = "".join(p.read_text() for p in (tmp_path / "out").iterdir())
    assert plan.one("kubernetes:core/v1:Secret").inputs["stringData"] == SECRET
    assert password not in exposed and password not in rendered


def test_nothing_is_open_to_the_world(run_stack) -> None:
    for stack in ("dev", "prod"):
        plan = run_stack(stack_config(stack), stack)
        rules = plan.of_type("alicloud:nas/accessRule:AccessRule")
        assert rules and all(r.inputs["sourceCidrIp"] not in ("0.0.0.0/0", UNKNOWN) for r in rules)
        assert plan.one("alicloud:cs/managedKubernetes:ManagedKubernetes").inputs["slbInternetEnabled"] is False
        assert not plan.of_type("alicloud:ecs/securityGroupRule:SecurityGroupRule")


def test_nas_rule_is_the_vpc_cidr_by_default(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    assert plan.one("alicloud:nas/accessRule:AccessRule").inputs["sourceCidrIp"] == "192.168.0.0/16"
    assert plan.one("alicloud:nas/accessGroup:AccessGroup").inputs["accessGroupType"] == "Vpc"


def test_public_api_endpoint_only_when_asked(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("cluster")]["publicApiEndpoint"] = True
    plan = run_stack(config)
    assert plan.one("alicloud:cs/managedKubernetes:ManagedKubernetes").inputs["slbInternetEnabled"] is True


def test_cluster_is_created_empty_with_deletion_protection(run_stack) -> None:
    cluster = run_stack(stack_config("dev")).one("alicloud:cs/managedKubernetes:ManagedKubernetes").inputs
    assert cluster["deletionProtection"] is True
    assert cluster["clusterSpec"] == "ack.pro.small"
    assert "workerInstanceTypes" not in cluster
    assert [a["name"] for a in cluster["addons"]] == [
        "flannel",
        "csi-plugin",
        "csi-provisioner",
        "storage-operator",
        "ack-node-problem-detector",
        "managed-aliyun-acr-credential-helper",
    ]
    assert cluster["podCidr"] == "172.20.0.0/16" and cluster["serviceCidr"] == "172.21.0.0/20"


def test_kubernetes_provider_survives_credential_rotation(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    provider = plan.one("pulumi:providers:kubernetes")
    assert provider.inputs["clusterIdentifier"] == UNKNOWN  # the new cluster's id
    adopted = stack_config("dev")
    adopted[cfg("cluster")]["existingClusterId"] = "c-0123456789abcdef"
    provider = run_stack(adopted).one("pulumi:providers:kubernetes")
    assert provider.inputs["clusterIdentifier"] == "c-0123456789abcdef"
    assert all(r.provider == provider.urn for r in run_stack(adopted).of_type(PVC))


def test_gpu_pool(run_stack) -> None:
    pool = run_stack(stack_config("dev")).one("alicloud:cs/nodePool:NodePool").inputs
    assert pool["instanceTypes"] == ["ecs.gn7i-c8g1.2xlarge", "ecs.gn7i-c16g1.4xlarge"]
    assert pool["spotStrategy"] == "SpotAsPriceGo" and pool["compensateWithOnDemand"] is True
    assert pool["scalingConfig"] == {"enable": True, "minSize": 0, "maxSize": 2, "type": "gpu"}
    assert "desiredSize" not in pool
    assert pool["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert {"key": "ack-training-platform/pool", "value": "gpu"} in pool["labels"]
    assert pool["management"] == {"enable": True, "autoRepair": True}


def test_rdma_pool_installs_the_device_plugin(run_stack) -> None:
    plan = run_stack(stack_config("prod"), "prod")
    addon = plan.one("alicloud:cs/kubernetesAddon:KubernetesAddon")
    assert addon.inputs["name"] == "ack-rdma-device-plugin"
    labels = plan.one("alicloud:cs/nodePool:NodePool").inputs["labels"]
    assert {"key": "ack.aliyun.com/nvidia-driver-version", "value": "550.127.08"} in labels


def test_fixed_size_pool_uses_desired_size(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("gpuPool")].update(minSize=2, maxSize=2, desiredSize=2)
    pool = run_stack(config).one("alicloud:cs/nodePool:NodePool").inputs
    assert pool["desiredSize"] == "2" and "scalingConfig" not in pool


def test_adopt_mode_creates_none_of_the_adopted(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("network")] = {"vpcId": "vpc-1", "vswitchIds": ["vsw-1"], "vpcCidr": "10.0.0.0/8"}
    config[cfg("cluster")]["existingClusterId"] = "c-1"
    config[cfg("storage")]["nas"] = {
        "existingFileSystemId": "0a1b2c",
        "existingMountTargetDomain": "0a1b2c-x.cn-hangzhou.nas.aliyuncs.com",
    }
    config[cfg("registry")] = {"existingRepositoryUrl": "registry-vpc.cn-hangzhou.aliyuncs.com/team/trainer"}
    plan = run_stack(config)
    created = set(plan.counts())
    assert not created & set(CLOUD)
    assert plan.one("alicloud:cs/nodePool:NodePool").inputs["clusterId"] == "c-1"
    assert plan.one(SC).inputs["parameters"]["server"] == "0a1b2c-x.cn-hangzhou.nas.aliyuncs.com:/training/"
    image = plan.one(JOB).inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["image"]
    assert image == "registry-vpc.cn-hangzhou.aliyuncs.com/team/trainer:v0.1.0"


def test_local_stack_creates_no_cloud_resources(run_stack) -> None:
    plan = run_stack(stack_config("local"), "local")
    assert not [r for r in plan.resources if r.type.startswith("alicloud:")]
    assert plan.one("pulumi:providers:kubernetes").inputs["context"] == "kind-training"
    assert not plan.of_type(SC)


def test_enterprise_registry(run_stack) -> None:
    plan = run_stack(stack_config("prod"), "prod")
    instance = plan.one("alicloud:cr/registryEnterpriseInstance:RegistryEnterpriseInstance")
    assert instance.protect
    assert plan.outputs["registryUrl"] == "ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/ml/trainer"


def test_outputs_tell_the_user_what_comes_next(run_stack) -> None:
    outputs = run_stack(stack_config("dev")).outputs
    assert outputs["volumeClaims"] == {"data": "training-data", "output": "training-output"}
    assert outputs["jobs"]["mnist-dev"]["commands"]["status"] == "kubectl -n training get pytorchjob mnist-dev -w"
    assert {"clusterId", "kubeconfig", "nasServer", "registryUrl"} <= outputs.keys()


def test_gpu_quota(run_stack) -> None:
    quota = run_stack(stack_config("dev")).one("kubernetes:core/v1:ResourceQuota").inputs
    assert quota["spec"] == {"hard": {"requests.nvidia.com/gpu": "2"}}


def plan_cli(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "components.plan", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_plan_cli_writes_applyable_yaml(tmp_path) -> None:
    result = plan_cli("--stack", "dev", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "alicloud:nas/fileSystem:FileSystem  nas  [protect]" in result.stdout
    assert "Traceback" not in result.stderr
    kinds = []
    for path in sorted(tmp_path.iterdir()):
        docs = list(yaml.safe_load_all(path.read_text()))
        assert len(docs) == 1 and docs[0]["metadata"]["name"]
        kinds.append(docs[0]["kind"])
    assert kinds[0] == "Namespace" and kinds[-1] == "PyTorchJob"


def test_plan_cli_json_carries_options(tmp_path) -> None:
    result = plan_cli("--stack", "dev", "--json")
    assert result.returncode == 0, result.stderr
    resources = {(r["type"], r["name"]): r for r in json.loads(result.stdout)["resources"]}
    assert resources[(FS, "nas")]["options"]["protect"] is True
    assert resources[(PVC, "training-data")]["options"]["retainOnDelete"] is True
    assert resources[(JOB, "mnist-dev")]["options"]["provider"].endswith(
        "pulumi:providers:kubernetes::training-dev-k8s"
    )


def test_plan_cli_rejects_bad_stack_file_without_traceback(tmp_path) -> None:
    config = stack_config("dev")
    config[cfg("gpuPool")]["maxSize"] = 0
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(yaml.safe_dump({"config": config}))
    result = plan_cli("--stack-file", str(bad))
    assert result.returncode == 2
    assert result.stderr == (
        "error: invalid stack configuration:\n  ack-training-platform:gpuPool.maxSize: "
        "Input should be greater than or equal to 1 (got 0)\n"
    )
    missing = plan_cli("--stack", "nope")
    assert missing.returncode == 2 and "no such stack file" in missing.stderr and "Traceback" not in missing.stderr
    bad.write_text("config: [unclosed")
    broken = plan_cli("--stack-file", str(bad))
    assert broken.returncode == 2 and "not valid YAML" in broken.stderr


def test_plan_cli_prints_schema() -> None:
    result = plan_cli("--schema")
    schema = json.loads(result.stdout)
    assert result.returncode == 0 and "gpuPool" in schema["properties"] and "region" not in schema["properties"]


def test_neither_components_nor_the_program_import_torch() -> None:
    code = (
        "import sys, components\n"
        "from components.plan import plan_stack, read_stack_file, stack_path, find_project_dir\n"
        "root = find_project_dir()\n"
        "plan_stack(read_stack_file(stack_path(root, 'prod')), stack='prod', project_dir=root)\n"
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_plans_are_repeatable(run_stack) -> None:
    first: Plan = run_stack(stack_config("prod"), "prod")
    second: Plan = run_stack(stack_config("prod"), "prod")
    assert first.kubernetes_objects() == second.kubernetes_objects()
    assert first.tree() == second.tree()


def oss_config() -> dict:
    config = stack_config("dev")
    config[cfg("storage")]["oss"] = {"bucket": "team-datasets", "path": "/imagenet"}
    config[cfg("ossAccessKeyId")] = {"secure": "v1:id"}
    config[cfg("ossAccessKeySecret")] = {"secure": "v1:secret"}
    return config


def test_oss_dataset_volume_replaces_the_nas_data_claim(run_stack) -> None:
    plan = run_stack(oss_config())
    volume = plan.one("kubernetes:core/v1:PersistentVolume")
    assert volume.retain_on_delete
    csi = volume.inputs["spec"]["csi"]
    assert csi["driver"] == "ossplugin.csi.alibabacloud.com" and csi["readOnly"] is True
    assert csi["volumeAttributes"]["url"] == "oss-cn-hangzhou-internal.aliyuncs.com"
    assert csi["volumeAttributes"]["bucket"] == "team-datasets" and csi["volumeAttributes"]["path"] == "/imagenet"
    assert csi["nodePublishSecretRef"] == {"name": "oss-credentials", "namespace": "training"}
    assert volume.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    data = plan.one(PVC, "training-data")
    assert data.retain_on_delete
    assert data.inputs["spec"]["volumeName"] == volume.inputs["metadata"]["name"]
    assert data.inputs["spec"]["storageClassName"] == "" and data.inputs["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert plan.one(PVC, "training-output").inputs["spec"]["storageClassName"] == "nas-training"
    secret = plan.one("kubernetes:core/v1:Secret", "shared-oss")
    assert secret.inputs["stringData"] == SECRET


def test_oss_needs_its_credentials() -> None:
    from components.config import ConfigError, load_spec

    config = oss_config()
    del config[cfg("ossAccessKeyId")], config[cfg("ossAccessKeySecret")]
    with pytest.raises(ConfigError) as raised:
        load_spec(config)
    assert raised.value.problems == [
        f"ack-training-platform:{key}: storage.oss is set but this credential is missing; "
        f"run: pulumi config set --secret {key} <value>"
        for key in ("ossAccessKeyId", "ossAccessKeySecret")
    ]


def test_pulumi_up_reports_invalid_config_without_traceback(run_stack) -> None:
    import pulumi

    config = stack_config("dev")
    config[cfg("gpuPool")]["minSize"] = 5
    with pytest.raises(pulumi.RunError) as raised:
        run_stack(config)
    assert str(raised.value) == (
        "invalid stack configuration:\n  ack-training-platform:gpuPool.minSize: minSize (5) must not exceed maxSize (2)"
    )


def test_components_compose_in_another_stack(run_stack) -> None:
    from components.plan import run_program

    plan = run_program({}, stack="dev", project_dir=ROOT / "examples" / "own-stack")
    job = plan.one(JOB).inputs
    pod = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert pod["nodeSelector"] == {"ack-training-platform/pool": "a10"}
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert job["metadata"]["namespace"] == "team-a"
    assert all(c.retain_on_delete for c in plan.of_type(PVC))
    assert plan.one("alicloud:cs/nodePool:NodePool").inputs["clusterId"] == "c-example"
    assert plan.outputs["commands"]["status"] == "kubectl -n team-a get pytorchjob finetune -w"

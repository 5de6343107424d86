"""The program under Pulumi's mock engine, read as policy.

Each run goes through the real pulumi-alicloud and pulumi-kubernetes SDK classes, which
reject unknown arguments, so a plan that completes is a plan whose arguments exist.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pulumi_alicloud as alicloud
import pytest
import yaml
from conftest import ROOT, STACKS, cfg, stack_config, with_pull_secret

from components.offline import SECRET, UNKNOWN, Plan

FS = "alicloud:nas/fileSystem:FileSystem"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
SC = "kubernetes:storage.k8s.io/v1:StorageClass"
TRAINJOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
JOB = "kubernetes:kubeflow.org/v1:PyTorchJob"
PV = "kubernetes:core/v1:PersistentVolume"
POOL = "alicloud:cs/nodePool:NodePool"
ADDON = "alicloud:cs/kubernetesAddon:KubernetesAddon"
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
    assert len(plan.of_type(JOB) + plan.of_type(TRAINJOB)) == len(stack_config(stack)[cfg("jobs")])
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
    for claim in claims:
        volume = plan.one(PV, f"training-{claim.name}")
        assert volume.retain_on_delete
        assert volume.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
        assert claim.inputs["spec"]["volumeName"] == volume.inputs["metadata"]["name"]
        # A fixed directory per claim: a claim created again finds the same data.
        assert volume.inputs["spec"]["csi"]["volumeAttributes"]["path"] == f"/training/training/{claim.name}"
        # Reserved for the claim by uid, which is read from the claim on every `pulumi up`.
        assert volume.inputs["spec"]["claimRef"] == {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": "training",
            "name": claim.name,
            "uid": UNKNOWN,
        }
        assert volume.inputs["spec"]["mountOptions"] == ["nolock,tcp,noresvport", "vers=3"]
    storage_class = plan.one(SC).inputs
    assert storage_class["reclaimPolicy"] == "Retain"
    # archiveOnDelete acts only with reclaimPolicy Delete; quotas only on general-purpose NAS.
    assert "archiveOnDelete" not in storage_class["parameters"]
    assert storage_class["parameters"]["volumeCapacity"] == "true"
    assert storage_class["parameters"]["volumeAs"] == "subpath"
    assert storage_class["mountOptions"] == ["nolock,tcp,noresvport", "vers=3"]


def test_claims_wait_for_their_namespace_and_never_for_binding(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    ns = plan.one("kubernetes:core/v1:Namespace").urn
    for claim in plan.of_type(PVC):
        assert ns in claim.dependencies
        # The volume needs the claim's uid, so waiting for the claim to bind would deadlock.
        assert claim.inputs["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}


def test_secrets_stay_secret(run_stack) -> None:
    plan = run_stack(with_pull_secret(stack_config("dev")))
    # No admin kubeconfig leaves the stack: job users bring their own.
    assert "kubeconfig" not in plan.outputs
    secret = plan.one("kubernetes:core/v1:Secret")
    assert secret.inputs["stringData"] == SECRET
    for provider in plan.of_type("pulumi:providers:kubernetes"):
        assert provider.inputs["kubeconfig"] == SECRET


def test_registry_password_plaintext_never_reaches_a_plain_output(run_stack, monkeypatch, tmp_path) -> None:
    # Run with a real plaintext secret value and search everything the plan exposes.
    import pulumi

    from components import plan as plan_module

    config = stack_config("dev")
    config[cfg("cluster")]["apiServer"]["allowedCidrs"] = ["61.10.20.0/24"]
    config[cfg("registry")]["username"] = "ml-pull@example.com"
    password = "pw-7f3a9c-plaintext"
    real_set_all_config = pulumi.runtime.set_all_config

    def with_password(values, secret_keys=None):
        values = {**values, cfg("registryPassword"): password}
        return real_set_all_config(values, [*(secret_keys or []), cfg("registryPassword")])

    monkeypatch.setattr(pulumi.runtime, "set_all_config", with_password)
    config[cfg("registryPassword")] = {"secure": "v1:AAAA"}
    plan = plan_module.run_program(config, stack="dev", project_dir=ROOT)
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
        assert not plan.of_type("alicloud:ecs/securityGroupRule:SecurityGroupRule")
        entries = [a.inputs["entry"] for a in plan.of_type("alicloud:slb/aclEntryAttachment:AclEntryAttachment")]
        assert "0.0.0.0/0" not in entries
    prod = run_stack(stack_config("prod"), "prod")
    assert prod.one("alicloud:cs/managedKubernetes:ManagedKubernetes").inputs["slbInternetEnabled"] is False
    assert not prod.of_type("alicloud:slb/acl:Acl") and prod.outputs["apiServerAccess"] is None


def test_nas_rule_is_the_vpc_cidr_by_default(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    assert plan.one("alicloud:nas/accessRule:AccessRule").inputs["sourceCidrIp"] == "192.168.0.0/16"
    assert plan.one("alicloud:nas/accessGroup:AccessGroup").inputs["accessGroupType"] == "Vpc"


def test_public_api_server_admits_only_its_ranges(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("cluster")]["apiServer"]["allowedCidrs"] = ["61.10.20.0/24"]
    plan = run_stack(config)
    assert plan.one("alicloud:cs/managedKubernetes:ManagedKubernetes").inputs["slbInternetEnabled"] is True
    acl = plan.one("alicloud:slb/acl:Acl")
    entries = plan.of_type("alicloud:slb/aclEntryAttachment:AclEntryAttachment")
    # The configured range, the nodes' VPC and ACK's control plane (which must reach it).
    # Siblings register in no fixed order.
    assert sorted(e.inputs["entry"] for e in entries) == ["100.104.0.0/16", "192.168.0.0/16", "61.10.20.0/24"]
    assert all(acl.urn in e.dependencies for e in entries)


def test_cluster_gets_system_nodes_and_its_add_ons_as_resources(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    cluster = plan.one("alicloud:cs/managedKubernetes:ManagedKubernetes").inputs
    assert cluster["deletionProtection"] is True
    assert cluster["clusterSpec"] == "ack.pro.small"
    assert "workerInstanceTypes" not in cluster
    # Only what must exist at creation; the rest are add-on resources, so edits take effect.
    assert [a["name"] for a in cluster["addons"]] == ["flannel", "csi-plugin", "csi-provisioner"]
    assert cluster["podCidr"] == "172.20.0.0/16" and cluster["serviceCidr"] == "172.21.0.0/20"
    addons = {a.inputs["name"]: a for a in plan.of_type(ADDON)}
    # arms-prometheus: the dev stack's alerts and scraping live in ACK's managed Prometheus.
    assert set(addons) == {
        "storage-operator",
        "ack-node-problem-detector",
        "node-lifecycle-controller",
        "arms-prometheus",
    }
    system = plan.one(POOL, "training-dev-system")
    assert system.inputs["desiredSize"] == "2" and "taints" not in system.inputs
    assert system.inputs["labels"] == [{"key": "ack-training-platform/pool", "value": "system"}]
    assert all(system.urn in a.dependencies for a in addons.values())


def test_everything_in_the_cluster_waits_for_system_nodes_and_add_ons(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    providers = plan.of_type("pulumi:providers:kubernetes")
    waits_for = {plan.one(POOL, "training-dev-system").urn, *(a.urn for a in plan.of_type(ADDON))}
    assert len(providers) == 2 and all(waits_for <= set(p.dependencies) for p in providers)
    kubernetes = [r for r in plan.resources if r.custom and r.type.startswith("kubernetes:") and r.provider]
    assert kubernetes and all(r.provider in {p.urn for p in providers} for r in kubernetes)


def test_only_kept_objects_may_be_created_over_existing_ones(run_stack) -> None:
    # Kept claims and volumes outlive `pulumi destroy` and replacements; creating them again
    # must update what is there, which pulumi-kubernetes refuses by default.
    for stack in ("dev", "local"):
        plan = run_stack(stack_config(stack), stack)
        kept = {p.urn for p in plan.of_type("pulumi:providers:kubernetes") if p.inputs.get("upsertExistingObjects")}
        assert len(kept) == 1
        users = {r.type for r in plan.resources if r.provider in kept}
        assert users == ({PVC, PV} if stack == "dev" else {PVC})
        assert all(r.retain_on_delete for r in plan.resources if r.provider in kept)


def test_autoscaling_is_configured_before_the_pool_can_grow(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    autoscaler = plan.one("alicloud:cs/autoscalingConfig:AutoscalingConfig")
    assert autoscaler.inputs["scaleUpFromZero"] is True
    assert autoscaler.urn in plan.one(POOL, "gpu").dependencies
    fixed = stack_config("dev")
    fixed[cfg("gpuPool")].update(minSize=1, maxSize=1)
    assert not run_stack(fixed).of_type("alicloud:cs/autoscalingConfig:AutoscalingConfig")


def test_idle_nodes_go_after_idle_minutes_not_after_a_scale_out(run_stack) -> None:
    # cool_down_duration is how long a node stays unneeded before it is removed;
    # unneeded_duration is the pause after a scale-out (the provider's read of the add-on's
    # ScaleDownUnneededTime and ScaleDownDelayAfterAdd), which stays ACK's default.
    config = stack_config("dev")
    config[cfg("cluster")]["autoscaler"] = {"idleMinutes": 25}
    autoscaler = run_stack(config).one("alicloud:cs/autoscalingConfig:AutoscalingConfig").inputs
    assert autoscaler["coolDownDuration"] == "25m"
    assert "unneededDuration" not in autoscaler
    assert autoscaler["scalerType"] == "cluster-autoscaler"


def test_kubernetes_provider_survives_credential_rotation(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    provider = plan.one("pulumi:providers:kubernetes", "training-dev-k8s")
    assert provider.inputs["clusterIdentifier"] == UNKNOWN  # the new cluster's id
    adopted = stack_config("dev")
    adopted[cfg("network")] = {"vpcId": "vpc-1", "vswitchIds": ["vsw-1"], "vpcCidr": "10.0.0.0/8"}
    adopted[cfg("cluster")] = {"existingClusterId": "c-0123456789abcdef"}
    providers = run_stack(adopted).of_type("pulumi:providers:kubernetes")
    assert [p.inputs["clusterIdentifier"] for p in providers] == ["c-0123456789abcdef"] * 2


def test_gpu_pool(run_stack) -> None:
    pool = run_stack(stack_config("dev")).one(POOL, "gpu").inputs
    assert pool["instanceTypes"] == ["ecs.gn7i-c8g1.2xlarge", "ecs.gn7i-c16g1.4xlarge"]
    assert pool["spotStrategy"] == "SpotAsPriceGo" and pool["compensateWithOnDemand"] is True
    assert pool["scalingConfig"] == {"enable": True, "minSize": 0, "maxSize": 2, "type": "gpu"}
    assert "desiredSize" not in pool and "tags" not in pool
    assert pool["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert {"key": "ack-training-platform/pool", "value": "gpu"} in pool["labels"]
    assert pool["management"] == {"enable": True, "autoRepair": True}


def test_auto_repair_waits_for_the_add_ons_it_needs(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    repair = {
        a.urn
        for a in plan.of_type(ADDON)
        if a.inputs["name"] in ("node-lifecycle-controller", "ack-node-problem-detector")
    }
    assert len(repair) == 2 and repair <= set(plan.one(POOL, "gpu").dependencies)
    # The add-ons' pods run on the system nodes, which therefore start without auto-repair.
    assert plan.one(POOL, "training-dev-system").inputs["management"] == {"enable": True, "autoRepair": False}


def test_erdma_pool_wires_the_fabric_end_to_end(run_stack) -> None:
    plan = run_stack(stack_config("prod"), "prod")
    pool = plan.one(POOL, "gpu-erdma")
    addon = plan.one(ADDON, "gpu-erdma-ack-erdma-controller")
    assert addon.inputs["name"] == "ack-erdma-controller" and pool.urn in addon.dependencies
    assert json.loads(addon.inputs["config"]) == {"agent": {"allocateAllDevices": True, "preferDriver": "ofed"}}
    # The autoscaler does not simulate aliyun/erdma: the pool declares it to scale from zero.
    assert pool.inputs["tags"] == {"k8s.io/cluster-autoscaler/node-template/resource/aliyun/erdma": "1"}
    assert {"key": "ack.aliyun.com/nvidia-driver-version", "value": "550.127.08"} in pool.inputs["labels"]
    job = plan.one(JOB, "gpt-pretrain")
    pod = job.inputs["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"]["aliyun/erdma"] == "1"
    assert "rdma/hca" not in container["resources"]["limits"]
    assert pod["hostNetwork"] is True and container["securityContext"] == {"privileged": True}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NCCL_IB_GID_INDEX"] == "1" and env["NCCL_IB_DISABLE"] == "0"
    assert "NCCL_IB_HCA" not in env  # "mlx5" would exclude the erdma devices
    assert addon.urn in job.dependencies
    assert not addon.retain_on_delete  # it goes with the cluster this stack created
    adopted = stack_config("prod")
    adopted[cfg("cluster")] = {"existingClusterId": "c-1"}
    kept = run_stack(adopted, "prod")
    assert all(a.retain_on_delete for a in kept.of_type(ADDON))  # leaving the stack uninstalls nothing


def test_fixed_size_pool_uses_desired_size(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("gpuPool")].update(minSize=2, maxSize=2, desiredSize=2)
    pool = run_stack(config).one(POOL, "gpu").inputs
    assert pool["desiredSize"] == "2" and "scalingConfig" not in pool


def test_adopt_mode_creates_none_of_the_adopted(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("network")] = {"vpcId": "vpc-1", "vswitchIds": ["vsw-1"], "vpcCidr": "10.0.0.0/8"}
    config[cfg("cluster")] = {"existingClusterId": "c-1"}
    config[cfg("storage")]["nas"] = {
        "existingFileSystemId": "0a1b2c",
        "existingMountTargetDomain": "0a1b2c-x.cn-hangzhou.nas.aliyuncs.com",
    }
    config[cfg("registry")] = {"existingRepositoryUrl": "registry-vpc.cn-hangzhou.aliyuncs.com/team/trainer"}
    plan = run_stack(config)
    created = set(plan.counts())
    assert not created & set(CLOUD)
    assert plan.one(POOL).inputs["clusterId"] == "c-1"  # the GPU pool only: no system pool
    assert not plan.of_type("alicloud:cs/autoscalingConfig:AutoscalingConfig")
    # Installing an add-on that is there adopts it; leaving the stack must not uninstall it.
    addons = plan.of_type(ADDON)
    assert {"csi-plugin", "csi-provisioner"} <= {a.inputs["name"] for a in addons}
    assert all(a.retain_on_delete for a in addons)
    assert plan.one(SC).inputs["parameters"]["server"] == "0a1b2c-x.cn-hangzhou.nas.aliyuncs.com:/training/"
    volume = plan.one(PV, "training-training-data").inputs["spec"]["csi"]["volumeAttributes"]
    assert volume == {"server": "0a1b2c-x.cn-hangzhou.nas.aliyuncs.com", "path": "/training/training/training-data"}
    image = plan.one(JOB).inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["image"]
    assert image == "registry-vpc.cn-hangzhou.aliyuncs.com/team/trainer:v0.1.0"


def test_local_stack_creates_no_cloud_resources(run_stack) -> None:
    plan = run_stack(stack_config("local"), "local")
    assert not [r for r in plan.resources if r.type.startswith("alicloud:")]
    assert {p.inputs["context"] for p in plan.of_type("pulumi:providers:kubernetes")} == {"kind-training"}
    assert not plan.of_type(SC)


def test_enterprise_registry_is_reachable_and_pulls_without_a_password(run_stack) -> None:
    config = stack_config("prod")
    del config[cfg("registry")]["enterpriseInstanceId"], config[cfg("imageMirror")]
    plan = run_stack(config, "prod")
    instance = plan.one("alicloud:cr/registryEnterpriseInstance:RegistryEnterpriseInstance")
    assert instance.protect
    assert instance.inputs["renewalStatus"] == "AutoRenewal" and instance.inputs["renewPeriod"] == 1
    link = plan.one("alicloud:cr/vpcEndpointLinkedVpc:VpcEndpointLinkedVpc").inputs
    assert link["vpcId"] == "vpc-0jl6b5ykcjznb4rbcqkyv" and link["moduleName"] == "Registry"
    assert link["vswitchId"] == "vsw-0jlp3zgdgalsyjm8g73ex" and link["enableCreateDnsRecordInPvzt"] is True
    helper = plan.one(ADDON, "registry-managed-aliyun-acr-credential-helper")
    assert helper.inputs["config"] == UNKNOWN  # it names the new instance's id
    adopted = run_stack(stack_config("prod"), "prod")
    assert not adopted.of_type("alicloud:cr/registryEnterpriseInstance:RegistryEnterpriseInstance")
    config = json.loads(adopted.one(ADDON, "registry-managed-aliyun-acr-credential-helper").inputs["config"])
    # The mirror's pods pull from the instance too.
    assert config["watchNamespace"] == "kubeflow,training,volcano-system"
    assert config["AcrInstanceInfo"] == [{"instanceId": "cri-0jl6b5ykcjznb4rb", "regionId": "cn-wulanchabu"}]
    release = adopted.one("kubernetes:helm.sh/v3:Release")
    assert {adopted.one("alicloud:cr/vpcEndpointLinkedVpc:VpcEndpointLinkedVpc").urn} <= set(release.dependencies)
    assert plan.outputs["registry"] == {
        "pushUrl": "ml-registry-registry.cn-wulanchabu.cr.aliyuncs.com/ml/trainer",
        "pullUrl": "ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/ml/trainer",
    }
    job = plan.one(JOB, "gpt-pretrain")
    assert helper.urn in job.dependencies
    pod = job.inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert "imagePullSecrets" not in pod


def test_credential_helper_covers_the_namespaces_that_pull() -> None:
    from components.manifests import acr_helper_config

    config = json.loads(acr_helper_config("cri-abc", "cn-wulanchabu", ["kubeflow", "training", "volcano-system"]))
    assert config["AcrInstanceInfo"] == [{"instanceId": "cri-abc", "regionId": "cn-wulanchabu"}]
    assert config["watchNamespace"] == "kubeflow,training,volcano-system" and config["serviceAccount"] == "*"


def test_personal_registry_urls_come_from_acr(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    # New personal instances have crpi-... hosts: the repository's own domains are used.
    assert plan.outputs["registry"] == {"pushUrl": UNKNOWN, "pullUrl": UNKNOWN}
    pod = plan.one(JOB).inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert pod["containers"][0]["image"] == UNKNOWN
    assert pod["imagePullSecrets"] == [{"name": "registry-pull"}]
    assert pod["containers"][0]["command"][:3] == ["python", "-m", "trainer.launch"]  # the rest is known


def test_outputs_tell_the_user_what_comes_next(run_stack) -> None:
    outputs = run_stack(stack_config("dev")).outputs
    assert outputs["volumeClaims"] == {"data": "training-data", "output": "training-output"}
    assert outputs["jobs"]["mnist-dev"]["commands"]["status"] == "kubectl -n training get pytorchjob mnist-dev -w"
    assert {"clusterId", "apiServerAccess", "nasServer", "registry"} <= outputs.keys()


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
    for path in sorted(tmp_path.glob("*.yaml")):
        docs = list(yaml.safe_load_all(path.read_text()))
        assert len(docs) == 1 and docs[0]["metadata"]["name"]
        kinds.append(docs[0]["kind"])
    assert kinds[0] == "Namespace" and "PyTorchJob" in kinds
    # The dashboard to import into ARMS Grafana, beside the objects.
    assert "wrote the Grafana dashboard to" in result.stdout
    assert json.loads((tmp_path / "dashboards" / "training.json").read_text())["uid"] == "ack-training-job"


@pytest.mark.parametrize("stack", STACKS)
def test_written_objects_are_valid_kubernetes(run_stack, stack: str, tmp_path) -> None:
    import kubernetes_validate

    from components.plan import write_manifests

    custom = {"PyTorchJob", "TrainJob", "ClusterTrainingRuntime", "ClusterQueue", "LocalQueue", "ResourceFlavor"}
    checked = set()
    for path in write_manifests(run_stack(stack_config(stack), stack), tmp_path):
        obj = yaml.safe_load(path.read_text())
        if obj["kind"] in custom:
            continue  # checked against their official models in test_jobs.py and test_trainjob.py
        if obj["kind"] == "Secret" and SECRET in (obj.get("data"), obj.get("stringData")):
            continue  # the plan shows a secret's data as one redacted value
        kubernetes_validate.validate(obj, "1.33", strict=True)
        checked.add(obj["kind"])
    assert {"Namespace", "ServiceAccount", "PersistentVolumeClaim"} <= checked
    if stack != "local":
        assert {"PersistentVolume", "StorageClass", "ResourceQuota"} <= checked


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
    config[cfg("cluster")]["apiServer"]["allowedCidrs"] = ["61.10.20.0/24"]
    config[cfg("storage")]["oss"] = {"bucket": "team-datasets", "path": "/imagenet"}
    config[cfg("ossAccessKeyId")] = {"secure": "v1:id"}
    config[cfg("ossAccessKeySecret")] = {"secure": "v1:secret"}
    config[cfg("registryPassword")] = {"secure": "v1:password"}
    return config


def test_oss_dataset_volume_replaces_the_nas_data_claim(run_stack) -> None:
    plan = run_stack(oss_config())
    volume = plan.one(PV, "training-training-data")
    assert volume.retain_on_delete
    csi = volume.inputs["spec"]["csi"]
    assert csi["driver"] == "ossplugin.csi.alibabacloud.com" and csi["readOnly"] is True
    assert csi["volumeAttributes"]["url"] == "oss-cn-hangzhou-internal.aliyuncs.com"
    assert csi["volumeAttributes"]["bucket"] == "team-datasets" and csi["volumeAttributes"]["path"] == "/imagenet"
    assert csi["nodePublishSecretRef"] == {"name": "oss-credentials", "namespace": "training"}
    assert volume.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    # A retained volume keeps its old claim's uid and would stay Released: it follows the claim.
    assert volume.inputs["spec"]["claimRef"]["name"] == "training-data"
    assert volume.inputs["spec"]["claimRef"]["uid"] == UNKNOWN
    data = plan.one(PVC, "training-data")
    assert data.retain_on_delete
    assert data.inputs["spec"]["volumeName"] == volume.inputs["metadata"]["name"]
    assert data.inputs["spec"]["storageClassName"] == "" and data.inputs["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert plan.one(PVC, "training-output").inputs["spec"]["volumeName"] == "training-training-output"
    secret = plan.one("kubernetes:core/v1:Secret", "shared-oss")
    assert secret.inputs["stringData"] == SECRET


def test_oss_needs_its_credentials() -> None:
    from components.config import ConfigError, load_spec

    config = oss_config()
    del config[cfg("ossAccessKeyId")], config[cfg("ossAccessKeySecret")]
    with pytest.raises(ConfigError) as raised:
        load_spec(config, [cfg("registryPassword")])
    assert raised.value.problems == [
        f"ack-training-platform:{key}: storage.oss is set but this credential is missing; "
        f"run: pulumi config set --secret {key} <value>"
        for key in ("ossAccessKeyId", "ossAccessKeySecret")
    ]


def test_pulumi_up_reports_invalid_config_without_traceback() -> None:
    import pulumi

    from components.offline import run_program

    config = stack_config("dev")
    config[cfg("gpuPool")]["minSize"] = 5
    config[cfg("registryPassword")] = {"secure": "v1:AAAA"}
    with pytest.raises(pulumi.RunError) as raised:
        run_program(config, stack="dev", project_dir=ROOT)
    assert str(raised.value) == (
        "invalid stack configuration:\n  ack-training-platform:gpuPool.minSize: minSize (5) must not exceed maxSize (2)"
    )


def test_components_compose_in_another_stack(run_stack) -> None:
    from components.offline import run_program

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
    # The same job on Trainer v2: the same placement, volumes and resources, on the platform's runtime.
    train_job = plan.one(TRAINJOB).inputs
    patch = train_job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    v2_pod = patch["template"]["spec"]["template"]["spec"]
    assert (v2_pod["tolerations"], v2_pod["nodeSelector"], v2_pod["volumes"]) == (
        pod["tolerations"],
        pod["nodeSelector"],
        pod["volumes"],
    )
    assert train_job["spec"]["trainer"]["resourcesPerNode"] == pod["containers"][0]["resources"]
    assert not plan.of_type("kubernetes:helm.sh/v3:Release")
    assert (
        plan.one("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime").urn
        in plan.one(TRAINJOB).dependencies
    )


@pytest.mark.parametrize("stack", STACKS)
def test_job_defaults_rebuild_the_stacks_own_jobs(run_stack, stack: str) -> None:
    # `ack-jobs submit` builds from the exported jobDefaults: the same job must come out as the
    # stack's own, on the same pool, claims, service account, pull secret and queue.
    from components.config import PlatformSpec, job_gpus
    from components.manifests import context_from_defaults, pytorch_job, train_job

    config = stack_config(stack)
    plan = run_stack(config, stack)
    defaults = plan.outputs["jobDefaults"]
    assert "jobDefaults" not in plan.secret_outputs
    platform = PlatformSpec.model_validate({k.split(":", 1)[1]: v for k, v in config.items()})
    assert defaults["backend"] == platform.training.backend
    for job in platform.jobs:
        backend = platform.job_backend(job)
        built = plan.one(TRAINJOB if backend == "v2" else JOB, job.name).inputs
        gpus = job_gpus(job, defaults["placement"]["gpusPerNode"])
        ctx = context_from_defaults(defaults, image="<image>", gpus=gpus, backend=backend)
        rebuilt = train_job(job, ctx) if backend == "v2" else pytorch_job(job, ctx)
        assert _without_images(rebuilt) == _without_images(built)


def _without_images(manifest: dict) -> dict:
    # The stack's image may be its registry's URL, known only after deployment.
    text = json.dumps(manifest)
    return json.loads(re.sub(r'"image": "[^"]*"', '"image": null', text))

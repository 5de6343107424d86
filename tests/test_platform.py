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

from components.manifests import KINDS
from components.plan.records import SECRET, UNKNOWN, Plan

FS = "alicloud:nas/fileSystem:FileSystem"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
SC = "kubernetes:storage.k8s.io/v1:StorageClass"
TRAINJOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
JOB = "kubernetes:kubeflow.org/v1:PyTorchJob"
PV = "kubernetes:core/v1:PersistentVolume"
POOL = "alicloud:cs/nodePool:NodePool"
ADDON = "alicloud:cs/kubernetesAddon:KubernetesAddon"
CLUSTER = "alicloud:cs/managedKubernetes:ManagedKubernetes"
RAM_ROLE = "alicloud:ram/role:Role"
RAM_POLICY = "alicloud:ram/policy:Policy"
RAM_ATTACHMENT = "alicloud:ram/rolePolicyAttachment:RolePolicyAttachment"
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
    v1_jobs = [plan.of_type(f"kubernetes:kubeflow.org/v1:{kind.kind}") for kind in KINDS.values()]
    assert sum(map(len, v1_jobs)) + len(plan.of_type(TRAINJOB)) == len(stack_config(stack)[cfg("jobs")])
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
    auths = json.loads(secret.inputs["stringData"][".dockerconfigjson"])["auths"]
    assert list(auths.values()) == [{"username": SECRET, "password": SECRET, "auth": SECRET}]
    for provider in plan.of_type("pulumi:providers:kubernetes"):
        assert provider.inputs["kubeconfig"] == SECRET


def test_registry_password_plaintext_never_reaches_a_plain_output(run_stack, monkeypatch, tmp_path) -> None:
    # Run with a real plaintext secret value and search everything the plan exposes.
    import pulumi

    from components.plan import command as plan_module

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
    docker_config = plan.one("kubernetes:core/v1:Secret").inputs["stringData"][".dockerconfigjson"]
    assert json.loads(docker_config)["auths"]["<registry host, known after deploy>"]["password"] == SECRET
    assert password not in exposed and password not in rendered


@pytest.mark.parametrize("backend", ["v1", "v2"])
def test_a_secret_in_a_jobs_env_never_reaches_a_plain_output(monkeypatch, tmp_path, backend: str) -> None:
    # As `pulumi config set --secret --path 'jobs[0].env.HF_TOKEN'` leaves it: the stack file
    # holds the ciphertext at that path, the program gets the plaintext and the whole key as secret.
    import pulumi

    from components.plan import command as plan_module

    token = "hf-5e1b0d-plaintext"
    config = stack_config("dev")
    config[cfg("training")]["backend"] = backend
    config[cfg("jobs")][0]["env"] = {"HF_TOKEN": {"secure": "v1:AAAA"}}
    decrypted = json.dumps([{**config[cfg("jobs")][0], "env": {"HF_TOKEN": token}}, *config[cfg("jobs")][1:]])
    real_set_all_config = pulumi.runtime.set_all_config

    def decrypting(values, secret_keys=None):
        assert cfg("jobs") in (secret_keys or [])
        return real_set_all_config({**values, cfg("jobs"): decrypted}, secret_keys)

    monkeypatch.setattr(pulumi.runtime, "set_all_config", decrypting)
    plan = plan_module.run_program(plan_module.with_unset_credentials(config)[0], stack="dev", project_dir=ROOT)
    exposed = json.dumps({**plan.as_json(), "outputs": plan.outputs}, default=str)
    plan_module.write_manifests(plan, tmp_path / "out")
    rendered = "".join(p.read_text() for p in (tmp_path / "out").iterdir())
    assert token not in exposed and token not in rendered
    job = plan.one(TRAINJOB if backend == "v2" else JOB)
    # The whole spec is one secret, which the plan shows redacted leaf by leaf.
    assert set(_leaves(job.inputs["spec"])) == {SECRET}
    assert job.inputs["metadata"]["name"] == config[cfg("jobs")][0]["name"]


def _leaves(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def test_only_credentials_and_jobs_may_be_encrypted() -> None:
    from components.config import ConfigError
    from components.plan.command import offline_spec

    config = stack_config("dev")
    config[cfg("storage")]["data"] = {"claimName": "training-data", "size": {"secure": "v1:AAAA"}}
    with pytest.raises(ConfigError) as raised:
        offline_spec(config)
    assert raised.value.problems == [
        "ack-training-platform:storage: is encrypted, but its settings become names and arguments the cloud and "
        "the cluster show in plain, so it would not stay secret; only registryPassword and jobs may be encrypted. "
        "Set it without --secret; a job reads a credential from a "
        "Kubernetes Secret with env: {NAME: {secretKeyRef: {name, key}}}"
    ]


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


def test_nas_rules_are_the_node_vswitches_with_root_squashed(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    rules = plan.of_type("alicloud:nas/accessRule:AccessRule")
    # One rule per node vSwitch, not the VPC; root on a node or in a pod owns nothing on NAS.
    assert sorted(r.inputs["sourceCidrIp"] for r in rules) == ["192.168.0.0/20", "192.168.16.0/20"]
    assert {r.inputs["userAccessType"] for r in rules} == {"root_squash"}
    mount = plan.one("alicloud:nas/mountTarget:MountTarget")
    assert {r.urn for r in rules} <= set(mount.dependencies)
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
    adopted[cfg("storage")]["nas"]["accessCidr"] = "10.0.0.0/16"
    providers = run_stack(adopted).of_type("pulumi:providers:kubernetes")
    assert [p.inputs["clusterIdentifier"] for p in providers] == ["c-0123456789abcdef"] * 2


def test_gpu_pool(run_stack) -> None:
    pool = run_stack(stack_config("dev")).one(POOL, "gpu").inputs
    assert pool["instanceTypes"] == ["ecs.gn7i-c8g1.2xlarge", "ecs.gn7i-c16g1.4xlarge"]
    assert pool["spotStrategy"] == "SpotAsPriceGo" and pool["compensateWithOnDemand"] is True
    # compensateWithOnDemand takes effect only with COST_OPTIMIZED (pulumi_alicloud 4.0.0
    # cs/node_pool.py), which the preview's on-demand warning for a spot pool relies on.
    assert pool["multiAzPolicy"] == "COST_OPTIMIZED"
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
    # On the pod network, unprivileged: NCCL's sockets on the pod's eth0, each device's GID found by NCCL.
    assert "hostNetwork" not in pod and "securityContext" not in container
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert env["NCCL_SOCKET_IFNAME"] == "eth0" and env["NCCL_IB_DISABLE"] == "0"
    assert env["NCCL_IB_GID_INDEX"] == "-1" and env["NCCL_IB_ROCE_VERSION_NUM"] == "2"
    assert "NCCL_IB_HCA" not in env  # "mlx5" would exclude the erdma devices
    assert addon.urn in job.dependencies
    assert not addon.retain_on_delete  # it goes with the cluster this stack created
    adopted = stack_config("prod")
    adopted[cfg("cluster")] = {"existingClusterId": "c-1", "network": "terway"}
    kept = run_stack(adopted, "prod")
    assert all(a.retain_on_delete for a in kept.of_type(ADDON))  # leaving the stack uninstalls nothing


def test_the_prod_pool_and_its_4_node_job_are_placed_close_together(run_stack) -> None:
    plan = run_stack(stack_config("prod"), "prod")
    deployment_set = plan.one("alicloud:ecs/ecsDeploymentSet:EcsDeploymentSet", "gpu-erdma-low-latency")
    assert deployment_set.inputs["strategy"] == "LowLatency"
    pool = plan.one(POOL, "gpu-erdma")
    assert pool.inputs["deploymentSetId"] == UNKNOWN and deployment_set.urn in pool.dependencies
    assert pool.inputs["vswitchIds"] == ["vsw-0jlp3zgdgalsyjm8g73ex"]
    two_zones = stack_config("prod")
    two_zones[cfg("network")]["vswitchIds"] = ["vsw-a", "vsw-b"]
    assert run_stack(two_zones, "prod").one(POOL, "gpu-erdma").inputs["vswitchIds"] == ["vsw-a"]
    # Its 4-node job keeps its pods in one zone and lets the trainer choose its parallelism.
    for replica in plan.one(JOB, "gpt-pretrain").inputs["spec"]["pytorchReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        assert pod["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "gpt-pretrain"}},
                    "topologyKey": "topology.kubernetes.io/zone",
                },
            }
        ]
        assert pod["containers"][0]["command"][-2:] == ["--parallel", "auto"]
        assert replica["template"]["metadata"]["labels"]["ack-training-platform/pool"] == "gpu-erdma"
    dev = run_stack(stack_config("dev"))
    assert not dev.of_type("alicloud:ecs/ecsDeploymentSet:EcsDeploymentSet")
    assert "deploymentSetId" not in dev.one(POOL, "gpu").inputs


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
    plan = run_stack(bought_instance(), "prod")
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
    # The mirror's pods pull without credentials: only the namespaces of jobs need the helper.
    assert config["watchNamespace"] == "llm,training,vision"
    assert config["AcrInstanceInfo"] == [{"instanceId": "cri-0jl6b5ykcjznb4rb", "regionId": "cn-wulanchabu"}]
    assert plan.outputs["registry"] == {
        "pushUrl": "ml-registry-registry.cn-wulanchabu.cr.aliyuncs.com/ml/trainer",
        "pullUrl": "ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/ml/trainer",
    }
    job = plan.one(JOB, "gpt-pretrain")
    assert helper.urn in job.dependencies
    pod = job.inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert "imagePullSecrets" not in pod


LINK = "alicloud:cr/vpcEndpointLinkedVpc:VpcEndpointLinkedVpc"
EE_NAMESPACE = "alicloud:cs/registryEnterpriseNamespace:RegistryEnterpriseNamespace"
EE_REPO = "alicloud:cs/registryEnterpriseRepo:RegistryEnterpriseRepo"


def bought_instance() -> dict:
    """prod with an enterprise instance the stack buys (so everything in it is new)."""
    config = stack_config("prod")
    registry = config[cfg("registry")]
    for key in ("enterpriseInstanceId", "linkVpc", "namespaceExists", "repositoryExists", "username"):
        del registry[key]
    del config[cfg("imageMirror")]
    del config[cfg("mirrorFill")]
    return config


def test_an_adopted_registry_is_neither_linked_again_nor_recreated(run_stack) -> None:
    plan = run_stack(stack_config("prod"), "prod")
    # The organisation's link, namespace and repository exist: nothing to create, nothing to remove on destroy.
    # (The mirror's repositories are its artifact subscription's, tests/test_mirror_fill.py.)
    assert not plan.of_type(LINK) + plan.of_type(EE_NAMESPACE) + registry_repos(plan)
    assert plan.one(JOB, "gpt-pretrain").inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"][
        "containers"
    ][0]["image"] == ("ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/ml/trainer:v0.1.0")
    config = stack_config("prod")
    config[cfg("registry")].update(linkVpc=True, namespaceExists=False, repositoryExists=False)
    linked = run_stack(config, "prod")
    assert linked.one(LINK).inputs["instanceId"] == "cri-0jl6b5ykcjznb4rb"
    assert [r.inputs["namespace"] for r in registry_repos(linked)] == ["ml"]


def registry_repos(plan) -> list:
    """The enterprise repositories the registry itself creates (not the mirror's)."""
    return [r for r in plan.of_type(EE_REPO) if ":MirrorFill$" not in r.urn]


@pytest.mark.parametrize("stack", ["dev", "prod-bought"])
def test_registry_namespaces_and_repositories_outlive_the_stack(run_stack, stack: str) -> None:
    plan = run_stack(stack_config("dev")) if stack == "dev" else run_stack(bought_instance(), "prod")
    kept = [r for r in plan.resources if r.type in (*CLOUD[5:7], EE_NAMESPACE, EE_REPO)]
    assert len(kept) == 2
    # Destroying the stack leaves the images where they are.
    assert all(r.retain_on_delete for r in kept)
    # The repository is created in its namespace, after it.
    namespace, repository = sorted(kept, key=lambda r: "repo" in r.type.lower())
    assert namespace.urn in repository.dependencies
    if repository.type == EE_REPO:  # the personal edition has no such setting (SDK cr.Repo)
        assert repository.inputs["tagImmutability"] is True


def test_credential_helper_covers_the_namespaces_that_pull() -> None:
    from components.manifests import acr_helper_config

    config = json.loads(acr_helper_config("cri-abc", "cn-wulanchabu", ["kubeflow", "training", "volcano-system"]))
    assert config["AcrInstanceInfo"] == [{"instanceId": "cri-abc", "regionId": "cn-wulanchabu"}]
    assert config["watchNamespace"] == "kubeflow,training,volcano-system" and config["serviceAccount"] == "*"


def test_personal_registry_urls_come_from_acr(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    # New personal instances have crpi-... hosts: the repository's own domains are used, and
    # offline everything but the host is shown.
    assert plan.outputs["registry"] == {
        "pushUrl": "<registry public host, known after deploy>/ml/trainer",
        "pullUrl": "<registry host, known after deploy>/ml/trainer",
    }
    pod = plan.one(JOB).inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "<registry host, known after deploy>/ml/trainer:v0.1.0"
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

    from components.plan.command import write_manifests

    v1_kinds = {kind.kind for kind in KINDS.values()}
    custom = {
        *v1_kinds,
        "TrainJob",
        "ClusterTrainingRuntime",
        "TrainingRuntime",
        "ClusterQueue",
        "LocalQueue",
        "ResourceFlavor",
    }
    checked = set()
    for path in write_manifests(run_stack(stack_config(stack), stack), tmp_path):
        obj = yaml.safe_load(path.read_text())
        if obj["kind"] in custom:
            continue  # checked against their official models in test_jobs.py, test_job_kinds.py, test_trainjob.py
        kubernetes_validate.validate(obj, "1.33", strict=True)
        checked.add(obj["kind"])
    assert {"Namespace", "ServiceAccount", "PersistentVolumeClaim"} <= checked
    if stack == "dev":
        assert "Secret" in checked  # the pull secret, its values redacted
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


def test_the_shipped_local_stack_plans_without_a_warning() -> None:
    # What ./dev quickstart plans first: nothing on stderr but the plan itself.
    result = plan_cli("--stack", "local")
    assert result.returncode == 0 and result.stderr == ""


def test_plan_cli_refuses_a_key_given_twice(tmp_path) -> None:
    # YAML keeps the last of two equal keys, so the first maxSize would be dropped without a word.
    text = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    twice = text.replace("    maxSize: 2\n", "    maxSize: 2\n    maxSize: 4\n", 1)
    assert twice != text
    stack = tmp_path / "Pulumi.twice.yaml"
    stack.write_text(twice)
    line = twice.splitlines().index("    maxSize: 4") + 1
    result = plan_cli("--stack-file", str(stack))
    assert result.returncode == 2
    assert result.stderr == (
        f"error: {stack}: line {line}: ack-training-platform:gpuPool.maxSize is given twice (first on line "
        f"{line - 1}), and YAML would keep only the last: remove one\n"
    )


def test_a_minimal_ack_stack_without_jobs_plans(run_stack) -> None:
    # Network, cluster and storage alone: nothing to take TensorBoard's image from, so none runs.
    config = {
        k: v for k, v in stack_config("dev").items() if k.split(":")[1] in ("region", "network", "cluster", "storage")
    }
    plan: Plan = run_stack(config, "dev")
    assert plan.outputs["tensorboard"] is None
    assert not [r for r in plan.resources if "tensorboard" in r.name]
    assert plan.of_type("alicloud:cs/managedKubernetes:ManagedKubernetes")


def test_plan_cli_prints_schema() -> None:
    result = plan_cli("--schema")
    schema = json.loads(result.stdout)
    assert result.returncode == 0 and "gpuPool" in schema["properties"] and "region" not in schema["properties"]


def test_neither_components_nor_the_program_import_torch() -> None:
    code = (
        "import sys, components\n"
        "from components.plan.command import plan_stack, read_stack_file, stack_path, find_project_dir\n"
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
    assert volume.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    # A retained volume keeps its old claim's uid and would stay Released: it follows the claim.
    assert volume.inputs["spec"]["claimRef"]["name"] == "training-data"
    assert volume.inputs["spec"]["claimRef"]["uid"] == UNKNOWN
    data = plan.one(PVC, "training-data")
    assert data.retain_on_delete
    assert data.inputs["spec"]["volumeName"] == volume.inputs["metadata"]["name"]
    assert data.inputs["spec"]["storageClassName"] == "" and data.inputs["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert plan.one(PVC, "training-output").inputs["spec"]["volumeName"] == "training-training-output"


def test_oss_dataset_is_read_through_rrsa_without_an_access_key(run_stack) -> None:
    plan = run_stack(oss_config())
    assert plan.of_type("kubernetes:core/v1:Secret") == [plan.one("kubernetes:core/v1:Secret", "registry-pull")]
    csi = plan.one(PV, "training-training-data").inputs["spec"]["csi"]
    assert "nodePublishSecretRef" not in csi
    role = plan.one(RAM_ROLE, "training-dev-dataset-reader")
    assert csi["volumeAttributes"]["authType"] == "rrsa"
    # The role's name is known once the role and its policy exist.
    assert csi["volumeAttributes"]["roleName"] == UNKNOWN
    assert role.inputs["roleName"] == "training-dev-dataset-reader"
    assert plan.one(CLUSTER).inputs["enableRrsa"] is True
    # Trusted for the OSS plugin's ossfs pods through the cluster's OIDC provider, known after deploy.
    assert role.inputs["assumeRolePolicyDocument"] == UNKNOWN
    policy = json.loads(plan.one(RAM_POLICY, "training-dev-dataset-reader").inputs["policyDocument"])
    assert policy["Statement"] == [
        {
            "Action": ["oss:Get*", "oss:List*"],
            "Effect": "Allow",
            "Resource": ["acs:oss:*:*:team-datasets", "acs:oss:*:*:team-datasets/*"],
        }
    ]
    attachment = plan.one(RAM_ATTACHMENT, "training-dev-dataset-reader")
    assert attachment.inputs["policyType"] == "Custom"


def test_oss_trust_policy_names_the_plugins_service_account() -> None:
    from components.manifests import OSS_RRSA_SERVICE_ACCOUNT, service_account_trust_policy

    arn = "acs:ram::1234:oidc-provider/ack-rrsa-c0ffee"
    trust = service_account_trust_policy(arn, "https://oidc-ack.example/c0ffee", *OSS_RRSA_SERVICE_ACCOUNT)
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Federated": [arn]}
    assert statement["Condition"]["StringEquals"] == {
        "oidc:aud": "sts.aliyuncs.com",
        "oidc:iss": "https://oidc-ack.example/c0ffee",
        "oidc:sub": "system:serviceaccount:ack-csi-fuse:csi-fuse-ossfs",
    }


def test_oss_on_an_adopted_cluster_names_its_role(run_stack) -> None:
    from components.config import ConfigError, load_spec

    config = oss_config()
    config[cfg("network")] = {"vpcId": "vpc-1", "vswitchIds": ["vsw-1"], "vpcCidr": "10.0.0.0/8"}
    config[cfg("storage")]["nas"] = {**config[cfg("storage")].get("nas", {}), "accessCidr": "10.0.0.0/16"}
    config[cfg("cluster")] = {"name": "training-dev", "existingClusterId": "c0ffee"}
    with pytest.raises(ConfigError) as raised:
        load_spec(config, [cfg("registryPassword")])
    assert raised.value.problems[0].startswith("ack-training-platform:storage.oss.roleName: the stack cannot read")
    config[cfg("storage")]["oss"]["roleName"] = "datasets-reader"
    plan = run_stack(config)
    csi = plan.one(PV, "training-training-data").inputs["spec"]["csi"]
    assert csi["volumeAttributes"]["roleName"] == "datasets-reader"
    assert not [r for r in plan.of_type(RAM_ROLE) if "dataset" in r.name]


def test_oss_access_keys_are_no_longer_read() -> None:
    from components.config import ConfigError, load_spec

    config = oss_config()
    config[cfg("ossAccessKeyId")] = {"secure": "v1:id"}
    with pytest.raises(ConfigError) as raised:
        load_spec(config, [cfg("registryPassword"), cfg("ossAccessKeyId")])
    assert raised.value.problems == [
        "ack-training-platform:ossAccessKeyId: no longer read: the OSS dataset is read through RRSA, without an "
        "AccessKey; run: pulumi config rm ossAccessKeyId, and delete that AccessKey in RAM"
    ]


def test_pulumi_up_reports_invalid_config_without_traceback() -> None:
    import pulumi

    from components.plan.runner import run_program

    config = stack_config("dev")
    config[cfg("gpuPool")]["minSize"] = 5
    config[cfg("registryPassword")] = {"secure": "v1:AAAA"}
    with pytest.raises(pulumi.RunError) as raised:
        run_program(config, stack="dev", project_dir=ROOT)
    assert str(raised.value) == (
        "invalid stack configuration:\n  ack-training-platform:gpuPool.minSize: minSize (5) must not exceed maxSize (2)"
    )


def test_components_compose_in_another_stack(run_stack, with_installed_package) -> None:
    from components.plan.runner import run_program

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
    runtimes = plan.of_type("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime")
    assert runtimes and {r.urn for r in runtimes} <= set(plan.one(TRAINJOB).dependencies)


@pytest.mark.parametrize("stack", STACKS)
def test_job_defaults_rebuild_the_stacks_own_jobs(run_stack, stack: str) -> None:
    # `ack-jobs submit` builds from the exported jobDefaults: the same job must come out as the
    # stack's own, on the same pool, claims, service account, pull secret and queue.
    from components.config import PlatformSpec, job_gpus
    from components.manifests import context_from_defaults, kubeflow_job, train_job

    config = stack_config(stack)
    plan = run_stack(config, stack)
    defaults = plan.outputs["jobDefaults"]
    assert "jobDefaults" not in plan.secret_outputs
    platform = PlatformSpec.model_validate({k.split(":", 1)[1]: v for k, v in config.items()})
    assert defaults["backend"] == platform.training.backend
    for job in platform.jobs:
        backend = platform.job_backend(job)
        v1_type = f"kubernetes:kubeflow.org/v1:{KINDS[job.framework].kind}"
        built = plan.one(TRAINJOB if backend == "v2" else v1_type, job.name).inputs
        # A team's jobs land in its namespace, with its claims, uid and queue.
        used = plan.outputs["teamJobDefaults"][job.team] if job.team else defaults
        gpus = job_gpus(job, used["placement"]["gpusPerNode"])
        ctx = context_from_defaults(used, image="<image>", gpus=gpus, backend=backend)
        rebuilt = train_job(job, ctx) if backend == "v2" else kubeflow_job(job, ctx)
        assert _without_images(rebuilt) == _without_images(built)


def _without_images(manifest: dict) -> dict:
    # The stack's image may be its registry's URL, known only after deployment.
    text = json.dumps(manifest)
    return json.loads(re.sub(r'"image": "[^"]*"', '"image": null', text))


PERSONAL_REPOS = "alicloud:cr/getRepos:getRepos"
ENTERPRISE_REPOS = "alicloud:cs/getRegistryEnterpriseRepos:getRegistryEnterpriseRepos"
ENTERPRISE_NAMESPACES = "alicloud:cs/getRegistryEnterpriseNamespaces:getRegistryEnterpriseNamespaces"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def personal_repos(*tags: str) -> dict:
    """What cr.get_repos answers for dev's repository holding ``tags`` (no tags: not created yet)."""
    domains = {
        "public": "crpi-abc.cn-hangzhou.personal.cr.aliyuncs.com",
        "vpc": "crpi-abc-vpc.cn-hangzhou.personal.cr.aliyuncs.com",
    }
    repo = {"name": "trainer", "namespace": "ml", "repoType": "PRIVATE", "summary": "", "domainLists": [domains]}
    return {
        PERSONAL_REPOS: {"repos": [{**repo, "tags": [{"tag": t, "status": "NORMAL"} for t in tags]}] if tags else []}
    }


def test_first_up_holds_back_what_pulls_an_image_not_pushed_yet(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("monitoring")]["tensorboard"] = {"enabled": True}
    first = run_stack(config, invokes=personal_repos())
    # The repository is created; nothing waits on, or starts GPU nodes for, an image that cannot be there.
    assert first.of_type("alicloud:cr/repo:Repo")
    assert not first.of_type(JOB) and not first.of_type(DEPLOYMENT)
    pushed = run_stack(config, invokes=personal_repos("v0.1.0"))
    assert pushed.one(JOB, "mnist-dev") and pushed.one("kubernetes:apps/v1:StatefulSet", "tensorboard-statefulset")


def test_a_tag_missing_from_an_existing_repository_stops_the_run(run_stack) -> None:
    from components.registry import NotInRegistry

    with pytest.raises(NotInRegistry) as raised:
        run_stack(stack_config("dev"), invokes=personal_repos("v0.0.9"))
    assert str(raised.value) == (
        "job 'mnist-dev' pulls tag 'v0.1.0', which the repository does not have: "
        "docker push crpi-abc.cn-hangzhou.personal.cr.aliyuncs.com/ml/trainer:v0.1.0 first"
    )
    with pytest.raises(
        NotInRegistry, match="docker push ml-registry-registry.cn-wulanchabu.cr.aliyuncs.com/ml/trainer:v0.1.0 first"
    ):
        run_stack(stack_config("prod"), "prod", invokes=mirror_repos(training_tags=()))
    # An adopted repository that is not there is a mistake, not a first run.
    with pytest.raises(NotInRegistry, match="registry.repositoryExists: ACR has no repository ml/trainer: create it"):
        run_stack(stack_config("prod"), "prod", invokes=mirror_repos(training_tags=None))


def test_a_teardown_goes_ahead_without_the_tag_when_asked(run_stack, monkeypatch) -> None:
    import pulumi

    monkeypatch.setenv("ACK_CLOUD_CHECKS", "warn")
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    plan = run_stack(stack_config("dev"), invokes=personal_repos("v0.0.9"))
    # The job stays in the program, so a run to remove or destroy it can go ahead.
    assert plan.one(JOB, "mnist-dev")
    assert any(w.startswith("job 'mnist-dev' pulls tag 'v0.1.0'") for w in warned)


def test_an_adopted_personal_repository_is_read_from_acr(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("registry")].update(namespaceExists=True, repositoryExists=True)
    plan = run_stack(config, invokes=personal_repos("v0.1.0"))
    assert not plan.of_type("alicloud:cr/namespace:Namespace") + plan.of_type("alicloud:cr/repo:Repo")
    assert plan.outputs["registry"] == {
        "pushUrl": "crpi-abc.cn-hangzhou.personal.cr.aliyuncs.com/ml/trainer",
        "pullUrl": "crpi-abc-vpc.cn-hangzhou.personal.cr.aliyuncs.com/ml/trainer",
    }
    pod = plan.one(JOB).inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "crpi-abc-vpc.cn-hangzhou.personal.cr.aliyuncs.com/ml/trainer:v0.1.0"
    # Offline nothing answers: the hosts are unknown, the rest is planned.
    offline = run_stack(config)
    assert offline.outputs["registry"] == {"pushUrl": UNKNOWN, "pullUrl": UNKNOWN}
    assert offline.one(JOB)


def test_exported_secrets_keep_their_shape_and_images_their_tag(tmp_path) -> None:
    result = plan_cli("--stack", "dev", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    secret = yaml.safe_load((tmp_path / "4-secret-registry-pull.yaml").read_text())
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    # The API server wants this key to hold a JSON document: it does, with every value redacted.
    config = json.loads(secret["stringData"][".dockerconfigjson"])
    assert config == {
        "auths": {"<registry host, known after deploy>": {"username": SECRET, "password": SECRET, "auth": SECRET}}
    }
    assert "hunter2" not in result.stdout
    job = yaml.safe_load((tmp_path / "6-pytorchjob-mnist-dev.yaml").read_text())
    image = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["image"]
    assert image == "<registry host, known after deploy>/ml/trainer:v0.1.0"


def test_a_secret_is_redacted_value_by_value() -> None:
    from components.plan.records import redacted

    assert redacted({"akId": "id", "akSecret": "key"}) == {"akId": SECRET, "akSecret": SECRET}
    assert redacted(["a", {"b": 1}]) == [SECRET, {"b": SECRET}]
    assert redacted("{not json") == SECRET and redacted("hunter2") == SECRET
    assert json.loads(redacted('{"auths": {"host": {"auth": "dTpw"}}}')) == {"auths": {"host": {"auth": SECRET}}}


def mirror_repos(
    *,
    public: bool = True,
    copied: bool = True,
    training_tags: tuple[str, ...] | None = ("v0.1.0",),
    existing: tuple[str, ...] = ("ml", "mirror"),
) -> dict:
    """What cs.get_registry_enterprise_repos answers for prod's instance, per namespace: the
    training image's repository with ``training_tags`` (``None``: no repository), and the
    mirror holding every image the stack mirrors (``copied``), public or not; of these
    namespaces, those in ``existing`` exist."""
    from components.config import load_spec
    from components.manifests.platform.images import image_copies

    spec = load_spec(stack_config("prod"), credentials=False)
    mirrored = [target.rsplit("/", 1)[-1].split(":") for _, target in image_copies(spec)]
    if not copied:
        mirrored = mirrored[1:]
    repo = {"instanceId": "cri-0jl6b5ykcjznb4rb", "summary": ""}
    by_namespace = {
        "ml": [
            {
                **repo,
                "id": "crr-0",
                "name": "trainer",
                "namespace": "ml",
                "repoType": "PRIVATE",
                "tags": [{"tag": tag} for tag in training_tags],
            }
        ]
        if training_tags is not None
        else [],
        "mirror": [
            {
                **repo,
                "id": f"crr-{i}",
                "name": name,
                "namespace": "mirror",
                "repoType": "PUBLIC" if public else "PRIVATE",
                "tags": [{"tag": tag}],
            }
            for i, (name, tag) in enumerate(mirrored, 1)
        ],
    }
    namespaces = [{"name": name, "namespaceName": name, "instanceId": repo["instanceId"]} for name in by_namespace]
    return {
        ENTERPRISE_NAMESPACES: {"namespaces": [n for n in namespaces if n["name"] in existing]},
        ENTERPRISE_REPOS: lambda args: {"repos": by_namespace[args["namespace"]]},
    }


def test_operator_and_volcano_pull_from_a_public_mirror_once_it_is_reachable(run_stack, fixture_pins) -> None:
    scheduler = ("kubernetes:apps/v1:Deployment", "volcano-system/volcano-scheduler")
    plan = run_stack(stack_config("prod"), "prod", invokes=mirror_repos())
    helper = plan.one(ADDON, "registry-managed-aliyun-acr-credential-helper").urn
    # Anonymous pulls: nothing to wait for when the instance is linked already, least of all the helper.
    assert helper not in plan.one(*scheduler).dependencies
    config = stack_config("prod")
    config[cfg("registry")]["linkVpc"] = True
    linked = run_stack(config, "prod", invokes=mirror_repos())
    link = linked.one(LINK).urn
    assert link in linked.one(*scheduler).dependencies
    assert helper not in linked.one(*scheduler).dependencies


@pytest.mark.parametrize(
    ("repos", "problem"),
    [
        (mirror_repos(public=False), "mirror/training-operator is private: make it public"),
        (mirror_repos(existing=("ml",)), "mirror/training-operator:v1-93c5489 is not copied"),
        (
            mirror_repos(copied=False),
            "ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/mirror/training-operator:v1-93c5489 is not copied",
        ),
    ],
    ids=["private", "no mirror namespace", "not copied"],
)
def test_a_mirror_that_needs_credentials_or_lacks_an_image_stops_the_run(run_stack, repos, problem) -> None:
    from components.images.mirror import MirrorNotReady

    # Copied by hand (mirrorFill: none): checked before anything is created.
    config = stack_config("prod")
    del config[cfg("mirrorFill")]
    with pytest.raises(MirrorNotReady) as raised:
        run_stack(config, "prod", invokes=repos)
    message = str(raised.value)
    assert message.startswith("imageMirror: the operator, Volcano and Trainer v2 pull these without credentials")
    assert problem in message and "python -m components.upstream images" in message


def test_a_namespace_the_stack_adds_to_an_adopted_instance_holds_back_the_jobs_until_pushed(run_stack) -> None:
    config = stack_config("prod")
    config[cfg("registry")].update(namespaceExists=False, repositoryExists=False)
    # The first update creates the namespace and the repository; the mirror is ready.
    first = run_stack(config, "prod", invokes=mirror_repos(existing=("mirror",)))
    (repo,) = registry_repos(first)
    assert repo.retain_on_delete and not first.of_type(JOB)
    assert run_stack(config, "prod", invokes=mirror_repos()).of_type(JOB)


def test_each_pool_has_its_own_least_privilege_role_and_metadata_tokens(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    pools = plan.of_type(POOL)
    assert len(pools) == 2
    roles = {r.inputs["roleName"]: r for r in plan.of_type(RAM_ROLE)}
    for pool in pools:
        assert pool.inputs["instanceMetadataOptions"] == {"httpTokens": "required"}
        role = roles[f"training-dev-{pool.inputs['nodePoolName']}-nodes"]
        assert pool.inputs["ramRoleName"] == role.inputs["roleName"]
        assert json.loads(role.inputs["assumeRolePolicyDocument"])["Statement"] == [
            {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": ["ecs.aliyuncs.com"]}}
        ]
        policy = plan.one(RAM_POLICY, role.name)
        assert policy.inputs["policyName"] == role.inputs["roleName"]
        (statement,) = json.loads(policy.inputs["policyDocument"])["Statement"]
        # ACK's worker policy without its registry and log statements: no pod on these
        # nodes can pull the account's private images or read its logs as the node.
        assert all(action.startswith("ecs:Describe") for action in statement["Action"])
        attachment = plan.one(RAM_ATTACHMENT, role.name)
        assert attachment.urn in pool.dependencies
    assert not any(name.startswith("KubernetesWorkerRole-") for name in roles)


def test_metadata_tokens_need_a_recent_cluster() -> None:
    from components.config import ConfigError, load_spec

    config = stack_config("dev")
    config[cfg("cluster")]["version"] = "1.26.3-aliyun.1"
    with pytest.raises(ConfigError) as raised:
        load_spec(config, credentials=False)
    assert raised.value.problems == [
        "ack-training-platform:cluster.version: Kubernetes 1.26.3-aliyun.1 is too old: the node pools require "
        "instance metadata tokens (IMDSv2), which ACK supports from 1.28 on; raise version"
    ]

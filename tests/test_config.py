"""Stack configs either validate fully or fail naming the key, the value and the fix."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ROOT, STACKS, cfg, stack_config

from components.config import ConfigError, PlatformSpec, load_spec, missing_credentials
from components.package.reference import END, START, reference


@pytest.mark.parametrize("stack", STACKS)
def test_every_shipped_stack_validates(stack: str) -> None:
    config = stack_config(stack)
    spec = load_spec(config, credentials=False)
    assert isinstance(spec, PlatformSpec)
    assert spec.is_local == (stack == "local")
    # Credentials are per user: each stack file gets its own ciphertext.
    assert missing_credentials(spec, config) == (
        {"registryPassword": "registry.username"} if stack in ("dev", "prod") else {}
    )


def validate(config: dict[str, Any]) -> PlatformSpec:
    """``load_spec`` as ``pulumi up`` calls it, with the dev stack's password set as a secret."""
    config.setdefault(cfg("registryPassword"), {"secure": "v1:AAAA"})
    return load_spec(config, [key for key, value in config.items() if isinstance(value, dict) and "secure" in value])


DEPLOYER_RANGE = "61.10.20.0/24"


def dev(**changes: Any) -> dict[str, Any]:
    """The dev stack with ``changes`` applied: keys are 'area.sub.key' paths. The API server's
    allowed ranges are set, as each deployer sets theirs."""
    config = stack_config("dev")
    config[cfg("cluster")]["apiServer"]["allowedCidrs"] = [DEPLOYER_RANGE]
    for path, value in changes.items():
        area, *rest = path.split(".")
        node = config.setdefault(cfg(area), {})
        for part in rest[:-1]:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if not rest:
            config[cfg(area)] = value
        elif value is DELETE:
            node.pop(rest[-1])
        else:
            node[rest[-1]] = value
    return config


DELETE = object()

INVALID = [
    # (case, changes, exact message)
    (
        "unknown key",
        {"gpuPool.maxSise": 3},
        "ack-training-platform:gpuPool.maxSise: unknown key; did you mean 'maxSize'? valid keys: autoRepair, "
        "compensateWithOnDemand, dataDiskGib, desiredSize, diskCategory, driverVersion, fabric, gpusPerNode, "
        "instanceTypes, labels, lowLatency, maxSize, minSize, name, nodeCapacity, spotPriceLimit, spotStrategy, systemDiskGib, "
        "taint",
    ),
    (
        "unknown top-level key",
        {"gpuPol": {}},
        "ack-training-platform:gpuPol: unknown key; did you mean 'gpuPool'? valid keys: cluster, costs, datasets, gpuPool, imageLock, "
        "imageMirror, jobs, mirrorFill, monitoring, network, operator, registry, storage, teams, trainerV2, training",
    ),
    (
        "min above max",
        {"gpuPool.minSize": 3, "gpuPool.maxSize": 2},
        "ack-training-platform:gpuPool.minSize: minSize (3) must not exceed maxSize (2)",
    ),
    (
        "desired outside range",
        {"gpuPool.minSize": 2, "gpuPool.maxSize": 2, "gpuPool.desiredSize": 3},
        "ack-training-platform:gpuPool.desiredSize: desiredSize (3) must lie between minSize (2) and maxSize (2)",
    ),
    (
        "negative size",
        {"gpuPool.minSize": -1},
        "ack-training-platform:gpuPool.minSize: Input should be greater than or equal to 0 (got -1)",
    ),
    (
        "empty instance types",
        {"gpuPool.instanceTypes": []},
        "ack-training-platform:gpuPool.instanceTypes: list at least one GPU instance type, e.g. ['ecs.gn7i-c8g1.2xlarge']",
    ),
    (
        "unknown spot strategy",
        {"gpuPool.spotStrategy": "Cheap"},
        "ack-training-platform:gpuPool.spotStrategy: Input should be 'NoSpot', 'SpotWithPriceLimit' or 'SpotAsPriceGo' (got 'Cheap')",
    ),
    (
        "price limit without strategy",
        {"gpuPool.spotPriceLimit": 2.5},
        "ack-training-platform:gpuPool.spotPriceLimit: spotPriceLimit is required with, and only with, spotStrategy SpotWithPriceLimit",
    ),
    (
        "erdma on plain instances",
        {"gpuPool.fabric": "erdma"},
        "ack-training-platform:gpuPool.fabric: instance types ['ecs.gn7i-c8g1.2xlarge', 'ecs.gn7i-c16g1.4xlarge'] are not "
        "of the GPU families ACK lists for eRDMA training (gn8is, ebmgn8is, gn8v, ebmgn8v): pick types of those "
        "families, or drop fabric erdma",
    ),
    (
        "lingjun rdma",
        {"gpuPool.fabric": "rdma", "gpuPool.instanceTypes": ["ecs.ebmgn8v.48xlarge"]},
        "ack-training-platform:gpuPool.fabric: Lingjun RDMA (rdma/hca) needs Lingjun nodes and Terway exclusive-ENI "
        "networking, which this platform does not create; ECS GPU families with RDMA NICs (ebmgn8v, gn8v, ebmgn8is, "
        "gn8is) use fabric: erdma",
    ),
    (
        "pod CIDR overlaps VPC",
        {"network.podCidr": "192.168.128.0/20"},
        "ack-training-platform:network.podCidr: 192.168.128.0/20 overlaps vpcCidr 192.168.0.0/16; pick a range outside the VPC, e.g. 172.20.0.0/16",
    ),
    (
        "service CIDR overlaps pods",
        {"network.serviceCidr": "172.20.16.0/20"},
        "ack-training-platform:network.serviceCidr: 172.20.16.0/20 overlaps podCidr 172.20.0.0/16",
    ),
    (
        "vSwitch outside VPC",
        {"network.vswitches.1.cidr": "10.0.0.0/24"},
        "ack-training-platform:network.vswitches[1].cidr: 10.0.0.0/24 is not inside vpcCidr 192.168.0.0/16",
    ),
    (
        "overlapping vSwitches",
        {"network.vswitches.1.cidr": "192.168.8.0/24"},
        "ack-training-platform:network.vswitches[1].cidr: 192.168.8.0/24 overlaps vswitches[0].cidr 192.168.0.0/20",
    ),
    (
        "malformed CIDR",
        {"network.vpcCidr": "192.168.0.0/33"},
        "ack-training-platform:network.vpcCidr: Input is not a valid IPv4 network (got '192.168.0.0/33')",
    ),
    (
        "NAS rule open to the world",
        {"storage.nas.accessCidr": "0.0.0.0/0"},
        "ack-training-platform:storage.nas.accessCidr: 0.0.0.0/0 is wider than the VPC (192.168.0.0/16): NAS access is limited to the VPC",
    ),
    (
        "NAS rule wider than VPC",
        {"storage.nas.accessCidr": "192.168.0.0/15"},
        "ack-training-platform:storage.nas.accessCidr: 192.168.0.0/15 is wider than the VPC (192.168.0.0/16): NAS access is limited to the VPC",
    ),
    (
        "bad claim name",
        {"storage.data.claimName": "Training_Data"},
        "ack-training-platform:storage.data.claimName: 'Training_Data' is not a valid Kubernetes name: use at most 63 "
        "lowercase letters, digits and '-', starting and ending with a letter or digit",
    ),
    (
        "bad size",
        {"storage.output.size": "1TB"},
        "ack-training-platform:storage.output.size: '1TB' is not a size: write a number with an optional unit "
        "(Ki, Mi, Gi, Ti, Pi, k, M, G, T, P), e.g. '500Gi'",
    ),
    (
        "size without its unit",
        {"jobs.0.memory": 24},
        "ack-training-platform:jobs[0].memory: '24' has no unit, so it means 24 bytes: write '24Gi' or '24Mi'",
    ),
    (
        "job name not DNS-1035",
        {"jobs.0.name": "1st-run"},
        "ack-training-platform:jobs[0].name: '1st-run' is not a valid job name: use at most 40 lowercase letters, "
        "digits and '-', starting with a letter and ending with a letter or digit",
    ),
    (
        "unpinned image",
        {"jobs.0.image": "registry.example.com/trainer:latest", "jobs.0.imageTag": DELETE},
        "ack-training-platform:jobs[0].image: 'registry.example.com/trainer:latest' is not pinned: add a version tag "
        "other than 'latest' (e.g. ':v1.2.0') or a digest (@sha256:...)",
    ),
    (
        "latest tag",
        {"jobs.0.imageTag": "latest"},
        "ack-training-platform:jobs[0].imageTag: 'latest' is not a pinned tag: use a version such as 'v1.2.0' or a commit id, not 'latest'",
    ),
    (
        "GPUs beyond the node",
        {"jobs.0.gpusPerNode": 2},
        "ack-training-platform:jobs[0].gpusPerNode: 2 GPUs per pod do not fit on a 1-GPU node of pool 'gpu'",
    ),
    (
        "procs disagree with GPUs",
        {"jobs.0.gpusPerNode": 1, "jobs.0.procsPerNode": 2},
        "ack-training-platform:jobs[0].procsPerNode: procsPerNode (2) must equal gpusPerNode (1): one process drives one GPU",
    ),
    (
        "rdma without a fabric",
        {"jobs.0.network": "rdma"},
        "ack-training-platform:jobs[0].network: rdma networking needs a gpuPool with an RDMA fabric (fabric: erdma)",
    ),
    (
        "gang without volcano",
        {"jobs.0.scheduling": {"minAvailable": 1}},
        "ack-training-platform:jobs[0].scheduling: queues and gang scheduling need Volcano: set operator.volcano.enabled: true",
    ),
    (
        "job volume over the data volume",
        {"jobs.0.volumes": [{"claim": "imagenet", "mountPath": "/mnt/data/imagenet"}]},
        "ack-training-platform:jobs[0].volumes[0].mountPath: '/mnt/data/imagenet' would cover or sit inside "
        "/mnt/data, which the platform mounts: give another path, such as /mnt/imagenet",
    ),
    (
        "job volumes that overlap",
        {"jobs.0.volumes": [{"claim": "a", "mountPath": "/srv/a"}, {"claim": "b", "mountPath": "/srv/a/b"}]},
        "ack-training-platform:jobs[0].volumes[1].mountPath: /srv/a/b and /srv/a overlap: mount each claim at a "
        "path of its own",
    ),
    (
        "shm larger than memory",
        {"jobs.0.shmSize": "32Gi"},
        "ack-training-platform:jobs[0].shmSize: shmSize 32Gi must be smaller than memory 24Gi: /dev/shm is memory",
    ),
    (
        "operator not pinned",
        {"operator.version": "master"},
        "ack-training-platform:operator.version: 'master' is not a release tag: pin one such as 'v1.9.4'",
    ),
    (
        "operator v2",
        {"operator.version": "v2.0.0"},
        "ack-training-platform:operator.version: 'v2.0.0' is not a v1 release; this platform emits kubeflow.org/v1 PyTorchJobs",
    ),
    (
        "no region",
        {"alicloud:region": DELETE},
        "alicloud:region: ACK stacks need the region: pulumi config set alicloud:region cn-hangzhou",
    ),
    (
        "registry password missing",
        {"registryPassword": DELETE},
        "ack-training-platform:registryPassword: registry.username is set but this credential is missing; "
        "run: pulumi config set --secret registryPassword <value>",
    ),
    (
        "private api server without a way in",
        {"cluster.apiServer": {}},
        "ack-training-platform:cluster.apiServer: Pulumi applies every in-cluster object through the API server, "
        "which is private by default: set public: true with allowedCidrs, or keep it private and set privateAccess "
        "to how this machine reaches the VPC (vpn, cen, express-connect, in-vpc)",
    ),
    (
        "public api server without ranges",
        {"cluster.apiServer": {"public": True}},
        "ack-training-platform:cluster.apiServer.allowedCidrs: a public API server needs the source ranges that may "
        "reach it (where Pulumi, CI and kubectl connect from); run: pulumi config set --path "
        "'cluster.apiServer.allowedCidrs[0]' <range>, with the egress range of your office, VPN or CI "
        "(one address: <address>/32)",
    ),
    (
        "api server admitting a documentation range",
        {"cluster.apiServer.allowedCidrs": [DEPLOYER_RANGE, "203.0.113.0/24"]},
        "ack-training-platform:cluster.apiServer.allowedCidrs[1]: 203.0.113.0/24 is in the documentation range "
        "TEST-NET-3 (RFC 5737), which no client connects from: once the whitelist is on, nobody could reach the API "
        "server. Run: pulumi config set --path 'cluster.apiServer.allowedCidrs[1]' <range>, with the egress range "
        "of your office, VPN or CI (one address: <address>/32)",
    ),
    (
        "api server admitting an address of a documentation range",
        {"cluster.apiServer.allowedCidrs": ["192.0.2.10/32"]},
        "ack-training-platform:cluster.apiServer.allowedCidrs[0]: 192.0.2.10/32 is in the documentation range "
        "TEST-NET-1 (RFC 5737), which no client connects from: once the whitelist is on, nobody could reach the API "
        "server. Run: pulumi config set --path 'cluster.apiServer.allowedCidrs[0]' <range>, with the egress range "
        "of your office, VPN or CI (one address: <address>/32)",
    ),
    (
        "api server admitting loopback",
        {"cluster.apiServer.allowedCidrs": ["127.0.0.1/32"]},
        "ack-training-platform:cluster.apiServer.allowedCidrs[0]: 127.0.0.1/32 is in the loopback range (RFC 1122), "
        "which no client connects from: once the whitelist is on, nobody could reach the API server. Run: pulumi "
        "config set --path 'cluster.apiServer.allowedCidrs[0]' <range>, with the egress range of your office, VPN "
        "or CI (one address: <address>/32)",
    ),
    (
        "api server open to the world",
        {"cluster.apiServer.allowedCidrs": ["0.0.0.0/0"]},
        "ack-training-platform:cluster.apiServer.allowedCidrs[0]: 0.0.0.0/0 opens the API server to the whole "
        "internet: list the ranges you connect from",
    ),
    (
        "cluster spec that does not exist",
        {"cluster.clusterSpec": "ack.pro.medium"},
        "ack-training-platform:cluster.clusterSpec: Input should be 'ack.standard', 'ack.pro.small', 'ack.pro.xlarge', "
        "'ack.pro.2xlarge' or 'ack.pro.4xlarge' (got 'ack.pro.medium')",
    ),
    (
        "adopted cluster in a new VPC",
        {"cluster": {"existingClusterId": "c-1"}},
        "ack-training-platform:network.vswitches: an adopted cluster (cluster.existingClusterId) lives in a VPC "
        "already: adopt it with network.vpcId and network.vswitchIds instead of creating vSwitches",
    ),
    (
        "setting for a created cluster on an adopted one",
        {"cluster.existingClusterId": "c-1"},
        "ack-training-platform:cluster.deletionProtection: deletionProtection has no effect with an adopted cluster "
        "(existingClusterId): drop it",
    ),
    (
        "cidr without prefix length",
        {"storage.nas.accessCidr": "192.168.0.0"},
        "ack-training-platform:storage.nas.accessCidr: '192.168.0.0' has no prefix length: write a CIDR block such "
        "as '192.168.0.0/16'",
    ),
    (
        "job needs more nodes than the pool has",
        {"jobs.0.nodes": 3},
        "ack-training-platform:jobs[0].nodes: the job's 3 pods need 3 GPU nodes but gpuPool.maxSize is 2: "
        "raise maxSize or run fewer nodes",
    ),
    (
        "quota below one job",
        {"training.gpuQuota": 0},
        "ack-training-platform:jobs[0].nodes: the job needs 1 GPUs at once but training.gpuQuota is 0: it could "
        "never start; raise the quota or shrink the job",
    ),
    (
        "more processes than gpus",
        {"jobs.0.procsPerNode": 2},
        "ack-training-platform:jobs[0].procsPerNode: procsPerNode (2) must equal the job's 1 GPUs per pod: one "
        "process drives one GPU",
    ),
    (
        "platform add-on listed again",
        {"cluster.addons": ["ack-erdma-controller", "logtail-ds"]},
        "ack-training-platform:cluster.addons: ['ack-erdma-controller'] are installed and configured by the platform "
        "where it needs them: list only other add-ons",
    ),
    (
        "gpu pool named like the system pool",
        {"gpuPool.name": "system"},
        "ack-training-platform:gpuPool.name: 'system' names the platform's system pool: pick another name",
    ),
    (
        "autoscaling pool without the autoscaler",
        {"cluster.autoscaler": {"enabled": False}},
        "ack-training-platform:cluster.autoscaler.enabled: the GPU pool autoscales, which ACK does only with the "
        "cluster autoscaler configured: drop enabled: false, or give the pool a fixed size (minSize == maxSize)",
    ),
    (
        "mirror in the instance this stack buys",
        {
            "registry": {"edition": "enterprise", "enterpriseInstanceName": "ml"},
            "imageMirror": "ml-registry-vpc.cn-hangzhou.cr.aliyuncs.com/mirror",
        },
        "ack-training-platform:imageMirror: the mirror is in the enterprise instance this stack buys, so its images "
        "cannot be copied before the operator and Volcano pull them: set mirrorFill: subscription or copy, adopt the instance "
        "(registry.enterpriseInstanceId) once it exists, or mirror into another registry",
    ),
    (
        "adopted enterprise instance without saying whether it is linked",
        {"registry": {"edition": "enterprise", "enterpriseInstanceId": "cri-abc", "enterpriseInstanceName": "ml"}},
        "ack-training-platform:registry.linkVpc: say whether instance cri-abc is linked to the stack's VPC: "
        "linkVpc: false when it is (the link is used as it is), true to link it in this stack",
    ),
    (
        "existing repository in a namespace the stack creates",
        {"registry.repositoryExists": True},
        "ack-training-platform:registry.namespaceExists: repositoryExists says ml/trainer exists, so its namespace "
        "does: set namespaceExists: true",
    ),
    (
        "existing namespace in an instance the stack buys",
        {"registry": {"edition": "enterprise", "enterpriseInstanceName": "ml", "namespaceExists": True}},
        "ack-training-platform:registry.namespaceExists: namespaceExists has no effect with an instance the stack "
        "buys (it is empty): drop it",
    ),
    (
        "label key with a space",
        {"gpuPool.labels": {"team name": "ml"}},
        "ack-training-platform:gpuPool.labels: 'team name' is not a valid Kubernetes label or taint "
        "key: an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending "
        "with a letter or digit (e.g. 'example.com/team')",
    ),
    (
        "taint key with a space",
        {"gpuPool.taint.key": "gpu node"},
        "ack-training-platform:gpuPool.taint.key: 'gpu node' is not a valid Kubernetes label or taint key: an "
        "optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a "
        "letter or digit (e.g. 'example.com/team')",
    ),
    (
        "env name with a space",
        {"jobs.0.env": {"MY VAR": "1"}},
        "ack-training-platform:jobs[0].env: 'MY VAR' is not a valid environment variable name: "
        "letters, digits, '_', '-' and '.', not starting with a digit",
    ),
    (
        "enterprise setting on the personal edition",
        {"registry.enterpriseInstanceName": "team"},
        "ack-training-platform:registry.enterpriseInstanceName: enterpriseInstanceName has no effect with the "
        "personal edition: drop it",
    ),
    (
        "extreme setting on standard nas",
        {"storage.nas.capacityGib": 200},
        "ack-training-platform:storage.nas.capacityGib: capacityGib has no effect on a standard file system "
        "(extreme only): drop it",
    ),
    (
        "on-demand fallback without spot",
        {"gpuPool.spotStrategy": "NoSpot"},
        "ack-training-platform:gpuPool.compensateWithOnDemand: compensateWithOnDemand applies to spot pools only: "
        "drop it, or set spotStrategy",
    ),
    (
        "sharding the cnn",
        {"jobs.0.trainer.parallel": "fsdp"},
        "ack-training-platform:jobs[0].trainer.parallel: parallel fsdp shards the gpt and llama models; the cnn takes ddp "
        "or auto (which keeps ddp)",
    ),
    (
        "low-latency pool of spot instances",
        {"gpuPool.lowLatency": True},
        "ack-training-platform:gpuPool.lowLatency: an ECS deployment set takes no spot instances: set spotStrategy "
        "NoSpot or drop lowLatency",
    ),
    (
        "low-latency pool past a deployment set's 20 instances",
        {
            "gpuPool.lowLatency": True,
            "gpuPool.spotStrategy": "NoSpot",
            "gpuPool.compensateWithOnDemand": DELETE,
            "gpuPool.maxSize": 21,
        },
        "ack-training-platform:gpuPool.maxSize: a lowLatency pool holds at most 20 nodes (an ECS LowLatency "
        "deployment set's limit), not 21: lower maxSize or drop lowLatency",
    ),
    (
        "personal edition without a pull login",
        {"registry.username": DELETE},
        "ack-training-platform:registry.username: nodes pull from a personal-edition registry with a password: the "
        "ACR credential helper serves enterprise instances (and personal ones created on or before 2024-09-08) "
        "only; set username and run: pulumi config set --secret registryPassword <password>",
    ),
    (
        "extreme nas outside /share",
        {
            "storage.nas": {
                "fileSystemType": "extreme",
                "storageType": "standard",
                "capacityGib": 100,
                "basePath": "/data",
            }
        },
        "ack-training-platform:storage.nas.basePath: '/data' is outside /share: extreme NAS exports only /share and "
        "below, e.g. '/share/training'",
    ),
    (
        "extreme nas zone without a vswitch",
        {
            "storage.nas": {
                "fileSystemType": "extreme",
                "storageType": "standard",
                "capacityGib": 100,
                "zoneId": "cn-hangzhou-i",
            }
        },
        "ack-training-platform:storage.nas.zoneId: 'cn-hangzhou-i' has no vSwitch for the mount target; use one of "
        "['cn-hangzhou-k', 'cn-hangzhou-j']",
    ),
    (
        "job in another namespace",
        {"jobs.0.namespace": "team-b"},
        "ack-training-platform:jobs[0].namespace: the data and output claims and the pull secret live in "
        "training.namespace ('training'), so pods in 'team-b' could not start: drop namespace, or set "
        "training.namespace",
    ),
    (
        "finished jobs deleted by a TTL",
        {"jobs.0.runPolicy": {"ttlSecondsAfterFinished": 60}},
        "ack-training-platform:jobs[0].runPolicy.ttlSecondsAfterFinished: a job the operator deletes after it "
        "finishes would be created and trained again by the next pulumi up --refresh: drop the TTL and remove the "
        "job from the stack when you are done with it (cleanPodPolicy frees its pods)",
    ),
    (
        "image mirror with a scheme",
        {"imageMirror": "https://registry.example.com/mirror"},
        "ack-training-platform:imageMirror: 'https://registry.example.com/mirror' is not a registry path: write "
        "host/namespace without scheme or tag, e.g. 'registry-vpc.cn-hangzhou.aliyuncs.com/mirror'",
    ),
    (
        "region given as a list",
        {"alicloud:region": ["cn-hangzhou"]},
        "alicloud:region: a region id such as 'cn-hangzhou' (got ['cn-hangzhou'])",
    ),
    (
        "v2 on a cluster older than 1.31",
        {"cluster.version": "1.30.7-aliyun.1", "training.backend": "v2"},
        "ack-training-platform:cluster.version: Kubernetes 1.30.7-aliyun.1 is too old for Trainer v2, which needs "
        "1.31 or later: raise cluster.version, or keep the jobs on backend v1 (training.backend, jobs[].backend)",
    ),
    (
        "v2 release tag",
        {"trainerV2.version": "v1.9.4"},
        "ack-training-platform:trainerV2.version: 'v1.9.4' is not a Trainer v2 release tag: pin one such as 'v2.3.0'",
    ),
    (
        "elastic job on v2",
        {"jobs.0.backend": "v2", "jobs.0.elastic": {"minNodes": 1, "maxNodes": 2}},
        "ack-training-platform:jobs[0].elastic: Trainer v2 has no elastic training (v2.3.0 runs a fixed numNodes): "
        "give a fixed nodes instead, or keep the job on backend v1",
    ),
    (
        "restart policy on v2",
        {"jobs.0.backend": "v2", "jobs.0.restartPolicy": "ExitCode"},
        "ack-training-platform:jobs[0].restartPolicy: a TrainJob has no restart policy: the platform runtime "
        "restarts all of a job's pods together after a failure, which resumes from the last checkpoint; drop "
        "restartPolicy, or keep the job on backend v1",
    ),
    (
        "backoff limit on v2",
        {"jobs.0.backend": "v2", "jobs.0.runPolicy": {"backoffLimit": 2}},
        "ack-training-platform:jobs[0].runPolicy.backoffLimit: a TrainJob has no backoff limit of its own: the "
        "platform runtime allows 6 restarts of the whole job; drop backoffLimit, or keep the job on backend v1",
    ),
    (
        "clean pod policy on v2",
        {"jobs.0.backend": "v2", "jobs.0.runPolicy": {"cleanPodPolicy": "All"}},
        "ack-training-platform:jobs[0].runPolicy.cleanPodPolicy: a TrainJob keeps its finished pods until the job "
        "is removed from the stack; drop cleanPodPolicy, or keep the job on backend v1",
    ),
    (
        "Volcano queue on v2",
        {"jobs.0.backend": "v2", "jobs.0.scheduling": {"queue": "default"}},
        "ack-training-platform:jobs[0].scheduling.queue: a Volcano queue has no counterpart for a TrainJob: queue "
        "v2 jobs with Kueue (trainerV2.kueue.enabled: true, which puts every v2 job in the platform's queue) and "
        "drop queue, or keep the job on backend v1",
    ),
    (
        "gang size on v2",
        {"jobs.0.backend": "v2", "jobs.0.scheduling": {"minAvailable": 1}},
        "ack-training-platform:jobs[0].scheduling.minAvailable: a Volcano gang size has no counterpart for a "
        "TrainJob: with trainerV2.kueue.enabled Kueue admits all of a job's pods together; drop minAvailable, or "
        "keep the job on backend v1",
    ),
    (
        "priority class on v2 without Kueue's",
        {"jobs.0.backend": "v2", "jobs.0.scheduling": {"priorityClass": "high"}},
        "ack-training-platform:jobs[0].scheduling.priorityClass: 'high': a TrainJob's priority is a Kueue "
        "WorkloadPriorityClass (its runtime patches cannot set a pod priority class): declare it in "
        "trainerV2.kueue.priorities (none declared) with trainerV2.kueue.enabled: true",
    ),
    (
        "priority class on v2 that Kueue does not have",
        {
            "jobs.0.backend": "v2",
            "jobs.0.scheduling": {"priorityClass": "high"},
            "trainerV2": {"kueue": {"enabled": True, "priorities": {"urgent": 1000}}},
        },
        "ack-training-platform:jobs[0].scheduling.priorityClass: 'high': a TrainJob's priority is a Kueue "
        "WorkloadPriorityClass (its runtime patches cannot set a pod priority class): declare it in "
        "trainerV2.kueue.priorities (['urgent']) with trainerV2.kueue.enabled: true",
    ),
    (
        "a pending alert Kueue would pre-empt",
        {
            "training": {"backend": "v2"},
            "trainerV2": {"kueue": {"enabled": True, "podsReadyTimeoutMinutes": 15}},
            "monitoring": {"alerts": {"pendingMinutes": 20}},
        },
        "ack-training-platform:monitoring.alerts.pendingMinutes: 20 minutes would never pass: Kueue evicts and "
        "requeues a job whose pods wait trainerV2.kueue.podsReadyTimeoutMinutes (15), so give less than that",
    ),
    (
        "a Kueue priority beyond int32",
        {"trainerV2": {"kueue": {"enabled": True, "priorities": {"urgent": 2**31}}}},
        "ack-training-platform:trainerV2.kueue.priorities.urgent: Input should be less than 2147483648 (got 2147483648)",
    ),
    (
        "torchrun's variables on v2",
        {"jobs.0.backend": "v2", "jobs.0.env": {"PET_NNODES": "2", "PET_RDZV_BACKEND": "c10d", "OMP": "1"}},
        "ack-training-platform:jobs[0].env: PET_NNODES, PET_RDZV_BACKEND: Trainer v2 sets torchrun's PET_* "
        "variables itself (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT) and "
        "torchrun reads any other as a flag; drop them and give torchrun flags in command",
    ),
    (
        "stack default v2 applies the same rules",
        {"training.backend": "v2", "jobs.0.restartPolicy": "Never"},
        "ack-training-platform:jobs[0].restartPolicy: a TrainJob has no restart policy: the platform runtime "
        "restarts all of a job's pods together after a failure, which resumes from the last checkpoint; drop "
        "restartPolicy, or keep the job on backend v1 (training.backend is v2)",
    ),
    (
        "suspend with Kueue",
        {"training.backend": "v2", "trainerV2.kueue": {"enabled": True}, "jobs.0.runPolicy": {"suspend": True}},
        "ack-training-platform:jobs[0].runPolicy.suspend: Kueue suspends and resumes queued TrainJobs itself "
        "(trainerV2.kueue.enabled): drop suspend, and stop a queued job by deactivating its Kueue Workload "
        "(spec.active: false)",
    ),
    (
        "a topology key Kueue's topology lacks",
        {
            "training.backend": "v2",
            "gpuPool.minSize": 1,
            "trainerV2.kueue": {"enabled": True, "topology": {}},
            "jobs.0.topology": {"key": "alibabacloud.com/asw-id", "mode": "required"},
        },
        "ack-training-platform:jobs[0].topology.key: 'alibabacloud.com/asw-id' is not a level of Kueue's topology, "
        "so the job would never be admitted: use one of ['topology.kubernetes.io/zone', 'kubernetes.io/hostname'] "
        "(trainerV2.kueue.topology.levels, above kubernetes.io/hostname)",
    ),
    (
        "Kueue's topology over a pool that scales from zero",
        {"training.backend": "v2", "trainerV2.kueue": {"enabled": True, "topology": {}}},
        "ack-training-platform:gpuPool.minSize: 0 nodes: Kueue's topology-aware scheduling admits a GPU job only "
        "onto nodes that exist, so the autoscaler is never asked for the first one; give minSize the nodes of the "
        "largest v2 GPU job, or drop trainerV2.kueue.topology",
    ),
    (
        "a placed job larger than the nodes the pool keeps",
        {
            "training.backend": "v2",
            "gpuPool.minSize": 1,
            "trainerV2.kueue": {"enabled": True, "topology": {}},
            "jobs.0.nodes": 2,
        },
        "ack-training-platform:jobs[0].nodes: 2 nodes, but the GPU pool keeps 1 (gpuPool.minSize) and Kueue's "
        "topology-aware scheduling (trainerV2.kueue.topology) admits a job only onto nodes that exist: raise minSize",
    ),
    (
        "Kueue's topology without Kueue",
        {"training.backend": "v2", "trainerV2.kueue": {"topology": {}}},
        "ack-training-platform:trainerV2.kueue.topology: topology-aware scheduling is Kueue's: set "
        "trainerV2.kueue.enabled: true, or drop it",
    ),
    (
        "the host as a topology level",
        {
            "training.backend": "v2",
            "trainerV2.kueue": {
                "enabled": True,
                "topology": {"levels": ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]},
            },
        },
        "ack-training-platform:trainerV2.kueue.topology.levels[1]: kubernetes.io/hostname is always the lowest "
        "level, added by the platform: drop it",
    ),
    (
        "a topology level twice",
        {"trainerV2.kueue": {"topology": {"levels": ["alibabacloud.com/asw-id", "alibabacloud.com/asw-id"]}}},
        "ack-training-platform:trainerV2.kueue.topology.levels[1]: 'alibabacloud.com/asw-id' is listed twice: "
        "each level once",
    ),
    (
        "Kueue without v2 jobs",
        {"trainerV2.kueue": {"enabled": True}},
        "ack-training-platform:trainerV2.kueue.enabled: Kueue queues v2 jobs only and no job runs on backend v2: "
        "set training.backend: v2 (or a job's backend: v2), or drop kueue",
    ),
    (
        "unknown backend",
        {"jobs.0.backend": "v3"},
        "ack-training-platform:jobs[0].backend: Input should be 'v1' or 'v2' (got 'v3')",
    ),
    (
        "unknown Prometheus",
        {"monitoring.prometheus": "thanos"},
        "ack-training-platform:monitoring.prometheus: Input should be 'arms', 'operator' or 'none' (got 'thanos')",
    ),
    (
        "misspelled alert threshold",
        {"monitoring.alerts": {"noProgressMinute": 10}},
        "ack-training-platform:monitoring.alerts.noProgressMinute: unknown key; did you mean 'noProgressMinutes'? "
        "valid keys: checkpointIntervals, minBusBandwidthGbps, minBusBandwidthOfBaseline, minMfu, noProgressMinutes, pendingMinutes, restartsPerHour",
    ),
    (
        "no-progress window too short",
        {"monitoring.alerts": {"noProgressMinutes": 1}},
        "ack-training-platform:monitoring.alerts.noProgressMinutes: Input should be greater than or equal to 5 (got 1)",
    ),
    (
        "MFU as a percentage",
        {"monitoring.alerts": {"minMfu": 30}},
        "ack-training-platform:monitoring.alerts.minMfu: Input should be less than 1 (got 30)",
    ),
    (
        "one checkpoint interval",
        {"monitoring.alerts": {"checkpointIntervals": 1}},
        "ack-training-platform:monitoring.alerts.checkpointIntervals: Input should be greater than or equal to 2 (got 1)",
    ),
    (
        "TensorBoard image twice",
        {"monitoring.tensorboard": {"image": "trainer:0.1.0", "imageTag": "v0.1.0"}},
        "ack-training-platform:monitoring.tensorboard.image: give image or imageTag, not both: drop one of them",
    ),
    (
        "TensorBoard asked for without an image",
        {"jobs": [], "monitoring.tensorboard": {"enabled": True}},
        "ack-training-platform:monitoring.tensorboard.image: TensorBoard runs from the training image, and the "
        "stack has no job to take it from: give image (or imageTag), or set enabled: false",
    ),
    (
        "TensorBoard tag without a registry",
        {"registry": None, "jobs": [], "monitoring.tensorboard": {"imageTag": "v0.1.0"}},
        "ack-training-platform:monitoring.tensorboard.imageTag: imageTag needs a registry; without one give a "
        "full image reference in image",
    ),
    (
        "TensorBoard image not pinned",
        {"monitoring.tensorboard": {"image": "tensorflow/tensorflow:latest"}},
        "ack-training-platform:monitoring.tensorboard.image: 'tensorflow/tensorflow:latest' is not pinned: add a "
        "version tag other than 'latest' (e.g. ':v1.2.0') or a digest (@sha256:...)",
    ),
    (
        "TensorBoard tag not pinned",
        {"monitoring.tensorboard": {"imageTag": "latest"}},
        "ack-training-platform:monitoring.tensorboard.imageTag: 'latest' is not a pinned tag: use a version such "
        "as 'v1.2.0' or a commit id, not 'latest'",
    ),
    (
        "monitoring labels with ARMS",
        {"monitoring.labels": {"release": "kube-prometheus-stack"}},
        "ack-training-platform:monitoring.labels: labels select the PodMonitors, PrometheusRule and dashboard "
        "ConfigMap for a prometheus-operator, and with prometheus: arms there are none to carry them: drop labels, "
        "or set prometheus: operator",
    ),
    (
        "cluster version with a v",
        {"cluster.version": "v1.33.1-aliyun.1"},
        "ack-training-platform:cluster.version: 'v1.33.1-aliyun.1' is not an ACK version: write it as ACK lists "
        "it, without 'v' ('1.33.1-aliyun.1')",
    ),
    (
        "cluster version not as ACK names it",
        {"cluster.version": "1.33"},
        "ack-training-platform:cluster.version: '1.33' is not an ACK version: write it as ACK lists it, without "
        "'v' (e.g. '1.33.1-aliyun.1')",
    ),
    (
        "VPC name for its id",
        {"network": {"vpcId": "training-vpc", "vswitchIds": ["vsw-bp1a"], "vpcCidr": "10.0.0.0/8"}},
        "ack-training-platform:network.vpcId: 'training-vpc' is not a VPC id: give the id (vpc-...) the VPC "
        "console lists",
    ),
    (
        "vSwitch name for its id",
        {"network": {"vpcId": "vpc-bp1a", "vswitchIds": ["vsw-bp1a", "gpu-k"], "vpcCidr": "10.0.0.0/8"}},
        "ack-training-platform:network.vswitchIds[1]: 'gpu-k' is not a vSwitch id: give the id (vsw-...) the VPC "
        "console lists",
    ),
    (
        "zone of another region",
        {"network.vswitches.1.zoneId": "cn-beijing-j"},
        "ack-training-platform:network.vswitches[1].zoneId: 'cn-beijing-j' is not a zone of cn-hangzhou "
        "(alicloud:region): use one such as 'cn-hangzhou-a'",
    ),
    (
        "NAS zone of another region",
        {
            "storage.nas": {
                "fileSystemType": "extreme",
                "storageType": "standard",
                "capacityGib": 100,
                "zoneId": "cn-shanghai-k",
            }
        },
        "ack-training-platform:storage.nas.zoneId: 'cn-shanghai-k' is not a zone of cn-hangzhou (alicloud:region): "
        "use one such as 'cn-hangzhou-a'",
    ),
    (
        "driver version latest",
        {"gpuPool.driverVersion": "latest"},
        "ack-training-platform:gpuPool.driverVersion: 'latest' is not an NVIDIA driver version: pin one ACK "
        "offers, e.g. '550.127.08', or drop driverVersion for ACK's default",
    ),
    (
        "node capacity above the instance's",
        {"gpuPool.nodeCapacity": {"cpu": "8", "memory": "64Gi"}},
        "ack-training-platform:gpuPool.nodeCapacity.memory: 64Gi is more than the smallest of "
        "ecs.gn7i-c8g1.2xlarge, ecs.gn7i-c16g1.4xlarge has (30Gi memory): give a node's Allocatable (kubectl "
        "describe node), which is less",
    ),
    (
        "final model outside the output volume",
        {"jobs.0.trainer.finalModelPath": "/models/final.pt"},
        "ack-training-platform:jobs[0].trainer.finalModelPath: '/models/final.pt' is not on the output volume, "
        "the pod's only lasting place to write: give a path under /mnt/output/, or drop it for final_model.pt in "
        "the job's output directory",
    ),
    (
        "final model climbing out of the output volume",
        {"jobs.0.trainer.finalModelPath": "/mnt/output/../final.pt"},
        "ack-training-platform:jobs[0].trainer.finalModelPath: '/mnt/output/../final.pt' is not on the output "
        "volume, the pod's only lasting place to write: give a path under /mnt/output/, or drop it for "
        "final_model.pt in the job's output directory",
    ),
    (
        "a model that is neither built in nor a factory",
        {"jobs.0.trainer.model": "my_models/net.py"},
        "ack-training-platform:jobs[0].trainer.model: model 'my_models/net.py': choose cnn, gpt or llama, or name "
        "your own model's factory as package.module:factory (importable from the job's code)",
    ),
    (
        "a factory with a line break after it",
        {"jobs.0.trainer.model": "own_models.mixer:factory\n"},
        "ack-training-platform:jobs[0].trainer.model: model 'own_models.mixer:factory\\n': choose cnn, gpt or "
        "llama, or name your own model's factory as package.module:factory (importable from the job's code)",
    ),
    (
        "initial weights outside the volumes",
        {"jobs.0.trainer.initFrom": "/home/me/base.pt"},
        "ack-training-platform:jobs[0].trainer.initFrom: '/home/me/base.pt' is on neither volume the pod mounts: "
        "give a path under /mnt/data/ or /mnt/output/",
    ),
    (
        "python launcher with several processes",
        {"jobs.0.launcher": "python", "jobs.0.command": ["train.py"], "jobs.0.procsPerNode": 2},
        "ack-training-platform:jobs[0].procsPerNode: launcher python starts one process per pod: use launcher "
        "torchrun for several, or procsPerNode: 1",
    ),
    (
        "python launcher on a whole multi-GPU node",
        {
            "gpuPool.instanceTypes": ["ecs.ebmgn8v.48xlarge"],
            "gpuPool.gpusPerNode": 8,
            "training.gpuQuota": 8,
            "jobs.0.launcher": "python",
            "jobs.0.command": ["train.py"],
        },
        "ack-training-platform:jobs[0].gpusPerNode: 8 GPUs per pod, and launcher python starts one process, which "
        "drives one of them: use launcher torchrun, or gpusPerNode: 1",
    ),
    (
        "images by tag without a word on ACK",
        {"imageLock": "tag"},
        "ack-training-platform:imageLock: tag pulls third-party images by tag without a word, which only a local "
        "cluster may: use warn, or require once python -m components.upstream lock-images has locked them",
    ),
    (
        "Kueue priorities without Kueue",
        {"trainerV2.kueue.priorities": {"urgent": 1000}},
        "ack-training-platform:trainerV2.kueue.priorities: WorkloadPriorityClasses order Kueue's queue, and Kueue "
        "is off: set enabled: true, or drop priorities (a v1 job takes a pod PriorityClass in "
        "scheduling.priorityClass)",
    ),
    (
        "two teams with one gid",
        {
            "cluster.network": "terway",
            "jobs.0.team": "vision",
            "teams": [
                {"name": "vision", "uid": 2000, "quota": {"gpus": 2, "cpu": "16", "memory": "64Gi"}},
                {"name": "speech", "uid": 2001, "gid": 2000, "quota": {"gpus": 2, "cpu": "16", "memory": "64Gi"}},
            ],
        },
        "ack-training-platform:teams[1].gid: gid 2000 is also 'vision''s: a team's NAS directories are open to "
        "its group (output 0770, data 0750), so each team needs a gid of its own",
    ),
    (
        "pod larger than the smallest node of the pool",
        {"jobs.0.memory": "30Gi"},
        "ack-training-platform:jobs[0].memory: memory 30Gi per pod does not fit a node of pool 'gpu': the smallest "
        "of ecs.gn7i-c8g1.2xlarge, ecs.gn7i-c16g1.4xlarge has 30Gi, of which ACK keeps a part for the system, and "
        "the autoscaler adds no node for a pod that cannot fit; ask for less, or give gpuPool.nodeCapacity (a "
        "node's Allocatable, kubectl describe node)",
    ),
    (
        "pod asking every vCPU of the node",
        {"jobs.0.cpu": 8},
        "ack-training-platform:jobs[0].cpu: cpu 8 per pod does not fit a node of pool 'gpu': the smallest of "
        "ecs.gn7i-c8g1.2xlarge, ecs.gn7i-c16g1.4xlarge has 8, of which ACK keeps a part for the system, and the "
        "autoscaler adds no node for a pod that cannot fit; ask for less, or give gpuPool.nodeCapacity (a node's "
        "Allocatable, kubectl describe node)",
    ),
    (
        "pod larger than the given allocatable",
        {"gpuPool.nodeCapacity": {"cpu": "7800m", "memory": "26Gi"}, "jobs.0.cpu": "7900m"},
        "ack-training-platform:jobs[0].cpu: cpu 7900m per pod does not fit a node of pool 'gpu', which can "
        "allocate 7800m to pods (gpuPool.nodeCapacity): ask for at most that",
    ),
    (
        "pods that share a node by their GPUs but not by their memory",
        {
            "gpuPool.instanceTypes": ["ecs.ebmgn8v.48xlarge"],
            "gpuPool.gpusPerNode": 8,
            "jobs.0.nodes": 2,
            "jobs.0.gpusPerNode": 4,
            "jobs.0.cpu": 64,
            "jobs.0.memory": "600Gi",
        },
        "ack-training-platform:jobs[0].memory: 2 pods of the job share a node of pool 'gpu' by their GPUs, but "
        "together ask for 1200Gi memory and ecs.ebmgn8v.48xlarge has 1024Gi: ask for less than 512Gi per pod, or "
        "give each pod a whole node's GPUs",
    ),
    (
        "job leaving memory to the default on an instance type the platform cannot size",
        {"gpuPool.instanceTypes": ["ecs.gu8tf.8xlarge"], "jobs.0.memory": DELETE},
        "ack-training-platform:jobs[0].memory: the GPU job leaves memory to the default, and no default can follow "
        "a node of pool 'gpu', whose instance types the platform's table does not list: give the job's cpu and "
        "memory per pod (checked against what ECS lists for the types only by the platform stack's pulumi "
        "preview, not for a TrainingJob or TeamTraining given a pool), or give gpuPool.nodeCapacity (a node's "
        "Allocatable, kubectl describe node)",
    ),
    (
        "misspelt size of a family the table lists in full",
        {"gpuPool.instanceTypes": ["ecs.gn7i-c8g1.4xlarge"]},
        "ack-training-platform:gpuPool.instanceTypes[0]: ecs.gn7i-c8g1.4xlarge is no gn7i type of ECS's family "
        "page (docs/configuration.md, GPU instance types): did you mean ecs.gn7i-c8g1.2xlarge, "
        "ecs.gn7i-c16g1.4xlarge, ecs.gn7i-c56g1.14xlarge? If ECS sells it and the page does not list it, give "
        "nodeCapacity (a node's Allocatable, kubectl describe node)",
    ),
    (
        "instance type with other GPUs than the pool says",
        {"gpuPool.gpusPerNode": 8, "training.gpuQuota": 8},
        "ack-training-platform:gpuPool.gpusPerNode: gpusPerNode is 8 but ecs.gn7i-c8g1.2xlarge has 1, "
        "ecs.gn7i-c16g1.4xlarge has 1: every instance type of the pool must have gpusPerNode GPUs",
    ),
    (
        "runtime image not pinned",
        {"trainerV2.runtimeImage": "registry.example.com/ml/trainer:latest"},
        "ack-training-platform:trainerV2.runtimeImage: 'registry.example.com/ml/trainer:latest' is not pinned: add a "
        "version tag other than 'latest' (e.g. ':v1.2.0') or a digest (@sha256:...)",
    ),
    (
        "runtime image twice",
        {"trainerV2.runtimeImage": "registry.example.com/ml/trainer:v1", "trainerV2.runtimeImageTag": "v1"},
        "ack-training-platform:trainerV2.runtimeImage: give runtimeImage or runtimeImageTag, not both: drop one of them",
    ),
    (
        "pip index that is no URL",
        {"trainerV2.pipIndexUrl": "mirrors.aliyun.com/pypi"},
        "ack-training-platform:trainerV2.pipIndexUrl: 'mirrors.aliyun.com/pypi' is not an index URL: give one such "
        "as 'https://mirrors.aliyun.com/pypi/simple/'",
    ),
    (
        "wrong type",
        {"gpuPool.maxSize": "many"},
        "ack-training-platform:gpuPool.maxSize: Input should be a valid integer, unable to parse string as an integer (got 'many')",
    ),
]


@pytest.mark.parametrize(("case", "changes", "message"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_config_names_the_key(case: str, changes: dict[str, Any], message: str) -> None:
    config = dev()
    if changes.get("alicloud:region") is DELETE:
        del config["alicloud:region"]
    elif "alicloud:region" in changes:
        config["alicloud:region"] = changes["alicloud:region"]
    elif changes.get("registryPassword") is DELETE:
        config[cfg("registry")]["username"] = "ml-pull@example.com"
    else:
        config = dev(**changes)
    if changes.get("registryPassword") is DELETE:
        with pytest.raises(ConfigError) as raised:
            load_spec(config)
    else:
        with pytest.raises(ConfigError) as raised:
            validate(config)
    assert raised.value.problems == [message]


def test_a_runtime_image_tag_needs_a_registry() -> None:
    config = stack_config("local")
    config[cfg("trainerV2")] = {"runtimeImageTag": "v1.4.0"}
    with pytest.raises(ConfigError) as raised:
        load_spec(config)
    assert raised.value.problems == [
        "ack-training-platform:trainerV2.runtimeImageTag: runtimeImageTag needs a registry; without one give a full "
        "image reference in runtimeImage"
    ]


def test_the_runtimes_take_the_first_jobs_image_unless_given_one() -> None:
    spec = validate(dev())
    assert spec.runtime_image() == (spec.jobs[0].image, spec.jobs[0].image_tag)
    own = "registry.example.com/ml/trainer:v1.4.0@sha256:" + "4" * 64
    assert validate(dev(**{"trainerV2.runtimeImage": own})).runtime_image() == (own, None)
    assert validate(dev(**{"trainerV2.runtimeImageTag": "v2"})).runtime_image() == (None, "v2")


def test_zones_of_regions_named_with_a_number_have_no_dash_before_the_letter() -> None:
    # Singapore's zones are ap-southeast-1a to 1c; a dash there names no zone.
    config = dev(**{"network.vswitches.0.zoneId": "ap-southeast-1c", "network.vswitches.1.zoneId": "ap-southeast-1a"})
    config["alicloud:region"] = "ap-southeast-1"
    assert [v.zone_id for v in validate(config).network.vswitches] == ["ap-southeast-1c", "ap-southeast-1a"]
    config = dev(**{"network.vswitches.0.zoneId": "ap-southeast-1-c"})
    config["alicloud:region"] = "ap-southeast-1"
    with pytest.raises(ConfigError) as raised:
        validate(config)
    assert raised.value.problems == [
        "ack-training-platform:network.vswitches[0].zoneId: 'ap-southeast-1-c' is not a zone of ap-southeast-1 "
        "(alicloud:region): use one such as 'ap-southeast-1a'"
    ]


def test_arms_needs_an_ack_cluster() -> None:
    config = stack_config("local")
    config[cfg("monitoring")] = {"prometheus": "arms"}
    with pytest.raises(ConfigError) as raised:
        load_spec(config)
    assert raised.value.problems == [
        "ack-training-platform:monitoring.prometheus: ARMS is ACK's managed Prometheus and a local cluster has "
        "none: use operator (a prometheus-operator running in the cluster) or none"
    ]


def test_prometheus_defaults_to_arms_on_ack_and_none_locally() -> None:
    for stack, mode in (("local", "none"), ("dev", "arms")):
        config = stack_config(stack)
        config.pop(cfg("monitoring"), None)
        assert load_spec(config, credentials=False).prometheus == mode


def test_one_key_moves_every_job_to_v2_and_a_job_can_stay_on_v1() -> None:
    spec = validate(dev(**{"training.backend": "v2", "cluster.version": "1.31.1-aliyun.1"}))
    assert [spec.job_backend(job) for job in spec.jobs] == ["v2"]
    assert spec.uses_trainer_v2 and spec.installs_trainer_v2
    pinned = validate(dev(**{"training.backend": "v2", "jobs.0.backend": "v1", "jobs.0.restartPolicy": "ExitCode"}))
    assert [pinned.job_backend(job) for job in pinned.jobs] == ["v1"]
    assert not pinned.uses_trainer_v2


def test_trainer_v2_is_installed_only_when_used_or_asked_for() -> None:
    assert not validate(dev()).uses_trainer_v2
    assert validate(dev(**{"trainerV2.install": True})).installs_trainer_v2
    adopted = validate(dev(**{"jobs.0.backend": "v2", "trainerV2.install": False}))
    assert adopted.uses_trainer_v2 and not adopted.installs_trainer_v2


def test_local_stack_refuses_cloud_resources() -> None:
    config = stack_config("local")
    config[cfg("gpuPool")] = {"instanceTypes": ["ecs.gn7i-c8g1.2xlarge"], "gpusPerNode": 1}
    with pytest.raises(ConfigError) as raised:
        load_spec(config)
    assert raised.value.problems == [
        "ack-training-platform:gpuPool: a local cluster (cluster.local) creates no cloud resources: remove gpuPool"
    ]


def test_gpu_job_without_gpu_pool_is_rejected() -> None:
    config = stack_config("local")
    config[cfg("jobs")][0].update(gpusPerNode=1, procsPerNode=None)
    with pytest.raises(ConfigError) as raised:
        load_spec(config)
    assert raised.value.problems == [
        "ack-training-platform:jobs[0].gpusPerNode: the job asks for 1 GPUs per node but the stack has no gpuPool; "
        "set gpusPerNode: 0 for a CPU job"
    ]


def test_several_problems_are_reported_together() -> None:
    config = dev(**{"gpuPool.maxSise": 3, "training.gpuQuota": -1})
    with pytest.raises(ConfigError) as raised:
        validate(config)
    assert len(raised.value.problems) == 2
    assert str(raised.value).startswith("invalid stack configuration:\n  ack-training-platform:")


def test_docs_reference_is_generated_from_the_models() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    block = page.split(START, 1)[1].split(END, 1)[0].strip()
    assert block == reference(), "docs/configuration.md is stale: run python -m components.package.reference --write"


def test_numbers_kubernetes_users_write_are_accepted() -> None:
    # What `pulumi config set --path jobs[0].cpu 6` stores, and plain Kubernetes YAML.
    config = dev(
        **{
            "jobs.0.cpu": 6,
            "jobs.0.memory": 25769803776,
            "jobs.0.env": {"EPOCHS": 3, "LR": 0.001, "DEBUG": True},
            "gpuPool.labels": {"generation": 8},
            "jobs.0.shmSize": 1073741824,
        }
    )
    job = validate(config).jobs[0]
    assert (job.cpu, job.memory, job.shm_size) == ("6", "25769803776", "1073741824")
    assert job.env == {"EPOCHS": "3", "LR": "0.001", "DEBUG": "true"}


def test_near_miss_of_the_config_namespace_is_named() -> None:
    config = stack_config("dev")
    config["ack-training-platfrom:jobs"] = config.pop(cfg("jobs"))
    with pytest.raises(ConfigError) as raised:
        validate(config)
    assert raised.value.problems == [
        "ack-training-platfrom:jobs: unknown config namespace 'ack-training-platfrom'; did you mean "
        "'ack-training-platform:'? (run: pulumi config rm ack-training-platfrom:jobs, then set "
        "ack-training-platform:jobs)"
    ]


def test_credentials_must_be_secrets() -> None:
    config = stack_config("dev")
    config[cfg("registryPassword")] = "hunter2"
    with pytest.raises(ConfigError) as raised:
        load_spec(config, secret_keys=[])
    assert raised.value.problems == [
        "ack-training-platform:registryPassword: a credential must be encrypted; "
        "run: pulumi config set --secret registryPassword <value>"
    ]
    assert validate(dev()).registry.username  # the same key, encrypted, is fine


def test_extreme_nas_takes_the_first_vswitch_zone_and_lives_under_share() -> None:
    config = dev(**{"storage.nas": {"fileSystemType": "extreme", "storageType": "standard", "capacityGib": 100}})
    spec = validate(config)
    assert spec.nas_zone == "cn-hangzhou-k" and spec.nas_vswitch == 0
    assert spec.storage.nas.volume_root == "/share/training"
    config = dev(
        **{
            "storage.nas": {
                "fileSystemType": "extreme",
                "storageType": "advance",
                "capacityGib": 100,
                "zoneId": "cn-hangzhou-j",
            }
        }
    )
    assert validate(config).nas_vswitch == 1


def test_default_shm_never_crowds_out_the_pod() -> None:
    # 8 GPUs want 128Gi of /dev/shm; a pod of the default 64Gi gets half of its memory.
    from components.config import job_shm_size

    prod = validate(stack_config("prod"))
    job = prod.jobs[0].model_copy(update={"memory": "64Gi"})
    assert job_shm_size(job, 8) == "32Gi"
    assert job_shm_size(prod.jobs[0], 8) == "128Gi"  # 900Gi of memory has room for it
    assert job_shm_size(job, 0) == "2Gi"


def test_pods_that_fit_a_node_together_need_fewer_nodes() -> None:
    eight_gpus = {"gpuPool.gpusPerNode": 8, "gpuPool.instanceTypes": ["ecs.ebmgn8v.48xlarge"], "gpuPool.maxSize": 1}
    config = dev(**eight_gpus, **{"jobs.0.nodes": 2, "jobs.0.gpusPerNode": 4})
    config[cfg("training")]["gpuQuota"] = 8
    assert validate(config).jobs[0].nodes == 2  # two 4-GPU pods share one 8-GPU node
    # eRDMA pods too: they are on the pod network, where two pods of a job bind no common port.
    config[cfg("gpuPool")].update(fabric="erdma")
    config[cfg("jobs")][0]["network"] = "rdma"
    assert validate(config).jobs[0].nodes == 2
    config[cfg("jobs")][0]["nodes"] = 3
    with pytest.raises(ConfigError) as raised:
        validate(config)
    assert raised.value.problems == [
        "ack-training-platform:jobs[0].nodes: the job's 3 pods need 2 GPU nodes but gpuPool.maxSize is 1: "
        "raise maxSize or run fewer nodes"
    ]


def test_adopted_cluster_refuses_system_pool_settings() -> None:
    config = dev(**{"cluster": {"existingClusterId": "c-1", "systemPool": {"size": 3}}})
    config[cfg("network")] = {"vpcId": "vpc-1", "vswitchIds": ["vsw-1"], "vpcCidr": "10.0.0.0/8"}
    with pytest.raises(ConfigError) as raised:
        validate(config)
    assert raised.value.problems == [
        "ack-training-platform:cluster.systemPool.size: size has no effect with an adopted cluster "
        "(existingClusterId): drop it"
    ]


def test_jobs_fit_the_nodes_they_ask_for() -> None:
    # prod's pods leave room on an ebmgn8v.48xlarge (192 vCPUs, 1024 GiB) for what ACK reserves.
    prod = validate(stack_config("prod"))
    node = prod.gpu_pool.node_share
    assert (node.millicpu, node.memory, node.exact) == (192_000, 1024 * 2**30, False)
    # A measured Allocatable may be used up exactly.
    config = dev(**{"gpuPool.nodeCapacity": {"cpu": "7800m", "memory": "26Gi"}, "jobs.0.cpu": "7800m"})
    config[cfg("jobs")][0]["memory"] = "26Gi"
    assert validate(config).jobs[0].memory == "26Gi"
    # The smallest of the pool's instance types decides.
    config = dev(**{"gpuPool.instanceTypes": ["ecs.gn7i-c16g1.4xlarge"], "jobs.0.cpu": 12, "jobs.0.memory": "48Gi"})
    assert validate(config).gpu_pool.node_share.memory == 60 * 2**30
    config[cfg("gpuPool")]["instanceTypes"].append("ecs.gn7i-c8g1.2xlarge")
    with pytest.raises(ConfigError) as raised:
        validate(config)
    assert raised.value.problems[0].startswith("ack-training-platform:jobs[0].cpu: cpu 12 per pod does not fit")


def test_a_spec_built_in_python_names_the_argument_as_python_does() -> None:
    from components.config import GpuPoolSpec, SpecError, TrainingJobSpec

    with pytest.raises(SpecError) as raised:
        GpuPoolSpec(instance_types=["ecs.gn7i-c8g1.2xlarge"], gpus_per_nod=1)
    assert raised.value.problems == [
        "gpus_per_node: required argument is missing",
        "gpus_per_nod: unknown argument; did you mean 'gpus_per_node'? valid: auto_repair, compensate_with_on_demand, "
        "data_disk_gib, desired_size, disk_category, driver_version, fabric, gpus_per_node, instance_types, labels, "
        "low_latency, max_size, min_size, name, node_capacity, spot_price_limit, spot_strategy, system_disk_gib, taint",
    ]
    assert str(raised.value).startswith("invalid GpuPoolSpec:\n  gpus_per_node: required argument is missing\n")
    assert raised.value.__suppress_context__  # pydantic's own report is not printed under it
    with pytest.raises(SpecError) as raised:
        TrainingJobSpec(
            name="x", image="trainer:1", trainer={"modle": "gpt"}, env={"B": {"secretKeyRef": {"name": "s"}}}
        )
    assert raised.value.problems == [
        "trainer.modle: unknown argument; did you mean 'model'? valid: batch_size, checkpoint_every, epochs, "
        "fabric_probe, final_model_path, init_from, llama_size, lr, max_steps, model, parallel, pp, synthetic_data, tp",
        "env['B'].secret_key_ref.key: required argument is missing",
    ]
    with pytest.raises(SpecError) as raised:
        GpuPoolSpec(instance_types=["ecs.gn7i-c8g1.2xlarge"], gpus_per_node=1, min_size=3)
    assert raised.value.problems == ["min_size: minSize (3) must not exceed maxSize (1)"]
    # Inside a stack the same model is still checked by stack key.
    with pytest.raises(ConfigError) as stack:
        validate(dev(**{"gpuPool.minSize": 3, "gpuPool.maxSize": 2}))
    assert stack.value.problems == ["ack-training-platform:gpuPool.minSize: minSize (3) must not exceed maxSize (2)"]

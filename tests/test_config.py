"""Stack configs either validate fully or fail naming the key, the value and the fix."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ROOT, STACKS, cfg, stack_config

from components.config import ConfigError, PlatformSpec, load_spec
from components.reference import END, START, reference


@pytest.mark.parametrize("stack", STACKS)
def test_every_shipped_stack_validates(stack: str) -> None:
    config = stack_config(stack)
    spec = load_spec(config)
    assert isinstance(spec, PlatformSpec)
    assert spec.is_local == (stack == "local")


def dev(**changes: Any) -> dict[str, Any]:
    """The dev stack with ``changes`` applied: keys are 'area.sub.key' paths."""
    config = stack_config("dev")
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
        "compensateWithOnDemand, dataDiskGib, desiredSize, diskCategory, driverVersion, gpusPerNode, instanceTypes, "
        "labels, maxSize, minSize, name, rdma, spotPriceLimit, spotStrategy, systemDiskGib, taint",
    ),
    (
        "unknown top-level key",
        {"gpuPol": {}},
        "ack-training-platform:gpuPol: unknown key; did you mean 'gpuPool'? valid keys: cluster, gpuPool, jobs, "
        "network, operator, registry, storage, training",
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
        "rdma on plain instances",
        {"gpuPool.rdma": True},
        "ack-training-platform:gpuPool.rdma: instance types ['ecs.gn7i-c8g1.2xlarge', 'ecs.gn7i-c16g1.4xlarge'] have no RDMA NIC; "
        "use families ecs.ebmgn7ex, ecs.ebmgn7e, ecs.ebmgn8v, ecs.ebmgn8is, ecs.gn8is, ecs.ebmgn8te",
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
        "rdma without rdma pool",
        {"jobs.0.network": "rdma"},
        "ack-training-platform:jobs[0].network: rdma networking needs a gpuPool with rdma: true",
    ),
    (
        "gang without volcano",
        {"jobs.0.scheduling": {"minAvailable": 1}},
        "ack-training-platform:jobs[0].scheduling: queues and gang scheduling need Volcano: set operator.volcano.enabled: true",
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
        "wrong type",
        {"gpuPool.maxSize": "many"},
        "ack-training-platform:gpuPool.maxSize: Input should be a valid integer, unable to parse string as an integer (got 'many')",
    ),
]


@pytest.mark.parametrize(("case", "changes", "message"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_config_names_the_key(case: str, changes: dict[str, Any], message: str) -> None:
    config = stack_config("dev")
    if changes.get("alicloud:region") is DELETE:
        del config["alicloud:region"]
    elif changes.get("registryPassword") is DELETE:
        config[cfg("registry")]["username"] = "ml-pull@example.com"
    else:
        config = dev(**changes)
    with pytest.raises(ConfigError) as raised:
        load_spec(config)
    assert raised.value.problems == [message]


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
        load_spec(config)
    assert len(raised.value.problems) == 2
    assert str(raised.value).startswith("invalid stack configuration:\n  ack-training-platform:")


def test_readme_reference_is_generated_from_the_models() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split(START, 1)[1].split(END, 1)[0].strip()
    assert block == reference(), "README is stale: run python -m components.reference --write"

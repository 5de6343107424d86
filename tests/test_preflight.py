"""The cloud look-ups a real preview makes before anything is created, answered here with
recorded shapes of the provider's results (the SDK's ``Get*Result`` types, wire names)."""

from __future__ import annotations

import pulumi
import pytest
from conftest import cfg, stack_config
from fixtures.ecs_instance_types import (
    QUOTED,
    SPOT_STRATEGY,
    ZONE_REFUSED,
    RefusedLookUp,
    by_spot_strategy,
    listed_type,
    zone_refused,
)
from pulumi_alicloud.ecs import outputs as ecs_outputs

from components.config.gpus.instance_data import LEFT_OUT
from components.preflight import CLUSTERS, INSTANCE_TYPES, NAS_ZONES, SWITCHES, VERSIONS

PROD_VSWITCH = "vsw-0jlp3zgdgalsyjm8g73ex"


def vswitch(zone: str) -> dict:
    """One vSwitch as DescribeVSwitches reports it through ``vpc.get_switches``."""
    return {
        "id": PROD_VSWITCH,
        "vswitchId": PROD_VSWITCH,
        "vswitchName": "training",
        "vpcId": "vpc-0jl6b5ykcjznb4rbcqkyv",
        "zoneId": zone,
        "cidrBlock": "10.0.0.0/16",
        "status": "Available",
    }


def nas_zone(zone: str, *storage_types: str) -> dict:
    return {"zoneId": zone, "instanceTypes": [{"storageType": t, "protocolType": "NFS"} for t in storage_types]}


A10 = listed_type(
    "ecs.gn7i-c16g1.4xlarge",
    family="ecs.gn7i",
    cpus=16,
    memory_gib=60,
    gpus=1,
    gpu_spec="NVIDIA A10",
    zones=["cn-hangzhou-k", "cn-hangzhou-j"],
)


EBMGN8V = listed_type(
    "ecs.ebmgn8v.48xlarge",
    family="ecs.ebmgn8v",
    cpus=192,
    memory_gib=1024,
    gpus=8,
    gpu_spec="NVIDIA GPU",
    zones=["cn-wulanchabu-c"],
)


def test_the_stand_in_answers_in_the_providers_shape() -> None:
    # Every name is one the SDK reads back from the wire (pulumi.getter names), with the type
    # data_source_alicloud_instance_types.go gives it (QUOTED): an int, a float, the GPUs as text.
    wire = {
        getattr(member.fget, "_pulumi_name", None)
        for member in vars(ecs_outputs.GetInstanceTypesInstanceTypeResult).values()
        if isinstance(member, property)
    }
    for listed in (A10, EBMGN8V, *unlisted_pool(LEFT_OUT[0])[1][INSTANCE_TYPES]["instanceTypes"]):
        assert set(listed) <= wire, set(listed) - wire
        assert set(QUOTED) <= set(listed)
        assert type(listed["cpuCoreCount"]) is int and type(listed["memorySize"]) is float
        assert listed["family"].startswith("ecs.")
        [gpu] = listed["gpus"]
        assert set(gpu) == {"amount", "category"} and gpu["amount"].isdigit()
    assert "strconv.Itoa" in QUOTED["gpus"] and "formatFloat64" in QUOTED["memorySize"]


def refused(run_stack, config: dict, stack: str, invokes: dict) -> list[str]:
    with pytest.raises(pulumi.RunError) as raised:
        run_stack(config, stack, invokes=invokes)
    header, *problems, hint = str(raised.value).splitlines()
    assert header == "invalid stack configuration:"
    assert hint == "(for a command that must go ahead regardless, such as a teardown: ACK_CLOUD_CHECKS=warn)"
    return [p.strip() for p in problems]


def test_the_shipped_stacks_pass_when_the_cloud_offers_what_they_ask_for(run_stack) -> None:
    prod = {
        SWITCHES: {"vswitches": [vswitch("cn-wulanchabu-c")]},
        NAS_ZONES: {"zones": [nas_zone("cn-wulanchabu-c", "Standard", "Advance")]},
        VERSIONS: {"clusterType": "ManagedKubernetes", "metadatas": [{"version": "1.33.1-aliyun.1", "runtimes": []}]},
        INSTANCE_TYPES: {"instanceTypes": [EBMGN8V]},
    }
    assert run_stack(stack_config("prod"), "prod", invokes=prod).of_type("alicloud:cs/nodePool:NodePool")


def test_jobs_must_fit_the_instance_type_as_ecs_lists_it(run_stack) -> None:
    smaller = {**EBMGN8V, "memorySize": 768.0}
    invokes = {SWITCHES: {"vswitches": [vswitch("cn-wulanchabu-c")]}, INSTANCE_TYPES: {"instanceTypes": [smaller]}}
    assert refused(run_stack, stack_config("prod"), "prod", invokes) == [
        f"ack-training-platform:jobs[{i}].memory: memory 900Gi per pod does not fit a node of pool 'gpu-erdma': "
        "ecs.ebmgn8v.48xlarge, as ECS lists it, has 768Gi, of which ACK keeps a part for the system, and the "
        "autoscaler adds no node for a pod that cannot fit; ask for less, or give gpuPool.nodeCapacity (a node's "
        "Allocatable, kubectl describe node)"
        for i in (0, 1)
    ] + [
        # Two 4-GPU pods of one job share an 8-GPU node, and ECS's node holds less than both ask for.
        "ack-training-platform:jobs[2].memory: 2 pods of the job share a node of pool 'gpu-erdma' by their GPUs, "
        "but together ask for 960Gi memory and ecs.ebmgn8v.48xlarge, as ECS lists it, has 768Gi: ask for less than "
        "384Gi per pod, or give each pod a whole node's GPUs"
    ]


def one_type_pool(**pool: object) -> dict:
    """The dev stack with a pool of ``ecs.gn7i-c8g1.2xlarge`` alone, so that one listed type answers."""
    config = stack_config("dev")
    config[cfg("gpuPool")].update(instanceTypes=["ecs.gn7i-c8g1.2xlarge"], **pool)
    return config


A10_SMALL = {**A10, "id": "ecs.gn7i-c8g1.2xlarge", "cpuCoreCount": 8, "memorySize": 30.0}


def test_node_capacity_above_what_ecs_lists_is_refused(run_stack) -> None:
    # Within the table's 30 GiB, but ECS, which wins at preview, lists less.
    config = one_type_pool(nodeCapacity={"cpu": "7", "memory": "29Gi"})
    config[cfg("jobs")][0].update(cpu="6", memory="24Gi")
    assert run_stack(config, "dev", invokes={INSTANCE_TYPES: {"instanceTypes": [A10_SMALL]}}).resources
    invokes = {INSTANCE_TYPES: {"instanceTypes": [{**A10_SMALL, "memorySize": 28.0}]}}
    assert refused(run_stack, config, "dev", invokes) == [
        "ack-training-platform:gpuPool.nodeCapacity.memory: 29Gi is more than ecs.gn7i-c8g1.2xlarge, as ECS lists "
        "it, has (28Gi memory): give a node's Allocatable (kubectl describe node), which is less"
    ]


def test_gpus_per_node_must_be_what_ecs_lists(run_stack) -> None:
    invokes = {INSTANCE_TYPES: {"instanceTypes": [{**A10_SMALL, "gpus": [{"amount": "2", "category": "NVIDIA A10"}]}]}}
    assert refused(run_stack, one_type_pool(), "dev", invokes) == [
        "ack-training-platform:gpuPool.gpusPerNode: gpusPerNode is 1 but, as ECS lists them, ecs.gn7i-c8g1.2xlarge "
        "has 2: every instance type of the pool must have gpusPerNode GPUs"
    ]


def test_a_version_ack_does_not_create_is_refused(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("cluster")]["version"] = "1.29.1-aliyun.1"
    asked = []

    def creatable(args: dict) -> dict:
        # Asked with a version, ACK would answer for any version it still supports.
        asked.append(args)
        return {"clusterType": "ManagedKubernetes", "metadatas": [{"version": "1.33.1-aliyun.1", "runtimes": []}]}

    problems = refused(run_stack, config, "dev", {VERSIONS: creatable})
    assert asked and all("kubernetesVersion" not in args for args in asked)
    assert problems == [
        "ack-training-platform:cluster.version: ACK does not create managed clusters of version '1.29.1-aliyun.1' "
        "in cn-hangzhou: pick one that `aliyun cs DescribeKubernetesVersionMetadata --ClusterType "
        "ManagedKubernetes --Region cn-hangzhou` lists, or drop version for ACK's default"
    ]


def existing(name: str, version: str) -> dict:
    """The stack's cluster as DescribeClustersForRegion reports it through ``cs.get_clusters``."""
    return {
        "clusters": [
            {"clusterId": "c0123456789abcdef", "clusterName": name, "currentVersion": version, "state": "running"},
            {"clusterId": "cfedcba9876543210", "clusterName": f"{name}-old", "currentVersion": "1.28.3-aliyun.1"},
        ]
    }


def test_a_version_ack_no_longer_creates_does_not_stop_the_cluster_that_has_it(run_stack, monkeypatch) -> None:
    config = stack_config("prod")
    config[cfg("cluster")]["version"] = "1.31.1-aliyun.1"
    asked = []

    def versions(args: dict) -> dict:
        asked.append(args)
        if args.get("kubernetesVersion") == "1.31.1-aliyun.1":  # still supported, no longer creatable
            return {"clusterType": "ManagedKubernetes", "metadatas": [{"version": "1.31.1-aliyun.1", "runtimes": []}]}
        return {"clusterType": "ManagedKubernetes", "metadatas": [{"version": "1.33.1-aliyun.1", "runtimes": []}]}

    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    invokes = {
        CLUSTERS: existing(config[cfg("cluster")]["name"], "1.31.1-aliyun.1"),
        VERSIONS: versions,
        SWITCHES: {"vswitches": [vswitch("cn-wulanchabu-c")]},
    }
    assert run_stack(config, "prod", invokes=invokes).of_type("alicloud:cs/managedKubernetes:ManagedKubernetes")
    assert [args.get("kubernetesVersion") for args in asked] == ["1.31.1-aliyun.1"]
    assert not [w for w in warned if "cluster.version" in w]


def test_a_cluster_ack_upgraded_or_no_longer_supports_is_a_warning(run_stack, monkeypatch) -> None:
    config = stack_config("prod")
    name = config[cfg("cluster")]["name"]
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    invokes = {
        CLUSTERS: existing(name, "1.34.1-aliyun.1"),
        VERSIONS: {"clusterType": "ManagedKubernetes", "metadatas": []},
        SWITCHES: {"vswitches": [vswitch("cn-wulanchabu-c")]},
    }
    assert run_stack(config, "prod", invokes=invokes).of_type("alicloud:cs/managedKubernetes:ManagedKubernetes")
    assert [w for w in warned if "cluster.version" in w] == [
        f"ack-training-platform:cluster.version: the cluster {name!r} runs 1.34.1-aliyun.1, the stack says "
        "1.33.1-aliyun.1: set cluster.version to 1.34.1-aliyun.1 (docs/day-2.md, upgrades)",
        "ack-training-platform:cluster.version: ACK no longer supports 1.34.1-aliyun.1: upgrade the cluster "
        "(docs/day-2.md, upgrades)",
    ]


def test_an_instance_type_sold_in_none_of_the_zones_is_refused(run_stack) -> None:
    # Only the fallback type is listed: the first is sold out in both zones.
    problems = refused(run_stack, stack_config("dev"), "dev", {INSTANCE_TYPES: {"instanceTypes": [A10]}})
    assert problems == [
        "ack-training-platform:gpuPool.instanceTypes[0]: ecs.gn7i-c8g1.2xlarge is sold neither as spot nor on demand "
        "in the vSwitches' zones (cn-hangzhou-k, cn-hangzhou-j): pick a type these zones sell, or add a vSwitch in a "
        "zone that sells it (aliyun ecs DescribeAvailableResource --DestinationResource InstanceType --InstanceType "
        "ecs.gn7i-c8g1.2xlarge)"
    ]


SPOT_OUT = by_spot_strategy(spot=(A10,), on_demand=(A10_SMALL, A10))
"""ECS selling the dev pool's first type on demand only, its fallback both ways, in both zones."""


def test_the_stand_in_answers_per_spot_strategy() -> None:
    ask = {"instanceType": A10_SMALL["id"], "availabilityZone": "cn-hangzhou-j", "instanceChargeType": "PostPaid"}
    # Without a spot strategy the data source asks for its default, NoSpot.
    assert "NoSpot" in SPOT_STRATEGY["default"] and "request.SpotStrategy" in SPOT_STRATEGY["request"]
    assert [t["id"] for t in SPOT_OUT(ask)["instanceTypes"]] == [A10_SMALL["id"]]
    assert SPOT_OUT({**ask, "spotStrategy": "NoSpot"}) == SPOT_OUT(ask)
    for strategy in ("SpotAsPriceGo", "SpotWithPriceLimit"):
        assert SPOT_OUT({**ask, "spotStrategy": strategy}) == {"instanceTypes": []}
    # A type is listed for the zone asked about alone, and not for a zone that does not sell it (or
    # sells it out: the data source skips a sold-out type).
    assert "SoldOut" in SPOT_STRATEGY["sold_out"]
    [listed] = SPOT_OUT({**ask, "instanceType": A10["id"], "spotStrategy": "SpotAsPriceGo"})["instanceTypes"]
    assert listed["availabilityZones"] == ["cn-hangzhou-j"]
    assert SPOT_OUT({**ask, "availabilityZone": "cn-hangzhou-h"}) == {"instanceTypes": []}


def asking(answer):
    """``answer``, keeping what each look-up asked."""
    asked: list[dict] = []

    def record(args: dict) -> dict:
        asked.append(dict(args))
        return answer(args)

    return record, asked


def test_a_type_sold_on_demand_only_is_a_warning_when_the_pool_compensates(run_stack, monkeypatch) -> None:
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    answer, asked = asking(SPOT_OUT)
    plan = run_stack(stack_config("dev"), "dev", invokes={INSTANCE_TYPES: answer})
    assert plan.of_type("alicloud:cs/nodePool:NodePool")
    assert [w for w in warned if "gpuPool.instanceTypes" in w] == [
        "ack-training-platform:gpuPool.instanceTypes[0]: ecs.gn7i-c8g1.2xlarge is not sold as spot in the vSwitches' "
        "zones (cn-hangzhou-k, cn-hangzhou-j) but is sold on demand in cn-hangzhou-k, cn-hangzhou-j: with "
        "gpuPool.compensateWithOnDemand, nodes of this type will come up on demand, at on-demand price; pick a type "
        "these zones sell as spot, or set compensateWithOnDemand: false to refuse it"
    ]
    # Asked again on demand: only the type no zone sells as spot.
    assert [(a["instanceType"], a["availabilityZone"]) for a in asked if a["spotStrategy"] == "NoSpot"] == [
        ("ecs.gn7i-c8g1.2xlarge", "cn-hangzhou-k"),
        ("ecs.gn7i-c8g1.2xlarge", "cn-hangzhou-j"),
    ]
    assert len(asked) == 6 and all(a["instanceChargeType"] == "PostPaid" for a in asked)


def test_a_type_sold_on_demand_only_is_still_checked_against_the_jobs(run_stack) -> None:
    # ECS's on-demand answer is the one the jobs are checked against.
    config = one_type_pool(nodeCapacity={"cpu": "7", "memory": "29Gi"})
    invokes = {INSTANCE_TYPES: by_spot_strategy(spot=(), on_demand=({**A10_SMALL, "memorySize": 28.0},))}
    assert refused(run_stack, config, "dev", invokes) == [
        "ack-training-platform:gpuPool.nodeCapacity.memory: 29Gi is more than ecs.gn7i-c8g1.2xlarge, as ECS lists "
        "it, has (28Gi memory): give a node's Allocatable (kubectl describe node), which is less"
    ]


def test_without_compensation_a_type_not_sold_as_spot_is_refused_naming_the_way_out(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("gpuPool")]["compensateWithOnDemand"] = False
    answer, asked = asking(SPOT_OUT)
    assert refused(run_stack, config, "dev", {INSTANCE_TYPES: answer}) == [
        "ack-training-platform:gpuPool.instanceTypes[0]: ecs.gn7i-c8g1.2xlarge is not sold as spot in the "
        "vSwitches' zones (cn-hangzhou-k, cn-hangzhou-j): pick a type these zones sell, or add a vSwitch in a zone "
        "that sells it, or set gpuPool.compensateWithOnDemand: true for on-demand nodes (at on-demand price) "
        "(aliyun ecs DescribeAvailableResource --DestinationResource InstanceType --InstanceType "
        "ecs.gn7i-c8g1.2xlarge)"
    ]
    assert {a["spotStrategy"] for a in asked} == {"SpotAsPriceGo"}


def test_zones_the_provider_refuses_for_spot_fall_back_on_demand(run_stack, monkeypatch) -> None:
    # Zones that offer no spot instance at all fail the spot look-up (ZONE_REFUSED) rather than
    # answer an empty list; a compensating pool asks them again on demand.
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    on_demand = by_spot_strategy(spot=(), on_demand=(A10_SMALL, A10))

    def answer(args: dict) -> dict:
        if args["spotStrategy"] != "NoSpot":
            raise zone_refused(INSTANCE_TYPES, args["availabilityZone"], "cn-hangzhou", ["cn-hangzhou-h"])
        return on_demand(args)

    assert run_stack(stack_config("dev"), "dev", invokes={INSTANCE_TYPES: answer}).of_type(
        "alicloud:cs/nodePool:NodePool"
    )
    assert [w.split(": ")[0] for w in warned if "is not sold as spot" in w] == [
        "ack-training-platform:gpuPool.instanceTypes[0]",
        "ack-training-platform:gpuPool.instanceTypes[1]",
    ]


def test_a_compensating_pool_of_a_type_sold_neither_way_is_refused(run_stack) -> None:
    invokes = {INSTANCE_TYPES: by_spot_strategy(spot=(A10,), on_demand=(A10,))}
    [problem] = refused(run_stack, stack_config("dev"), "dev", invokes)
    assert problem.startswith(
        "ack-training-platform:gpuPool.instanceTypes[0]: ecs.gn7i-c8g1.2xlarge is sold neither as spot nor on "
        "demand in the vSwitches' zones (cn-hangzhou-k, cn-hangzhou-j): pick a type these zones sell, or add a "
        "vSwitch in a zone that sells it (aliyun ecs"
    )


def refusing(*zones: str, region: str = "cn-hangzhou", selling: tuple[dict, ...] = ()):
    """ECS's answer per zone: the provider's error for ``zones`` (DescribeAvailableResource does not
    offer them), ``selling`` listed for any other."""

    def answer(args: dict) -> dict:
        zone = args["availabilityZone"]
        if zone in zones:
            raise zone_refused(INSTANCE_TYPES, zone, region, [f"{region}-h"])
        return {"instanceTypes": [t for t in selling if t["id"] == args["instanceType"]]}

    return answer


def test_the_stand_in_refuses_a_zone_in_the_providers_words() -> None:
    refused_zone = zone_refused(INSTANCE_TYPES, "cn-hangzhou-k", "cn-hangzhou", ["cn-hangzhou-h", "cn-hangzhou-i"])
    engine, provider = refused_zone.details().split("[ERROR]\x1b[0m ", 1)
    assert engine == f"invocation of {INSTANCE_TYPES} returned an error: invoking {INSTANCE_TYPES}: \x1b[31m"
    header, words, response = provider.split("\n")
    assert header == "alicloud/service_alicloud_ecs.go:509:"
    assert words + "\\n" + response.split(": ")[0] == ZONE_REFUSED.split(": %#v")[0].replace("%s", "{}").format(
        "cn-hangzhou-k", "cn-hangzhou", "cn-hangzhou-h, cn-hangzhou-i"
    )


def test_a_zone_the_provider_refuses_counts_as_not_selling_the_type(run_stack) -> None:
    # cn-hangzhou-k offers no spot instances: the provider fails the look-up there, and
    # cn-hangzhou-j sells both types.
    invokes = {INSTANCE_TYPES: refusing("cn-hangzhou-k", selling=(A10_SMALL, A10))}
    assert run_stack(stack_config("dev"), "dev", invokes=invokes).of_type("alicloud:cs/nodePool:NodePool")


def test_a_type_no_zone_sells_names_the_zones_the_provider_refused(run_stack) -> None:
    invokes = {INSTANCE_TYPES: refusing("cn-hangzhou-k", selling=(A10,))}
    assert refused(run_stack, stack_config("dev"), "dev", invokes) == [
        "ack-training-platform:gpuPool.instanceTypes[0]: ecs.gn7i-c8g1.2xlarge is sold neither as spot nor on demand "
        "in the vSwitches' zones (cn-hangzhou-k, cn-hangzhou-j): pick a type these zones sell, or add a vSwitch in a "
        "zone that sells it (aliyun ecs DescribeAvailableResource --DestinationResource InstanceType --InstanceType "
        "ecs.gn7i-c8g1.2xlarge); the provider refused network.vswitches[0]'s zone cn-hangzhou-k: Availability "
        "zone cn-hangzhou-k status is not available in the region cn-hangzhou. Expected availability zones: "
        "cn-hangzhou-h."
    ]


def test_an_adopted_vswitchs_refused_zone_is_named_by_its_key_and_can_be_passed(run_stack, monkeypatch) -> None:
    invokes = {
        SWITCHES: {"vswitches": [vswitch("cn-wulanchabu-c")]},
        INSTANCE_TYPES: refusing("cn-wulanchabu-c", region="cn-wulanchabu"),
    }
    [problem] = refused(run_stack, stack_config("prod"), "prod", invokes)
    assert problem.startswith("ack-training-platform:gpuPool.instanceTypes[0]: ecs.ebmgn8v.48xlarge is not sold in")
    assert problem.endswith(
        "; the provider refused network.vswitchIds[0]'s zone cn-wulanchabu-c: Availability zone cn-wulanchabu-c "
        "status is not available in the region cn-wulanchabu. Expected availability zones: cn-wulanchabu-h."
    )
    monkeypatch.setenv("ACK_CLOUD_CHECKS", "warn")
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    assert run_stack(stack_config("prod"), "prod", invokes=invokes).of_type("alicloud:cs/nodePool:NodePool")
    assert problem in [w.strip() for w in warned]


def test_a_refusal_that_dumps_the_response_on_its_line_is_cut_short(run_stack) -> None:
    # service_alicloud_ecs.go line 485: "There are no available zones in the API DescribeAvailableResource
    # response: %#v." when the answer lists no zone at all, the response on the same line.
    cause = "There are no available zones in the API DescribeAvailableResource response: &{" + "x" * 5000 + "}."

    def empty(args: dict) -> dict:
        raise RefusedLookUp(INSTANCE_TYPES, "alicloud/service_alicloud_ecs.go", 485, cause)

    problems = refused(run_stack, stack_config("dev"), "dev", {INSTANCE_TYPES: empty})
    assert len(problems) == 2 and all(len(problem) < 1200 for problem in problems)
    assert "network.vswitches[1]'s zone cn-hangzhou-j: There are no available zones in the API " in problems[0]
    assert problems[0].endswith(" ...")


def test_an_error_other_than_a_failed_look_up_is_not_taken_for_a_refusal(run_stack) -> None:
    def broken(args: dict) -> dict:
        raise LookupError("not the engine's answer")

    with pytest.raises(LookupError, match="not the engine's answer"):
        run_stack(stack_config("dev"), "dev", invokes={INSTANCE_TYPES: broken})


def test_every_refusal_is_reported_at_once(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("cluster")]["version"] = "1.29.1-aliyun.1"
    invokes = {
        VERSIONS: {"clusterType": "ManagedKubernetes", "metadatas": []},
        INSTANCE_TYPES: {"instanceTypes": []},
        NAS_ZONES: {"zones": [nas_zone("cn-hangzhou-j", "Performance", "Capacity")]},
    }
    problems = refused(run_stack, config, "dev", invokes)
    assert [p.split(": ", 1)[0] for p in problems] == [
        "ack-training-platform:cluster.version",
        "ack-training-platform:gpuPool.instanceTypes[0]",
        "ack-training-platform:gpuPool.instanceTypes[1]",
        "ack-training-platform:network.vswitches[0]",
    ]
    assert problems[-1] == (
        "ack-training-platform:network.vswitches[0]: cn-hangzhou-k, the zone of the NAS mount target's vSwitch "
        "(network.vswitches[0]), offers no standard NAS; zones that do: cn-hangzhou-j"
    )


def test_an_adopted_vswitch_outside_the_extreme_nas_zone_is_refused(run_stack) -> None:
    problems = refused(run_stack, stack_config("prod"), "prod", {SWITCHES: {"vswitches": [vswitch("cn-wulanchabu-a")]}})
    assert problems == [
        "ack-training-platform:storage.nas.zoneId: the extreme file system is created in cn-wulanchabu-c but its "
        "mount target's vSwitch (network.vswitchIds[0]) is in cn-wulanchabu-a: set zoneId to cn-wulanchabu-a, or "
        "list a vSwitch of cn-wulanchabu-c first"
    ]


def test_a_zone_without_the_nas_type_is_refused(run_stack) -> None:
    invokes = {
        SWITCHES: {"vswitches": [vswitch("cn-wulanchabu-c")]},
        NAS_ZONES: {
            "zones": [nas_zone("cn-wulanchabu-a", "Standard", "Advance"), nas_zone("cn-wulanchabu-c", "Standard")]
        },
    }
    assert refused(run_stack, stack_config("prod"), "prod", invokes) == [
        "ack-training-platform:storage.nas.zoneId: cn-wulanchabu-c, the zone of the NAS mount target's vSwitch "
        "(network.vswitchIds[0]), offers no extreme NAS of storage type advance; zones that do: cn-wulanchabu-a"
    ]


def test_an_adopted_vswitch_that_does_not_exist_is_refused(run_stack) -> None:
    assert refused(run_stack, stack_config("prod"), "prod", {SWITCHES: {"vswitches": []}}) == [
        f"ack-training-platform:network.vswitchIds[0]: there is no vSwitch '{PROD_VSWITCH}' in VPC "
        "'vpc-0jl6b5ykcjznb4rbcqkyv' in cn-wulanchabu"
    ]


def test_a_missing_vswitch_does_not_lend_its_place_to_the_next_ones_zone(run_stack) -> None:
    # The NAS mount target's vSwitch (vswitchIds[0]) does not exist: the next one's zone is not its zone.
    config = stack_config("prod")
    config[cfg("network")]["vswitchIds"] = ["vsw-0jlgone0000000000000", PROD_VSWITCH]
    assert refused(run_stack, config, "prod", {SWITCHES: {"vswitches": [vswitch("cn-wulanchabu-a")]}}) == [
        "ack-training-platform:network.vswitchIds[0]: there is no vSwitch 'vsw-0jlgone0000000000000' in VPC "
        "'vpc-0jl6b5ykcjznb4rbcqkyv' in cn-wulanchabu"
    ]


def test_a_local_stack_asks_the_cloud_nothing(run_stack) -> None:
    refusing = {token: {} for token in (VERSIONS, INSTANCE_TYPES, NAS_ZONES, SWITCHES)}
    assert run_stack(stack_config("local"), "local", invokes=refusing).resources


def test_a_teardown_goes_ahead_with_warnings_when_asked(run_stack, monkeypatch) -> None:
    monkeypatch.setenv("ACK_CLOUD_CHECKS", "warn")
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    plan = run_stack(stack_config("dev"), "dev", invokes={INSTANCE_TYPES: {"instanceTypes": [A10]}})
    assert plan.of_type("alicloud:cs/nodePool:NodePool")
    assert [w.split(": ", 1)[0] for w in warned if w.startswith("ack-training-platform:")] == [
        "ack-training-platform:gpuPool.instanceTypes[0]"
    ]


def unlisted_pool(family: str, **job: object) -> tuple[dict, dict]:
    """The dev stack with a 2-GPU pool of a family the platform's table leaves out, without
    nodeCapacity, and ECS's answer for its type: figures of the stand-in's own, no claim that
    ECS sells a type of this name."""
    name = f"ecs.{family}.8xlarge"
    config = stack_config("dev")
    config[cfg("gpuPool")].update(instanceTypes=[name], gpusPerNode=2)
    config[cfg("training")]["gpuQuota"] = 2
    config[cfg("jobs")][0].update(job)
    listed = listed_type(
        name, family=f"ecs.{family}", cpus=32, memory_gib=188, gpus=2, gpu_spec="NVIDIA GPU", zones=["cn-hangzhou-k"]
    )
    return config, {INSTANCE_TYPES: {"instanceTypes": [listed]}}


@pytest.mark.parametrize("family", LEFT_OUT)
def test_a_job_on_an_unlisted_type_that_fits_what_ecs_lists_passes(run_stack, monkeypatch, family: str) -> None:
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    config, invokes = unlisted_pool(family, cpu="30", memory="180Gi")
    assert run_stack(config, "dev", invokes=invokes).one("kubernetes:kubeflow.org/v1:PyTorchJob")
    # ECS answered: nothing was left unchecked.
    assert not [w for w in warned if "gpuPool" in w]


@pytest.mark.parametrize("family", LEFT_OUT)
@pytest.mark.parametrize(
    ("job", "problem"),
    [
        (
            {"cpu": "32", "memory": "64Gi"},
            "jobs[0].cpu: cpu 32 per pod does not fit a node of pool 'gpu': {name}, as ECS lists it, has 32",
        ),
        (
            {"cpu": "8", "memory": "190Gi"},
            "jobs[0].memory: memory 190Gi per pod does not fit a node of pool 'gpu': {name}, as ECS lists it, "
            "has 188Gi",
        ),
    ],
)
def test_a_job_on_an_unlisted_type_above_what_ecs_lists_is_refused(run_stack, family: str, job, problem) -> None:
    config, invokes = unlisted_pool(family, **job)
    assert refused(run_stack, config, "dev", invokes) == [
        "ack-training-platform:"
        + problem.format(name=f"ecs.{family}.8xlarge")
        + ", of which ACK keeps a part for the system, and the autoscaler adds no node for a pod that cannot fit; "
        "ask for less, or give gpuPool.nodeCapacity (a node's Allocatable, kubectl describe node)"
    ]


@pytest.mark.parametrize("family", LEFT_OUT)
def test_gpus_per_node_on_an_unlisted_type_must_be_what_ecs_lists(run_stack, family: str) -> None:
    config, invokes = unlisted_pool(family, cpu="8", memory="64Gi")
    config[cfg("gpuPool")]["gpusPerNode"] = 4
    config[cfg("training")]["gpuQuota"] = 4
    assert refused(run_stack, config, "dev", invokes) == [
        f"ack-training-platform:gpuPool.gpusPerNode: gpusPerNode is 4 but, as ECS lists them, ecs.{family}.8xlarge "
        "has 2: every instance type of the pool must have gpusPerNode GPUs"
    ]


def test_an_unlisted_type_ecs_does_not_sell_is_not_said_to_be_checked_later(run_stack, monkeypatch) -> None:
    # At preview, with refusals turned into warnings, the only word on the type is that ECS does not sell it.
    monkeypatch.setenv("ACK_CLOUD_CHECKS", "warn")
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    config, _ = unlisted_pool(LEFT_OUT[0], cpu="8", memory="64Gi")
    assert run_stack(config, "dev", invokes={INSTANCE_TYPES: {"instanceTypes": []}}).one(
        "kubernetes:kubeflow.org/v1:PyTorchJob"
    )
    assert [w.split(": ", 1)[0] for w in warned if w.startswith("ack-training-platform:")] == [
        "ack-training-platform:gpuPool.instanceTypes[0]"
    ]

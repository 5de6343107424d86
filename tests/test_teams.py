"""Teams: the stack rules that tie jobs to a team, and the limits on a job's pods."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import cfg, stack_config
from test_config import dev, validate

from components.config import ConfigError

TEAMS = [
    {"name": "vision", "uid": 2001, "quota": {"gpus": 2, "cpu": "16", "memory": "64Gi"}},
    {"name": "speech", "uid": 2002, "gid": 3002, "quota": {"gpus": 1, "cpu": 8, "memory": "32Gi"}},
]


def with_teams(*, network: str = "terway", **job: Any) -> dict[str, Any]:
    """The dev stack on ``network`` with two teams, its job given to the first (``job`` overrides)."""
    config = dev()
    config[cfg("cluster")]["network"] = network
    config[cfg("teams")] = [dict(team) for team in TEAMS]
    config[cfg("jobs")][0].update({"team": "vision", **job})
    return config


def test_teams_load() -> None:
    spec = validate(with_teams())
    assert [(t.name, t.uid, t.group_id) for t in spec.teams] == [("vision", 2001, 2001), ("speech", 2002, 3002)]
    assert spec.jobs[0].team == "vision"
    assert spec.network_policies
    # The default stays Flannel and a single namespace, which a stack without teams keeps.
    plain = validate(dev())
    assert plain.cluster.network == "flannel" and not plain.teams and not plain.network_policies


def _on_version(config: dict[str, Any], version: str) -> dict[str, Any]:
    config[cfg("cluster")]["version"] = version
    return config


def _teams(change) -> dict[str, Any]:
    config = with_teams()
    change(config[cfg("teams")])
    return config


def _prod_teams(change) -> dict[str, Any]:
    """The prod stack, whose first team ('llm') runs eRDMA jobs, with ``change`` made to its teams."""
    config = stack_config("prod")
    change(config[cfg("teams")])
    return config


def _erdma_job() -> dict[str, Any]:
    """Two teams on an eRDMA pool, the first team's job over the fabric."""
    config = with_teams()
    config[cfg("gpuPool")].update(fabric="erdma", instanceTypes=["ecs.ebmgn8v.48xlarge"], gpusPerNode=8)
    config[cfg("jobs")][0].update(network="rdma", gpusPerNode=1)
    return config


INVALID = [
    (
        "job without a team",
        with_teams(team=None),
        "ack-training-platform:jobs[0].team: the stack declares teams: name the job's team, one of "
        "['vision', 'speech']",
    ),
    (
        "unknown team",
        with_teams(team="audio"),
        "ack-training-platform:jobs[0].team: no team 'audio': declare it under teams, or use one of "
        "['vision', 'speech']",
    ),
    (
        "job in another namespace",
        with_teams(namespace="speech"),
        "ack-training-platform:jobs[0].namespace: team 'vision''s jobs run in its namespace 'vision', where its "
        "claims are: drop namespace",
    ),
    (
        "job over the team's GPUs",
        with_teams(team="speech", nodes=2),
        "ack-training-platform:jobs[0].nodes: the job needs 2 GPUs at once but team 'speech''s quota "
        "(teams[1].quota.gpus) is 1: it could never start; raise the quota or shrink the job",
    ),
    (
        "job over the team's CPU",
        with_teams(cpu="9", team="speech"),
        "ack-training-platform:jobs[0].nodes: the job needs 9 cpu at once but team 'speech''s quota "
        "(teams[1].quota.cpu) is 8: it could never start; raise the quota or shrink the job",
    ),
    (
        "job over the team's memory",
        with_teams(memory="40Gi", team="speech"),
        "ack-training-platform:jobs[0].nodes: the job needs 40Gi memory at once but team 'speech''s quota "
        "(teams[1].quota.memory) is 32Gi: it could never start; raise the quota or shrink the job",
    ),
    (
        "two teams, one uid",
        _teams(lambda teams: teams[1].update(uid=2001)),
        "ack-training-platform:teams[1].uid: uid 2001 is also 'vision''s: NFS tells teams apart by uid alone, so "
        "each team needs its own",
    ),
    (
        "team named twice",
        _teams(lambda teams: teams[1].update(name="vision", uid=2003)),
        "ack-training-platform:teams[1].name: team name 'vision' is used twice",
    ),
    (
        "root uid",
        _teams(lambda teams: teams[0].update(uid=0)),
        "ack-training-platform:teams[0].uid: Input should be greater than or equal to 1000 (got 0)",
    ),
    (
        "team named as the platform's namespace",
        _teams(lambda teams: teams[1].update(name="training")),
        "ack-training-platform:teams[1].name: 'training' is the platform's own namespace (training.namespace): "
        "name the team otherwise",
    ),
    (
        "several teams on Flannel",
        with_teams(network="flannel"),
        "ack-training-platform:cluster.network: Flannel enforces no NetworkPolicy, so every team's pods could "
        "reach every other's: create the cluster with network: terway, or keep one team, or accept an open pod "
        "network with sharedNetwork: true",
    ),
    (
        # The admission policy would refuse the pods at runtime: the stack refuses the job first.
        "eRDMA job of the prod stack in a team without rdma",
        _prod_teams(lambda teams: teams[0].pop("rdma")),
        "ack-training-platform:jobs[0].network: team 'llm' may not use the eRDMA devices, which its admission "
        "policy refuses: set teams[0].rdma: true to allow it, or use network: tcp",
    ),
    (
        "system priority class",
        with_teams(scheduling={"priorityClass": "system-node-critical"}),
        "ack-training-platform:jobs[0].scheduling.priorityClass: 'system-node-critical' is reserved for the "
        "cluster's own components (PriorityClasses named system-*): a training job with it could preempt and "
        "outlive them; give a PriorityClass of your own",
    ),
    (
        "an eRDMA job in a team without rdma",
        _erdma_job(),
        "ack-training-platform:jobs[0].network: team 'vision' may not use the eRDMA devices, which its admission "
        "policy refuses: set teams[0].rdma: true to allow it, or use network: tcp",
    ),
    (
        "teams on a cluster without admission policies",
        _on_version(with_teams(), "1.29.3-aliyun.1"),
        "ack-training-platform:cluster.version: Kubernetes 1.29.3-aliyun.1 is too old for teams, whose pods an "
        "admission policy (ValidatingAdmissionPolicy v1) keeps within each team: it needs 1.30 or later; raise "
        "cluster.version",
    ),
]


@pytest.mark.parametrize(("case", "config", "message"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_teams_name_the_key(case: str, config: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        validate(config)
    assert raised.value.problems == [message]


def test_an_rdma_team_runs_erdma_jobs() -> None:
    config = _erdma_job()
    config[cfg("teams")][0]["rdma"] = True
    assert validate(config).jobs[0].network == "rdma"


def test_flannel_takes_several_teams_when_told() -> None:
    config = with_teams(network="flannel")
    config[cfg("cluster")]["sharedNetwork"] = True
    spec = validate(config)
    assert len(spec.teams) == 2 and not spec.network_policies


def test_a_single_team_may_use_flannel() -> None:
    config = with_teams(network="flannel")
    config[cfg("teams")] = config[cfg("teams")][:1]
    assert validate(config).teams[0].name == "vision"


def test_system_priority_class_refused_without_teams() -> None:
    config = dev()
    config[cfg("jobs")][0]["scheduling"] = {"priorityClass": "system-cluster-critical"}
    with pytest.raises(ConfigError, match=r"jobs\[0\]\.scheduling\.priorityClass: 'system-cluster-critical'"):
        validate(config)


def test_nas_access_follows_the_node_vswitches() -> None:
    spec = validate(dev())
    assert spec.nas_access_cidrs == ["192.168.0.0/20", "192.168.16.0/20"]
    assert spec.storage.nas.user_access == "root_squash"


def test_adopted_vpc_needs_the_nas_access_block() -> None:
    config = stack_config("prod")
    del config[cfg("storage")]["nas"]["accessCidr"]
    with pytest.raises(ConfigError, match=r"storage\.nas\.accessCidr: with an adopted VPC"):
        validate(config)

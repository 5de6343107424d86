"""The stack file's cross-object rules hold when the components are built from a program of
one's own: a TrainingJob given a pool and a namespace is checked against both, with one line
naming the argument (a ``pulumi.RunError``, which Pulumi prints without a traceback)."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pytest

from components.plan.records import Plan
from components.plan.runner import run_program
from components.training_job import JobArgumentError

PROGRAM = """
import pulumi_kubernetes as k8s

from components import GpuNodePool, SharedVolumes, TrainingJob, TrainingNamespace
from components.config import GpuPoolSpec, StorageSpec, TeamSpec, TrainingJobSpec, TrainingNamespaceSpec

provider = k8s.Provider("k8s", cluster_identifier="c-example")
pool = GpuNodePool(
    "a10",
    GpuPoolSpec(name="a10", instance_types=["{instance_type}"], gpus_per_node=1, max_size={max_size}),
    cluster_id="c-example",
    vswitch_ids=["vsw-example"],
    worker_role="a10-nodes",
)
namespace = TrainingNamespace("ns", TrainingNamespaceSpec(namespace="team-a", gpu_quota={quota}), provider=provider{team})
volumes = SharedVolumes("ns", StorageSpec(create_storage_class=False), namespace=namespace, provider=provider)
job = TrainingJobSpec(name="big", image="{image}", {sizes}nodes={nodes}{job_namespace})
TrainingJob("big", job, namespace=namespace, storage=volumes, pool=pool, provider=provider)
"""
TEAM = ', team=TeamSpec(name="team-a", uid=2001, quota={"gpus": 2, "cpu": "64", "memory": "256Gi"})'


def plan(tmp_path: Path, **overrides: object) -> Plan:
    values = {
        "max_size": 4,
        "quota": "None",
        "team": "",
        "instance_type": "ecs.gn7i-c8g1.2xlarge",
        "sizes": 'cpu="6", memory="16Gi", ',
        "nodes": 2,
        "job_namespace": "",
        "image": "trainer:1",
    } | overrides
    (tmp_path / "Pulumi.yaml").write_text("name: own\nruntime: python\n")
    (tmp_path / "__main__.py").write_text(PROGRAM.format(**values))
    return run_program({}, stack="dev", project_dir=tmp_path)


def refused(tmp_path: Path, **overrides: object) -> str:
    with pytest.raises(JobArgumentError) as raised:
        plan(tmp_path, **overrides)
    assert isinstance(raised.value, pulumi.RunError) and "\n" not in str(raised.value)
    return str(raised.value)


def test_a_job_that_fits_its_pool_and_quota_is_built(tmp_path: Path) -> None:
    image = "trainer@sha256:" + "0" * 64
    built = plan(tmp_path, quota=2, image=image)
    quota = built.one("kubernetes:core/v1:ResourceQuota").inputs
    assert (quota["metadata"]["namespace"], quota["spec"]["hard"]["requests.nvidia.com/gpu"]) == ("team-a", "2")
    job = built.one("kubernetes:kubeflow.org/v1:PyTorchJob", "big").inputs
    assert job["metadata"]["namespace"] == "team-a"
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert {role: r["replicas"] for role, r in replicas.items()} == {"Master": 1, "Worker": 1}
    for r in replicas.values():
        pod = r["template"]["spec"]
        # Placed on the pool it was given, with the claims of the namespace it was given.
        assert pod["nodeSelector"] == {"ack-training-platform/pool": "a10"}
        assert {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName") for v in pod["volumes"]} == {
            "dshm": None,
            "data": "training-data",
            "output": "training-output",
        }
        (container,) = pod["containers"]
        assert container["image"] == image  # kept by digest, as given
        assert container["resources"]["limits"] == {"cpu": "6", "memory": "16Gi", "nvidia.com/gpu": "1"}


def test_a_job_over_the_namespace_quota_is_refused(tmp_path: Path) -> None:
    assert refused(tmp_path, quota=1, nodes=4) == (
        "TrainingJob 'big': spec.nodes: the job needs 4 GPUs at once but namespace 'team-a''s gpuQuota is 1: "
        "it could never start; raise the quota or shrink the job (the namespace argument)"
    )


def test_a_job_over_its_team_quota_is_refused(tmp_path: Path) -> None:
    assert refused(tmp_path, team=TEAM, nodes=3) == (
        "TrainingJob 'big': spec.nodes: the job needs 3 GPUs at once but team 'team-a''s quota (quota.gpus) is 2: "
        "it could never start; raise the quota or shrink the job (the namespace argument)"
    )


def test_a_job_needing_more_nodes_than_the_pool_has_is_refused(tmp_path: Path) -> None:
    assert refused(tmp_path, max_size=2, nodes=3) == (
        "TrainingJob 'big': spec.nodes: the job's 3 pods need 3 GPU nodes but gpuPool.maxSize is 2: raise maxSize "
        "or run fewer nodes (the pool argument)"
    )


def test_a_pod_larger_than_the_pools_nodes_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, sizes='cpu="64", memory="16Gi", ')
    assert message.startswith("TrainingJob 'big': spec.cpu: cpu 64 per pod does not fit a node of pool 'a10'")
    assert message.endswith("(the pool argument)")


def test_a_job_on_a_pool_of_a_type_outside_the_table_gives_its_own_cpu_and_memory(tmp_path: Path) -> None:
    # No nodeCapacity, and the table has no figures for gu8tf: no default can be sized to its nodes.
    gu8tf = {"instance_type": "ecs.gu8tf.8xlarge"}
    assert refused(tmp_path, **gu8tf, sizes='memory="16Gi", ') == (
        "TrainingJob 'big': spec.cpu: the GPU job leaves cpu to the default, and no default can follow a node of "
        "pool 'a10', whose instance types the platform's table does not list: give the job's cpu and memory per "
        "pod (checked against what ECS lists for the types only by the platform stack's pulumi preview, not for a "
        "TrainingJob or TeamTraining given a pool), or give gpuPool.nodeCapacity (a node's Allocatable, kubectl "
        "describe node) (the pool argument)"
    )
    job = plan(tmp_path, **gu8tf).one("kubernetes:kubeflow.org/v1:PyTorchJob", "big").inputs
    (container,) = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"cpu": "6", "memory": "16Gi", "nvidia.com/gpu": "1"}


def test_a_job_naming_another_namespace_than_its_claims_is_refused(tmp_path: Path) -> None:
    assert refused(tmp_path, job_namespace=', namespace="other"') == (
        "TrainingJob 'big': spec.namespace: 'other', but its volumes and pull secret are in namespace 'team-a' "
        "(the namespace argument): drop spec.namespace or give that namespace"
    )

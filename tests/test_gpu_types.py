"""The ECS GPU instance types the platform knows (components/config/gpus/types.py), as ECS's
"GPU-accelerated compute-optimized instance families" page lists them
(components/config/gpus/instance_data.py): every pool of them sizes its jobs without
``gpuPool.nodeCapacity``; a pool of a type outside the table plans without it too, its GPU jobs
giving their own cpu and memory (checked against ECS's figures at preview: tests/test_preflight.py)."""

from __future__ import annotations

import pulumi
import pytest
from conftest import ROOT, cfg, stack_config

from components.config import ConfigError, GpuPoolSpec, SpecError, load_spec
from components.config.gpus.capacity import GIB
from components.config.gpus.instance_data import FAMILIES, LEFT_OUT, READ_ON, SOURCE_URL
from components.config.gpus.types import GPU_INSTANCE_TYPES, family_of_name, instance_type_table
from components.config.pools import ERDMA_INSTANCE_FAMILIES
from components.package.reference import TYPES_END, TYPES_START

ASKED_FOR = ("gn6i", "gn6v", "gn6e", "gn7", "gn7e", "ebmgn7e", "gn7i", "gn8is", "ebmgn8is", "gn8v", "ebmgn8v")
"""The families the platform's users train on, each of which the page lists."""


def test_the_families_users_train_on_are_known() -> None:
    assert set(ASKED_FOR) <= {spec.family for spec in GPU_INSTANCE_TYPES.values()}


@pytest.mark.parametrize(
    ("name", "vcpus", "memory_gib", "gpus", "gpu_model", "gpu_memory_gb"),
    [
        # The page's rows, quoted: "ecs.gn6v-c10g1.20xlarge 82 336 NVIDIA V100 × 8 16 GB × 8", 82 vCPUs
        # where the size's name would give 80: the table does not derive vCPUs from names.
        ("ecs.gn6v-c10g1.20xlarge", 82, 336, 8, "NVIDIA V100", 16),
        ("ecs.gn6i-c4g1.xlarge", 4, 15, 1, "NVIDIA T4", 16),
        ("ecs.gn7e-c16g1.4xlarge", 16, 125, 1, None, 80),
        ("ecs.gn7i-c8g1.2xlarge", 8, 30, 1, "NVIDIA A10", 24),
        ("ecs.gn8is-2x.8xlarge", 32, 256, 2, "NVIDIA L20", 48),
        ("ecs.gn8v-4x.8xlarge", 32, 384, 4, None, 96),
        ("ecs.ebmgn8v.48xlarge", 192, 1024, 8, None, 96),
        ("ecs.ebmgn8is.32xlarge", 128, 1024, 8, "NVIDIA L20", 48),
        ("ecs.gn5-c8g1.14xlarge", 54, 480, 8, "NVIDIA P100", 16),
    ],
)
def test_rows_as_the_page_lists_them(name, vcpus, memory_gib, gpus, gpu_model, gpu_memory_gb) -> None:
    spec = GPU_INSTANCE_TYPES[name]
    assert (spec.vcpus, spec.memory_gib, spec.gpus, spec.gpu_model, spec.gpu_memory_gb) == (
        vcpus,
        memory_gib,
        gpus,
        gpu_model,
        gpu_memory_gb,
    )


def test_every_type_is_of_the_family_its_name_gives() -> None:
    # A row filed under the wrong family would be checked against the wrong eRDMA list.
    for name, spec in GPU_INSTANCE_TYPES.items():
        assert family_of_name(name) == spec.family, name
    assert family_of_name("ecs.gn8v-tee-8x.48xlarge") == "gn8v-tee"
    assert family_of_name("gn7i-c8g1.2xlarge") is None


def test_the_families_ack_lists_for_erdma_have_eris_on_the_page() -> None:
    for family in ERDMA_INSTANCE_FAMILIES:
        assert FAMILIES[family]["eri"], family


@pytest.mark.parametrize("name", sorted(GPU_INSTANCE_TYPES))
def test_a_pool_of_any_known_type_is_sized_without_node_capacity(name: str) -> None:
    spec = GPU_INSTANCE_TYPES[name]
    pool = GpuPoolSpec(instance_types=[name], gpus_per_node=spec.gpus)
    node = pool.node_share
    assert (node.millicpu, node.memory, node.exact, node.source) == (
        spec.vcpus * 1000,
        spec.memory_gib * GIB,
        False,
        name,
    )


def first_of_each_family() -> list[str]:
    return [about["types"][0][0] for about in FAMILIES.values()]


@pytest.mark.parametrize("name", first_of_each_family())
def test_a_pool_of_each_family_plans_without_node_capacity(run_stack, name: str) -> None:
    spec = GPU_INSTANCE_TYPES[name]
    config = stack_config("dev")
    config[cfg("cluster")]["apiServer"]["allowedCidrs"] = ["61.10.20.0/24"]
    config[cfg("gpuPool")].update(instanceTypes=[name], gpusPerNode=spec.gpus)
    config[cfg("training")]["gpuQuota"] = spec.gpus
    # A pod the smallest of the page's types (2 vCPUs, 8 GiB) leaves room on.
    config[cfg("jobs")][0].update(cpu="1", memory="4Gi")
    plan = run_stack(config, "dev")
    assert plan.one("alicloud:cs/nodePool:NodePool", "gpu").inputs["instanceTypes"] == [name]
    job = plan.one("kubernetes:kubeflow.org/v1:PyTorchJob")
    container = job.inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == str(spec.gpus)


def dev_pool(**pool: object) -> dict:
    config = stack_config("dev")
    config[cfg("cluster")]["apiServer"]["allowedCidrs"] = ["61.10.20.0/24"]
    config[cfg("gpuPool")].update(pool)
    config[cfg("registryPassword")] = {"secure": "v1:AAAA"}
    return config


def problems_of(config: dict) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        load_spec(config, [cfg("registryPassword")])
    return raised.value.problems


def test_node_capacity_above_a_known_type_is_refused_by_the_table() -> None:
    config = dev_pool(
        instanceTypes=["ecs.gn8is-2x.8xlarge"], gpusPerNode=2, nodeCapacity={"cpu": 30, "memory": "300Gi"}
    )
    config[cfg("training")]["gpuQuota"] = 2
    assert problems_of(config) == [
        "ack-training-platform:gpuPool.nodeCapacity.memory: 300Gi is more than ecs.gn8is-2x.8xlarge has (256Gi "
        "memory): give a node's Allocatable (kubectl describe node), which is less"
    ]


def test_a_known_type_with_other_gpus_than_the_pool_says_is_refused() -> None:
    config = dev_pool(instanceTypes=["ecs.gn7e-c16g1.8xlarge"], gpusPerNode=1)
    assert problems_of(config) == [
        "ack-training-platform:gpuPool.gpusPerNode: gpusPerNode is 1 but ecs.gn7e-c16g1.8xlarge has 2: every "
        "instance type of the pool must have gpusPerNode GPUs"
    ]


def test_erdma_takes_every_size_of_the_families_ack_lists() -> None:
    for name in ("ecs.gn8is-2x.8xlarge", "ecs.gn8v-8x.48xlarge", "ecs.gn8is.2xlarge"):
        GpuPoolSpec(instance_types=[name], gpus_per_node=GPU_INSTANCE_TYPES[name].gpus, fabric="erdma")
    with pytest.raises(SpecError) as raised:
        GpuPoolSpec(instance_types=["ecs.gn8v-tee.4xlarge"], gpus_per_node=1, fabric="erdma")
    assert raised.value.problems == [
        "fabric: instance types ['ecs.gn8v-tee.4xlarge'] are not of the GPU families ACK lists for eRDMA training "
        "(gn8is, ebmgn8is, gn8v, ebmgn8v): pick types of those families, or drop fabric erdma"
    ]


def test_the_docs_table_is_generated_from_the_data_and_names_its_source() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    block = page.split(TYPES_START, 1)[1].split(TYPES_END, 1)[0].strip()
    assert block == instance_type_table(), (
        "docs/configuration.md is stale: run python -m components.package.reference --write"
    )
    assert f"<{SOURCE_URL}>, read {READ_ON}" in block
    assert block.count("\n| `ecs.") == len(GPU_INSTANCE_TYPES)


def example_of(family: str) -> str:
    # A name of ECS's form for the family; that ECS sells a type of exactly this name is not claimed.
    return f"ecs.{family}.8xlarge"


def known_limits() -> str:
    return " ".join((ROOT / "docs" / "known-limits.md").read_text().split())


def test_the_families_left_out_are_the_ones_known_limits_names() -> None:
    # Adding one of them to the table must come with correcting the page that says it is missing.
    page = known_limits()
    for family in LEFT_OUT:
        assert family not in FAMILIES, family
        assert family_of_name(example_of(family)) == family
        assert f"{family}," in page or f"{family} " in page, family


def left_out_pool(name: str, **job: object) -> dict:
    """The dev stack with a 2-GPU pool of ``name`` alone, without nodeCapacity, its job as ``job`` says."""
    config = dev_pool(instanceTypes=[name], gpusPerNode=2)
    config[cfg("training")]["gpuQuota"] = 2
    config[cfg("jobs")][0].pop("cpu")
    config[cfg("jobs")][0].pop("memory")
    config[cfg("jobs")][0].update(job)
    return config


@pytest.mark.parametrize("name", [example_of(family) for family in LEFT_OUT])
def test_a_pool_of_a_family_left_out_plans_without_node_capacity(run_stack, monkeypatch, name: str) -> None:
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    plan = run_stack(left_out_pool(name, cpu="8", memory="64Gi"), "dev")
    assert plan.one("alicloud:cs/nodePool:NodePool", "gpu").inputs["instanceTypes"] == [name]
    job = plan.one("kubernetes:kubeflow.org/v1:PyTorchJob")
    container = job.inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"}
    # Nothing describes the node: ack-jobs submit gets no figure to size its defaults from.
    assert plan.outputs["jobDefaults"]["placement"]["node"] is None
    assert plan.outputs["jobDefaults"]["placement"]["gpusPerNode"] == 2
    # Offline nothing answers for ECS: the plan says once what it could not check.
    assert [w for w in warned if "gpuPool" in w] == [
        f"ack-training-platform:gpuPool.instanceTypes: the platform's table does not list {name}, so the cpu and "
        "memory of the jobs on pool 'gpu' are checked against what ECS lists for the types only at pulumi preview, "
        "not here: give gpuPool.nodeCapacity to check them offline"
    ]


@pytest.mark.parametrize("name", [example_of(family) for family in LEFT_OUT])
@pytest.mark.parametrize(
    ("job", "key", "unset"),
    [({}, "cpu", "cpu and memory"), ({"cpu": "8"}, "memory", "memory"), ({"memory": "64Gi"}, "cpu", "cpu")],
)
def test_a_job_on_a_family_left_out_must_give_cpu_and_memory(name: str, job: dict, key: str, unset: str) -> None:
    assert problems_of(left_out_pool(name, **job)) == [
        f"ack-training-platform:jobs[0].{key}: the GPU job leaves {unset} to the default, and no default can "
        "follow a node of pool 'gpu', whose instance types the platform's table does not list: give the job's cpu "
        "and memory per pod (checked against what ECS lists for the types only by the platform stack's pulumi "
        "preview, not for a TrainingJob or TeamTraining given a pool), or give gpuPool.nodeCapacity (a node's "
        "Allocatable, kubectl describe node)"
    ]


def test_a_pool_mixing_a_listed_and_an_unlisted_type_is_sized_by_neither() -> None:
    # The smallest node cannot be known while one type's figures are missing.
    pool = GpuPoolSpec(instance_types=["ecs.gn7i-c8g1.2xlarge", example_of("gn8ia")], gpus_per_node=1)
    assert pool.node_share is None
    assert pool.unlisted_types == [example_of("gn8ia")]


@pytest.mark.parametrize("name", [example_of(family) for family in LEFT_OUT])
def test_a_pool_of_a_family_left_out_plans_with_node_capacity(run_stack, name: str) -> None:
    config = stack_config("dev")
    config[cfg("cluster")]["apiServer"]["allowedCidrs"] = ["61.10.20.0/24"]
    config[cfg("gpuPool")].update(instanceTypes=[name], gpusPerNode=2, nodeCapacity={"cpu": "31", "memory": "180Gi"})
    config[cfg("training")]["gpuQuota"] = 2
    config[cfg("jobs")][0].update(cpu="8", memory="64Gi")
    plan = run_stack(config, "dev")
    assert plan.one("alicloud:cs/nodePool:NodePool", "gpu").inputs["instanceTypes"] == [name]
    job = plan.one("kubernetes:kubeflow.org/v1:PyTorchJob")
    container = job.inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"


def test_a_type_of_a_family_the_table_lists_but_not_of_its_sizes_is_refused_with_the_closest() -> None:
    # The page lists every size of gn7i: a gn7i name it lacks is a slip, not a type to leave to the preview.
    config = dev_pool(instanceTypes=["ecs.gn7i-c8g1.2xlarge", "ecs.gn7i-c8g1.4xlarge"])
    assert problems_of(config) == [
        "ack-training-platform:gpuPool.instanceTypes[1]: ecs.gn7i-c8g1.4xlarge is no gn7i type of ECS's family page "
        "(docs/configuration.md, GPU instance types): did you mean ecs.gn7i-c8g1.2xlarge, ecs.gn7i-c16g1.4xlarge, "
        "ecs.gn7i-c56g1.14xlarge? If ECS sells it and the page does not list it, give nodeCapacity (a node's "
        "Allocatable, kubectl describe node)"
    ]
    with pytest.raises(SpecError) as raised:
        GpuPoolSpec(instance_types=["ecs.ebmgn8v.48xlargee"], gpus_per_node=8)
    assert raised.value.problems == [
        "instance_types[0]: ecs.ebmgn8v.48xlargee is no ebmgn8v type of ECS's family page (docs/configuration.md, "
        "GPU instance types): did you mean ecs.ebmgn8v.48xlarge? If ECS sells it and the page does not list it, "
        "give nodeCapacity (a node's Allocatable, kubectl describe node)"
    ]


def test_a_size_the_page_does_not_list_is_taken_with_node_capacity() -> None:
    pool = GpuPoolSpec(
        instance_types=["ecs.gn7i-c8g1.4xlarge"], gpus_per_node=1, node_capacity={"cpu": "15", "memory": "56Gi"}
    )
    assert pool.unlisted_types == ["ecs.gn7i-c8g1.4xlarge"]


def test_the_plan_warns_that_a_type_of_no_family_the_platform_knows_is_checked_only_at_preview(
    run_stack, monkeypatch
) -> None:
    # gn7x is no family of the page nor of the known limits: a slip in it can only be found by ECS.
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    run_stack(left_out_pool("ecs.gn7x-c8g1.2xlarge", cpu="8", memory="64Gi"), "dev")
    assert [w for w in warned if "gpuPool" in w] == [
        "ack-training-platform:gpuPool.instanceTypes: the platform's table does not list ecs.gn7x-c8g1.2xlarge, "
        "so the cpu and memory of the jobs on pool 'gpu' are checked against what ECS lists for the types only "
        "at pulumi preview, not here: give gpuPool.nodeCapacity to check them offline. Nor does it know the "
        "family of ecs.gn7x-c8g1.2xlarge: a misspelt name is found only at pulumi preview (ECS sells no such type)"
    ]

"""The ECS GPU instance types the platform knows without asking the cloud: what each has
(vCPUs, memory, GPUs) as Alibaba Cloud's family page lists it (:mod:`.instance_data`),
and the family a type belongs to. At ``pulumi preview`` ECS's own DescribeInstanceTypes
answer is checked as well (components/preflight/); it cannot loosen this table's bounds,
which load-time checks apply first. A type outside the table is sized by ECS's answer alone."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from .instance_data import FAMILIES, LEFT_OUT, READ_ON, SOURCE_TITLE, SOURCE_URL


@dataclass(frozen=True)
class InstanceType:
    """One ECS instance type as its family page lists it.

    Args:
        name: the instance type, e.g. ``ecs.gn7i-c8g1.2xlarge``.
        family: its family without ``ecs.``, e.g. ``gn7i``.
        vcpus: vCPUs.
        memory_gib: memory, GiB.
        gpus: GPUs.
        gpu_model: the GPU as the page names it; ``None`` where the page gives only its memory.
        gpu_memory_gb: memory of each GPU, GB as the page writes it.
        eri: the page says the family supports elastic RDMA interfaces (eRDMA).
        note: the page's restriction on the family (regions, preview), if any.
    """

    name: str
    family: str
    vcpus: int
    memory_gib: int
    gpus: int
    gpu_model: str | None
    gpu_memory_gb: int
    eri: bool
    note: str | None


GPU_INSTANCE_TYPES: dict[str, InstanceType] = {
    name: InstanceType(
        name, family, vcpus, memory, gpus, about["gpu"], about["gpu_memory_gb"], about["eri"], about["note"]
    )
    for family, about in FAMILIES.items()
    for name, vcpus, memory, gpus in about["types"]
}
"""Every GPU instance type of the family page, by name."""

# ecs.<family>[-<n>x | -c<n>g<n>].<size>: the part after the family tells GPUs or the CPU/GPU
# ratio, not another family (ECS: "Instance naming conventions").
_TYPE_NAME = re.compile(r"^ecs\.(?P<family>[a-z0-9]+(?:-tee)?)(?:-\d+x|-c\d+g\d+)?\.[a-z0-9]+$")


def family_of_name(instance_type: str) -> str | None:
    """The family an ECS type name gives, without ``ecs.`` (``ecs.gn8is-2x.8xlarge``: ``gn8is``);
    ``None`` for a name of no ECS form."""
    match = _TYPE_NAME.match(instance_type)
    return match["family"] if match else None


def instance_family(instance_type: str) -> str | None:
    """The family of ``instance_type`` without ``ecs.``: the table's, else the one its name gives."""
    known = GPU_INSTANCE_TYPES.get(instance_type)
    return known.family if known is not None else family_of_name(instance_type)


def misnamed_type(instance_type: str) -> str | None:
    """Why ``instance_type``, of a family whose every size the page lists but not one of them, is
    taken for a misspelling, naming the family's closest types; ``None`` for a listed type or one
    of a family the table does not hold (:data:`~.instance_data.LEFT_OUT`, or unknown), which
    only ECS can judge."""
    family = family_of_name(instance_type)
    if instance_type in GPU_INSTANCE_TYPES or family not in FAMILIES:
        return None
    sizes = [name for name, *_ in FAMILIES[family]["types"]]
    closest = difflib.get_close_matches(instance_type, sizes, n=3, cutoff=0)
    return (
        f"{instance_type} is no {family} type of ECS's family page (docs/configuration.md, GPU instance types): "
        f"did you mean {', '.join(closest)}"
    )


def instance_type_table() -> str:
    """The table as Markdown, with its source and the date it was read (docs/configuration.md)."""
    lines = [
        f"From {SOURCE_TITLE}, <{SOURCE_URL}>, read {READ_ON}. A pool of these types needs no "
        "`gpuPool.nodeCapacity`: jobs are checked against the vCPUs and memory below, and "
        "`pulumi preview` checks them again against what ECS itself lists (`DescribeInstanceTypes`). "
        "GPU model `—`: the page gives only the GPU's memory. eRDMA: the page says the family supports "
        "elastic RDMA interfaces; `gpuPool.fabric: erdma` takes the families ACK lists for eRDMA training. "
        f"A family missing here, such as {', '.join(LEFT_OUT)}, has no figures in the pages read "
        "([known limits](known-limits.md)): a pool of it plans without `gpuPool.nodeCapacity`, but its GPU jobs "
        "must give their own `cpu` and `memory`, which only `pulumi preview` checks, against what ECS lists. "
        "A name of a family listed here that is none of its sizes is refused as misspelt, with the closest "
        "sizes, unless the pool gives `gpuPool.nodeCapacity`.",
        "",
        "| instance type | vCPUs | memory (GiB) | GPUs | GPU model | GPU memory (GB each) | eRDMA |",
        "|---|---|---|---|---|---|---|",
    ]
    for spec in GPU_INSTANCE_TYPES.values():
        lines.append(
            f"| `{spec.name}` | {spec.vcpus} | {spec.memory_gib} | {spec.gpus} | {spec.gpu_model or '—'} | "
            f"{spec.gpu_memory_gb} | {'yes' if spec.eri else 'no'} |"
        )
    lines += ["", "What the page says of some families:", ""]
    lines += [f"- {family}: {about['note']}." for family, about in FAMILIES.items() if about["note"]]
    return "\n".join(lines)

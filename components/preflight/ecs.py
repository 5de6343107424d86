"""Whether ECS sells the GPU pool's instance types in the vSwitches' zones, for the pool's
spot strategy (or on demand, for a spot pool that compensates with on-demand nodes), and
ECS's figures for each type sold, which the jobs are then checked against
(components/preflight/__init__.py)."""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pulumi_alicloud as alicloud

from ..config import PROJECT, GpuPoolSpec

INSTANCE_TYPES = "alicloud:ecs/getInstanceTypes:getInstanceTypes"


def instance_types_sold(pool: GpuPoolSpec | None, zones: list[tuple[str, str]]) -> tuple[list[Any], list[str]]:
    """What ECS reports for each GPU instance type sold in one of ``zones`` (stack key, zone), and
    a problem per type sold in none of them. A spot pool's scaling group is COST_OPTIMIZED
    (components/gpu_pool.py), where ``compensate_with_on_demand`` creates pay-as-you-go instances
    at a scale-out when spot ones cannot be created for their price or stock (pulumi_alicloud
    4.0.0 cs/node_pool.py; Auto Scaling, "Scaling policies", cost optimization policy:
    https://www.alibabacloud.com/help/en/auto-scaling/user-guide/scaling-policy): with it, a type sold
    on demand only is a warning."""
    if pool is None or not zones:
        return [], []
    key_of: dict[str, str] = {}
    for key, zone in zones:
        key_of.setdefault(zone, key)
    spot = pool.spot_strategy != "NoSpot"
    compensated = spot and pool.compensate_with_on_demand
    reported, problems = [], []
    for i, instance_type in enumerate(pool.instance_types):
        listed, refusals = _listed(instance_type, key_of, pool.spot_strategy)
        if not listed and compensated:
            listed, refusals = _listed(instance_type, key_of, "NoSpot")
            if listed:
                pulumi.log.warn(
                    f"{PROJECT}:gpuPool.instanceTypes[{i}]: {instance_type} is not sold as spot in the vSwitches' "
                    f"zones ({', '.join(key_of)}) but is sold on demand in {', '.join(z for z, _ in listed)}: with "
                    "gpuPool.compensateWithOnDemand, nodes of this type will come up on demand, at on-demand price; "
                    "pick a type these zones sell as spot, or set compensateWithOnDemand: false to refuse it"
                )
        if listed:
            reported.append(listed[0][1])
            continue
        sold = "is sold neither as spot nor on demand" if compensated else "is not sold" + " as spot" * spot
        way_out = ", or set gpuPool.compensateWithOnDemand: true for on-demand nodes (at on-demand price)"
        way_out *= spot and not compensated
        problems.append(
            f"{PROJECT}:gpuPool.instanceTypes[{i}]: {instance_type} {sold} in the vSwitches' zones "
            f"({', '.join(key_of)}): pick a type these zones sell, or add a vSwitch in a zone that sells it{way_out} "
            f"(aliyun ecs DescribeAvailableResource --DestinationResource InstanceType --InstanceType {instance_type})"
            + (f"; the provider refused {'; '.join(refusals)}" if refusals else "")
        )
    return reported, problems


def _listed(instance_type: str, key_of: dict[str, str], spot_strategy: str) -> tuple[list[tuple[str, Any]], list[str]]:
    """Each zone of ``key_of`` (zone: stack key) selling ``instance_type`` under ``spot_strategy``, which
    DescribeAvailableResource is asked with (terraform-provider-alicloud v1.289.0
    alicloud/service_alicloud_ecs.go ``DescribeAvailableResources``), with ECS's figures for the
    type there, and the provider's reason for each zone it refused."""
    listed, refusals = [], []
    for zone, key in key_of.items():
        try:
            # A type that is sold out in a zone is not listed for it (Terraform's alicloud_instance_types:
            # "If one instance type is sold out, it will not be exported").
            offered = alicloud.ecs.get_instance_types(
                instance_type=instance_type,
                availability_zone=zone,
                instance_charge_type="PostPaid",
                spot_strategy=spot_strategy,
            ).instance_types
        except Exception as error:  # the SDK's type for a failed look-up; _refusal raises any other again
            refusals.append(f"{key}'s zone {zone}: {_refusal(error)}")
            continue
        listed += [(zone, t) for t in offered or [] if t.id == instance_type]
    return listed, refusals


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GO_ERROR_HEADER = re.compile(r"\[ERROR\] \S+:\d+:$")
_REASON_CHARS = 200
"""The most of a provider's reason a problem line quotes."""


def _refusal(error: Exception) -> str:
    """The provider's reason in a failed ``get_instance_types``, for a zone it refuses.

    The data source first asks DescribeAvailableResource for the zone, with the charge type and
    spot strategy but not the instance type, and when the zone is missing from the answer or sold
    out it returns an error ("Availability zone <zone> status is not available in the region
    <region>. Expected availability zones: ..."), followed on the next line by the whole response,
    rather than an empty list (terraform-provider-alicloud v1.289.0
    alicloud/service_alicloud_ecs.go ``DescribeAvailableResources``, returned as is by
    ``dataSourceAliCloudInstanceTypesRead`` in alicloud/data_source_alicloud_instance_types.go;
    errors.go's ``ComplexError`` puts "[ERROR] <file>:<line>:" and a line break before it). The
    bridge and the engine prefix it (pulumi-terraform-bridge pkg/tfbridge/provider.go ``Invoke``,
    "invoking <token>: "; pulumi pkg/resource/deploy/source_eval.go, "invocation of <token>
    returned an error: "), and the SDK raises it as a plain ``Exception`` whose message begins
    "invoke of <token> failed: " (pulumi 3.272 pulumi/runtime/invoke.py), which has no type of
    its own: that message is how a failed look-up is told from any other error.

    Raises:
        Exception: ``error`` itself when it is not the SDK's failed ``get_instance_types``.
    """
    prefix = f"invoke of {INSTANCE_TYPES} failed: "
    if type(error) is not Exception or not str(error).startswith(prefix):
        raise error
    lines = [line.strip() for line in _ANSI.sub("", str(error).removeprefix(prefix)).splitlines() if line.strip()]
    # The first line of the provider's own words, without the response dumped after them; where the
    # response is dumped on that line ("There are no available zones in the API DescribeAvailableResource
    # response: %#v.", line 485 of the same file), only its start.
    words = next((line for line in lines if not _GO_ERROR_HEADER.search(line)), lines[0] if lines else "")
    words = words.removesuffix(".").strip()
    return words + "." if len(words) <= _REASON_CHARS else words[:_REASON_CHARS].rstrip() + " ..."

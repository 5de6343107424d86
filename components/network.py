"""The VPC and vSwitches the cluster, its nodes and the NAS mount target live in."""

from __future__ import annotations

import pulumi
import pulumi_alicloud as alicloud

from ._k8s import TOKEN
from .config import NetworkSpec


class Network(pulumi.ComponentResource):
    """A VPC with one vSwitch per zone, or an adopted VPC and its vSwitches.

    Attributes:
        vpc_id: the VPC id.
        vswitch_ids: vSwitch ids, in the order nodes should prefer them.
        vpc_cidr: the VPC's IPv4 block (the NAS access rule is limited to it).
        adopted: whether the VPC existed before this stack.
    """

    def __init__(self, name: str, spec: NetworkSpec, *, opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"{TOKEN}:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.vpc_cidr = str(spec.vpc_cidr)
        self.adopted = spec.vpc_id is not None
        if spec.vpc_id is not None:
            self.vpc_id = pulumi.Output.from_input(spec.vpc_id)
            self.vswitch_ids = pulumi.Output.from_input(list(spec.vswitch_ids))
        else:
            vpc = alicloud.vpc.Network(
                name, vpc_name=name, cidr_block=self.vpc_cidr, description="ack-training-platform network", opts=child
            )
            switches = [
                alicloud.vpc.Switch(
                    f"{name}-{vsw.zone_id}",
                    vswitch_name=f"{name}-{vsw.zone_id}",
                    vpc_id=vpc.id,
                    cidr_block=str(vsw.cidr),
                    zone_id=vsw.zone_id,
                    opts=child,
                )
                for vsw in spec.vswitches
            ]
            self.vpc_id = vpc.id
            self.vswitch_ids = pulumi.Output.all(*[s.id for s in switches])
        self.register_outputs({"vpcId": self.vpc_id, "vswitchIds": self.vswitch_ids})

    @property
    def first_vswitch_id(self) -> pulumi.Output[str]:
        return self.vswitch_ids.apply(lambda ids: ids[0])

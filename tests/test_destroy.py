"""``pulumi destroy --exclude-protected``: what it deletes, in which order, and what it
leaves, read from the resource graph the program registers."""

from __future__ import annotations

from conftest import stack_config
from test_platform import bought_instance

from components.plan.records import Plan, Recorded

BINDING = "pulumi-python:dynamic/slb:ListenerAcl"
CLUSTER = "alicloud:cs/managedKubernetes:ManagedKubernetes"
ACL = "alicloud:slb/acl:Acl"
FS = "alicloud:nas/fileSystem:FileSystem"
INSTANCE = "alicloud:cr/registryEnterpriseInstance:RegistryEnterpriseInstance"


def kept_by_exclude_protected(plan: Plan) -> set[str]:
    """The URNs ``--exclude-protected`` leaves: each protected resource, every ancestor of
    one, and everything one depends on (pulumi/pulumi PR #8359: a parent of a protected
    resource, and a dependency of one, cannot go before it)."""
    by_urn = {r.urn: r for r in plan.resources}
    kept: set[str] = set()
    todo = [r.urn for r in plan.resources if r.protect]
    while todo:
        urn = todo.pop()
        if urn in kept or urn not in by_urn:
            continue
        kept.add(urn)
        todo += [by_urn[urn].parent, *by_urn[urn].dependencies]
    return kept


def deletion_order(plan: Plan) -> list[Recorded]:
    """The resources in an order the engine may delete them: every resource after all that
    depend on it or are its children."""
    waiting_on = {r.urn: 0 for r in plan.resources}
    for r in plan.resources:
        for needed in {r.parent, *r.dependencies} & waiting_on.keys():
            waiting_on[needed] += 1
    by_urn = {r.urn: r for r in plan.resources}
    ready = [urn for urn, n in waiting_on.items() if n == 0]
    order = []
    while ready:
        urn = ready.pop()
        order.append(by_urn[urn])
        for needed in {by_urn[urn].parent, *by_urn[urn].dependencies} & waiting_on.keys():
            waiting_on[needed] -= 1
            if waiting_on[needed] == 0:
                ready.append(needed)
    assert len(order) == len(plan.resources), "the dependency graph has a cycle"
    return order


def test_the_api_server_access_list_is_unbound_before_it_and_the_cluster_go(run_stack) -> None:
    plan = run_stack(stack_config("dev"), "dev")
    binding, cluster, acl = plan.one(BINDING), plan.one(CLUSTER), plan.one(ACL)
    # The binding takes the cluster's load balancer and the list as inputs: it depends on both.
    assert {cluster.urn, acl.urn} <= set(binding.dependencies)
    order = [r.urn for r in deletion_order(plan)]
    assert order.index(binding.urn) < order.index(cluster.urn)
    assert order.index(binding.urn) < order.index(acl.urn)


def test_destroy_excluding_protected_keeps_the_data_and_the_bought_registry(run_stack) -> None:
    plan = run_stack(bought_instance(), "prod")
    kept = {r.type for r in plan.resources if r.urn in kept_by_exclude_protected(plan) and r.custom}
    # Only the data and the registry instance stay; the cluster, pools, mount target and
    # access group (nothing protected depends on them) are deleted.
    assert kept == {FS, INSTANCE}
    assert plan.one(FS).protect and plan.one(INSTANCE).protect
    assert not any(r.protect for r in plan.resources if r.type in (CLUSTER, "alicloud:nas/mountTarget:MountTarget"))


def test_a_plain_destroy_would_stop_at_the_protected_file_system(run_stack) -> None:
    """Every resource goes in a plain destroy, the protected file system too, which the
    engine refuses: the whole plan stops before anything is deleted."""
    plan = run_stack(stack_config("dev"), "dev")
    protected = [r for r in deletion_order(plan) if r.protect]
    assert [r.type for r in protected] == [FS]

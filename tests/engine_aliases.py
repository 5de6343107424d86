"""A stand-in for the Pulumi engine's matching of a program's resources to a stack's state.

Models pulumi/pulumi ``pkg/resource/deploy/step_generator.go`` at v3.259.0 (``getOldResource``,
``generateAliases``, ``collapseAliasToUrn``, ``inheritedChildAlias``): a resource is the old
one whose URN is its own or, checked in order, one of its aliases'. Its aliases are those the
program gave it, each collapsed to a URN with the resource's own name, type and parent for
what the alias leaves out; and, when its parent was itself found through an alias, the
parent's old URN as parent of its name and type ("multiply out any aliases our parent had";
"Save the alias actually being used so we can look it up later if anything has this as a
parent"), so the children of a moved component follow it at any depth. The mock engine
sends the aliases as specifications and never resolves them; this does, on the recorded
plan.
"""

from __future__ import annotations

from components.plan.records import Plan, Recorded
from components.plan.urns import ROOT_STACK_TYPE, qualified_type, urn_name, urn_type


def _urn(stack: str, project: str, parent_type: str, type_: str, name: str) -> str:
    return f"urn:pulumi:{stack}::{project}::{parent_type + '$' if parent_type else ''}{type_}::{name}"


class DuplicateAlias(Exception):
    """Two resources of the program claim one old resource (the engine's "Duplicate resource alias")."""


def _stack_project(urn: str) -> tuple[str, str]:
    _, _, rest = urn.partition("urn:pulumi:")
    stack, project, _ = rest.split("::", 2)
    return stack, project


def _collapse(goal: Recorded, alias: dict, used: dict[str, str]) -> str:
    if "urn" in alias:
        return alias["urn"]
    stack, project = _stack_project(goal.urn)
    parent = alias.get("parentUrn") or goal.parent
    if alias.get("parentUrn"):
        # "If the parent used an alias then use it's old URN here"
        parent = used.get(parent, parent)
    if alias.get("noParent") or (parent and qualified_type(parent) == ROOT_STACK_TYPE):
        parent = ""
    return _urn(
        alias.get("stack") or stack,
        alias.get("project") or project,
        qualified_type(parent) if parent else "",
        alias.get("type") or goal.type,
        alias.get("name") or goal.name,
    )


def _inherited(goal: Recorded, child_type: str, child_name: str, parent_name: str, parent_alias: str) -> str:
    # A child named after its parent ("{name}-details") takes the parent's old name as prefix.
    name = urn_name(parent_alias) + child_name[len(parent_name) :] if child_name.startswith(parent_name) else child_name
    # The deployment's own stack and project, whatever stack or project the parent's alias named.
    stack, project = _stack_project(goal.urn)
    return _urn(stack, project, qualified_type(parent_alias), child_type, name)


def aliases_of(goal: Recorded, used: dict[str, str]) -> list[str]:
    """The alias URNs the engine tries for ``goal``, in its order; ``used`` maps each resource
    found through an alias to the old URN it was found by."""
    found: list[str] = []
    for alias in goal.aliases:
        found.append(_collapse(goal, alias, used))
    if goal.parent in used:
        parent_alias = used[goal.parent]
        parent_name = urn_name(goal.parent)
        found.append(_inherited(goal, goal.type, goal.name, parent_name, parent_alias))
        for alias in goal.aliases:
            child = _collapse(goal, alias, used)
            found.append(_inherited(goal, urn_type(child), urn_name(child), parent_name, parent_alias))
    return list(dict.fromkeys(found))


def match(olds: set[str], plan: Plan) -> dict[str, str]:
    """Each old URN the program's resources take over, mapped to the URN that takes it.

    Raises:
        DuplicateAlias: two resources claim one old resource.
    """
    used: dict[str, str] = {}
    taken: dict[str, str] = {}
    for goal in plan.resources:  # registration order: a parent before its children
        for candidate in [goal.urn, *aliases_of(goal, used)]:
            if candidate in olds:
                if candidate in taken:
                    raise DuplicateAlias(f"{goal.urn} and {taken[candidate]} both claim {candidate}")
                taken[candidate] = goal.urn
                if candidate != goal.urn:
                    used[goal.urn] = candidate
                break
    return taken

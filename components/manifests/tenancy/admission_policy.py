"""A ValidatingAdmissionPolicy and the binding that denies what it refuses in one team's
namespace: the shape both halves of a team's admission boundary (:mod:`.admission`,
:mod:`.job_guard`) share."""

from __future__ import annotations

from ..base import MANAGED_BY, TEAM_LABEL, Manifest


def admission_policy(
    name: str,
    team: str,
    resource_rules: list[dict],
    variables: list[tuple[str, str]],
    validations: list[tuple[str, str]],
    match_conditions: list[tuple[str, str]] = (),
) -> list[Manifest]:
    """The policy ``name`` (``variables`` and ``validations`` as ``(name, expression)`` and
    ``(expression, message)`` pairs) and its binding to the namespace ``team``, with
    ``failurePolicy: Fail`` so an expression the API server cannot evaluate refuses rather than
    admits."""
    labels = {**MANAGED_BY, TEAM_LABEL: team}
    spec = {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": resource_rules}}
    if match_conditions:
        spec["matchConditions"] = [{"name": n, "expression": e} for n, e in match_conditions]
    spec["variables"] = [{"name": n, "expression": e} for n, e in variables]
    spec["validations"] = [{"expression": e, "message": m} for e, m in validations]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team}}},
        },
    }
    return [policy, binding]

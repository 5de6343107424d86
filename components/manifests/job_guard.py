"""The second half of a team's admission boundary: the stack's jobs keep their names.

The pod policy (:mod:`.admission`) knows a job by its name, pinned to its kind by the pods'
controller; members may create, change and delete PyTorchJobs and TrainJobs
(``tenancy.JOB_USER_RULES``). A member who deleted one of the stack's jobs, or changed its template,
and created another of that name would have pods the policy takes for the stack's job, with its
Secrets. This ValidatingAdmissionPolicy refuses that to the team's members: they may suspend and
resume the stack's jobs (``spec.runPolicy`` on v1, ``spec.suspend`` on v2, as ``ack-jobs suspend``
patches them), nothing more, and name their own jobs otherwise.
"""

from __future__ import annotations

from .base import MANAGED_BY, Manifest
from .pod_rules import literal_list
from .tenancy import TEAM_LABEL

MUTABLE = ("runPolicy", "suspend")
"""What a member may change in one of the stack's jobs: where v1 and v2 suspend a job."""


def job_guard(team: str, members: list[tuple[str, str]], jobs: list[str], name: str) -> list[Manifest]:
    """The policy ``name`` and its binding, refusing the team's ``members`` (``(kind, name)``, kind
    ``User`` or ``Group``, as the team's RoleBinding names them) the creation, deletion, or change
    beyond :data:`MUTABLE`, of a PyTorchJob or TrainJob named as one of the stack's ``jobs``.
    Nothing when there are no members or no jobs."""
    users = [m for kind, m in members if kind == "User"]
    groups = [m for kind, m in members if kind == "Group"]
    if not jobs or not members:
        return []
    unchanged = (
        f"object.spec.all(k, k in {literal_list(MUTABLE)} || (k in oldObject.spec && object.spec[k] == oldObject.spec[k]))"
        f" && oldObject.spec.all(k, k in {literal_list(MUTABLE)} || k in object.spec)"
    )
    variables = [
        (
            "member",
            f"request.userInfo.username in {literal_list(users)} || (has(request.userInfo.groups)"
            f" && request.userInfo.groups.exists(g, g in {literal_list(groups)}))",
        ),
        (
            "stackJob",
            f'(request.operation == "DELETE" ? oldObject.metadata.name : object.metadata.name) in {literal_list(jobs)}',
        ),
    ]
    validation = (
        f'!variables.member || !variables.stackJob || (request.operation == "UPDATE" && {unchanged})',
        f"the stack's jobs in {team} ({', '.join(jobs)}) keep their names and templates: members may only "
        f"suspend or resume them ({', '.join(f'spec.{k}' for k in MUTABLE)}); name your own job otherwise",
    )
    labels = {**MANAGED_BY, TEAM_LABEL: team}
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [group],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "resources": [resource],
                    }
                    for group, resource in (("kubeflow.org", "pytorchjobs"), ("trainer.kubeflow.org", "trainjobs"))
                ]
            },
            "variables": [{"name": n, "expression": e} for n, e in variables],
            "validations": [{"expression": validation[0], "message": validation[1]}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team}}},
        },
    }
    return [policy, binding]

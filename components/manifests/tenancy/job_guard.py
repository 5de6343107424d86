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

from ..base import Manifest
from .admission_policy import admission_policy
from .pod_rules import literal_list

FIXED = {
    "pytorchjobs": ("pytorchReplicaSpecs", "elasticPolicy", "nprocPerNode"),
    "trainjobs": ("runtimeRef", "initializer", "trainer", "runtimePatches", "managedBy"),
}
"""What a member may not change in one of the stack's jobs: every field of the spec that decides
what its pods run (kubeflow/trainer v1.9.4 ``pkg/apis/kubeflow.org/v1/pytorch_types.go``
``PyTorchJobSpec``, v2.3.0 ``pkg/apis/trainer/v1alpha1/trainjob_types.go`` ``TrainJobSpec``), so
``spec.runPolicy`` (v1) and ``spec.suspend`` (v2), where jobs are suspended, stay open. Named
field by field: the API server types a custom resource's fields from its schema, where an
object's fields cannot be iterated like a map's keys."""


def _same(field: str) -> str:
    new, old = f"object.spec.{field}", f"oldObject.spec.{field}"
    return f"has({new}) == has({old}) && (!has({new}) || {new} == {old})"


def job_guard(team: str, members: list[tuple[str, str]], jobs: list[str], name: str) -> list[Manifest]:
    """The policy ``name`` and its binding, refusing the team's ``members`` (``(kind, name)``, kind
    ``User`` or ``Group``, as the team's RoleBinding names them) the creation, deletion, or change
    of :data:`FIXED`, of a PyTorchJob or TrainJob named as one of the stack's ``jobs``.
    Nothing when there are no members or no jobs."""
    users = [m for kind, m in members if kind == "User"]
    groups = [m for kind, m in members if kind == "Group"]
    if not jobs or not members:
        return []
    v1, v2 = (" && ".join(_same(f) for f in FIXED[resource]) for resource in ("pytorchjobs", "trainjobs"))
    unchanged = f'(request.resource.resource == "pytorchjobs" ? ({v1}) : ({v2}))'
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
        f"suspend or resume them (spec.runPolicy, spec.suspend); name your own job otherwise",
    )
    job_rules = [
        {
            "apiGroups": [group],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "resources": [resource],
        }
        for group, resource in (("kubeflow.org", "pytorchjobs"), ("trainer.kubeflow.org", "trainjobs"))
    ]
    return admission_policy(name, team, job_rules, variables, [validation])

"""The namespace training jobs run in: the platform's own, or one per team."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from ._k8s import TOKEN, resource_args, typed_resource
from .config import TeamSpec, TrainingNamespaceSpec
from .manifests import (
    Manifest,
    TeamBoundary,
    run_as,
    team_access,
    team_admission,
    team_namespace,
    team_network_policies,
    training_namespace,
)


class TrainingNamespace(pulumi.ComponentResource):
    """Namespace, service account and quota for jobs: the platform's training namespace, or a
    team's namespace with its Role, its admission policy and, on a Terway cluster, its
    NetworkPolicies.

    Args:
        name: Pulumi resource name.
        spec: the training namespace's settings (its service account name serves teams too).
        provider: the cluster's kubernetes provider.
        team: the team whose namespace this is; ``None`` for the training namespace.
        network_policies: wall the team's pods in with NetworkPolicies.
        scraper_namespace: with ``network_policies``, the namespace whose pods may scrape the
            team's trainers (``None``: none may).
        admission: what the team's pods may use, enforced by a ValidatingAdmissionPolicy on every
            pod of its namespace; ``None`` for none (a team only).

    Attributes:
        name: the namespace name.
        service_account: the jobs' service account name.
        namespace: the Namespace resource (depend on it before creating objects inside).
        team: the team, or ``None``.
        security_context: the pod security context of the team's jobs, or ``None``.
    """

    def __init__(
        self,
        name: str,
        spec: TrainingNamespaceSpec,
        *,
        provider: k8s.Provider,
        team: TeamSpec | None = None,
        network_policies: bool = False,
        admission: TeamBoundary | None = None,
        scraper_namespace: str | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:TrainingNamespace", name, None, opts)
        self.team = team
        self.name = team.name if team is not None else spec.namespace
        self.service_account = spec.service_account
        # A team's namespace has the team's own quota (team.quota).
        self.gpu_quota = spec.gpu_quota if team is None else None
        self.security_context: Manifest | None = run_as(team) if team is not None else None
        if team is None:
            manifests = training_namespace(spec)
        else:
            manifests = [
                *team_namespace(team, service_account=spec.service_account),
                *team_access(team),
                *(team_network_policies(team.name, scraper_namespace=scraper_namespace) if network_policies else []),
                *(team_admission(admission) if admission is not None else []),
            ]
        first, *rest = manifests
        self.namespace = k8s.core.v1.Namespace(
            self.name, **resource_args(first), opts=pulumi.ResourceOptions(parent=self, provider=provider)
        )
        inside = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[self.namespace])
        # Members get their RoleBinding last: until the walls and the admission policies stand,
        # what they submit would run unchecked.
        grants = [m for m in rest if m["kind"] == "RoleBinding"]
        walls = [self._object(m, team, inside) for m in rest if m["kind"] != "RoleBinding"]
        after_walls = pulumi.ResourceOptions.merge(inside, pulumi.ResourceOptions(depends_on=walls))
        for manifest in grants:
            self._object(manifest, team, after_walls)
        self.register_outputs({"name": self.name})

    def _object(self, manifest: Manifest, team: TeamSpec | None, opts: pulumi.ResourceOptions) -> pulumi.Resource:
        name = manifest["metadata"]["name"]
        # The SDK class is looked up by the object's kind when it is made, so the SDK's module of a
        # kind the stack never makes (NetworkPolicy without Terway) is never loaded.
        return typed_resource(
            f"{self.name}-{manifest['kind'].lower()}-{name}" if team is not None else f"{self.name}-{name}",
            manifest,
            opts,
        )

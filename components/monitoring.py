"""Monitoring: scraping of the training pods, the alert rules, the dashboard and TensorBoard."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s
import yaml

from ._k8s import IMAGE_PLACEHOLDER, TOKEN, resource_args, with_image
from .config import MonitoringScope, TeamSpec
from .manifests import Manifest
from .manifests.base import TRAINER_UID
from .manifests.monitoring.alerts import alerts
from .manifests.monitoring.node_health import node_guard_objects
from .manifests.monitoring.objects import operator_objects, pod_monitors
from .manifests.monitoring.rules import arms_alert_rule
from .manifests.monitoring.tensorboard import port_forward_command, tensorboard_objects
from .namespace import TrainingNamespace
from .registry import ContainerRegistry, image_pushed, pinned_image
from .storage import SharedVolumes

ARMS_MONITORING_TYPE = "podMonitor"
"""``alicloud.arms.PrometheusMonitoring`` takes a PodMonitor's YAML with this type (pulumi-alicloud
4.0.0 ``arms/prometheus_monitoring.py``)."""
PLAIN_KINDS = {
    "ServiceAccount": k8s.core.v1.ServiceAccount,
    "ClusterRole": k8s.rbac.v1.ClusterRole,
    "ClusterRoleBinding": k8s.rbac.v1.ClusterRoleBinding,
    "Deployment": k8s.apps.v1.Deployment,
    "ValidatingAdmissionPolicy": k8s.admissionregistration.v1.ValidatingAdmissionPolicy,
    "ValidatingAdmissionPolicyBinding": k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding,
}
BOUNDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
"""The node health controller starts once what bounds its node patches is in place."""


class TeamWorkspace(NamedTuple):
    """A team's namespace and claims, where its own TensorBoard runs as the team."""

    team: TeamSpec
    namespace: TrainingNamespace
    storage: SharedVolumes


class Monitoring(pulumi.ComponentResource):
    """What watches the training jobs of every namespace in ``spec``, as its ``monitoring`` key asks.

    - ``operator``: PodMonitors for the jobs and the v1 operator, a PrometheusRule and the
      dashboard ConfigMap, for a prometheus-operator the cluster runs; its CRDs must exist.
    - ``arms``: the same PodMonitors registered with ACK's managed Prometheus through the ARMS
      API and one ARMS alert rule per alert, all waiting for the ``arms-prometheus`` add-on.
    - TensorBoard (``tensorboard.enabled``), on the system nodes with the output claim read-only,
      once its image is in the registry (:func:`~components.registry.image_pushed`): one in the
      training namespace, and one in each team's, reading only that team's claim as the team's
      uid (NFS tells teams apart by uid, so no TensorBoard reads another team's events).

    Args:
        name: Pulumi resource name.
        spec: what it watches (``PlatformSpec.monitoring_scope()``).
        namespace: the training namespace.
        storage: the shared volumes (TensorBoard reads the output claim).
        provider: the cluster's kubernetes provider.
        node_selector: the system pool's labels, or ``None``.
        registry: the registry the training image is in, or ``None``.
        cluster_id: the ACK cluster's id; ARMS names the cluster's Prometheus instance by it.
        depends_on: what the ARMS objects wait for (the ``arms-prometheus`` add-on).
        teams: each team's namespace and claims.

    Attributes:
        tensorboard_command: the ``kubectl port-forward`` command, or ``None``.
        team_tensorboard_commands: each team's ``kubectl port-forward`` command, by team name.
    """

    def __init__(
        self,
        name: str,
        spec: MonitoringScope,
        *,
        namespace: TrainingNamespace,
        storage: SharedVolumes,
        provider: k8s.Provider,
        node_selector: dict[str, str] | None = None,
        registry: ContainerRegistry | None = None,
        cluster_id: pulumi.Input[str] | None = None,
        depends_on: Sequence[pulumi.Resource] = (),
        teams: Sequence[TeamWorkspace] = (),
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(f"{TOKEN}:Monitoring", name, None, opts)
        in_cluster = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[namespace.namespace])
        if spec.prometheus == "operator":
            for obj in operator_objects(spec):
                self._object(obj, in_cluster)
        elif spec.prometheus == "arms":
            if cluster_id is None:
                raise ValueError("monitoring with ARMS needs the ACK cluster's id")
            arms = pulumi.ResourceOptions(parent=self, depends_on=list(depends_on))
            for monitor in pod_monitors(spec):
                alicloud.arms.PrometheusMonitoring(
                    monitor["metadata"]["name"],
                    cluster_id=cluster_id,
                    type=ARMS_MONITORING_TYPE,
                    config_yaml=yaml.safe_dump(monitor, sort_keys=False),
                    status="run",
                    opts=arms,
                )
            for rule in alerts(spec):
                alicloud.arms.PrometheusAlertRule(rule.name, cluster_id=cluster_id, **arms_alert_rule(rule), opts=arms)
        self._node_guard(spec, namespace, provider, node_selector, registry)
        self.tensorboard_command: str | None = None
        self.team_tensorboard_commands: dict[str, str] = {}
        image_ref, tag = spec.tensorboard_image
        if spec.runs_tensorboard and image_pushed(registry, tag, "TensorBoard"):
            image = pinned_image(image_ref, tag, registry, "TensorBoard")
            workspaces = [(None, namespace, storage, (TRAINER_UID, TRAINER_UID))]
            workspaces += [(team.name, ns, volumes, (team.uid, team.group_id)) for team, ns, volumes in teams]
            for team, where, volumes, run_as in workspaces:
                objects = with_image(
                    tensorboard_objects(
                        spec.monitoring.tensorboard,
                        namespace=where.name,
                        image=IMAGE_PLACEHOLDER,
                        output_claim=volumes.output_claim,
                        node_selector=node_selector,
                        image_pull_secret=registry.pull_secret if registry is not None else None,
                        run_as=run_as,
                    ),
                    image,
                )
                waits = pulumi.ResourceOptions(
                    depends_on=[where.namespace, *volumes.claims, *(registry.ready if registry else [])]
                )
                for obj in objects:
                    self._object(obj, pulumi.ResourceOptions.merge(in_cluster, waits), prefix=team)
                if team is None:
                    self.tensorboard_command = port_forward_command(where.name)
                else:
                    self.team_tensorboard_commands[team] = port_forward_command(where.name)
        self.register_outputs(
            {"tensorboard": self.tensorboard_command, "teamTensorboards": self.team_tensorboard_commands}
        )

    def _node_guard(
        self,
        spec: MonitoringScope,
        namespace: TrainingNamespace,
        provider: k8s.Provider,
        node_selector: dict[str, str] | None,
        registry: ContainerRegistry | None,
    ) -> None:
        """The GPU node health controller, once the training image it runs from is in the registry."""
        health = spec.monitoring.node_health
        image_ref, tag = spec.trainer_image
        owner = "the GPU node health controller"
        if not health.enabled or spec.gpu_pool is None or not image_pushed(registry, tag, owner):
            return
        objects = node_guard_objects(
            health,
            namespace=namespace.name,
            pool=spec.gpu_pool,
            image=IMAGE_PLACEHOLDER,
            node_selector=node_selector,
            image_pull_secret=registry.pull_secret if registry is not None else None,
        )
        opts = pulumi.ResourceOptions(
            parent=self, provider=provider, depends_on=[namespace.namespace, *(registry.ready if registry else [])]
        )
        objects = with_image(objects, pinned_image(image_ref, tag, registry, owner))
        bounds = [self._object(obj, opts) for obj in objects if obj["kind"] in BOUNDS]
        for obj in objects:
            if obj["kind"] not in BOUNDS:
                waits = pulumi.ResourceOptions(depends_on=bounds) if obj["kind"] == "Deployment" else None
                self._object(obj, pulumi.ResourceOptions.merge(opts, waits))

    def _object(self, obj: Manifest, opts: pulumi.ResourceOptions, prefix: str | None = None) -> pulumi.Resource:
        kind, name = obj["kind"], obj["metadata"]["name"]
        # Teams' objects share names with the training namespace's; their resource names carry the team.
        name = f"{prefix}-{name}" if prefix else name
        if kind == "StatefulSet":
            return k8s.apps.v1.StatefulSet(f"{name}-{kind.lower()}", **resource_args(obj), opts=opts)
        if kind == "Service":
            return k8s.core.v1.Service(f"{name}-{kind.lower()}", **resource_args(obj), opts=opts)
        if kind == "ConfigMap":
            return k8s.core.v1.ConfigMap(name, **resource_args(obj), opts=opts)
        if kind in PLAIN_KINDS:
            return PLAIN_KINDS[kind](f"{name}-{kind.lower()}", **resource_args(obj), opts=opts)
        return k8s.apiextensions.CustomResource(name, **resource_args(obj), opts=opts)

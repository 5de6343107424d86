"""What a stack's monitoring puts in the cluster, as complete objects: the PodMonitors for
every mode, and for a self-hosted prometheus-operator the PrometheusRule and the dashboard
ConfigMap too, all carrying ``monitoring.labels``."""

from __future__ import annotations

from ..config import PlatformSpec
from .alerts import alerts, prometheus_rule
from .base import Manifest
from .dashboard import dashboard_configmap, training_dashboard
from .operator import OPERATOR_NAMESPACE
from .scraping import operator_pod_monitor, trainer_pod_monitor


def _labelled(objects: list[Manifest], spec: PlatformSpec) -> list[Manifest]:
    for obj in objects:
        obj["metadata"]["labels"].update(spec.monitoring.labels)
    return objects


def pod_monitors(spec: PlatformSpec) -> list[Manifest]:
    """The PodMonitors of the training pods and, when the stack installs it, the v1 operator."""
    namespace = spec.training.namespace
    monitors = [trainer_pod_monitor(namespace, [namespace, *(team.name for team in spec.teams)])]
    if spec.operator.install:
        monitors.append(operator_pod_monitor(OPERATOR_NAMESPACE))
    return _labelled(monitors, spec)


def operator_objects(spec: PlatformSpec) -> list[Manifest]:
    """Everything a self-hosted prometheus-operator and Grafana's sidecar pick up: the
    PodMonitors, the PrometheusRule and, unless switched off, the dashboard ConfigMap."""
    namespace = spec.training.namespace
    objects = [*pod_monitors(spec), prometheus_rule(alerts(spec), namespace)]
    if spec.monitoring.dashboard:
        objects.append(dashboard_configmap(training_dashboard(namespace), namespace))
    return _labelled(objects, spec)

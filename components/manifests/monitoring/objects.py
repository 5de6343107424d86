"""What a stack's monitoring puts in the cluster, as complete objects: the PodMonitors for
every mode, and for a self-hosted prometheus-operator the PrometheusRule and the dashboard
ConfigMap too, all carrying ``monitoring.labels``."""

from __future__ import annotations

from ...config import MonitoringScope
from ..base import Manifest
from ..platform.operator import OPERATOR_NAMESPACE
from .alerts import alerts
from .cost_rules import cost_rule
from .rules import prometheus_rule
from .scraping import operator_pod_monitor, trainer_pod_monitor


def _labelled(objects: list[Manifest], scope: MonitoringScope) -> list[Manifest]:
    for obj in objects:
        obj["metadata"]["labels"].update(scope.monitoring.labels)
    return objects


def pod_monitors(scope: MonitoringScope) -> list[Manifest]:
    """The PodMonitors of the training pods of every namespace and, when the stack installs it,
    the v1 operator."""
    monitors = [trainer_pod_monitor(scope.home, list(scope.namespaces))]
    if scope.v1_operator:
        monitors.append(operator_pod_monitor(OPERATOR_NAMESPACE))
    return _labelled(monitors, scope)


def operator_objects(scope: MonitoringScope) -> list[Manifest]:
    """Everything a self-hosted prometheus-operator and Grafana's sidecar pick up: the
    PodMonitors, the PrometheusRule, the cost rules when the stack has prices and, unless switched off,
    the dashboard ConfigMap."""
    objects = [*pod_monitors(scope), prometheus_rule(alerts(scope), scope.home)]
    if (costs := cost_rule(scope)) is not None:
        objects.append(costs)
    if scope.monitoring.dashboard:
        # Built with the Grafana SDK, loaded only by a stack that has the dashboard (about 30 ms).
        from .dashboard import dashboard_configmap, training_dashboard

        board = training_dashboard(
            scope.namespaces, cost_currency=scope.cost_currency, exporters=scope.monitoring.exporters
        )
        objects.append(dashboard_configmap(board, scope.home))
    return _labelled(objects, scope)

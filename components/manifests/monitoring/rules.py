"""An alerting rule, and the forms the platform hands it over in: a Prometheus rule group (what a
plain rules file for ``promtool`` and a PrometheusRule hold) and the arguments of an ARMS alert
rule. The platform's alerts (:mod:`.alerts`) and the cost rules' budget alerts
(:mod:`.cost_rules`) are made of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..base import MANAGED_BY, Manifest
from .scraping import MONITORING_API

RULE_GROUP = "ack-training-platform.training"
RULE_NAME = "ack-training-platform-training"


@dataclass(frozen=True)
class Alert:
    """One alerting rule.

    Args:
        name: the alert name.
        expr: PromQL; a series in its result is a firing alert.
        for_minutes: how long the condition must hold.
        severity: ``critical`` (act now) or ``warning`` (act today).
        summary: one line, with label templates.
        description: what happened and what to do first.
        threshold_key: the stack key that sets its threshold, if one does.
    """

    name: str
    expr: str
    for_minutes: int
    severity: Literal["critical", "warning"]
    summary: str
    description: str
    threshold_key: str | None = None


def rule_group(rules: list[Alert]) -> Manifest:
    """``rules`` as one Prometheus rule group, as both a rules file and a PrometheusRule hold it."""
    return {
        "name": RULE_GROUP,
        "rules": [
            {
                "alert": rule.name,
                "expr": rule.expr,
                "for": f"{rule.for_minutes}m",
                "labels": {"severity": rule.severity},
                "annotations": {"summary": rule.summary, "description": rule.description},
            }
            for rule in rules
        ],
    }


def prometheus_rule(rules: list[Alert], namespace: str) -> Manifest:
    """The PrometheusRule (``monitoring.coreos.com/v1``) holding ``rules``.

    Args:
        rules: the alerts (:func:`alerts`).
        namespace: where the object lives (the training namespace).

    Returns:
        A complete PrometheusRule object.
    """
    return {
        "apiVersion": MONITORING_API,
        "kind": "PrometheusRule",
        "metadata": {"name": RULE_NAME, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "spec": {"groups": [rule_group(rules)]},
    }


def arms_alert_rule(rule: Alert) -> dict[str, object]:
    """Keyword arguments of ``alicloud.arms.PrometheusAlertRule`` (pulumi-alicloud 4.0.0) for
    ``rule``, less the cluster id: ARMS evaluates alert rules it stores itself (API
    ``CreatePrometheusAlertRule``), with the duration in minutes and the summary as the
    notification's message."""
    return {
        "prometheus_alert_rule_name": rule.name,
        "expression": rule.expr,
        "duration": str(rule.for_minutes),
        "message": rule.summary,
        "labels": [{"name": "severity", "value": rule.severity}],
        "annotations": [
            {"name": "summary", "value": rule.summary},
            {"name": "description", "value": rule.description},
        ],
        "notify_type": "ALERT_MANAGER",
    }

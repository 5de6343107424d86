"""The job alerts with ``monitoring.exporters.kubeStateMetricsJob``: they read kube-state-metrics' series by
that job label only, so a team's pod serving series of the same names raises no alert, while every alert's
firing and quiet case (:mod:`test_monitoring`) holds on the exporter's own series."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import cfg
from test_cost_rules_forged import POD, TEAM, scraped_from_team_pod
from test_monitoring import CASES, MORE_CASES, metric_names_in, operator_config, run_promtool_cases

from components.config import load_spec
from components.manifests.monitoring.alert_queries import kube_state_metrics_only
from components.manifests.monitoring.alerts import alerts

JOB = "kube-state-metrics"


def config(told: bool = True) -> dict:
    """The operator stack with a team, ``TEAM``, whose namespace the alerts watch."""
    config = operator_config()
    quota = {"gpus": 8, "cpu": "96", "memory": "768Gi"}
    config[cfg("cluster")]["network"] = "terway"
    config[cfg("teams")] = [{"name": TEAM, "uid": 2002, "quota": quota}]
    for job in config[cfg("jobs")]:
        job["team"] = TEAM
    if told:
        config[cfg("monitoring")]["exporters"] = {"kubeStateMetricsJob": JOB}
    return config


def served_by_the_exporter(series: dict[str, str]) -> dict[str, str]:
    """Input series with kube-state-metrics' labelled as its ServiceMonitor's scrape labels them."""
    return {
        (re.sub(r"^(kube_\w+)\{", rf'\1{{job="{JOB}",', s) if s.startswith("kube_") else s): v
        for s, v in series.items()
    }


def test_every_kube_state_metrics_selector_names_its_job() -> None:
    rules = alerts(load_spec(config(), credentials=False).monitoring_scope())
    read = 0
    for rule in rules:
        for name in {n for n in metric_names_in(rule.expr) if n.startswith("kube_")}:
            after = [rule.expr[m.end() :] for m in re.finditer(rf"(?<![\w:]){name}(?![\w:])", rule.expr)]
            assert all(a.startswith(f'{{job="{JOB}"') for a in after), (rule.name, name)
            read += 1
    assert read > 10
    # Label values and label_replace's arguments are not selectors.
    assert kube_state_metrics_only('label_replace(kube_x, "kube_y", "$1", "z", "kube_w(.+)")', JOB) == (
        f'label_replace(kube_x{{job="{JOB}"}}, "kube_y", "$1", "z", "kube_w(.+)")'
    )


def test_every_alert_still_fires_on_the_exporters_own_series(tmp_path: Path) -> None:
    told = operator_config()
    told[cfg("monitoring")]["exporters"] = {"kubeStateMetricsJob": JOB}
    rules = alerts(load_spec(told, credentials=False).monitoring_scope())
    cases = {
        name: (at, served_by_the_exporter(firing), labels, served_by_the_exporter(quiet))
        for name, (at, firing, labels, quiet) in CASES.items()
    }
    more = [(name, at, served_by_the_exporter(series), labels) for name, at, series, labels in MORE_CASES]
    run_promtool_cases(tmp_path, rules, cases, more)


def test_a_team_pods_forged_pending_pod_raises_no_alert(tmp_path: Path) -> None:
    # The team's pod, running, serves a Pending phase and a training container under its own uid: as
    # the platform's PodMonitor stores them, namespace and pod are the pod's own.
    ids = {"job": JOB, "namespace": TEAM, "pod": POD, "uid": "forged"}
    forged = {
        scraped_from_team_pod("kube_pod_status_phase", ids | {"phase": "Pending"}): "1x40",
        scraped_from_team_pod("kube_pod_container_info", ids | {"container": "pytorch"}): "1x40",
    }
    pending = {"namespace": TEAM, "pod": POD, "severity": "warning"}
    # Read by name, the forged series raise TrainingPodPending for a pod that runs; by job, they do not.
    for told, tmp, fired in ((False, tmp_path / "by-name", pending), (True, tmp_path / "by-job", None)):
        rules = alerts(load_spec(config(told), credentials=False).monitoring_scope())
        run_promtool_cases(tmp, rules, {}, [("TrainingPodPending", "30m", forged, fired)])

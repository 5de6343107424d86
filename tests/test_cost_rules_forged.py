"""A team's pod serving series named as kube-state-metrics' and the DCGM exporter's, under ``promtool test
rules``: the cost rules read only the exporters' own series (``monitoring.exporters``), so the forged ones
change no job's, team's or pool's figure, and the recorded run keeps its figures worked out by hand
(:mod:`test_cost_rules`).

The forged series are stored as Prometheus stores what the platform's PodMonitor scrapes from a team's pod
(:func:`scraped_from_team_pod`): prometheus-operator v0.79.0 ``pkg/prometheus/promcfg.go``
``generatePodMonitorConfig`` sets the target labels ``namespace`` (``__meta_kubernetes_namespace``),
``container`` (``__meta_kubernetes_pod_container_name``), ``pod`` (``__meta_kubernetes_pod_name``), ``job``
(``<PodMonitor's namespace>/<its name>``, no ``jobLabel`` given) and ``endpoint`` (the port's name), then the
PodMonitor's own relabelings; Prometheus adds ``instance`` (the target's address); and with ``honor_labels``
false, the PodMonitor's default, a scraped label that a target label also sets is kept as
``exported_<name>`` (Prometheus docs, ``scrape_config`` ``honor_labels``).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from conftest import cfg
from loopback_api import NS
from test_cost_rules import (
    BY_HAND,
    KIND,
    KSM,
    MINUTES,
    config,
    promtool_test,
    recorded_run,
    stack_rules,
    without_annotations,
)

from components.config import ConfigError, load_spec
from components.config.costs import BudgetSpec
from components.manifests.monitoring import cost_rules as c
from components.manifests.monitoring.scraping import TRAINER_MONITOR, trainer_pod_monitor

TEAM = "vision"
POD = "evil-worker-0"
POD_ADDRESS = "10.0.3.7:9464"


def scraped_from_team_pod(metric: str, served: dict[str, str]) -> str:
    """``metric`` with the ``served`` labels, as Prometheus stores it when the platform's PodMonitor (in the
    training namespace, watching the teams') scrapes it from the pytorch container of ``TEAM``'s pod ``POD``."""
    endpoint = trainer_pod_monitor(NS, [NS, TEAM])["spec"]["podMetricsEndpoints"][0]
    target = {
        "namespace": TEAM,
        "container": "pytorch",
        "pod": POD,
        "job": f"{NS}/{TRAINER_MONITOR}",
        "endpoint": endpoint["port"],
        "instance": POD_ADDRESS,
        # The PodMonitor's relabelings: the job's name from the pod's label; the pod has no pool label.
        "training_job": "evil",
    }
    stored = {(f"exported_{k}" if k in target else k): v for k, v in served.items()} | target
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(stored.items())) + "}"


def test_the_team_pod_stand_in_sets_the_target_labels_the_platforms_pod_monitor_gives() -> None:
    monitor = trainer_pod_monitor(NS, [NS, TEAM])
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    # honorLabels unset: prometheus-operator writes honor_labels false (promcfg.go AddHonorLabels).
    assert "honorLabels" not in endpoint and "jobLabel" not in monitor["spec"]
    relabelled = {r["targetLabel"] for r in endpoint["relabelings"]}
    stored = scraped_from_team_pod("up", {"namespace": "training", "job": "kube-state-metrics", "uid": "u"})
    assert stored == (
        'up{container="pytorch",endpoint="metrics",exported_job="kube-state-metrics",exported_namespace="training",'
        f'instance="{POD_ADDRESS}",job="training/ack-training-platform-trainer",namespace="vision",pod="{POD}",'
        'training_job="evil",uid="u"}'
    )
    assert "training_job" in relabelled


def team_run() -> dict[str, str]:
    """The recorded run, plus ``TEAM``'s own job: pod ``POD`` holds 1 of od-0's 8 GPUs (on demand, 40/8 = 5 an
    hour) for 2 h, as kube-state-metrics serves it: 10, and 2 GPU-hours."""
    series = recorded_run()
    ids = f'{KSM},namespace="{TEAM}",pod="{POD}",uid="evil-uid"'
    series[
        f'kube_pod_container_resource_requests{{{ids},container="pytorch",node="od-0",resource="nvidia_com_gpu",'
        'unit="integer"}'
    ] = f"1x{MINUTES}"
    series[f'kube_pod_status_phase{{{ids},phase="Running"}}'] = f"1x119 0x{MINUTES - 120}"
    series[f'kube_pod_owner{{{ids},owner_kind="PyTorchJob",owner_name="evil",owner_is_controller="true"}}'] = (
        f"1x{MINUTES}"
    )
    return series


def forged() -> dict[str, dict[str, str]]:
    """What ``POD`` serves on its metrics port to lower its team's spend and skew another team's figures, by
    attack."""
    ksm = {"job": "kube-state-metrics"}
    own = {"namespace": TEAM, "pod": POD, "uid": "evil-uid", "container": "pytorch", "node": "od-0"}
    attacks = {
        # Minus its own GPU: its team's spend and GPU-hours to nothing, under its budget.
        "minus its own GPU": {
            scraped_from_team_pod(
                c.POD_REQUESTS, ksm | own | {"resource": "nvidia_com_gpu", "unit": "integer"}
            ): f"-1x{MINUTES}"
        },
        # bert's spot node relabelled into the on-demand pool: priced on demand, counted in another pool.
        "another team's node repriced": {
            scraped_from_team_pod(
                c.NODE_LABELS, ksm | {"node": "spot-0", c.INSTANCE_TYPE_SERIES: KIND, c.POOL_SERIES: "gpu"}
            ): f"1x{MINUTES}"
        },
        # bert's master's other GPUs reported idle, under the labels NVIDIA's exporter gives the GPU's pod.
        "another team's GPUs idle": {
            scraped_from_team_pod(
                "DCGM_FI_DEV_GPU_UTIL", {"namespace": NS, "pod": "bert-master-0", "gpu": str(gpu), "Hostname": "spot-0"}
            ): f"0x{MINUTES}"
            for gpu in range(1, 8)
        },
        # The cost rules' own series, which the later rules read: bert's spot node priced twice, which would
        # leave every pod's cost unrecorded, and a cost on od-0 that bert's pool would sum.
        "another team's node priced": {
            scraped_from_team_pod(c.NODE_GPU_PRICE, {"node": "spot-0"}): f"0x{MINUTES}",
        },
        "a pod's cost on a shared node": {
            scraped_from_team_pod(c.POD_COST, {"node": "od-0", "pod": POD}): f"1000x{MINUTES}",
        },
    }
    attacks["all at once"] = {k: v for series in attacks.values() for k, v in series.items()}
    return attacks


BUDGET = ((TEAM, BudgetSpec(amount=5, period="day")),)
"""``TEAM``'s budget: 5 a day, which its job's 10 passes."""


@pytest.mark.parametrize("attack", list(forged()))
def test_a_team_pods_forged_exporter_series_change_no_figure(tmp_path: Path, attack: str) -> None:
    at = f"{MINUTES}m"
    bert = f'{{namespace="{NS}",training_job="bert"}}'
    evil = f'{{namespace="{TEAM}",training_job="evil"}}'
    figures = {
        # The recorded run's, as worked out by hand.
        (c.JOB_COST, bert): BY_HAND["cost"],
        (c.JOB_ON_DEMAND_COST, bert): BY_HAND["on_demand"],
        (c.JOB_GPUS, bert): BY_HAND["gpu_hours"],
        (c.JOB_IDLE_GPUS, bert): 0.5,
        (c.TEAM_COST, f'{{namespace="{NS}"}}'): BY_HAND["cost"],
        # The team's own: 1 GPU at 5 an hour for 2 h.
        (c.JOB_COST, evil): 10,
        (c.JOB_GPUS, evil): 2,
        (c.TEAM_COST, f'{{namespace="{TEAM}"}}'): 10,
        # Pools: gpu-spot holds spot-0 (bert's master, 24); gpu holds od-0 (bert's worker, 60, and the team's 10).
        (c.POOL_COST, '{pool="gpu-spot"}'): 24,
        (c.POOL_COST, '{pool="gpu"}'): 70,
        (c.POOL_GPUS, '{pool="gpu"}'): 12 + 2,
    }
    assert BY_HAND["cost"] - 2 * 12.0 == 60
    cases = []
    for run in (team_run(), team_run() | forged()[attack]):
        checks = [
            {
                "expr": c.over(f"{series}{labels}", "1d"),
                "eval_time": at,
                "exp_samples": [{"labels": labels, "value": v}],
            }
            for (series, labels), v in figures.items()
        ]
        cases.append(
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in run.items()],
                "promql_expr_test": checks,
                "alert_rule_test": [
                    {
                        "eval_time": at,
                        "alertname": "TeamBudgetExceeded",
                        "exp_alerts": [{"exp_labels": {"namespace": TEAM, "severity": "critical"}}],
                    }
                ],
            }
        )
    promtool_test(tmp_path, without_annotations(stack_rules(BUDGET)), cases)


def test_the_gpu_exporters_series_under_the_gpus_own_pod_labels_are_not_read(tmp_path: Path) -> None:
    # Series naming the GPU's pod as namespace and pod are what a team's pod's series carry too: they are
    # not read, and bert's idle GPU time is the NVIDIA exporter's alone (GPU 0 of the master, 0.5 GPU-hours).
    bert = f'{{namespace="{NS}",training_job="bert"}}'
    run = recorded_run()
    for gpu in range(1, 8):
        run[f'DCGM_FI_DEV_GPU_UTIL{{namespace="{NS}",pod="bert-master-0",gpu="{gpu}"}}'] = f"0x{MINUTES}"
    test = {
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in run.items()],
        "promql_expr_test": [
            {
                "expr": c.over(f"{c.JOB_IDLE_GPUS}{bert}", "1d"),
                "eval_time": f"{MINUTES}m",
                "exp_samples": [{"labels": bert, "value": 0.5}],
            }
        ],
    }
    promtool_test(tmp_path, stack_rules(), [test])


def test_every_series_the_cost_rules_read_is_the_exporters() -> None:
    # Each selector of a kube-state-metrics series names its job, each of the GPU series its exporter's namespace.
    exprs = [r["expr"] for g in stack_rules() for r in g["rules"]]
    for metric, told in (
        (c.POD_REQUESTS, KSM),
        (c.NODE_LABELS, KSM),
        ("kube_pod_status_phase", KSM),
        ("kube_pod_owner", KSM),
        ("kube_job_owner", KSM),
        ("DCGM_FI_DEV_GPU_UTIL", 'namespace="gpu-operator"'),
    ):
        selectors = [s for e in exprs for s in e.split(metric + "{")[1:]]
        assert selectors, metric
        assert sum(e.count(metric) for e in exprs) == len(selectors), metric
        assert all(told in s.split("}")[0].split(",") for s in selectors), (metric, selectors)


@pytest.mark.parametrize(
    ("exporters", "message"),
    [
        (
            {"dcgmNamespace": "gpu-operator"},
            "ack-training-platform:monitoring.exporters.kubeStateMetricsJob: the cost rules read kube-state-metrics' "
            "series, and Prometheus also scrapes the teams' pods, which could serve series of the same names: give "
            "the job label of its series",
        ),
        (
            {"kubeStateMetricsJob": "kube-state-metrics"},
            "ack-training-platform:monitoring.exporters.dcgmNamespace: the cost rules count idle GPUs from the DCGM "
            "exporter's series",
        ),
        ({"kubeStateMetricsJob": 'ksm"} or vector(1)', "dcgmNamespace": "gpu-operator"}, "kubeStateMetricsJob"),
        ({"kubeStateMetricsJob": "kube-state-metrics", "dcgmNamespace": "GPU_Operator"}, "dcgmNamespace"),
    ],
)
def test_the_cost_rules_need_the_exporters_labels(exporters: dict, message: str) -> None:
    raw = config()
    raw[cfg("monitoring")]["exporters"] = exporters
    with pytest.raises(ConfigError) as raised:
        load_spec(raw, credentials=False)
    assert message in str(raised.value)


def test_the_dcgm_exporters_namespace_is_the_same_for_costs_and_node_health() -> None:
    raw = config()
    raw[cfg("monitoring")]["nodeHealth"] = {"exporterNamespace": "dcgm"}
    with pytest.raises(ConfigError) as raised:
        load_spec(raw, credentials=False)
    assert (
        "ack-training-platform:monitoring.exporters.dcgmNamespace: 'gpu-operator' is not "
        "monitoring.nodeHealth.exporterNamespace ('dcgm'): both name the namespace the DCGM exporter's pods run in"
    ) in str(raised.value)
    raw[cfg("monitoring")]["nodeHealth"] = {"exporterNamespace": "gpu-operator"}
    assert load_spec(raw, credentials=False).monitoring.exporters.dcgm_namespace == "gpu-operator"


def test_the_dcgm_exporters_namespace_is_not_one_the_platform_scrapes() -> None:
    # Series from the training namespace's pods carry namespace="training", as the exporter's carry its own.
    raw = config()
    raw[cfg("monitoring")]["exporters"] = {**raw[cfg("monitoring")]["exporters"], "dcgmNamespace": NS}
    with pytest.raises(ConfigError) as raised:
        load_spec(raw, credentials=False)
    assert (
        f"ack-training-platform:monitoring.exporters.dcgmNamespace: '{NS}' is a namespace whose pods the platform "
        "scrapes (the training namespace or a team's)"
    ) in str(raised.value)


def test_without_the_cost_rules_the_exporters_labels_are_not_needed() -> None:
    raw = config(monitoring={"prometheus": "arms"})
    assert load_spec(raw, credentials=False).costs is not None
    without_costs = copy.deepcopy(config())
    del without_costs[cfg("costs")]
    del without_costs[cfg("monitoring")]["exporters"]
    assert load_spec(without_costs, credentials=False).costs is None

"""What a job costs, from the stack's prices: the ``costs`` key's checks, ``ack-jobs cost`` reading the
stack's prices, and the cost recording rules and budget alerts under ``promtool test rules``, all against
one recorded run whose cost is worked out by hand.

The recorded run (series in the shapes kube-state-metrics v2.20.0 serves them, see
``components/manifests/monitoring/cost_rules.py``): job ``bert`` in namespace ``training`` has two pods, each
holding all 8 GPUs of an ``ecs.gn7e-c16g1.32xlarge`` (a test price of 40 an hour on demand, 12 spot):

- ``bert-master-0`` on ``spot-0``, a node of the stack's spot pool ``gpu-spot``, runs 2 h (minutes 0-119);
- ``bert-worker-0`` on ``od-0``, a node of another pool, billed on demand, runs 1.5 h (minutes 0-89).

By hand: GPU-hours 8 x 2 + 8 x 1.5 = 28; cost 2 h x 12 + 1.5 h x 40 = 24 + 60 = 84; on demand
3.5 h x 40 = 140; spot savings 140 - 84 = 56.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import cfg, stack_config
from loopback_api import NS, V1, jobs
from test_cost import NODES, PODS, node
from test_monitoring import metric_names_in, promtool

from components.config import ConfigError, MonitoringScope, load_spec
from components.config.costs import BudgetSpec, price_table
from components.manifests.monitoring import cost_rules as c
from components.manifests.monitoring import cost_series, gpu_metrics, kube_metrics
from components.manifests.monitoring.objects import operator_objects
from components.plan.command import write_dashboard, write_job_state_metrics
from components.platform import _dashboard as platform_dashboard

KIND = "ecs.gn7e-c16g1.32xlarge"
COSTS = {
    "date": "2026-11-01",
    "source": "test table",
    "currency": "USD",
    "instances": {KIND: {"gpus": 8, "vcpus": 128, "onDemand": 40.0, "spot": 12.0}},
}
EXPORTERS = {"kubeStateMetricsJob": "kube-state-metrics", "dcgmNamespace": "gpu-operator"}
KSM = 'job="kube-state-metrics"'
"""kube-state-metrics' series as its chart's ServiceMonitor labels them (``job`` from its Service)."""
BY_HAND = {"gpu_hours": 8 * 2 + 8 * 1.5, "cost": 2 * 12.0 + 1.5 * 40.0, "on_demand": 3.5 * 40.0}
assert BY_HAND == {"gpu_hours": 28.0, "cost": 84.0, "on_demand": 140.0}


def _prices_of(spec):
    """What the price table is built from: the stack's prices and its GPU pool."""
    return spec.costs, spec.gpu_pool


def config(**changes: Any) -> dict[str, Any]:
    """The dev stack with a spot pool of 8-GPU nodes, its prices and a prometheus-operator."""
    config = stack_config("dev")
    config[cfg("gpuPool")].update(name="gpu-spot", instanceTypes=[KIND], gpusPerNode=8)
    config[cfg("training")]["gpuQuota"] = 16
    config[cfg("monitoring")] = {"prometheus": "operator", "exporters": dict(EXPORTERS)}
    config[cfg("costs")] = json.loads(json.dumps(COSTS))
    for key, value in changes.items():
        config[cfg(key)] = value
    return config


# --- the costs key ----------------------------------------------------------------------------


def bad(change: dict[str, Any]) -> dict[str, Any]:
    costs = {**COSTS, **change}
    return config(costs={k: v for k, v in costs.items() if v is not None})


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (bad({"date": None}), "ack-training-platform:costs.date: required key is missing"),
        (bad({"source": None}), "ack-training-platform:costs.source: required key is missing"),
        (
            bad({"instances": {"ecs.gn7i-c8g1.2xlarge": {"gpus": 1, "vcpus": 8, "onDemand": 1.0}}}),
            "ack-training-platform:costs.instances: no price for the GPU pool's instance types "
            "['ecs.gn7e-c16g1.32xlarge']: add them, so its nodes' time is priced",
        ),
        (
            bad({"instances": {KIND: {"gpus": 8, "vcpus": 128, "onDemand": 40.0}}}),
            f"ack-training-platform:costs.instances: {KIND}: no spot price, and gpuPool 'gpu-spot' runs spot "
            "instances (SpotAsPriceGo): give spot, the price it was read at",
        ),
        (
            bad({"instances": {KIND: {"gpus": 4, "vcpus": 128, "onDemand": 40.0, "spot": 12.0}}}),
            f"ack-training-platform:costs.instances: {KIND}: gpus is 4, but gpuPool.gpusPerNode is 8: a pod "
            "pays its GPUs' share of the node, so give the instance's GPU count",
        ),
    ],
)
def test_a_price_table_without_its_date_or_source_or_a_pool_price_is_refused(raw, error) -> None:
    with pytest.raises(ConfigError) as raised:
        load_spec(raw, credentials=False)
    assert error in str(raised.value)


def test_a_budget_needs_prices() -> None:
    raw = stack_config("prod")
    raw[cfg("teams")][0]["budget"] = {"amount": 1000, "period": "week"}
    with pytest.raises(ConfigError) as raised:
        load_spec(raw, credentials=False)
    assert "ack-training-platform:teams[0].budget: a budget is counted in the stack's prices, and it has none" in str(
        raised.value
    )


def test_a_budget_needs_the_cost_rules_to_alert() -> None:
    # The prod stack runs under ARMS (monitoring.prometheus: arms), where the cost rules are not created.
    raw = stack_config("prod")
    pool = raw[cfg("gpuPool")]
    instances = {kind: {"gpus": pool["gpusPerNode"], "vcpus": 192, "onDemand": 40.0} for kind in pool["instanceTypes"]}
    raw[cfg("costs")] = {**COSTS, "instances": instances}
    raw[cfg("teams")][0]["budget"] = {"amount": 1000}
    with pytest.raises(ConfigError) as raised:
        load_spec(raw, credentials=False)
    assert (
        "ack-training-platform:teams[0].budget: a budget alert reads the cost recording rules, which run only with "
        "monitoring.prometheus: operator (here 'arms'): set it, or drop budget and read spend with ack-jobs cost"
    ) in str(raised.value)
    raw[cfg("monitoring")] = {**raw[cfg("monitoring")], "prometheus": "operator", "exporters": dict(EXPORTERS)}
    assert load_spec(raw, credentials=False).monitoring_scope().budgets[0][1].amount == 1000


def test_the_docs_price_table_and_budget_load_on_the_dev_stack() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "monitoring.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", doc, re.S) if "ack-training-platform:costs:" in b]
    # The dev stack without its jobs, which would have to name a team once the stack declares teams.
    raw = {k: v for k, v in stack_config("dev").items() if k != cfg("jobs")} | yaml.safe_load(block)
    scope = load_spec(raw, credentials=False).monitoring_scope()
    assert [(team, budget.amount, budget.period) for team, budget in scope.budgets] == [("nlp", 2000, "month")]


def test_the_stack_exports_its_prices_with_the_spot_pools() -> None:
    table = price_table(*_prices_of(load_spec(config(), credentials=False)))
    assert table == {**COSTS, "instances": {KIND: {**COSTS["instances"][KIND]}}, "spotPools": ["gpu-spot"]}
    assert price_table(*_prices_of(load_spec(stack_config("dev"), credentials=False))) is None


# --- ack-jobs cost with the stack's prices ---------------------------------------------------


def outputs_file(tmp_path: Path) -> Path:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"prices": price_table(*_prices_of(load_spec(config(), credentials=False)))}))
    return path


def test_ack_jobs_cost_prices_the_recorded_run_from_the_stack(cluster, tmp_path: Path) -> None:
    api, kubeconfig = cluster
    api.routes[("GET", f"{V1}/bert")] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bert"},
    }
    api.pods += PODS
    api.nodes += [node("spot-0", "gpu-spot"), node("od-0", "gpu")]
    code, lines = jobs(kubeconfig, "--outputs", str(outputs_file(tmp_path)), "cost", "bert")
    assert code == 0, lines
    assert lines[0] == "Prices: test table, read 2026-11-01 (USD)"
    row = lines[2].split()
    assert row[0] == "bert"
    assert [float(v) for v in row[1:4]] == [
        BY_HAND["gpu_hours"],
        BY_HAND["cost"],
        BY_HAND["on_demand"] - BY_HAND["cost"],
    ]


def test_the_command_line_table_overrides_the_stacks(cluster, tmp_path: Path) -> None:
    api, kubeconfig = cluster
    api.routes[("GET", f"{V1}/bert")] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bert"},
    }
    api.pods += PODS
    api.nodes += NODES
    prices = tmp_path / "prices.yaml"
    # Everything on demand at 20 an hour: 3.5 h x 20 = 70.
    prices.write_text(
        yaml.safe_dump(
            {**COSTS, "source": "the bill", "instances": {KIND: {"gpus": 8, "vcpus": 128, "onDemand": 20.0}}}
        )
    )
    code, lines = jobs(kubeconfig, "--outputs", str(outputs_file(tmp_path)), "cost", "bert", "--prices", str(prices))
    assert code == 0, lines
    assert lines[0] == "Prices: the bill, read 2026-11-01 (USD)"
    assert lines[2].split()[2] == "70.00"


def test_cost_without_any_prices_says_where_to_set_them(cluster, tmp_path: Path, capsys) -> None:
    _, kubeconfig = cluster
    empty = tmp_path / "outputs.json"
    empty.write_text("{}")
    assert jobs(kubeconfig, "--outputs", str(empty), "cost", "bert") == (2, [])
    assert capsys.readouterr().err == (
        "ack-jobs cost: the stack has no prices (its costs key, docs/monitoring.md): set costs, or give "
        "--prices FILE, a dated price table with its source\n"
    )


# --- the recording rules and budget alerts under promtool --------------------------------------

MINUTES = 180
RUNNING_UNTIL = {"bert-master-0": 120, "bert-worker-0": 90}
ON_NODE = {"bert-master-0": "spot-0", "bert-worker-0": "od-0"}


def recorded_run() -> dict[str, str]:
    """The run above as input series, one sample a minute for 3 h; the GPU exporter's pod labels as
    NVIDIA's chart gives them (renamed ``exported_``)."""
    series = {
        f'kube_node_labels{{{KSM},node="spot-0",{c.INSTANCE_TYPE_SERIES}="{KIND}",{c.POOL_SERIES}="gpu-spot"}}': f"1x{MINUTES}",
        f'kube_node_labels{{{KSM},node="od-0",{c.INSTANCE_TYPE_SERIES}="{KIND}",{c.POOL_SERIES}="gpu"}}': f"1x{MINUTES}",
    }
    for pod, until in RUNNING_UNTIL.items():
        ids = f'{KSM},namespace="{NS}",pod="{pod}",uid="{pod}-uid"'
        # Requests stay while the finished pod is kept; only its phase says it stopped.
        series[
            f'kube_pod_container_resource_requests{{{ids},container="pytorch",node="{ON_NODE[pod]}",'
            f'resource="nvidia_com_gpu",unit="integer"}}'
        ] = f"8x{MINUTES}"
        asked = f'kube_pod_container_resource_requests{{{ids},container="pytorch",node="{ON_NODE[pod]}"'
        series[f'{asked},resource="cpu",unit="core"}}'] = f"16x{MINUTES}"
        series[f'{asked},resource="memory",unit="byte"}}'] = f"{64 * 2**30}x{MINUTES}"
        series[f'kube_pod_status_phase{{{ids},phase="Running"}}'] = f"1x{until - 1} 0x{MINUTES - until}"
        series[f'kube_pod_status_phase{{{ids},phase="Succeeded"}}'] = f"0x{until - 1} 1x{MINUTES - until}"
        series[f'kube_pod_owner{{{ids},owner_kind="PyTorchJob",owner_name="bert",owner_is_controller="true"}}'] = (
            f"1x{MINUTES}"
        )
    # dcgm-exporter behind honorLabels false: the GPU's pod as exported_pod. GPU 0 of the master ran no
    # kernel for its first 30 minutes: 0.5 idle GPU-hours.
    for gpu in range(8):
        labels = f'exported_namespace="{NS}",exported_pod="bert-master-0",gpu="{gpu}",namespace="gpu-operator"'
        series[f"DCGM_FI_DEV_GPU_UTIL{{{labels}}}"] = "0x29 90x89 stale" if gpu == 0 else "90x119 stale"
    # A GPU of od-0 that no pod holds carries no pod labels (dcgm-exporter labels only the GPUs it maps to
    # a pod): idle, but nobody's.
    series['DCGM_FI_DEV_GPU_UTIL{gpu="7",Hostname="od-0",namespace="gpu-operator"}'] = f"0x{MINUTES}"
    return series


def promtool_test(tmp_path: Path, groups: list[dict[str, Any]], tests: list[dict[str, Any]]) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    checked = subprocess.run([promtool(), "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests})
    )
    result = subprocess.run([promtool(), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def without_annotations(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    return groups


def stack_rules(budgets: tuple[tuple[str, BudgetSpec], ...] = ()) -> list[dict[str, Any]]:
    """The cost PrometheusRule's groups as the stack's operator objects hold them."""
    spec = load_spec(config(), credentials=False)
    scope = spec.monitoring_scope()
    if budgets:
        scope = MonitoringScope(
            **{**scope.__dict__, "namespaces": (*scope.namespaces, *(t for t, _ in budgets)), "budgets": budgets}
        )
    rule = next(o for o in operator_objects(scope) if o["metadata"]["name"] == c.COST_RULE_NAME)
    return rule["spec"]["groups"]


def test_the_recording_rules_price_the_recorded_run_as_by_hand(tmp_path: Path) -> None:
    job = f'{{namespace="{NS}",training_job="bert"}}'
    at = f"{MINUTES}m"

    def total(series: str) -> str:
        return c.over(f"{series}{job}", "1d")

    # Per minute while both pods run (minutes 0-89): 8 GPUs x 12/8 + 8 GPUs x 40/8 = 52 an hour; while only the
    # master runs (90-119): 12. Read once a minute and divided by 60: (90 x 52 + 30 x 12) / 60 = 84.
    # GPUs: (90 x 16 + 30 x 8) / 60 = 28 GPU-hours; on demand (90 x 80 + 30 x 40) / 60 = 140.
    # Idle: GPU 0 of the master under 1 % for 30 minutes: 30 x 1 / 60 = 0.5 GPU-hours.
    # CPU: 16 cores a pod, (90 x 32 + 30 x 16) / 60 = 56 core-hours; memory 64 GiB a pod, 3.5 x 64 = 224 GiB-hours.
    expected = {
        c.JOB_CPU: 56,
        c.JOB_MEMORY: 224 * 2**30,
        c.JOB_COST: BY_HAND["cost"],
        c.JOB_GPUS: BY_HAND["gpu_hours"],
        c.JOB_ON_DEMAND_COST: BY_HAND["on_demand"],
        c.JOB_IDLE_GPUS: 0.5,
    }
    team = {c.TEAM_COST: BY_HAND["cost"], c.TEAM_CPU: 56, c.TEAM_MEMORY: 224 * 2**30}
    # Pool gpu-spot holds spot-0, the master's node: 2 h x 8 GPUs = 16 GPU-hours, 2 h x 12 = 24, 2 h x 16 = 32
    # core-hours, 2 h x 64 = 128 GiB-hours. Pool gpu holds od-0, the worker's: 1.5 h x 8 = 12 GPU-hours,
    # 1.5 h x 40 = 60, 1.5 h x 16 = 24 core-hours, 1.5 h x 64 = 96 GiB-hours. Together the job's 28, 84, 56, 224.
    pools = {
        (c.POOL_GPUS, "gpu-spot"): 16,
        (c.POOL_COST, "gpu-spot"): 24,
        (c.POOL_CPU, "gpu-spot"): 32,
        (c.POOL_MEMORY, "gpu-spot"): 128 * 2**30,
        (c.POOL_GPUS, "gpu"): 12,
        (c.POOL_COST, "gpu"): 60,
        (c.POOL_CPU, "gpu"): 24,
        (c.POOL_MEMORY, "gpu"): 96 * 2**30,
    }
    assert sum(v for (s, _), v in pools.items() if s == c.POOL_COST) == BY_HAND["cost"]
    tests = [
        {
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in recorded_run().items()],
            "promql_expr_test": [
                *(
                    {"expr": total(series), "eval_time": at, "exp_samples": [{"labels": job, "value": value}]}
                    for series, value in expected.items()
                ),
                # The team's (namespace's) totals are the job's, its only one.
                *(
                    {
                        "expr": c.over(f'{series}{{namespace="{NS}"}}', "1d"),
                        "eval_time": at,
                        "exp_samples": [{"labels": f'{{namespace="{NS}"}}', "value": value}],
                    }
                    for series, value in team.items()
                ),
                # Each pool's totals: its node's pod alone.
                *(
                    {
                        "expr": c.over(f'{series}{{pool="{pool}"}}', "1d"),
                        "eval_time": at,
                        "exp_samples": [{"labels": f'{{pool="{pool}"}}', "value": value}],
                    }
                    for (series, pool), value in pools.items()
                ),
                # At minute 60 both pods run: 52 an hour.
                {
                    "expr": c.JOB_COST,
                    "eval_time": "60m",
                    "exp_samples": [{"labels": f"{c.JOB_COST}{job}", "value": 52}],
                },
            ],
        }
    ]
    promtool_test(tmp_path, stack_rules(), tests)


def test_a_trainjobs_pods_are_its_own_through_their_jobset(tmp_path: Path) -> None:
    # Trainer v2: the TrainJob's JobSet, named after it, owns a Job per replicated job, and that Job owns the
    # pods (kube_pod_owner, kube_job_owner). One pod holding 2 of od-0's 8 GPUs (on demand, 40/8 = 5 a GPU)
    # for 60 minutes: 2 x 5 x 1 h = 10, and 2 GPU-hours.
    ids = f'{KSM},namespace="{NS}",pod="gpt-node-0-0-x7k2p",uid="g"'
    series = {
        f'kube_node_labels{{{KSM},node="od-0",{c.INSTANCE_TYPE_SERIES}="{KIND}",{c.POOL_SERIES}="gpu"}}': "1x90",
        f'kube_pod_container_resource_requests{{{ids},container="node",node="od-0",resource="nvidia_com_gpu",unit="integer"}}': "2x90",
        f'kube_pod_status_phase{{{ids},phase="Running"}}': "1x59 0x31",
        f'kube_pod_owner{{{ids},owner_kind="Job",owner_name="gpt-node-0",owner_is_controller="true"}}': "1x90",
        f'kube_job_owner{{{KSM},namespace="{NS}",job_name="gpt-node-0",owner_kind="JobSet",owner_name="gpt",owner_is_controller="true"}}': "1x90",
    }
    gpt = f'{{namespace="{NS}",training_job="gpt"}}'
    tests = [
        {
            "interval": "1m",
            "input_series": [{"series": k, "values": v} for k, v in series.items()],
            "promql_expr_test": [
                {
                    "expr": c.over(f"{c.JOB_COST}{gpt}", "1d"),
                    "eval_time": "90m",
                    "exp_samples": [{"labels": gpt, "value": 10}],
                },
                {
                    "expr": c.over(f"{c.JOB_GPUS}{gpt}", "1d"),
                    "eval_time": "90m",
                    "exp_samples": [{"labels": gpt, "value": 2}],
                },
            ],
        }
    ]
    promtool_test(tmp_path, stack_rules(), tests)


def test_a_team_over_its_budget_is_alerted_and_nearly_over_it_warned(tmp_path: Path) -> None:
    # The run's namespace as a team with a budget of 80 a day, warned at 80 % (64). One reading a minute,
    # from minute 0: 52/60 each while both pods run (minutes 0-89), then 12/60.
    # Minute 72 (73 readings): 73 x 52/60 = 63.27, under 64. Minute 73: 74 x 52/60 = 64.13, over 64.
    # Minute 99: 90 x 52/60 + 10 x 12/60 = 78 + 2 = 80, not over 80. Minute 100: 78 + 11 x 12/60 = 80.2.
    budgets = ((NS, BudgetSpec(amount=80, period="day", warn_at=0.8)), ("vision", BudgetSpec(amount=1, period="day")))
    groups = without_annotations(stack_rules(budgets))
    warned = [{"exp_labels": {"namespace": NS, "severity": "warning"}}]
    exceeded = [{"exp_labels": {"namespace": NS, "severity": "critical"}}]
    tests = [
        {
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in recorded_run().items()],
            "alert_rule_test": [
                {"eval_time": "72m", "alertname": "TeamBudgetNearlySpent", "exp_alerts": []},
                {"eval_time": "73m", "alertname": "TeamBudgetNearlySpent", "exp_alerts": warned},
                {"eval_time": "99m", "alertname": "TeamBudgetNearlySpent", "exp_alerts": warned},
                {"eval_time": "99m", "alertname": "TeamBudgetExceeded", "exp_alerts": []},
                {"eval_time": "100m", "alertname": "TeamBudgetExceeded", "exp_alerts": exceeded},
                {"eval_time": "100m", "alertname": "TeamBudgetNearlySpent", "exp_alerts": []},
                # A day after minute 100 the window holds only minutes 100-119 (or 101-119) of the master alone,
                # 20 x 12/60 = 4 at most: the run's spend has left the rolling day.
                {"eval_time": "1540m", "alertname": "TeamBudgetExceeded", "exp_alerts": []},
                {"eval_time": "1540m", "alertname": "TeamBudgetNearlySpent", "exp_alerts": []},
            ],
        }
    ]
    promtool_test(tmp_path, groups, tests)


def test_gpu_pods_on_nodes_without_their_labels_served_are_alerted(tmp_path: Path) -> None:
    # The recorded run with kube-state-metrics' default kube_node_labels: the node label alone. The pods run
    # until minute 119 (the worker until 89); the alert waits 15 minutes.
    plain = {s: v for s, v in recorded_run().items() if not s.startswith(c.NODE_LABELS)} | {
        f'{c.NODE_LABELS}{{{KSM},node="{node}"}}': f"1x{MINUTES}" for node in ON_NODE.values()
    }
    fired = [{"exp_labels": {"severity": "warning"}}]
    tests = [
        {
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in run.items()],
            "alert_rule_test": [
                {"eval_time": at, "alertname": "CostRulesMissingNodeLabels", "exp_alerts": alerts}
                for at, alerts in expected
            ],
        }
        for run, expected in (
            # Without the labels: firing while the GPU pods run, quiet once they stopped.
            (plain, [("10m", []), ("30m", fired), ("150m", [])]),
            # With them, as the plan's flag serves them: never.
            (recorded_run(), [("10m", []), ("30m", []), ("150m", [])]),
        )
    ]
    promtool_test(tmp_path, without_annotations(stack_rules()), tests)
    (alert,) = [r for g in stack_rules() for r in g["rules"] if r.get("alert") == "CostRulesMissingNodeLabels"]
    assert f"--metric-labels-allowlist={c.NODE_LABELS_ALLOWLIST}" in alert["annotations"]["description"]


# --- the dashboard's Cost row ------------------------------------------------------------------


def cost_row() -> list[dict[str, Any]]:
    """The panels after the dashboard's Cost row, as the stack's dashboard ConfigMap holds them."""
    board = next(
        o
        for o in operator_objects(load_spec(config(), credentials=False).monitoring_scope())
        if o["kind"] == "ConfigMap"
    )
    panels = json.loads(next(iter(board["data"].values())))["panels"]
    titles = [p["title"] for p in panels]
    return panels[titles.index("Cost") + 1 :]


def test_the_cost_panels_read_only_recorded_series_and_the_rules_only_served_ones() -> None:
    recorded = {rule["record"] for group in stack_rules() for rule in group["rules"] if "record" in rule}
    served = set(gpu_metrics.EXPORTED) | set(kube_metrics.KUBE_STATE_METRICS) | {c.POD_REQUESTS, c.NODE_LABELS}
    panels = cost_row()
    assert [p["title"] for p in panels] == [
        "Cost per hour by job (USD)",
        "Cost per job over the time range (USD)",
        "GPU-hours and idle GPU-hours over the time range",
        "Cost per pool over the time range (USD)",
    ]
    for panel in panels:
        for target in panel["targets"]:
            read = metric_names_in(target["expr"])
            assert read and read <= recorded, target["expr"]
            # A pool serves every namespace: its panel is the only one not narrowed to the chosen one.
            assert ('namespace="$namespace"' in target["expr"]) == ("pool" not in panel["title"])
    for group in stack_rules():
        for rule in group["rules"]:
            assert metric_names_in(rule["expr"]) <= served | recorded, rule["expr"]
    # Without prices there are neither rules nor a Cost row.
    plain = operator_objects(
        load_spec(
            stack_config("dev") | {cfg("monitoring"): {"prometheus": "operator"}}, credentials=False
        ).monitoring_scope()
    )
    assert c.COST_RULE_NAME not in {o["metadata"]["name"] for o in plain}
    assert "Cost" not in next(o for o in plain if o["kind"] == "ConfigMap")["data"]["training.json"]


def test_every_copy_of_the_dashboard_has_the_cost_row_where_the_rules_run(tmp_path: Path) -> None:
    # The ConfigMap, the plan's file for Grafana's import and the package's `dashboard` output are one board.
    spec = load_spec(config(), credentials=False)
    board = next(o for o in operator_objects(spec.monitoring_scope()) if o["kind"] == "ConfigMap")
    shipped = json.loads(next(iter(board["data"].values())))
    assert json.loads(write_dashboard(spec, tmp_path).read_text()) == shipped
    assert json.loads(platform_dashboard(spec)) == shipped
    # Under ARMS the rules do not run: no copy has the row.
    arms = load_spec(config(monitoring={"prometheus": "arms"}), credentials=False)
    assert "Cost" not in [p["title"] for p in json.loads(platform_dashboard(arms))["panels"]]


def test_the_cost_panel_shows_the_recorded_runs_cost_as_by_hand(tmp_path: Path) -> None:
    # The panel's queries as Grafana sends them for namespace training over the last day, at minute 180.
    (spent,) = [p for p in cost_row() if p["title"].startswith("Cost per job over")]
    queries = [t["expr"].replace("$namespace", NS).replace("$__range", "1d") for t in spent["targets"]]
    bert = f'{{namespace="{NS}",training_job="bert"}}'
    tests = [
        {
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in recorded_run().items()],
            "promql_expr_test": [
                {"expr": queries[0], "eval_time": f"{MINUTES}m", "exp_samples": [{"labels": bert, "value": 84}]},
                # Spot savings: 140 - 84.
                {"expr": queries[1], "eval_time": f"{MINUTES}m", "exp_samples": [{"labels": bert, "value": 56}]},
            ],
        }
    ]
    promtool_test(tmp_path, stack_rules(), tests)


def test_the_pool_panel_shows_each_pools_cost_as_by_hand(tmp_path: Path) -> None:
    # The master's pool gpu-spot: 2 h x 12 = 24 and 16 GPU-hours; the worker's pool gpu: 1.5 h x 40 = 60 and 12.
    (pools,) = [p for p in cost_row() if p["title"].startswith("Cost per pool")]
    cost, gpu_hours = [t["expr"].replace("$__range", "1d") for t in pools["targets"]]
    tests = [
        {
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in recorded_run().items()],
            "promql_expr_test": [
                {
                    "expr": query,
                    "eval_time": f"{MINUTES}m",
                    "exp_samples": [
                        {"labels": '{pool="gpu-spot"}', "value": spot},
                        {"labels": '{pool="gpu"}', "value": on_demand},
                    ],
                }
                for query, spot, on_demand in ((cost, 24, 60), (gpu_hours, 16, 12))
            ],
        }
    ]
    promtool_test(tmp_path, stack_rules(), tests)


def test_the_stack_deploys_the_cost_rules_and_exports_its_prices(run_stack) -> None:
    plan = run_stack(config())
    rules = {r.name: r.inputs for r in plan.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")}
    assert rules[c.COST_RULE_NAME]["spec"]["groups"][0]["name"] == c.COST_GROUP
    assert rules[c.COST_RULE_NAME]["metadata"]["namespace"] == NS
    assert plan.outputs["prices"] == price_table(*_prices_of(load_spec(config(), credentials=False)))
    # A stack without prices exports none, and ack-jobs cost then asks for --prices.
    assert "prices" not in run_stack(stack_config("dev"), "dev").outputs


def test_the_plan_writes_the_exporter_flag_the_rules_need_where_they_run(tmp_path: Path) -> None:
    written = yaml.safe_load(write_job_state_metrics(load_spec(config(), credentials=False), tmp_path).read_text())
    assert written["args"] == [f"--metric-labels-allowlist={c.NODE_LABELS_ALLOWLIST}"]
    assert c.NODE_LABELS_ALLOWLIST == "nodes=[node.kubernetes.io/instance-type,ack-training-platform/pool]"
    # Without prices, or under ARMS, no cost rules run: no flag.
    for raw in (
        stack_config("dev") | {cfg("monitoring"): {"prometheus": "operator"}},
        config(monitoring={"prometheus": "arms"}),
    ):
        written = yaml.safe_load(write_job_state_metrics(load_spec(raw, credentials=False), tmp_path).read_text())
        assert "args" not in written


def test_the_docs_say_what_each_rule_aggregates_by() -> None:
    """Every recording rule that aggregates (a job's, a team's, a pool's, a pod's or a node's) is in the docs'
    table of cost series with the labels it keeps."""
    docs = (Path(__file__).parent.parent / "docs" / "monitoring.md").read_text()
    documented = {}
    for row in re.findall(r"^\| (`ack_training_platform:.*)$", docs, re.M):
        names, labels = row.split(" | ")[:2]
        for name in re.findall(r"`([^`]+)`", names):
            documented[name if name.startswith(cost_series.PREFIX) else cost_series.PREFIX + name] = re.findall(
                r"`([^`]+)`", labels
            )
    kept = {
        rule["record"]: [label.strip() for label in by.group(1).split(",")]
        for group in stack_rules()
        for rule in group["rules"]
        if "record" in rule and (by := re.match(r"(?:sum|max) by \(([^)]*)\)", rule["expr"]))
    }
    assert {c.JOB_CPU, c.TEAM_CPU, c.TEAM_MEMORY, c.POOL_COST, c.POOL_GPUS, c.POOL_CPU, c.POOL_MEMORY} <= set(kept)
    assert {name: documented.get(name) for name in kept} == kept


def test_the_docs_give_the_exporter_flag_the_rules_need() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "monitoring.md").read_text()
    assert f"`--metric-labels-allowlist={c.NODE_LABELS_ALLOWLIST}`" in docs

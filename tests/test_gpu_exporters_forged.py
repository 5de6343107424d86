"""A team's pod serving series named as the DCGM exporter's, naming another team's pod: where the stack names
the exporter's namespace (``monitoring.exporters.dcgmNamespace``, the stack output ``exporters``), the
dashboard's GPU panels, ``ack-jobs top`` and ``ack-jobs cost``'s idle GPU time read only the exporter's series,
so the forged ones change no figure. Without it they read GPU series from any namespace, as before, and say so.

The forged series are stored as the platform's PodMonitor scrapes them (:func:`scraped_from_team_pod`); the
exporter's as NVIDIA's chart has them scraped (``honorLabels: false``): the exporter pod's ``namespace`` and
``pod``, the GPU's pod as ``exported_namespace`` and ``exported_pod``. The dashboard's queries run under
promtool; the job commands ask :mod:`prometheus_selectors`, whose answers are checked against promtool's.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import stack_config
from loopback_api import NS, V1, jobs, serve_mnist
from prometheus_selectors import Series, evaluate, instant_route, range_route
from test_cost import NODES, PODS, TABLE
from test_cost_rules import BY_HAND, EXPORTERS, MINUTES, config, promtool_test, recorded_run, stack_rules
from test_cost_rules_forged import TEAM, scraped_from_team_pod

from components.config import load_spec
from components.manifests.monitoring import cost_series as cs
from components.manifests.monitoring.dashboard import (
    DASHBOARD_CONFIGMAP,
    DASHBOARD_FILE,
    dashboard_queries,
    training_dashboard,
)
from components.manifests.monitoring.gpu_metrics import GPU_MEMORY_USED, GPU_UTIL, per_pod
from components.manifests.monitoring.objects import operator_objects
from components.plan.command import write_dashboard
from components.platform import _dashboard as platform_dashboard

DCGM = "gpu-operator"
SAMPLES = 10
"""One a minute, from minute 0."""


def exporters_series(metric: str, pod: str, gpu: int) -> str:
    """``metric`` of GPU ``gpu`` held by ``pod`` of ``NS``, as Prometheus stores the DCGM exporter's series."""
    labels = {
        "namespace": DCGM,
        "pod": "dcgm-exporter-7xk2p",
        "job": "dcgm-exporter",
        "exported_namespace": NS,
        "exported_pod": pod,
        "gpu": str(gpu),
        "Hostname": "gpu-node-0",
    }
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def run(forged: bool) -> dict[str, float]:
    """Series and their constant value: mnist's master holds two GPUs (90 % and 60 %, 1000 and 2000 MiB), its
    worker one (70 %, 500 MiB); ``forged``: ``TEAM``'s pod adds a GPU of the master at 0 % and 80000 MiB."""
    series = {
        exporters_series(GPU_UTIL, "mnist-master-0", 0): 90.0,
        exporters_series(GPU_UTIL, "mnist-master-0", 1): 60.0,
        exporters_series(GPU_UTIL, "mnist-worker-0", 0): 70.0,
        exporters_series(GPU_MEMORY_USED, "mnist-master-0", 0): 1000.0,
        exporters_series(GPU_MEMORY_USED, "mnist-master-0", 1): 2000.0,
        exporters_series(GPU_MEMORY_USED, "mnist-worker-0", 0): 500.0,
    }
    if forged:
        served = {"namespace": NS, "pod": "mnist-master-0", "gpu": "7"}
        series[scraped_from_team_pod(GPU_UTIL, served)] = 0.0
        series[scraped_from_team_pod(GPU_MEMORY_USED, served)] = 80000.0
    return series


TRUE = {("util", "mnist-master-0"): 75.0, ("util", "mnist-worker-0"): 70.0}
TRUE |= {("memory", "mnist-master-0"): 3000.0, ("memory", "mnist-worker-0"): 500.0}
SKEWED = {**TRUE, ("util", "mnist-master-0"): 50.0, ("memory", "mnist-master-0"): 83000.0}
"""What the forged GPU makes of the master's figures where series are read from any namespace."""


def stored(series: dict[str, float]) -> Series:
    """``series`` for :mod:`prometheus_selectors`: labels parsed, one sample a minute."""
    out: Series = []
    for text, value in series.items():
        name, labels = text.rstrip("}").split("{", 1)
        parsed = dict(part.split("=", 1) for part in labels.split(","))
        out.append(
            (
                {"__name__": name, **{k: v.strip('"') for k, v in parsed.items()}},
                [(60.0 * i, value) for i in range(SAMPLES)],
            )
        )
    return out


def gpu_checks(queries: list[str], figures: dict[tuple[str, str], float]) -> list[dict[str, Any]]:
    """promtool checks that each GPU query gives ``figures`` per pod at the last minute."""
    checks = []
    for query in queries:
        kind = "util" if GPU_UTIL in query else "memory"
        samples = [{"labels": f'{{pod="{pod}"}}', "value": v} for (k, pod), v in figures.items() if k == kind]
        checks.append({"expr": query, "eval_time": f"{SAMPLES - 1}m", "exp_samples": samples})
    return checks


def promtool_case(series: dict[str, float], checks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "interval": "1m",
        "input_series": [{"series": s, "values": f"{v!r}x{SAMPLES - 1}"} for s, v in series.items()],
        "promql_expr_test": checks,
    }


def gpu_panel_queries(board: dict[str, object]) -> list[str]:
    """The dashboard's GPU queries for job ``mnist`` in ``NS``, as Grafana sends them."""
    found = [q for q in dashboard_queries(board) if GPU_UTIL in q or GPU_MEMORY_USED in q]
    assert len(found) == 2
    return [q.replace("$namespace", NS).replace("$job", "mnist") for q in found]


def test_a_team_pods_forged_gpu_series_change_no_figure_of_the_stacks_dashboard(tmp_path: Path) -> None:
    scope = load_spec(config(), credentials=False).monitoring_scope()
    assert scope.monitoring.exporters.dcgm_namespace == DCGM
    (configmap,) = [o for o in operator_objects(scope) if o["metadata"]["name"] == DASHBOARD_CONFIGMAP]
    queries = gpu_panel_queries(json.loads(configmap["data"][DASHBOARD_FILE]))
    cases = [promtool_case(run(forged), gpu_checks(queries, TRUE)) for forged in (False, True)]
    promtool_test(tmp_path, [], cases)


def test_without_the_exporters_namespace_the_dashboard_reads_gpu_series_from_any_namespace(tmp_path: Path) -> None:
    queries = gpu_panel_queries(training_dashboard([NS, TEAM]))
    promtool_test(tmp_path, [], [promtool_case(run(True), gpu_checks(queries, SKEWED))])


def test_the_selector_stand_in_answers_as_promtool_evaluates(tmp_path: Path) -> None:
    # Both shapes of the job commands' GPU queries, over the exporter's and the forged series.
    queries = [
        per_pod(how, metric, NS, dcgm_namespace=dcgm)
        for how, metric in (("avg", GPU_UTIL), ("sum", GPU_MEMORY_USED))
        for dcgm in (DCGM, None)
    ]
    utilisation = f'{GPU_UTIL}{{namespace="{DCGM}",exported_namespace="{NS}",exported_pod=~"mnist-master-0|x"}}'
    queries += [
        utilisation,
        f'{GPU_UTIL}{{namespace="{NS}",pod=~"mnist-master-0"}} or {GPU_UTIL}{{exported_namespace="{NS}",exported_pod=~"mnist-master-0"}}',
    ]
    series = run(True)
    checks = []
    for query in queries:
        answer = evaluate(query, stored(series))
        assert answer, query
        samples = [
            {"labels": "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}", "value": values[-1][1]}
            for labels, values in answer
        ]
        checks.append({"expr": query, "eval_time": f"{SAMPLES - 1}m", "exp_samples": samples})
    promtool_test(tmp_path, [], [promtool_case(series, checks)])


def outputs_file(tmp_path: Path, exporters: bool) -> str:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"namespace": NS, **({"exporters": {"dcgmNamespace": DCGM}} if exporters else {})}))
    return str(path)


def top(cluster, tmp_path: Path, forged: bool, exporters: bool) -> tuple[int, list[list[str]], list[str]]:
    api, kubeconfig = cluster
    mnist = serve_mnist(api)
    api.routes[("GET", V1)] = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJobList", "items": [mnist]}
    asked: list[str] = []
    api.routes[("GET", "/api/v1/query")] = instant_route(stored(run(forged)), 60.0 * (SAMPLES - 1), asked)
    url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    code, lines = jobs(kubeconfig, "--outputs", outputs_file(tmp_path, exporters), "top", "--prometheus-url", url)
    return code, [line.split() for line in lines], asked


def top_rows(figures: dict[tuple[str, str], float]) -> list[list[str]]:
    return [["JOB", "POD", "GPU-UTIL", "GPU-MEM-USED"]] + [
        ["mnist", pod, f"{figures['util', pod]:.0f}%", f"{figures['memory', pod]:.0f}", "MiB"]
        for pod in ("mnist-master-0", "mnist-worker-0")
    ]


@pytest.mark.parametrize("forged", [False, True])
def test_a_team_pods_forged_gpu_series_change_no_figure_of_top(cluster, tmp_path: Path, capsys, forged: bool) -> None:
    code, rows, asked = top(cluster, tmp_path, forged, exporters=True)
    assert (code, rows) == (0, top_rows(TRUE))
    assert asked and all(f'namespace="{DCGM}"' in q for q in asked)
    assert "names no DCGM exporter namespace" not in capsys.readouterr().err


def test_top_without_the_exporters_output_reads_any_namespace_and_says_so_once(cluster, tmp_path: Path, capsys) -> None:
    code, rows, _ = top(cluster, tmp_path, True, exporters=False)
    assert (code, rows) == (0, top_rows(SKEWED))
    err = capsys.readouterr().err
    assert (
        err.count("ack-jobs top: the stack names no DCGM exporter namespace (monitoring.exporters.dcgmNamespace)") == 1
    )


def test_a_bad_exporters_output_is_refused_naming_it(cluster, tmp_path: Path, capsys) -> None:
    api, kubeconfig = cluster
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"exporters": {"dcgmNamespace": 'x"} or vector(0) #'}}))
    assert jobs(kubeconfig, "--outputs", str(path), "top", "--prometheus-url", "http://127.0.0.1:9")[0] == 2
    assert "ack-jobs top: --stack/--outputs: exporters.dcgmNamespace" in capsys.readouterr().err


def cost_idle(cluster, tmp_path: Path, exporters: bool) -> tuple[int, list[str], list[str]]:
    """``ack-jobs cost bert``'s idle GPU-hours: the exporter's GPU 0 of bert's master idle for its first 30
    minutes (0.5 GPU-hours); ``TEAM``'s pod serves GPUs 1-7 of it idle throughout."""
    api, kubeconfig = cluster
    api.routes[("GET", f"{V1}/bert")] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": NS},
    }
    api.pods += PODS
    api.nodes += NODES
    start = datetime.fromisoformat("2026-11-27T08:00:00+00:00").timestamp()
    minutes = [start + 60.0 * i for i in range(121)]
    series: Series = [
        (
            {
                "__name__": GPU_UTIL,
                "namespace": DCGM,
                "pod": "dcgm-exporter-7xk2p",
                "exported_namespace": NS,
                "exported_pod": "bert-master-0",
                "gpu": "0",
            },
            [(t, 0.0 if i < 30 else 99.0) for i, t in enumerate(minutes)],
        )
    ]
    for gpu in range(1, 8):
        text = scraped_from_team_pod(GPU_UTIL, {"namespace": NS, "pod": "bert-master-0", "gpu": str(gpu)})
        series += [(labels, [(t, 0.0) for t in minutes]) for labels, _ in stored({text: 0.0})]
    asked: list[str] = []
    api.routes[("GET", "/api/v1/query_range")] = range_route(series, asked)
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump(TABLE))
    url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    argv = [
        "--outputs",
        outputs_file(tmp_path, exporters),
        "cost",
        "bert",
        "--prices",
        str(prices),
        "--prometheus-url",
        url,
    ]
    code, lines = jobs(kubeconfig, *argv)
    return code, lines, asked


def test_a_team_pods_forged_gpu_series_change_no_idle_time_of_cost(cluster, tmp_path: Path) -> None:
    code, lines, asked = cost_idle(cluster, tmp_path, exporters=True)
    assert code == 0, lines
    assert lines[-1].split() == ["bert", "28.00", "84.00", "56.00", "0.50"]
    assert asked and all(q.startswith(f'{GPU_UTIL}{{namespace="{DCGM}",') for q in asked)


def test_cost_without_the_exporters_output_reads_any_namespace_and_says_so(cluster, tmp_path: Path, capsys) -> None:
    code, lines, _ = cost_idle(cluster, tmp_path, exporters=False)
    assert code == 0, lines
    # 0.5 GPU-hours, and the 7 forged GPUs' 121 minutes each.
    assert lines[-1].split()[-1] == f"{0.5 + 7 * 121 / 60:.2f}"
    assert capsys.readouterr().err.count("ack-jobs cost: the stack names no DCGM exporter namespace") == 1


def test_the_stack_exports_the_exporters_labels_and_every_dashboard_reads_them(run_stack, tmp_path: Path) -> None:
    plan = run_stack(config())
    assert plan.outputs["exporters"] == {"kubeStateMetricsJob": EXPORTERS["kubeStateMetricsJob"], "dcgmNamespace": DCGM}
    # A stack that names neither exports none, and the job commands read GPU series as before.
    assert "exporters" not in run_stack(stack_config("dev"), "dev").outputs
    spec = load_spec(config(), credentials=False)
    written = write_dashboard(spec, tmp_path)
    assert written is not None
    for board in (json.loads(written.read_text()), json.loads(platform_dashboard(spec) or "{}")):
        assert all(f'{{namespace="{DCGM}",' in q for q in gpu_panel_queries(board))


def test_a_team_pods_series_of_the_cost_rules_names_change_no_figure_of_the_cost_row(tmp_path: Path) -> None:
    # The pools' row sums every namespace: a team's pod serving a pool's cost would add a series there.
    scope = load_spec(config(), credentials=False).monitoring_scope()
    (configmap,) = [o for o in operator_objects(scope) if o["metadata"]["name"] == DASHBOARD_CONFIGMAP]
    board = json.loads(configmap["data"][DASHBOARD_FILE])
    totals = [
        q.replace("$namespace", NS).replace("$__range", "1d") for q in dashboard_queries(board) if "$__range" in q
    ]
    bert = f'{{namespace="{NS}",training_job="bert"}}'
    figures = [
        (bert, BY_HAND["cost"]),
        (bert, BY_HAND["on_demand"] - BY_HAND["cost"]),
        (bert, BY_HAND["gpu_hours"]),
        (bert, 0.5),
        ('{pool="gpu"}', 60),
        ('{pool="gpu-spot"}', 24),
        ('{pool="gpu"}', 12),
        ('{pool="gpu-spot"}', 16),
    ]
    expected = [[figures[0]], [figures[1]], [figures[2]], [figures[3]], figures[4:6], figures[6:]]
    assert len(totals) == len(expected)
    checks = [
        {"expr": q, "eval_time": f"{MINUTES}m", "exp_samples": [{"labels": labels, "value": v} for labels, v in want]}
        for q, want in zip(totals, expected, strict=True)
    ]
    forged = {
        scraped_from_team_pod(cs.POOL_COST, {"pool": "gpu"}): f"1000x{MINUTES}",
        scraped_from_team_pod(cs.POOL_GPUS, {"pool": "gpu"}): f"1000x{MINUTES}",
        scraped_from_team_pod(cs.JOB_COST, {"namespace": NS, "training_job": "bert"}): f"1000x{MINUTES}",
    }
    cases = [
        {
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in run.items()],
            "promql_expr_test": checks,
        }
        for run in (recorded_run(), recorded_run() | forged)
    ]
    promtool_test(tmp_path, stack_rules(), cases)

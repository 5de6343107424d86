"""What a job costs: a recorded run's GPU-hours, cost, spot savings and idle GPU time against the
same arithmetic done by hand, the price table's checks, and ``ack-jobs cost`` against the
stand-in API server (which also answers Prometheus's range queries).

The prices here are a test table, not ECS's: the platform ships none (``docs/jobs.md``, ``cost``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import waiting as w
from loopback_api import NS, V1, jobs

from components.jobs.cost import PriceError, cost, idle_gpu_hours, parse_table, pod_runs

TABLE = {
    "date": "2026-11-01",
    "source": "test table",
    "currency": "USD",
    "instances": {"ecs.gn7e-c16g1.32xlarge": {"gpus": 8, "vcpus": 128, "onDemand": 40.0, "spot": 12.0}},
    "spotPools": ["gpu-spot"],
}
GPUS8 = {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "8"}
LABEL = "training.kubeflow.org/job-name"


def node(name: str, pool: str, instance_type: str = "ecs.gn7e-c16g1.32xlarge") -> dict[str, Any]:
    labels = {"ack-training-platform/pool": pool, "node.kubernetes.io/instance-type": instance_type}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "status": {}}


def ran(name: str, job: str, node_name: str, start: str, end: str | None) -> dict[str, Any]:
    pod = w.pod(name, {LABEL: job}, requests=GPUS8, phase="Succeeded" if end else "Running", node=node_name)
    pod["status"]["startTime"] = start
    if end:
        pod["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 0, "finishedAt": end}}
    return pod


NODES = [node("spot-0", "gpu-spot"), node("od-0", "gpu"), node("other-0", "gpu", "ecs.gn8is.2xlarge")]
PODS = [
    ran("bert-master-0", "bert", "spot-0", "2026-11-27T08:00:00Z", "2026-11-27T10:00:00Z"),  # 2 h on spot
    ran("bert-worker-0", "bert", "od-0", "2026-11-27T08:00:00Z", "2026-11-27T09:30:00Z"),  # 1.5 h on demand
]
NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)


def test_a_recorded_run_matches_the_arithmetic_by_hand() -> None:
    found = cost(pod_runs(PODS, NODES, NOW), parse_table(TABLE, "prices.yaml"))
    # GPU-hours: 8 GPUs x 2 h + 8 GPUs x 1.5 h. Each pod holds all 8 GPUs of its node: share 1.
    assert found.gpu_hours == pytest.approx(8 * 2 + 8 * 1.5)
    # Paid: 2 h at the spot price + 1.5 h on demand; on demand throughout: 3.5 h at 40.
    assert found.cost == pytest.approx(2 * 12.0 + 1.5 * 40.0)
    assert found.on_demand == pytest.approx(3.5 * 40.0)
    assert found.spot_savings == pytest.approx(2 * (40.0 - 12.0))
    assert found.unpriced == ()


def test_a_running_pod_counts_until_now_and_an_unknown_instance_is_named() -> None:
    running = ran("gpt-master-0", "gpt", "other-0", "2026-11-27T11:00:00Z", None)
    found = cost(pod_runs([running], NODES, NOW), parse_table(TABLE, "prices.yaml"))
    assert found.gpu_hours == pytest.approx(8.0) and found.cost == 0.0
    assert found.unpriced == ("ecs.gn8is.2xlarge",)


def test_a_pod_failed_without_a_container_end_is_not_charged_until_now() -> None:
    # A pod of a lost node: Failed, its container still shown running, its conditions changed at the end.
    lost = ran("bert-worker-0", "bert", "od-0", "2026-11-27T08:00:00Z", None)
    lost["status"]["phase"] = "Failed"
    lost["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-27T07:59:00Z"},
        {"type": "DisruptionTarget", "status": "True", "lastTransitionTime": "2026-11-27T09:00:00Z"},
    ]
    assert [run.hours for run in pod_runs([lost], NODES, NOW)] == [1.0]


def test_idle_gpu_time_counts_the_steps_under_one_percent() -> None:
    # Two GPUs sampled every 60 s: three samples under 1 %, so 3 minutes of one GPU.
    assert idle_gpu_hours([[0.0, 0.0, 50.0, 97.0], [0.5, 80.0]], 60) == pytest.approx(3 * 60 / 3600)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"source": ""}, "prices.yaml: source is missing (a table says when and where its prices were read)"),
        ({"date": "November"}, "prices.yaml: date 'November': write it as YYYY-MM-DD"),
        (
            {"instances": {"ecs.x": {"gpus": 8, "vcpus": 128, "onDemand": "cheap"}}},
            "prices.yaml: instances.ecs.x.onDemand: give a number, 0 or more (got 'cheap')",
        ),
    ],
)
def test_a_bad_price_table_names_the_key(change: dict[str, Any], error: str) -> None:
    with pytest.raises(PriceError) as raised:
        parse_table({**TABLE, **change}, "prices.yaml")
    assert str(raised.value) == error


def test_cost_of_a_job_with_idle_time_from_prometheus(cluster, tmp_path: Path) -> None:
    api, kubeconfig = cluster
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bert", "namespace": NS}}
    api.routes[("GET", f"{V1}/bert")] = job
    api.pods += PODS
    api.nodes += NODES
    asked: list[dict[str, list[str]]] = []

    def query_range(params: dict[str, list[str]], _: object) -> tuple[int, object]:
        asked.append(params)
        result = [{"metric": {"pod": "bert-master-0", "gpu": "0"}, "values": [[0, "0"], [60, "0"], [120, "99"]]}]
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}

    api.routes[("GET", "/api/v1/query_range")] = query_range
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump(TABLE))
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    code, lines = jobs(kubeconfig, "cost", "bert", "--prices", str(prices), "--prometheus-url", server)
    assert code == 0
    assert lines[0] == "Prices: test table, read 2026-11-01 (USD)"
    assert [line.split() for line in lines[1:]] == [
        ["JOB", "GPU-HOURS", "COST", "SPOT", "SAVINGS", "IDLE", "GPU-HOURS"],
        ["bert", "28.00", "84.00", "56.00", "0.03"],
    ]
    assert 'pod=~"bert-master-0|bert-worker-0"' in asked[0]["query"][0] and asked[0]["step"] == ["60"]


def test_idle_time_of_a_job_longer_than_one_range_query_allows(cluster, tmp_path: Path) -> None:
    api, kubeconfig = cluster
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bert", "namespace": NS}}
    api.routes[("GET", f"{V1}/bert")] = job
    api.pods += [ran("bert-master-0", "bert", "od-0", "2026-11-01T00:00:00Z", "2026-11-09T00:00:00Z")]  # 8 days
    api.nodes += NODES
    windows: list[tuple[float, float]] = []

    def query_range(params: dict[str, list[str]], _: object) -> tuple[int, object]:
        start, end, step = (float(params[k][0]) for k in ("start", "end", "step"))
        # prometheus web/api/v1/api.go: end.Sub(start)/step > 11000 is refused as bad_data.
        if (end - start) / step > 11000:
            return 400, {"status": "error", "errorType": "bad_data", "error": "exceeded maximum resolution"}
        windows.append((start, end))
        values = [[start + i * step, "0"] for i in range(int((end - start) // step) + 1)]
        return 200, {
            "status": "success",
            "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]},
        }

    api.routes[("GET", "/api/v1/query_range")] = query_range
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump(TABLE))
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    code, lines = jobs(kubeconfig, "cost", "bert", "--prices", str(prices), "--prometheus-url", server)
    assert code == 0, lines
    # Every minute of the 8 days idle, once: 8 x 24 h of one GPU (the last sample, at the end, adds a minute).
    assert lines[-1].split()[-1] == f"{(8 * 24 * 60 + 1) / 60:.2f}"
    assert len(windows) == 2 and all(b[0] > a[1] for a, b in zip(windows, windows[1:], strict=False))


def test_cost_read_by_someone_who_may_not_list_nodes(cluster, tmp_path: Path) -> None:
    # A team's Role is namespaced (components/manifests/tenancy/teams.py): the nodes answer 403.
    api, kubeconfig = cluster
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bert", "namespace": NS}}
    api.routes[("GET", f"{V1}/bert")] = job
    api.pods += PODS
    forbidden = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403}
    api.routes[("GET", "/api/v1/nodes")] = lambda _, __: (403, forbidden)
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump(TABLE))
    code, lines = jobs(kubeconfig, "cost", "bert", "--prices", str(prices))
    assert code == 0
    assert [line.split() for line in lines[2:3]] == [["bert", "28.00", "-", "-", "-"]]
    assert lines[-1] == "Not priced: the nodes could not be read (HTTP 403), so their instance types are unknown"


def test_cost_needs_a_job_or_a_known_team(cluster, tmp_path: Path, capsys) -> None:
    _, kubeconfig = cluster
    prices = tmp_path / "prices.yaml"
    prices.write_text(json.dumps(TABLE))
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"teamJobDefaults": {"nlp": {"namespace": "nlp"}}}))
    argv = ["--outputs", str(outputs), "cost", "--team", "vision", "--prices", str(prices)]
    assert jobs(kubeconfig, *argv) == (2, [])
    assert capsys.readouterr().err == "ack-jobs cost: --team vision: the stack's teams are nlp\n"
    assert jobs(kubeconfig, "cost", "--prices", str(prices)) == (2, [])
    assert capsys.readouterr().err == "ack-jobs cost: give a job's NAME or --team TEAM\n"


def test_cost_of_a_teams_jobs_since_a_time(cluster, tmp_path: Path) -> None:
    api, kubeconfig = cluster
    now = datetime.now(UTC)

    def stamp(hours_ago: float) -> str:
        return (now - timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")

    api.pods += [
        ran("bert-master-0", "bert", "od-0", stamp(3), stamp(1)),  # 2 h, ended an hour ago
        ran("old-master-0", "old", "od-0", stamp(30), stamp(26)),  # ended before the window
        ran("gpt-master-0", "gpt", "od-0", stamp(48), stamp(23)),  # 25 h, of which 1 h in the window
    ]
    api.nodes += NODES
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump(TABLE))
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"teamJobDefaults": {"nlp": {"namespace": NS}}}))
    argv = ["--outputs", str(outputs), "cost", "--team", "nlp", "--since", "24h", "--prices", str(prices)]
    code, lines = jobs(kubeconfig, *argv)
    assert code == 0
    rows = [line.split() for line in lines[2:]]
    assert rows[0] == ["bert", "16.00", "80.00", "0.00", "-"]
    # The window starts when the command runs, seconds after the pods were stamped: 1 h less those seconds.
    assert rows[1][0] == "gpt" and float(rows[1][1]) == pytest.approx(8.0, abs=0.05)
    assert float(rows[1][2]) == pytest.approx(40.0, abs=0.25)

"""The job commands (``ack-jobs``) against a stand-in API server.

Every command runs for real, through the official clients (``TrainingClient`` and the
kubernetes client), against a local HTTP server on 127.0.0.1 (``http.server`` in a thread,
``tests/loopback_api.py``) that answers exactly the Kubernetes API paths the commands use,
with a kubeconfig pointing at it. The server records each request (method, path, query,
body), so the tests check what the commands asked for as well as what they printed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, stack_config
from job_commands_readme import session
from loopback_api import (
    CTX,
    FAILED_V1,
    IMAGE,
    NS,
    PODS,
    RUNNING_V1,
    V1,
    V2,
    FakeApi,
    cond,
    jobs,
    rank0_metrics,
    serve_gpt,
    serve_mnist,
    v1_pod,
)
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from test_job_submit import DEFAULTS

from components.config import TrainingJobSpec
from components.jobs.cli import run
from components.manifests import pytorch_job
from components.manifests.monitoring.gpu_metrics import GPU_MEMORY_USED, GPU_UTIL, POD_LABEL, per_pod
from components.plan.command import with_unset_credentials
from components.plan.runner import run_program
from trainer.telemetry.exporter import PrometheusExporter
from trainer.telemetry.metric_names import (
    FABRIC_BUS_BANDWIDTH,
    METRICS_PORT,
    PARALLEL_MESH,
    PARALLEL_STRATEGY,
    RESTARTS,
    SHARD_GROUP,
    STEP,
    TRAINING,
)

# --- list and get ------------------------------------------------------------------------


def test_list_shows_both_kinds_with_phase_replicas_restarts_and_age(cluster) -> None:
    api, kubeconfig = cluster
    mnist, gpt = serve_mnist(api), serve_gpt(api)
    api.routes[("GET", V1)] = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJobList", "items": [mnist]}
    api.routes[("GET", V2)] = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJobList", "items": [gpt]}
    code, lines = jobs(kubeconfig, "list")
    assert code == 0
    assert [line.split()[:3] for line in lines] == [
        ["NAME", "KIND", "PHASE"],
        ["gpt", "TrainJob", "Running"],
        ["mnist", "PyTorchJob", "Running"],
    ]
    # mnist: 2 container restarts on the Master; its failed Worker pod shows under replicas.
    assert lines[2].split()[-2:] == ["2", "3h5m"] and lines[1].split()[-2:] == ["1", "7m"]
    assert "Master 1/1 active; Worker 1/1 active, 1 failed" in lines[2]
    assert "node 2/2 running" in lines[1]  # gpt: its JobSet restarted once
    selectors = [q["labelSelector"][0] for m, p, q, _ in api.requests if p == PODS]
    assert selectors == ["jobset.sigs.k8s.io/jobset-name=gpt", "training.kubeflow.org/job-name=mnist"]


def test_list_of_an_empty_namespace_without_trainer_v2(cluster) -> None:
    api, kubeconfig = cluster
    api.routes[("GET", V1)] = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJobList", "items": []}
    assert jobs(kubeconfig, "list") == (0, [f"No jobs in namespace {NS}."])
    assert ("GET", V2) in [(m, p) for m, p, _, _ in api.requests]


def test_get_shows_conditions_restarts_andrank0_metrics_through_the_pod_proxy(cluster) -> None:
    api, kubeconfig = cluster
    serve_mnist(api)
    proxy = f"{PODS}/mnist-master-0:{METRICS_PORT}/proxy/metrics"
    api.routes[("GET", proxy)] = rank0_metrics()
    code, lines = jobs(kubeconfig, "get", "mnist")
    assert code == 0
    assert lines[:7] == [
        "Name:      mnist",
        "Kind:      PyTorchJob",
        "Phase:     Running",
        "Age:       3h5m",
        "Restarts:  2",
        "Replicas:  Master 1/1 active; Worker 1/1 active, 1 failed",
        "Why:       It is running: 2/2 pods running on gpu-node-0, gpu-node-1.",
    ]
    assert lines[9].split(None, 3) == ["Created", "True", "PyTorchJobCreated", "PyTorchJob mnist is created."]
    assert lines[-1] == "Metrics:   step 120  loss 0.25  samples/s 512  MFU 0.41  (from mnist-master-0)"
    assert proxy in api.paths("GET")


def test_get_shows_the_strategy_and_bandwidth_rank_0_serves(cluster) -> None:
    # The trainer's own exporter, serving what a 4-node HSDP run and its probe set.
    exporter = PrometheusExporter(0, TRAINING)
    try:
        exporter.set(STEP, 120)
        exporter.set(PARALLEL_STRATEGY, 1, strategy="hsdp")
        exporter.set(SHARD_GROUP, 8)
        for scope, op, value in (
            ("intra-node", "all_reduce", 151.2e9),
            ("inter-node", "all_reduce", 21.4e9),
            ("inter-node", "all_gather", 18e9),
        ):
            exporter.set(FABRIC_BUS_BANDWIDTH, value, scope=scope, op=op)
        with urllib.request.urlopen(f"http://127.0.0.1:{exporter.server.server_port}/metrics") as response:
            served = response.read().decode()
    finally:
        exporter.close()
    api, kubeconfig = cluster
    serve_mnist(api)
    api.routes[("GET", f"{PODS}/mnist-master-0:{METRICS_PORT}/proxy/metrics")] = served
    code, lines = jobs(kubeconfig, "get", "mnist")
    assert code == 0
    assert lines[-2:] == [
        "Metrics:   step 120  (from mnist-master-0)",
        "Network:   hsdp, 8 processes per shard group; all-reduce bus bandwidth intra-node 151 GB/s, "
        "inter-node 21.4 GB/s",
    ]


def test_get_shows_the_mesh_of_a_split_model(cluster) -> None:
    exporter = PrometheusExporter(0, TRAINING)
    try:
        exporter.set(PARALLEL_STRATEGY, 1, strategy="fsdp")
        exporter.set(SHARD_GROUP, 4)
        exporter.set(PARALLEL_MESH, 1, dp="4", pp="4", tp="2")
        with urllib.request.urlopen(f"http://127.0.0.1:{exporter.server.server_port}/metrics") as response:
            served = response.read().decode()
    finally:
        exporter.close()
    api, kubeconfig = cluster
    serve_mnist(api)
    api.routes[("GET", f"{PODS}/mnist-master-0:{METRICS_PORT}/proxy/metrics")] = served
    code, lines = jobs(kubeconfig, "get", "mnist")
    assert code == 0
    assert lines[-1] == "Network:   fsdp on mesh dp 4 × pp 4 × tp 2, 4 processes per shard group"


def test_get_of_an_elastic_job_finds_rank_0_on_whichever_worker_has_it(cluster) -> None:
    # An elastic PyTorchJob has no Master: rendezvous put rank 0 on worker-1 here, and
    # worker-0's first process serves only its pod's restarts.
    api, kubeconfig = cluster
    spec = TrainingJobSpec(name="elastic", image=IMAGE, elastic={"minNodes": 1, "maxNodes": 2})
    job = pytorch_job(spec, CTX)
    job["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    job["status"] = {"conditions": RUNNING_V1, "replicaStatuses": {"Worker": {"active": 2}}}
    assert "Master" not in job["spec"]["pytorchReplicaSpecs"]
    api.routes[("GET", f"{V1}/elastic")] = job
    api.pods += [v1_pod("elastic", "worker", 0), v1_pod("elastic", "worker", 1)]
    registry = CollectorRegistry()
    Gauge(RESTARTS.name, RESTARTS.help, registry=registry).set(0)
    api.routes[("GET", f"{PODS}/elastic-worker-0:{METRICS_PORT}/proxy/metrics")] = generate_latest(registry).decode()
    api.routes[("GET", f"{PODS}/elastic-worker-1:{METRICS_PORT}/proxy/metrics")] = rank0_metrics()
    code, lines = jobs(kubeconfig, "get", "elastic")
    assert code == 0
    assert lines[-1] == "Metrics:   step 120  loss 0.25  samples/s 512  MFU 0.41  (from elastic-worker-1)"


def test_get_says_when_metrics_are_unreachable_and_carries_on(cluster) -> None:
    api, kubeconfig = cluster
    serve_gpt(api)
    code, lines = jobs(kubeconfig, "get", "gpt")
    assert code == 0
    assert lines[2] == "Phase:     Running"
    assert lines[-1] == "Metrics:   rank 0's /metrics unreachable (gpt-node-0-0-x7k2q): Not Found"


def test_get_of_a_failed_job_names_the_reason(cluster) -> None:
    api, kubeconfig = cluster
    serve_mnist(api, FAILED_V1)
    code, lines = jobs(kubeconfig, "get", "mnist")
    assert code == 0 and lines[2] == "Phase:     Failed"
    assert lines[3] == "Failure:   PyTorchJobFailed: PyTorchJob mnist is failed because 1 Worker replica(s) failed."


def test_get_of_a_missing_job(cluster, capsys) -> None:
    _, kubeconfig = cluster
    assert jobs(kubeconfig, "get", "nope")[0] == 1
    assert "no PyTorchJob or TrainJob named 'nope' in namespace training" in capsys.readouterr().err


# --- logs ----------------------------------------------------------------------------------


def test_logs_of_the_master_and_of_a_worker(cluster) -> None:
    api, kubeconfig = cluster
    serve_mnist(api)
    api.routes[("GET", f"{PODS}/mnist-master-0/log")] = "step 10 loss 2.1\nstep 20 loss 1.7\n"
    api.routes[("GET", f"{PODS}/mnist-worker-0/log")] = "worker ready\n"
    assert jobs(kubeconfig, "logs", "mnist") == (0, ["step 10 loss 2.1\nstep 20 loss 1.7"])
    assert jobs(kubeconfig, "logs", "mnist", "--replica", "worker-0") == (0, ["worker ready"])
    logs = [(p, q) for m, p, q, _ in api.requests if p.endswith("/log")]
    assert logs == [
        (f"{PODS}/mnist-master-0/log", {"container": ["pytorch"]}),
        (f"{PODS}/mnist-worker-0/log", {"container": ["pytorch"]}),
    ]
    selectors = [q["labelSelector"][0] for m, p, q, _ in api.requests if p == PODS]
    assert selectors[-1] == (
        "training.kubeflow.org/job-name=mnist,training.kubeflow.org/replica-type=worker,"
        "training.kubeflow.org/replica-index=0"
    )


def test_logs_follow_streams_lines_as_they_come(cluster) -> None:
    # A separate process, so each line is read from its stdout while the server still holds
    # the rest: the second line is sent only after the first one has been printed.
    api, kubeconfig = cluster
    serve_mnist(api)
    first_printed = threading.Event()

    def stream(query: dict[str, list[str]], _: Any) -> tuple[int, Iterator[str]]:
        assert query["follow"] == ["True"]

        def lines() -> Iterator[str]:
            yield "step 10 loss 2.1"
            assert first_printed.wait(timeout=60)
            yield "step 20 loss 1.7"

        return 200, lines()

    api.routes[("GET", f"{PODS}/mnist-master-0/log")] = stream
    command = [sys.executable, "-m", "components.jobs", "--kubeconfig", str(kubeconfig), "--namespace", NS]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(
        [*command, "logs", "mnist", "-f"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout.readline() == "step 10 loss 2.1\n"
        first_printed.set()
        assert proc.stdout.readline() == "step 20 loss 1.7\n"
        assert proc.wait(timeout=60) == 0


def test_logs_follow_of_a_trainjob_node(cluster) -> None:
    api, kubeconfig = cluster
    serve_gpt(api)
    api.routes[("GET", f"{PODS}/gpt-node-0-1-x7k2q/log")] = lambda q, _: (200, iter(["rank 1 up", "rank 1 done"]))
    assert jobs(kubeconfig, "logs", "gpt", "-f", "--replica", "node-1") == (0, ["rank 1 up", "rank 1 done"])
    (query,) = [q for m, p, q, _ in api.requests if p.endswith("/log")]
    assert query == {"container": ["node"], "follow": ["True"]}


def test_logs_of_a_replica_a_pytorchjob_does_not_have(cluster, capsys) -> None:
    api, kubeconfig = cluster
    serve_mnist(api)
    assert jobs(kubeconfig, "logs", "mnist", "--replica", "node-0")[0] == 2
    assert "--replica 'node-0': a PyTorchJob has replicas master and worker-0, worker-1" in capsys.readouterr().err


# --- wait and delete -------------------------------------------------------------------------


def _changing(api: FakeApi, path: str, states: list[dict[str, Any]]) -> None:
    """Serve ``states`` in turn at ``path``, then the last one for ever."""
    served = iter(states)
    last: list[dict[str, Any]] = []

    def get(_: Any, __: Any) -> tuple[int, dict[str, Any]]:
        last[:] = [next(served, last[0] if last else states[-1])]
        return 200, last[0]

    api.routes[("GET", path)] = get


def test_wait_returns_once_the_condition_appears(cluster) -> None:
    api, kubeconfig = cluster
    created = serve_mnist(api, RUNNING_V1[:1])
    running = {**created, "status": {**created["status"], "conditions": RUNNING_V1}}
    _changing(api, f"{V1}/mnist", [created, created, running])
    code, lines = jobs(kubeconfig, "wait", "mnist", "--for", "running", "--interval", "0.05", "--timeout", "60")
    assert (code, lines) == (0, ["mnist is running"])
    assert api.paths("GET").count(f"{V1}/mnist") >= 3


def test_wait_for_a_trainjob_to_complete(cluster) -> None:
    api, kubeconfig = cluster
    running = serve_gpt(api)
    done = {**running, "status": {**running["status"], "conditions": [cond("Complete", "AllJobsCompleted", "done")]}}
    _changing(api, f"{V2}/gpt", [running, running, done])
    assert jobs(kubeconfig, "wait", "gpt", "--interval", "0.05", "--timeout", "60") == (0, ["gpt is succeeded"])


def test_wait_times_out_with_a_clear_message(cluster, capsys) -> None:
    api, kubeconfig = cluster
    serve_mnist(api)
    code, lines = jobs(kubeconfig, "wait", "mnist", "--interval", "0.05", "--timeout", "0.2")
    assert (code, lines) == (1, [])
    err = capsys.readouterr().err
    assert "ack-jobs wait: timed out after 0.2s waiting for mnist to be succeeded; it is Running" in err
    assert "Traceback" not in err


def test_wait_stops_when_the_job_fails(cluster, capsys) -> None:
    api, kubeconfig = cluster
    serve_mnist(api, FAILED_V1)
    assert jobs(kubeconfig, "wait", "mnist", "--interval", "0.05", "--timeout", "60")[0] == 1
    assert "mnist failed: PyTorchJobFailed: PyTorchJob mnist is failed because 1 Worker" in capsys.readouterr().err


@pytest.mark.parametrize(("serve", "path"), [(serve_mnist, f"{V1}/mnist"), (serve_gpt, f"{V2}/gpt")])
def test_delete(cluster, serve, path: str) -> None:
    api, kubeconfig = cluster
    job = serve(api)
    api.routes[("DELETE", path)] = {"kind": "Status", "apiVersion": "v1", "status": "Success"}
    assert jobs(kubeconfig, "delete", job["metadata"]["name"]) == (
        0,
        [f"{job['kind']} {job['metadata']['name']} deleted"],
    )
    assert [(m, p, b) for m, p, _, b in api.requests if m == "DELETE"] == [("DELETE", path, None)]


# --- top -------------------------------------------------------------------------------------


def test_top_shows_gpu_use_per_job_pod_from_prometheus(cluster) -> None:
    api, kubeconfig = cluster
    mnist = serve_mnist(api)
    api.routes[("GET", V1)] = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJobList", "items": [mnist]}
    gpu_use = {"mnist-master-0": (97.5, 61234.0), "mnist-worker-0": (88.0, 60111.0), "other-pod": (50.0, 1.0)}

    def query(params: dict[str, list[str]], _: Any) -> tuple[int, Any]:
        expr = params["query"][0]
        assert expr in (per_pod("avg", GPU_UTIL, NS), per_pod("sum", GPU_MEMORY_USED, NS))
        column = 0 if GPU_UTIL in expr else 1
        assert column == 0 or GPU_MEMORY_USED in expr
        result = [{"metric": {POD_LABEL: pod}, "value": [0, str(v[column])]} for pod, v in gpu_use.items()]
        return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}

    api.routes[("GET", "/api/v1/query")] = query
    url = f"http://127.0.0.1:{_port(kubeconfig)}"
    code, lines = jobs(kubeconfig, "top", "--prometheus-url", url)
    assert code == 0
    assert [line.split() for line in lines] == [
        ["JOB", "POD", "GPU-UTIL", "GPU-MEM-USED"],
        ["mnist", "mnist-master-0", "98%", "61234", "MiB"],
        ["mnist", "mnist-worker-0", "88%", "60111", "MiB"],
    ]


def _port(kubeconfig: Path) -> int:
    return int(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"].rsplit(":", 1)[1])


def test_top_without_prometheus_says_how_to_give_one(cluster, capsys) -> None:
    _, kubeconfig = cluster
    assert jobs(kubeconfig, "top")[0] == 2
    assert "ack-jobs top: --prometheus-url: give the address of a Prometheus" in capsys.readouterr().err


# --- errors: flags, outputs, the cluster ------------------------------------------------------


def test_a_file_that_is_not_a_kubeconfig_exits_2(tmp_path: Path, capsys) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("- not\n- a kubeconfig\n")
    assert run(["--kubeconfig", str(path), "--namespace", NS, "list"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ack-jobs list: --kubeconfig: cannot load a kubeconfig: TypeError") and "Traceback" not in err


def test_help_says_how_to_write_the_outputs_file_without_secrets(capsys) -> None:
    with pytest.raises(SystemExit):
        run(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "pulumi stack output --json)" in shown and "--show-secrets" not in shown


@pytest.mark.parametrize("flag", ["--interval", "--timeout"])
@pytest.mark.parametrize("value", ["0", "-5", "nan", "soon"])
def test_wait_refuses_seconds_that_are_not_above_0(cluster, capsys, flag: str, value: str) -> None:
    api, kubeconfig = cluster
    serve_mnist(api)
    with pytest.raises(SystemExit) as exit_:
        jobs(kubeconfig, "wait", "mnist", flag, value)
    assert exit_.value.code == 2
    assert f"argument {flag}: '{value}': give a number of seconds above 0" in capsys.readouterr().err
    assert api.requests == []


def test_wait_with_a_timeout_shorter_than_the_interval_still_polls(cluster) -> None:
    api, kubeconfig = cluster
    serve_mnist(api)
    code, lines = jobs(kubeconfig, "wait", "mnist", "--for", "running", "--interval", "10", "--timeout", "1")
    assert (code, lines) == (0, ["mnist is running"])


SUCCEEDED_V1 = [
    cond("Created", "PyTorchJobCreated", "PyTorchJob mnist is created."),
    cond("Running", "PyTorchJobRunning", "PyTorchJob training/mnist is running.", status="False"),
    cond("Succeeded", "PyTorchJobSucceeded", "PyTorchJob training/mnist successfully completed."),
]


@pytest.mark.parametrize(
    ("serve", "conditions", "phase", "message"),
    [
        (serve_mnist, SUCCEEDED_V1, "running", "mnist is Succeeded and will not be running"),
        (serve_mnist, SUCCEEDED_V1, "failed", "mnist is Succeeded and will not be failed"),
        (serve_gpt, [cond("Complete", "AllJobsCompleted", "done")], "running", "gpt is Succeeded and will not be"),
        (serve_gpt, [cond("Failed", "DeadlineExceeded", "too long")], "succeeded", "gpt failed: DeadlineExceeded"),
    ],
)
def test_wait_stops_at_once_when_the_job_ended_otherwise(cluster, capsys, serve, conditions, phase, message) -> None:
    # Polling on until the timeout would make about 100 requests and end with "timed out".
    api, kubeconfig = cluster
    name = serve(api, conditions)["metadata"]["name"]
    assert jobs(kubeconfig, "wait", name, "--for", phase, "--interval", "0.05", "--timeout", "5")[0] == 1
    assert f"ack-jobs wait: {message}" in capsys.readouterr().err
    assert len([p for p in api.paths("GET") if p.endswith(f"/{name}")]) <= 6


FORBIDDEN = 'pytorchjobs.kubeflow.org "mnist" is forbidden: User "tester" cannot get resource "pytorchjobs"'


@pytest.mark.parametrize(("name", "path"), [("mnist", f"{V1}/mnist"), ("gpt", f"{V2}/gpt")])
def test_a_refusal_prints_the_api_servers_message(cluster, capsys, name: str, path: str) -> None:
    api, kubeconfig = cluster
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403}
    api.routes[("GET", path)] = lambda _, __: (403, {**status, "message": FORBIDDEN})
    assert jobs(kubeconfig, "get", name) == (1, [])
    assert capsys.readouterr().err == f"ack-jobs get: Forbidden: {FORBIDDEN}\n"


def test_an_unreachable_api_server_is_named_with_the_cause(cluster, capsys) -> None:
    _, kubeconfig = cluster
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{port}"
    kubeconfig.write_text(yaml.safe_dump(config))
    assert jobs(kubeconfig, "list") == (1, [])
    err = capsys.readouterr().err
    assert err.startswith("ack-jobs list: ") and len(err.splitlines()) == 1
    assert "Connection refused" in err and "Traceback" not in err


@pytest.mark.parametrize(("replica", "pending"), [("worker-9", False), ("master", True)])
def test_logs_of_a_replica_without_a_started_pod(cluster, capsys, replica: str, pending: bool) -> None:
    api, kubeconfig = cluster
    serve_mnist(api)
    if pending:
        api.pods[0]["status"]["phase"] = "Pending"
    assert jobs(kubeconfig, "logs", "mnist", "--replica", replica) == (1, [])
    assert f"ack-jobs logs: no started pod for {replica} of PyTorchJob mnist yet" in capsys.readouterr().err
    assert not [p for p in api.paths("GET") if p.endswith("/log")]


@pytest.mark.parametrize("module", ["kubernetes", "kubeflow"])
def test_ack_jobs_without_the_jobs_extra_says_what_to_install(module: str) -> None:
    # Setting a module to None in sys.modules makes importing it fail as if it were absent.
    script = f"import sys; sys.modules[{module!r}] = None; sys.argv[1:] = ['list']; from components.jobs.cli import main; main()"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == (
        f"ack-jobs: {module} is not installed; the job commands need the [jobs] extra: "
        "pip install 'ack-training-platform[jobs] @ git+https://github.com/<org>/ack-training-platform@<tag>'\n"
    )


def test_help_works_without_the_jobs_extra() -> None:
    script = (
        "import sys\n"
        "for module in ('kubernetes', 'kubeflow', 'prometheus_client'): sys.modules[module] = None\n"
        "sys.argv[1:] = ['logs', '--help']; from components.jobs.cli import main; main()"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert "--tail N" in done.stdout and "--context CONTEXT" in done.stdout


def test_submit_refuses_a_namespace_without_the_stacks_job_defaults(tmp_path: Path, capsys) -> None:
    path = tmp_path / "outputs.json"
    team = {**DEFAULTS, "namespace": "vision"}
    path.write_text(json.dumps({"namespace": NS, "jobDefaults": DEFAULTS, "teamJobDefaults": {"vision": team}}))
    argv = ["--outputs", str(path), "submit", "gpt-small", "--image-tag", "v1.4.0", "--dry-run"]
    assert run(["--namespace", "research", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ack-jobs submit: --namespace research: the stack's job defaults")
    assert f"exist in {NS}, vision" in err
    lines: list[str] = []
    assert run(["--namespace", NS, *argv], out=lines.append) == 0
    assert yaml.safe_load("\n".join(lines))["metadata"]["namespace"] == NS


def test_submit_in_a_teams_namespace_builds_with_the_teams_claims_and_uid(tmp_path: Path) -> None:
    # The prod stack's own exports: a team's claims share names, its uid and pool are its own.
    plan = run_program(with_unset_credentials(stack_config("prod"))[0], stack="prod", project_dir=ROOT)
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(plan.outputs))
    team = plan.outputs["teamJobDefaults"]["llm"]
    lines: list[str] = []
    argv = ["--outputs", str(path), "--namespace", "llm", "submit", "probe", "--image-tag", "v1.4.0", "--dry-run"]
    assert run(argv, out=lines.append) == 0
    job = yaml.safe_load("\n".join(lines))
    assert job["metadata"]["namespace"] == "llm"
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        assert pod["securityContext"] == team["securityContext"]
        claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
        assert claims == {team["dataClaim"], team["outputClaim"]}
        assert pod["serviceAccountName"] == team["serviceAccount"]


def test_the_docs_show_the_session_as_it_runs_now(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "jobs.md").read_text()
    start = page.index("```text\n", page.index("`python tests/job_commands_readme.py` runs")) + len("```text\n")
    shown = page[start : page.index("```", start)].rstrip("\n")
    assert shown == "\n".join(session(tmp_path)).strip(), "docs/jobs.md is stale: python tests/job_commands_readme.py"

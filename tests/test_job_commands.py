"""The job commands (``ack-jobs``) against a stand-in API server.

Every command runs for real, through the official clients (``TrainingClient``,
``TrainerClient``, the kubernetes client), against a local HTTP server on 127.0.0.1
(``http.server`` in a thread) that answers exactly the Kubernetes API paths the commands
use, with a kubeconfig pointing at it. The server records each request (method, path,
query, body), so the tests check what the commands asked for as well as what they printed.
The objects it serves are written here in the shapes the v1.9.4 operator and Trainer v2.3.0
write (see ``components/jobs/status.py`` for the sources); the jobs themselves come from the
platform's builders.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import yaml
from conftest import ROOT
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from components.config import TrainingJobSpec
from components.jobs.cli import run
from components.manifests import CPU_PLACEMENT, JobContext, pytorch_job, train_job, training_runtime
from components.manifests.gpu_metrics import GPU_MEMORY_USED, GPU_UTIL, NAMESPACE_LABEL, POD_LABEL
from trainer.metric_names import LOSS, METRICS_PORT, MFU, SAMPLES_PER_SECOND, STEP

NS = "training"
V1 = f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs"
V2 = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
IMAGE = "registry.example.com/ml/trainer:v1.4.0"
V1_LABEL = "training.kubeflow.org/"
JOBSET = "jobset.sigs.k8s.io/"
Handler = Callable[[dict[str, list[str]], Any], tuple[int, Any]]


class FakeApi:
    """Routes (method, path) → a fixed object or a handler; 404 for anything else."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Any] = {}
        self.requests: list[tuple[str, str, dict[str, list[str]], Any]] = []
        self.pods: list[dict[str, Any]] = []
        self.routes[("GET", PODS)] = self._pods

    def _pods(self, query: dict[str, list[str]], _: Any) -> tuple[int, Any]:
        wanted = dict(term.split("=", 1) for term in query.get("labelSelector", [""])[0].split(",") if term)
        items = [p for p in self.pods if wanted.items() <= p["metadata"]["labels"].items()]
        return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}

    def paths(self, method: str) -> list[str]:
        return [path for m, path, _, _ in self.requests if m == method]


def _handler(api: FakeApi) -> type[BaseHTTPRequestHandler]:
    class Serve(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # for chunked streams, as the API server sends them

        def _serve(self) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            path = unquote(url.path)  # the client escapes the ':' of pod:port; the API server decodes it
            api.requests.append((self.command, path, query, body))
            route = api.routes.get((self.command, path))
            if route is None:
                status, payload = 404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404}
            else:
                status, payload = route(query, body) if callable(route) else (200, route)
            self.send_response(status)
            if isinstance(payload, dict):
                data = json.dumps(payload).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif isinstance(payload, str):
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(payload.encode())))
                self.end_headers()
                self.wfile.write(payload.encode())
            else:  # a stream of lines, one chunk each as the API server sends a followed log
                self.send_header("Content-Type", "text/plain")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for line in payload:
                    data = f"{line}\n".encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

        do_GET = do_POST = do_DELETE = do_PATCH = _serve

        def log_message(self, *args: Any) -> None:
            pass

    return Serve


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeApi, Path]]:
    api = FakeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(_kubeconfig(server.server_address[1])))
    yield api, kubeconfig
    server.shutdown()
    server.server_close()


def _kubeconfig(port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "loopback", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "tester", "user": {"token": "not-a-secret"}}],
        "contexts": [{"name": "loopback", "context": {"cluster": "loopback", "user": "tester"}}],
        "current-context": "loopback",
    }


def jobs(kubeconfig: Path, *argv: str) -> tuple[int, list[str]]:
    """Run one command against the stand-in server; its exit status and printed lines."""
    lines: list[str] = []
    code = run(["--kubeconfig", str(kubeconfig), "--namespace", NS, *argv], out=lines.append)
    return code, lines


# --- objects in the shapes the controllers write ------------------------------------------

CTX = JobContext(
    namespace=NS,
    image=IMAGE,
    gpus=0,
    placement=CPU_PLACEMENT,
    data_claim="training-data",
    output_claim="training-output",
    service_account="trainer",
)


def _ago(delta: timedelta) -> str:
    return (datetime.now(UTC) - delta).strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(kind: str, reason: str, message: str, status: str = "True") -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": _ago(timedelta()),
    }


def v1_job(name: str, conditions: list[dict[str, str]], replicas: dict[str, Any], nodes: int = 2) -> dict[str, Any]:
    job = pytorch_job(TrainingJobSpec(name=name, image=IMAGE, nodes=nodes), CTX)
    job["metadata"]["creationTimestamp"] = _ago(timedelta(hours=3, minutes=5, seconds=30))
    job["status"] = {"conditions": conditions, "replicaStatuses": replicas}
    return job


def v2_job(name: str, conditions: list[dict[str, str]], ready: int) -> dict[str, Any]:
    job = train_job(TrainingJobSpec(name=name, image=IMAGE, nodes=2, backend="v2"), CTX)
    job["metadata"]["creationTimestamp"] = _ago(timedelta(minutes=7, seconds=30))
    job["status"] = {
        "conditions": conditions,
        "jobsStatus": [{"name": "node", "ready": ready, "active": 1, "succeeded": 0, "failed": 0, "suspended": 0}],
    }
    return job


def v1_pod(job: str, kind: str, index: int, restarts: int = 0, phase: str = "Running") -> dict[str, Any]:
    labels = {f"{V1_LABEL}job-name": job, f"{V1_LABEL}replica-type": kind, f"{V1_LABEL}replica-index": str(index)}
    if kind == "master":
        labels[f"{V1_LABEL}job-role"] = "master"
    return _pod(f"{job}-{kind}-{index}", labels, "pytorch", restarts, phase)


def v2_pod(job: str, index: int, restarts: int = 0) -> dict[str, Any]:
    labels = {
        f"{JOBSET}jobset-name": job,
        f"{JOBSET}replicatedjob-name": "node",
        "batch.kubernetes.io/job-completion-index": str(index),
    }
    return _pod(f"{job}-node-0-{index}-x7k2q", labels, "node", restarts, "Running")


def _pod(name: str, labels: dict[str, str], container: str, restarts: int, phase: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels, "creationTimestamp": _ago(timedelta(hours=1))},
        "spec": {"containers": [{"name": container, "image": IMAGE}]},
        "status": {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": container,
                    "image": IMAGE,
                    "imageID": f"{IMAGE}@sha256:{'0' * 64}",
                    "ready": phase == "Running",
                    "restartCount": restarts,
                    "state": {"running": {"startedAt": _ago(timedelta(minutes=30))}},
                }
            ],
        },
    }


RUNNING_V1 = [
    cond("Created", "PyTorchJobCreated", "PyTorchJob mnist is created."),
    cond("Running", "PyTorchJobRunning", "PyTorchJob training/mnist is running."),
]
FAILED_V1 = [
    cond("Created", "PyTorchJobCreated", "PyTorchJob mnist is created."),
    cond("Running", "PyTorchJobRunning", "PyTorchJob training/mnist is running.", status="False"),
    cond("Failed", "PyTorchJobFailed", "PyTorchJob mnist is failed because 1 Worker replica(s) failed."),
]


def serve_mnist(api: FakeApi, conditions: list[dict[str, str]] = RUNNING_V1) -> dict[str, Any]:
    job = v1_job("mnist", conditions, {"Master": {"active": 1}, "Worker": {"active": 1, "failed": 1}})
    api.routes[("GET", f"{V1}/mnist")] = job
    api.pods += [v1_pod("mnist", "master", 0, restarts=2), v1_pod("mnist", "worker", 0)]
    return job


def serve_gpt(api: FakeApi, conditions: list[dict[str, str]] = ()) -> dict[str, Any]:
    job = v2_job("gpt", list(conditions), ready=1)
    api.routes[("GET", f"{V2}/gpt")] = job
    runtime = training_runtime()
    api.routes[
        ("GET", f"/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/{runtime['metadata']['name']}")
    ] = runtime
    api.pods += [v2_pod("gpt", 0), v2_pod("gpt", 1, restarts=1)]
    return job


def _rank0_metrics() -> str:
    registry = CollectorRegistry()
    for metric, value in ((STEP, 120), (LOSS, 0.25), (SAMPLES_PER_SECOND, 512.0), (MFU, 0.41)):
        Gauge(metric.name, metric.help, registry=registry).set(value)
    return generate_latest(registry).decode()


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
    # mnist: 2 container restarts on the Master and 1 Worker pod the operator replaced.
    assert lines[2].split()[-2:] == ["3", "3h5m"] and lines[1].split()[-2:] == ["1", "7m"]
    assert "Master 1/1 active; Worker 1/1 active, 1 failed" in lines[2]
    assert "node 1/2 ready, 1 active" in lines[1]
    selectors = [q["labelSelector"][0] for m, p, q, _ in api.requests if p == PODS]
    assert selectors == ["jobset.sigs.k8s.io/jobset-name=gpt", "training.kubeflow.org/job-name=mnist"]


def test_list_of_an_empty_namespace_without_trainer_v2(cluster) -> None:
    api, kubeconfig = cluster
    api.routes[("GET", V1)] = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJobList", "items": []}
    assert jobs(kubeconfig, "list") == (0, [f"No jobs in namespace {NS}."])
    assert ("GET", V2) in [(m, p) for m, p, _, _ in api.requests]


def test_get_shows_conditions_restarts_and_rank0_metrics_through_the_pod_proxy(cluster) -> None:
    api, kubeconfig = cluster
    serve_mnist(api)
    proxy = f"{PODS}/mnist-master-0:{METRICS_PORT}/proxy/metrics"
    api.routes[("GET", proxy)] = _rank0_metrics()
    code, lines = jobs(kubeconfig, "get", "mnist")
    assert code == 0
    assert lines[:6] == [
        "Name:      mnist",
        "Kind:      PyTorchJob",
        "Phase:     Running",
        "Age:       3h5m",
        "Restarts:  3",
        "Replicas:  Master 1/1 active; Worker 1/1 active, 1 failed",
    ]
    assert lines[8].split(None, 3) == ["Created", "True", "PyTorchJobCreated", "PyTorchJob mnist is created."]
    assert lines[-1] == "Metrics:   step 120  loss 0.25  samples/s 512  MFU 0.41  (from mnist-master-0)"
    assert proxy in api.paths("GET")


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
        assert proc.stdout.readline() == "[Pod mnist-master-0]: step 10 loss 2.1\n"
        first_printed.set()
        assert proc.stdout.readline() == "[Pod mnist-master-0]: step 20 loss 1.7\n"
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


# --- submit --------------------------------------------------------------------------------

REGISTRY = "registry-vpc.cn-hangzhou.aliyuncs.com/ml/trainer"
GPU_PLACEMENT = {
    "nodeSelector": {"ack-training-platform/pool": "gpu"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}],
    "gpusPerNode": 8,
    "fabric": "erdma",
    "maxNodes": 4,
}
DEFAULTS = {
    "namespace": NS,
    "backend": "v1",
    "registry": REGISTRY,
    "placement": GPU_PLACEMENT,
    "dataClaim": "training-data",
    "outputClaim": "training-output",
    "serviceAccount": "trainer",
    "imagePullSecret": "registry-pull",
    "queue": "training",
}


def gpu_context(backend: str) -> JobContext:
    """The context a stack with an 8-GPU eRDMA pool gives its jobs, written out by hand."""
    from components.manifests.placement import ERDMA, Placement

    placement = Placement(
        node_selector=GPU_PLACEMENT["nodeSelector"],
        tolerations=tuple(GPU_PLACEMENT["tolerations"]),
        gpus_per_node=8,
        fabric=ERDMA,
        max_nodes=4,
    )
    return JobContext(
        namespace=NS,
        image=f"{REGISTRY}:v1.4.0",
        gpus=8,
        placement=placement,
        data_claim="training-data",
        output_claim="training-output",
        service_account="trainer",
        image_pull_secret="registry-pull",
        queue="training" if backend == "v2" else None,
    )


@pytest.fixture
def outputs(tmp_path: Path) -> Path:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"namespace": NS, "jobDefaults": DEFAULTS}))
    return path


FLAGS = ["--nodes", "2", "--model", "gpt", "--max-steps", "2000", "--network", "rdma", "--image-tag", "v1.4.0"]
SPEC = {"nodes": 2, "trainer": {"model": "gpt", "maxSteps": 2000}, "network": "rdma", "imageTag": "v1.4.0"}


@pytest.mark.parametrize("backend", ["v1", "v2"])
def test_submit_dry_run_prints_the_builders_manifest(outputs: Path, backend: str) -> None:
    lines: list[str] = []
    argv = ["--outputs", str(outputs), "submit", "gpt-small", *FLAGS, "--backend", backend, "--dry-run"]
    assert run([*argv, "--", "--grad-accum", "4"], out=lines.append) == 0
    spec = TrainingJobSpec.model_validate(
        {"name": "gpt-small", **SPEC, "backend": backend, "args": ["--grad-accum", "4"]}
    )
    builder = train_job if backend == "v2" else pytorch_job
    assert yaml.safe_load("\n".join(lines)) == builder(spec, gpu_context(backend))


@pytest.mark.parametrize("backend", ["v1", "v2"])
def test_submit_creates_exactly_the_builders_manifest(cluster, outputs: Path, backend: str) -> None:
    api, kubeconfig = cluster
    collection = V2 if backend == "v2" else V1
    api.routes[("POST", collection)] = lambda _, body: (201, body)
    lines: list[str] = []
    argv = ["--outputs", str(outputs), "--kubeconfig", str(kubeconfig), "submit", "gpt-small", *FLAGS]
    assert run([*argv, "--backend", backend], out=lines.append) == 0
    spec = TrainingJobSpec.model_validate({"name": "gpt-small", **SPEC, "backend": backend})
    expected = (train_job if backend == "v2" else pytorch_job)(spec, gpu_context(backend))
    assert [(m, p, b) for m, p, _, b in api.requests if m == "POST"] == [("POST", collection, expected)]
    assert lines == [f"{expected['kind']} gpt-small created in {NS}"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--nodes", "0", "--image-tag", "v1"], "--nodes: Input should be greater than or equal to 1"),
        (["--image-tag", "latest"], "--image-tag: 'latest' is not a pinned tag"),
        (["--image", "trainer:latest"], "--image: 'trainer:latest' is not pinned"),
        (["--gpus", "16", "--image-tag", "v1"], "--gpus, --nodes or --network: job 'bad' asks for 16 GPUs per pod"),
        (["--env", "NO_EQUALS", "--image-tag", "v1"], "--env 'NO_EQUALS': give NAME=VALUE"),
        (["--backend", "v2", "--env", "PET_X=1", "--image-tag", "v1"], "--env: PET_X: Trainer v2 sets torchrun's"),
        (
            ["--gpus", "4", "--procs-per-node", "2", "--image-tag", "v1"],
            "--procs-per-node: procsPerNode (2) must equal",
        ),
        (["--max-steps", "0", "--image-tag", "v1"], "--max-steps: Input should be greater than or equal to 1"),
    ],
)
def test_submit_with_bad_flags_names_the_flag_and_exits_2(outputs: Path, capsys, flags, message) -> None:
    assert run(["--outputs", str(outputs), "submit", "bad", *flags, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ack-jobs submit: {message}") and "Traceback" not in err


def test_submit_flag_of_the_wrong_type_exits_2(outputs: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        run(["--outputs", str(outputs), "submit", "bad", "--max-steps", "many", "--dry-run"])
    assert exit_.value.code == 2
    assert "argument --max-steps: invalid int value: 'many'" in capsys.readouterr().err


def test_submit_without_the_stacks_defaults(capsys) -> None:
    assert run(["submit", "gpt-small", "--image-tag", "v1", "--dry-run"]) == 2
    assert "--stack/--outputs: submit needs the stack's jobDefaults output" in capsys.readouterr().err


# --- connecting through the stack's outputs -----------------------------------------------------


def test_the_stacks_kubeconfig_is_used_from_a_private_file_that_is_removed(cluster, tmp_path, monkeypatch, capsys):
    api, kubeconfig = cluster
    api.routes[("GET", V1)] = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJobList", "items": []}
    secret = kubeconfig.read_text()
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"kubeconfig": secret, "namespace": NS}))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    modes = []
    real_load = __import__("kubernetes").config.load_kube_config

    def load(config_file, **kwargs):
        modes.append(os.stat(config_file).st_mode & 0o777)
        return real_load(config_file=config_file, **kwargs)

    monkeypatch.setattr("kubernetes.config.load_kube_config", load)
    lines: list[str] = []
    assert run(["--outputs", str(path), "list"], out=lines.append) == 0
    assert modes == [0o600] and list(scratch.iterdir()) == []
    assert "not-a-secret" not in "\n".join(lines) + capsys.readouterr().out


# --- top -------------------------------------------------------------------------------------


def test_top_shows_gpu_use_per_job_pod_from_prometheus(cluster) -> None:
    api, kubeconfig = cluster
    mnist = serve_mnist(api)
    api.routes[("GET", V1)] = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJobList", "items": [mnist]}
    per_pod = {"mnist-master-0": (97.5, 61234.0), "mnist-worker-0": (88.0, 60111.0), "other-pod": (50.0, 1.0)}

    def query(params: dict[str, list[str]], _: Any) -> tuple[int, Any]:
        expr = params["query"][0]
        assert f'{NAMESPACE_LABEL}="{NS}"' in expr and f"by ({POD_LABEL})" in expr
        column = 0 if GPU_UTIL in expr else 1
        assert column == 0 or GPU_MEMORY_USED in expr
        result = [{"metric": {POD_LABEL: pod}, "value": [0, str(v[column])]} for pod, v in per_pod.items()]
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

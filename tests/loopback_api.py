"""A stand-in Kubernetes API server for the job commands' tests, and the objects it serves.

A local HTTP server on 127.0.0.1 (``http.server`` in a thread) answers exactly the API paths
a test routes, records each request (method, path, query, body), and streams followed logs
in chunks as the API server does. The objects are written here in the shapes the v1.9.4
operator and Trainer v2.3.0 write (sources in ``components/jobs/status.py``), Volcano v1.12.1
and Kueue v0.19.2 theirs (sources in ``components/jobs/queues.py``); the jobs themselves come
from the platform's builders. A PyTorchJob's pods carry the labels of kubeflow/trainer v1.9.4
``pkg/controller.v1/common/pod.go`` ``createNewPod``; an MPIJob's those of its own controller,
``pkg/controller.v1/mpi/mpijob_controller.go``, as ``fixtures.operator_pods`` derives them; a
TrainJob's node pods those of JobSet v0.12.0 ``pkg/controllers/jobset_controller.go``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml
from fixtures.operator_pods import operator_pods
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from components.config import TrainingJobSpec
from components.jobs.cli import run
from components.manifests import CPU_PLACEMENT, JobContext, kubeflow_job, pytorch_job, train_job, training_runtime
from trainer.telemetry.metric_names import LOSS, MFU, SAMPLES_PER_SECOND, STEP

NS = "training"
V1 = f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs"
V2 = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
IMAGE = "registry.example.com/ml/trainer:v1.4.0"
V1_LABEL = "training.kubeflow.org/"
JOBSET = "jobset.sigs.k8s.io/"
GPU = "nvidia.com/gpu"
VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


class FakeApi:
    """Routes (method, path) → a fixed object or a handler; 404 for anything else."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Any] = {}
        self.requests: list[tuple[str, str, dict[str, list[str]], Any]] = []
        self.pods: list[dict[str, Any]] = []
        self.nodes: list[dict[str, Any]] = []
        self.content_types: list[tuple[str, str]] = []
        self.routes[("GET", PODS)] = self._pods
        self.routes[("GET", "/api/v1/pods")] = self._pods
        self.routes[("GET", "/api/v1/nodes")] = lambda _, __: (
            200,
            {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": self.nodes},
        )

    def _pods(self, query: dict[str, list[str]], _: Any) -> tuple[int, Any]:
        """Pods matching ``labelSelector`` and ``fieldSelector`` (``status.phase=``)."""
        fields = _terms(query, "fieldSelector")
        assert set(fields) <= {"status.phase"}, fields
        items = [
            p
            for p in _selected(self.pods, query)
            if fields.get("status.phase", p["status"]["phase"]) == p["status"]["phase"]
        ]
        return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}

    def serve(self, path: str, kind: str, items: list[dict[str, Any]]) -> None:
        """A list at ``path`` (``kind`` + ``List``, filtered by ``labelSelector``) and each item
        at ``path/<name>``."""
        version = items[0]["apiVersion"] if items else "v1"
        self.routes[("GET", path)] = lambda query, _: (
            200,
            {"apiVersion": version, "kind": f"{kind}List", "metadata": {}, "items": _selected(items, query)},
        )
        for item in items:
            self.routes[("GET", f"{path}/{item['metadata']['name']}")] = item

    def paths(self, method: str) -> list[str]:
        return [path for m, path, _, _ in self.requests if m == method]


def _terms(query: dict[str, list[str]], name: str) -> dict[str, str]:
    return dict(term.split("=", 1) for term in query.get(name, [""])[0].split(",") if term)


_SET_TERM = re.compile(r"([^,\s]+)\s+in\s+\(([^)]*)\)")
"""A set-based term of a label selector, ``key in (a, b)`` (kubernetes.io, "Labels and Selectors")."""


def _selected(items: list[dict[str, Any]], query: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The items whose labels match every term of the query's ``labelSelector``: ``k=v``, and
    ``k in (a, b)``, which the Kubeflow SDK lists a TrainJob's pods with."""
    selector = query.get("labelSelector", [""])[0]
    sets = {key: {v.strip() for v in values.split(",")} for key, values in _SET_TERM.findall(selector)}
    wanted = _terms({"labelSelector": [_SET_TERM.sub("", selector)]}, "labelSelector")

    def matches(labels: dict[str, str]) -> bool:
        return wanted.items() <= labels.items() and all(labels.get(k) in v for k, v in sets.items())

    return [item for item in items if matches(item["metadata"].get("labels") or {})]


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
            api.content_types.append((self.command, self.headers.get("Content-Type", "")))
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


def v1_pod(job: str, kind: str, index: int, restarts: int = 0, phase: str = "Running", gpus: int = 0) -> dict[str, Any]:
    labels = {f"{V1_LABEL}job-name": job, f"{V1_LABEL}replica-type": kind, f"{V1_LABEL}replica-index": str(index)}
    if kind == "master":
        labels[f"{V1_LABEL}job-role"] = "master"
    return _pod(
        f"{job}-{kind}-{index}", labels, "pytorch", restarts, phase, f"gpu-node-{index + (kind == 'worker')}", gpus
    )


def v2_pod(job: str, index: int, attempt: int = 0, gpus: int = 0) -> dict[str, Any]:
    """A node pod as JobSet v0.12.0 labels it; it never restarts in place (``restartPolicy:
    Never``): a JobSet restart creates it again with the next ``restart-attempt``."""
    labels = {
        f"{JOBSET}jobset-name": job,
        f"{JOBSET}replicatedjob-name": "node",
        f"{JOBSET}restart-attempt": str(attempt),
        "batch.kubernetes.io/job-completion-index": str(index),
    }
    return _pod(f"{job}-node-0-{index}-x7k2q", labels, "node", 0, "Running", f"gpu-node-{index + 2}", gpus)


def _pod(
    name: str, labels: dict[str, str], container: str, restarts: int, phase: str, node: str, gpus: int
) -> dict[str, Any]:
    # The builders set GPU limits only; the API server defaults an extended resource's request to its limit.
    resources = {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus)}} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels, "creationTimestamp": _ago(timedelta(hours=1))},
        "spec": {
            "containers": [{"name": container, "image": IMAGE, "resources": resources}],
            **({"nodeName": node} if phase != "Pending" else {}),
        },
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
    job["metadata"]["uid"] = "7d0c3a52-0000-4000-8000-00000000000a"
    api.routes[("GET", f"{V1}/mnist")] = job
    api.pods += [v1_pod("mnist", "master", 0, restarts=2), v1_pod("mnist", "worker", 0)]
    return job


def serve_gpt(api: FakeApi, conditions: list[dict[str, str]] = ()) -> dict[str, Any]:
    job = v2_job("gpt", list(conditions), ready=1)
    job["metadata"]["uid"] = "7d0c3a52-0000-4000-8000-00000000000b"
    api.routes[("GET", f"{V2}/gpt")] = job
    runtime = training_runtime()
    api.routes[
        ("GET", f"/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/{runtime['metadata']['name']}")
    ] = runtime
    api.pods += [v2_pod("gpt", 0, attempt=1), v2_pod("gpt", 1, attempt=1)]
    return job


MPIJOBS = f"/apis/kubeflow.org/v1/namespaces/{NS}/mpijobs"


def serve_mpi(api: FakeApi) -> dict[str, Any]:
    """A running MPIJob ``hvd`` (a Launcher and two Workers), its pods labelled as its controller
    labels them."""
    spec = TrainingJobSpec(name="hvd", image=IMAGE, framework="mpi", nodes=2, command=["mpirun", "python", "t.py"])
    job = kubeflow_job(spec, CTX)
    job["metadata"]["creationTimestamp"] = _ago(timedelta(minutes=20))
    running = [cond("Created", "MPIJobCreated", "MPIJob hvd is created."), cond("Running", "MPIJobRunning", "")]
    job["status"] = {"conditions": running, "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 2}}}
    api.routes[("GET", f"{MPIJOBS}/hvd")] = job
    specs = job["spec"]["mpiReplicaSpecs"]
    for (replica, index), pod in operator_pods(job).items():
        labels = {**specs[replica]["template"]["metadata"]["labels"], **pod.labels}
        api.pods.append(_pod(pod.name, labels, "mpi", 0, "Running", f"gpu-node-{index + (replica == 'Worker')}", 0))
    return job


def gpu_node(name: str, pool: str, gpus: int) -> dict[str, Any]:
    """A node as the kubelet reports it: its GPUs under ``allocatable`` (the device plugin's)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"ack-training-platform/pool": pool, "kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "94", "memory": "700Gi", "pods": "110", GPU: str(gpus)}},
    }


def volcano_queue(name: str, state: str, **counts: int) -> dict[str, Any]:
    """A Volcano v1.12.1 Queue; its counts are ``omitempty``, so a zero count is absent."""
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": True},
        "status": {"state": state, **{k: v for k, v in counts.items() if v}, "allocated": {"cpu": "0"}},
    }


def podgroup(job: str, queue: str, phase: str, unschedulable: str | None = None) -> dict[str, Any]:
    """The PodGroup the v1 operator makes for a job (named after it), as Volcano's gang plugin
    updates it: an ``Unschedulable`` condition with reason ``NotEnoughResources``."""
    status: dict[str, Any] = {"phase": phase}
    if unschedulable:
        status["conditions"] = [
            {
                "type": "Unschedulable",
                "status": "True",
                "transitionID": "5b1f6a0e-0000-4000-8000-000000000001",
                "lastTransitionTime": _ago(timedelta(minutes=2)),
                "reason": "NotEnoughResources",
                "message": unschedulable,
            }
        ]
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": job, "namespace": NS},
        "spec": {"minMember": 2, "queue": queue},
        "status": status,
    }


def local_queue(name: str, cluster_queue: str, pending: int, admitted: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"clusterQueue": cluster_queue},
        "status": {"pendingWorkloads": pending, "reservingWorkloads": admitted, "admittedWorkloads": admitted},
    }


def cluster_queue(name: str, nominal_gpus: int, used_gpus: int, pending: int, admitted: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", GPU],
                    "flavors": [
                        {
                            "name": "gpu",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "192"},
                                {"name": GPU, "nominalQuota": str(nominal_gpus)},
                            ],
                        }
                    ],
                }
            ],
        },
        "status": {
            "pendingWorkloads": pending,
            "reservingWorkloads": admitted,
            "admittedWorkloads": admitted,
            "flavorsUsage": [
                {"name": "gpu", "resources": [{"name": "cpu", "total": "16"}, {"name": GPU, "total": str(used_gpus)}]}
            ],
        },
    }


def workload(job: dict[str, Any], queue: str, conditions: list[dict[str, str]], active: bool = True) -> dict[str, Any]:
    """The Workload Kueue v0.19.2 makes for a job: owned by it, labelled with its UID."""
    meta = job["metadata"]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"trainjob-{meta['name']}-3f2a1",
            "namespace": NS,
            "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
            "ownerReferences": [
                {"apiVersion": job["apiVersion"], "kind": job["kind"], "name": meta["name"], "uid": meta["uid"]}
            ],
        },
        "spec": {"active": active, "queueName": queue, "podSets": [{"name": "node", "count": 2}]},
        "status": {"conditions": conditions},
    }


def rank0_metrics() -> str:
    registry = CollectorRegistry()
    for metric, value in ((STEP, 120), (LOSS, 0.25), (SAMPLES_PER_SECOND, 512.0), (MFU, 0.41)):
        Gauge(metric.name, metric.help, registry=registry).set(value)
    return generate_latest(registry).decode()


@contextmanager
def loopback(directory: Path) -> Iterator[tuple[FakeApi, Path]]:
    """A running stand-in server and a kubeconfig in ``directory`` pointing at it."""
    api = FakeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(_kubeconfig(server.server_address[1])))
    try:
        yield api, kubeconfig
    finally:
        server.shutdown()
        server.server_close()

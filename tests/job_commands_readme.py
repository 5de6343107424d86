"""Print the ``ack-jobs`` session docs/jobs.md shows: each command run for real against the stand-in API
server of ``loopback_api.py`` (which also stands in for Prometheus), as ``$ ack-jobs ...``
followed by what it printed and, when not 0, its exit status.

    python tests/job_commands_readme.py
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures.waiting import gang_message, kueue_waiting, volcano_fit_error  # noqa: E402
from loopback_api import (  # noqa: E402
    KUEUE,
    NS,
    PODS,
    V1,
    V2,
    VOLCANO,
    FakeApi,
    cluster_queue,
    cond,
    gpu_node,
    local_queue,
    loopback,
    podgroup,
    rank0_metrics,
    serve_gpt,
    serve_mnist,
    v1_job,
    v2_job,
    volcano_queue,
    workload,
)
from test_job_submit import DEFAULTS  # noqa: E402

from components.jobs.cli import run  # noqa: E402
from components.manifests.monitoring.gpu_metrics import GPU_UTIL, POD_LABEL  # noqa: E402
from trainer.telemetry.metric_names import METRICS_PORT  # noqa: E402

MANIFEST_LINES = 40
"""Lines of a ``submit --dry-run`` manifest shown."""
OK = {"kind": "Status", "apiVersion": "v1", "status": "Success"}
GPU_USE = {"mnist-master-0": (97.0, 61234.0), "mnist-worker-0": (88.0, 60111.0)}


def _prometheus(params: dict[str, list[str]], _: Any) -> tuple[int, Any]:
    column = 0 if GPU_UTIL in params["query"][0] else 1
    result = [{"metric": {POD_LABEL: pod}, "value": [0, str(v[column])]} for pod, v in GPU_USE.items()]
    return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}


def _master_log(query: dict[str, list[str]], _: Any) -> tuple[int, str]:
    """The Master's last lines, with the API server's timestamps when asked for."""
    lines = [
        ("2026-11-24T06:58:01.120Z", "step 110 loss 0.2712 samples/s 509.8"),
        ("2026-11-24T06:58:13.480Z", "step 120 loss 0.2500 samples/s 512.0"),
    ]
    stamped = query.get("timestamps") == ["True"]
    tail = int(query.get("tailLines", ["0"])[0]) or len(lines)
    return 200, "".join(f"{when} {line}\n" if stamped else f"{line}\n" for when, line in lines[-tail:])


def _cluster(api: FakeApi, kubeconfig: Path) -> str:
    """The jobs, pods, nodes and queues the session shows; returns the Prometheus address."""
    mnist, gpt = serve_mnist(api), serve_gpt(api)
    mnist["spec"]["runPolicy"]["schedulingPolicy"] = {"queue": "research"}
    gpt["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "training"
    # bert waits for Volcano to fit its gang; gpt-large for Kueue quota, suspended by Kueue until then.
    bert = v1_job("bert", [cond("Created", "PyTorchJobCreated", "PyTorchJob bert is created.")], {})
    bert["spec"]["runPolicy"]["schedulingPolicy"] = {"queue": "research"}
    large = v2_job("gpt-large", [cond("Suspended", "Suspended", "TrainJob is suspended")], ready=0)
    large["status"]["jobsStatus"][0].update(active=0, suspended=1)
    large["spec"]["trainer"]["numNodes"] = 4
    large["metadata"]["uid"] = "7d0c3a52-0000-4000-8000-00000000000c"
    large["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "training"
    api.serve(V1, "PyTorchJob", [bert, mnist])
    api.serve(V2, "TrainJob", [gpt, large])
    for pod in api.pods:
        container = pod["spec"]["containers"][0]
        container["resources"] = {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}
    api.nodes += [gpu_node(f"gpu-node-{i}", "gpu", 8) for i in range(5)]
    api.routes[("GET", f"{PODS}/mnist-master-0:{METRICS_PORT}/proxy/metrics")] = rank0_metrics()
    api.routes[("GET", f"{PODS}/mnist-master-0/log")] = _master_log
    api.routes[("GET", f"{PODS}/mnist-worker-0/log")] = "worker 0 joined the rendezvous\nrank 1 ready\n"
    api.routes[("GET", f"{PODS}/gpt-node-0-1-x7k2q/log")] = "rank 2 ready\nrank 3 ready\n"
    api.routes[("GET", "/api/v1/query")] = _prometheus
    api.routes[("PATCH", f"{V1}/mnist")] = mnist
    api.routes[("DELETE", f"{V1}/mnist")] = OK
    api.routes[("DELETE", f"{V2}/gpt")] = OK
    queues = [volcano_queue("default", "Open"), volcano_queue("research", "Open", pending=1, running=1)]
    api.serve(f"{VOLCANO}/queues", "Queue", queues)
    # Volcano's gang plugin and Kueue's scheduler write these (tests/fixtures/waiting.py names the sources).
    origin = volcano_fit_error(5, {"Insufficient nvidia.com/gpu": 5})
    unschedulable = gang_message(2, 2, {"Unschedulable": 2}, "bert-master-0", origin)
    groups = [podgroup("bert", "research", "Pending", unschedulable), podgroup("mnist", "research", "Running")]
    api.serve(f"{VOLCANO}/namespaces/{NS}/podgroups", "PodGroup", groups)
    quota = kueue_waiting("node", "nvidia.com/gpu", "gpu", "16")
    waiting = workload(large, "training", [cond("QuotaReserved", "WaitingForQuota", quota, status="False")])
    admitted = [cond("QuotaReserved", "QuotaReserved", "Quota reserved in ClusterQueue platform")]
    admitted.append(cond("Admitted", "Admitted", "The workload is admitted"))
    running = workload(gpt, "training", admitted)
    api.serve(f"{KUEUE}/namespaces/{NS}/localqueues", "LocalQueue", [local_queue("training", "platform", 1, 1)])
    api.serve(f"{KUEUE}/clusterqueues", "ClusterQueue", [cluster_queue("platform", 32, 16, 1, 1)])
    api.serve(f"{KUEUE}/namespaces/{NS}/workloads", "Workload", [running, waiting])
    api.routes[("PATCH", f"{KUEUE}/namespaces/{NS}/workloads/{running['metadata']['name']}")] = running
    return yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]


def session(directory: Path) -> list[str]:
    printed: list[str] = []
    with loopback(directory) as (api, kubeconfig):
        prometheus = _cluster(api, kubeconfig)
        commands = [
            ["list"],
            ["list", "-o", "wide"],
            ["list", "-o", "name"],
            ["get", "mnist"],
            ["logs", "mnist", "--tail", "2", "--timestamps"],
            ["logs", "gpt", "--rank", "1"],
            ["logs", "mnist", "--all-replicas"],
            ["top", "--prometheus-url", "http://localhost:9090"],
            ["top", "nodes"],
            ["queue"],
            ["why", "bert"],
            ["why", "gpt-large"],
            ["suspend", "mnist"],
            ["suspend", "gpt"],
            ["delete", "mnist", "nope", "gpt"],
            ["logs", "mnist", "--rank", "5"],
        ]
        outputs = directory / "outputs.json"
        outputs.write_text(json.dumps({"namespace": NS, "jobDefaults": DEFAULTS}))
        submit = ["--outputs", "outputs.json", "submit", "gpt-small", "--nodes", "2", "--gpus", "8"]
        commands += [
            ["wait", "gpt", "--for", "running", "--interval", "1"],
            ["wait", "mnist", "--timeout", "2", "--interval", "1"],
            [*submit, "--image-tag", "latest"],
            [*submit, "--image-tag", "v1.4.0", "--toleration", "spot=true", "--dry-run"],
            [*submit, "--model", "gpt", "--image-tag", "v1.4.0", "--label", "team=nlp", "--dry-run"],
        ]
        for argv in commands:
            # The addresses shown are the ones a user gives; the run uses the stand-in's.
            stand_in = {"http://localhost:9090": prometheus, "outputs.json": str(outputs)}
            given = [stand_in.get(arg, arg) for arg in argv]
            connect = [] if "--outputs" in argv else ["--kubeconfig", str(kubeconfig), "-n", NS]
            lines: list[str] = []
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                code = run([*connect, *given], out=lines.append)
            lines = "\n".join(lines).splitlines()
            if len(lines) > MANIFEST_LINES:
                lines = [*lines[:MANIFEST_LINES], f"... ({len(lines)} lines in all)"]
            printed += [f"$ ack-jobs {shlex.join(argv)}", *lines, *err.getvalue().splitlines()]
            if code:
                printed.append(f"# exit {code}")
            printed.append("")
    return printed


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        print("\n".join(session(Path(directory))).strip())


if __name__ == "__main__":
    main()

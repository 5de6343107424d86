"""Thin access to a cluster's training jobs through the official clients.

- v1 PyTorchJobs: ``kubeflow-training`` 1.9.4's ``TrainingClient`` (list, get, pods, logs,
  wait, create, delete).
- v2 TrainJobs: the kubernetes client's ``CustomObjectsApi`` and ``CoreV1Api``. The
  ``kubeflow`` SDK's ``TrainerClient`` (0.5.0, which installs beside the pins) cannot read the
  platform's jobs: its ``get_job``, ``get_job_logs`` and ``wait_for_job_status`` all resolve
  the job's runtime first and refuse one whose trainer container has no image
  (``kubeflow/trainer/backends/kubernetes/utils.py`` ``get_runtime_trainer``), while the
  platform's runtimes leave the image to each TrainJob; and ``TrainerClient.train`` builds its
  own TrainJob from a function or command, so it cannot submit the builder's.

Everything returned is a plain dict with the API's camelCase keys, as :mod:`.status` reads it.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from kubeflow.training import TrainingClient
from kubeflow.training.constants import constants as v1c
from kubeflow.training.utils.utils import FakeResponse
from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.rest import ApiException

from trainer.metric_names import METRICS_PORT

from ..manifests.trainjob import TRAINER_API, TRAINER_NODE
from .status import PYTORCHJOB, TRAINJOB, job_phase

V2_GROUP, V2_VERSION = TRAINER_API.split("/")
V2_PLURAL = "trainjobs"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
NODE_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
"""How JobSet labels a TrainJob's pods (Trainer v2.3.0 ``docs/user-guides/megatron.md``; the
completion index is the node's rank, as Kubernetes' indexed Jobs set it)."""
V1_WAIT = {"created": "Created", "running": "Running", "restarting": "Restarting", "succeeded": "Succeeded"}
"""``wait --for`` → v1 condition type (``kubeflow.training.constants.JOB_CONDITIONS``)."""
V2_WAIT = {"created": "Created", "running": "Running", "succeeded": "Succeeded"}
"""``wait --for`` → the TrainJob phase :func:`.status.job_phase` gives."""
FAILED = "failed"


class JobNotFound(LookupError):
    """No PyTorchJob or TrainJob of that name in the namespace."""


class WaitFailed(RuntimeError):
    """The job failed while ``wait`` expected another phase."""


def _not_found(err: BaseException) -> bool:
    cause = err if isinstance(err, ApiException) else err.__cause__
    return isinstance(cause, ApiException) and cause.status == 404


class JobsClient:
    """PyTorchJobs and TrainJobs of one namespace.

    Args:
        configuration: the kubernetes client configuration (from a kubeconfig).
        namespace: the training namespace.
    """

    def __init__(self, configuration: k8s.Configuration, namespace: str):
        self.namespace = namespace
        api = k8s.ApiClient(configuration)
        self.core = k8s.CoreV1Api(api)
        self.custom = k8s.CustomObjectsApi(api)
        self._serializer = api
        self.v1 = TrainingClient(client_configuration=configuration, namespace=namespace)

    def _plain(self, model: Any) -> dict[str, Any]:
        return self._serializer.sanitize_for_serialization(model)

    def list_jobs(self) -> list[dict[str, Any]]:
        """Every PyTorchJob and TrainJob; a kind whose CRD is not installed has none.

        Raises:
            RuntimeError: the API server refused the request.
        """
        jobs: list[dict[str, Any]] = []
        try:
            jobs += [{"kind": PYTORCHJOB, **self._plain(job)} for job in self.v1.list_jobs()]
        except RuntimeError as err:
            if not _not_found(err):
                raise
        try:
            items = self.custom.list_namespaced_custom_object(V2_GROUP, V2_VERSION, self.namespace, V2_PLURAL)["items"]
            jobs += [{"kind": TRAINJOB, **item} for item in items]
        except ApiException as err:
            if err.status != 404:
                raise RuntimeError(f"Failed to list TrainJobs in namespace {self.namespace}: {err.reason}") from err
        return sorted(jobs, key=lambda job: job["metadata"]["name"])

    def get_job(self, name: str) -> dict[str, Any]:
        """The PyTorchJob or TrainJob ``name``.

        Raises:
            JobNotFound: there is neither.
        """
        try:
            return {"kind": PYTORCHJOB, **self._plain(self.v1.get_job(name))}
        except RuntimeError as err:
            if not _not_found(err):
                raise
        try:
            job = self.custom.get_namespaced_custom_object(V2_GROUP, V2_VERSION, self.namespace, V2_PLURAL, name)
            return {"kind": TRAINJOB, **job}
        except ApiException as err:
            if err.status == 404:
                raise JobNotFound(f"no PyTorchJob or TrainJob named {name!r} in namespace {self.namespace}") from None
            raise

    def pods(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        """The job's pods, labelled by the v1 operator or by JobSet for a TrainJob."""
        name = job["metadata"]["name"]
        if job["kind"] == PYTORCHJOB:
            return [self._plain(pod) for pod in self.v1.get_job_pods(name)]
        return self._v2_pods(f"{JOBSET_NAME_LABEL}={name}")

    def _v2_pods(self, selector: str) -> list[dict[str, Any]]:
        return [
            self._plain(pod) for pod in self.core.list_namespaced_pod(self.namespace, label_selector=selector).items
        ]

    def metrics_text(self, pod: str) -> str:
        """``/metrics`` of a pod's trainer, through the API server's pod proxy.

        Raises:
            ApiException: the pod or its port is unreachable.
        """
        return self.core.connect_get_namespaced_pod_proxy_with_path(f"{pod}:{METRICS_PORT}", self.namespace, "metrics")

    def logs(self, job: dict[str, Any], replica: str, follow: bool, emit: Callable[[str], None]) -> None:
        """Print one replica's log (``master``/``worker-N`` on v1, ``node-N`` on v2).

        Raises:
            ValueError: ``replica`` does not name a replica of this kind of job.
        """
        name = job["metadata"]["name"]
        if job["kind"] == TRAINJOB:
            self._v2_logs(name, replica, follow, emit)
            return
        kind, _, index = replica.partition("-")
        if kind not in v1c.PYTORCHJOB_REPLICA_TYPES or (kind == "worker") != index.isdigit():
            raise ValueError(f"--replica {replica!r}: a PyTorchJob has replicas master and worker-0, worker-1, ...")
        options = {"replica_type": kind, "replica_index": int(index) if index else None, "is_master": False}
        if follow:
            # The client prints each line as it arrives, prefixed with its pod.
            self.v1.get_job_logs(name, follow=True, **options)
            return
        for text in self.v1.get_job_logs(name, **options)[0].values():
            emit(text.rstrip("\n"))

    def _v2_logs(self, name: str, replica: str, follow: bool, emit: Callable[[str], None]) -> None:
        role, _, index = replica.rpartition("-")
        if role != TRAINER_NODE or not index.isdigit():
            raise ValueError(f"--replica {replica!r}: a TrainJob has replicas node-0, node-1, ...")
        selector = f"{JOBSET_NAME_LABEL}={name},{REPLICATED_JOB_LABEL}={TRAINER_NODE},{NODE_INDEX_LABEL}={index}"
        pods = self._v2_pods(selector)
        if not pods:
            raise JobNotFound(f"no pod for {replica} of TrainJob {name} yet")
        options = {"name": pods[0]["metadata"]["name"], "namespace": self.namespace, "container": TRAINER_NODE}
        if follow:
            # As TrainingClient follows a log: the watch adds follow=true and yields each line.
            for line in watch.Watch().stream(self.core.read_namespaced_pod_log, **options):
                emit(line)
            return
        emit(self.core.read_namespaced_pod_log(**options).rstrip("\n"))

    def wait(self, job: dict[str, Any], phase: str, timeout: float, interval: float) -> None:
        """Return once the job reaches ``phase``.

        Raises:
            WaitFailed: the job failed first.
            TimeoutError: ``timeout`` seconds passed.
            ValueError: ``phase`` is not one this kind of job reports.
        """
        name = job["metadata"]["name"]
        table = V1_WAIT if job["kind"] == PYTORCHJOB else V2_WAIT
        if phase != FAILED and phase not in table:
            raise ValueError(f"--for {phase}: a {job['kind']} reports {', '.join([*table, FAILED])}")
        try:
            if job["kind"] == PYTORCHJOB:
                wanted = {v1c.JOB_CONDITION_FAILED} if phase == FAILED else {table[phase]}
                self.v1.wait_for_job_conditions(
                    name, expected_conditions=wanted, wait_timeout=timeout, polling_interval=interval
                )
            else:
                self._v2_wait(name, "Failed" if phase == FAILED else table[phase], timeout, interval)
        except TimeoutError:
            raise
        except RuntimeError as err:
            if "is Failed" in str(err):
                raise WaitFailed(name) from None
            raise

    def _v2_wait(self, name: str, phase: str, timeout: float, interval: float) -> None:
        # The same loop as TrainingClient.wait_for_job_conditions: a fixed number of polls.
        for _ in range(max(round(timeout / interval), 1)):
            current, _ = job_phase(self.get_job(name))
            if current == phase:
                return
            if current == "Failed":
                raise RuntimeError(f"TrainJob {name} is Failed")
            time.sleep(interval)
        raise TimeoutError(name)

    def create(self, manifest: dict[str, Any]) -> None:
        """Create the builder's PyTorchJob or TrainJob as it is.

        Raises:
            RuntimeError: the API server refused it.
        """
        if manifest["kind"] == PYTORCHJOB:
            model = self.v1.api_client.deserialize(FakeResponse(manifest), "KubeflowOrgV1PyTorchJob")
            self.v1.create_job(job=model)
            return
        try:
            self.custom.create_namespaced_custom_object(V2_GROUP, V2_VERSION, self.namespace, V2_PLURAL, manifest)
        except ApiException as err:
            raise RuntimeError(f"Failed to create TrainJob {manifest['metadata']['name']}: {err.body}") from err

    def delete(self, job: dict[str, Any]) -> None:
        """Delete the job; its pods go with it."""
        if job["kind"] == PYTORCHJOB:
            self.v1.delete_job(job["metadata"]["name"])
        else:
            self.custom.delete_namespaced_custom_object(
                V2_GROUP, V2_VERSION, self.namespace, V2_PLURAL, job["metadata"]["name"]
            )


def prometheus_query(base_url: str, query: str, timeout_s: float = 10.0) -> list[tuple[dict[str, str], float]]:
    """An instant query through Prometheus's HTTP API (``GET /api/v1/query``; Prometheus docs,
    "HTTP API"). The ``prometheus-client`` package serves and parses metrics but has no query
    client, so this is the one HTTP call made by hand.

    Args:
        base_url: Prometheus's address, e.g. ``http://prometheus.monitoring:9090``.
        query: a PromQL expression with a vector result.
        timeout_s: how long to wait for the answer.

    Returns:
        ``(labels, value)`` per series.

    Raises:
        OSError: Prometheus is unreachable or answered with an error.
    """
    url = f"{base_url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        answer = json.load(response)
    if answer.get("status") != "success":
        raise OSError(f"Prometheus refused {query!r}: {answer.get('error', answer)}")
    return [(series["metric"], float(series["value"][1])) for series in answer["data"]["result"]]

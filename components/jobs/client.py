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
from urllib3.exceptions import HTTPError as TransportError

from trainer.metric_names import METRICS_PORT

from ..manifests.trainjob import TRAINER_API, TRAINER_NODE
from .status import PYTORCHJOB, TRAINJOB, job_phase, true_condition

V2_GROUP, V2_VERSION = TRAINER_API.split("/")
V2_PLURAL = "trainjobs"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
NODE_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
"""An Indexed Job's pod index, as a label since Kubernetes 1.28 (KEP-4017, the pod index
label; before, only as an annotation): node N of a TrainJob is index N of its node Job."""
"""How JobSet labels a TrainJob's pods (Trainer v2.3.0 ``docs/user-guides/megatron.md``; the
completion index is the node's rank, as Kubernetes' indexed Jobs set it)."""
V1_WAIT = {"created": "Created", "running": "Running", "restarting": "Restarting", "succeeded": "Succeeded"}
"""``wait --for`` → v1 condition type (``kubeflow.training.constants.JOB_CONDITIONS``)."""
V2_WAIT = {"created": "Created", "running": "Running", "succeeded": "Succeeded"}
"""``wait --for`` → the TrainJob phase :func:`.status.job_phase` gives."""
FAILED = "failed"
FINAL = ("Succeeded", "Failed")
"""Phases a job never leaves (:mod:`.status`)."""


class JobNotFound(LookupError):
    """No PyTorchJob or TrainJob of that name in the namespace."""


class WaitEnded(RuntimeError):
    """The job reached a final phase other than the one ``wait`` expected."""


def _api_error(err: BaseException) -> ApiException | None:
    # TrainingClient wraps the kubernetes client's errors in RuntimeError, the ApiException
    # as the cause (``raise ... from e``), anything else as the context.
    for candidate in (err, err.__cause__):
        if isinstance(candidate, ApiException):
            return candidate
    return None


def _not_found(err: BaseException) -> bool:
    api = _api_error(err)
    return api is not None and api.status == 404


def explain(err: BaseException) -> str:
    """One line on what went wrong talking to the cluster, without HTTP headers or a traceback.

    Args:
        err: an error from the kubernetes client or ``TrainingClient``, possibly wrapping one.

    Returns:
        For an API error, its reason and the ``message`` of the Status the API server sent as
        the body (Kubernetes API conventions, "Response Status Kind"), e.g. ``Forbidden:
        pytorchjobs.kubeflow.org "mnist" is forbidden: ...``; for anything else, the error
        and what caused it at bottom (e.g. ``[Errno 111] Connection refused``).
    """
    api = _api_error(err)
    if api is not None:
        try:
            body = json.loads(api.body or "")
        except (TypeError, ValueError):
            body = None
        message = body.get("message") if isinstance(body, dict) else None
        return f"{api.reason}: {message}" if message else str(api.reason)
    root = err
    # urllib3 keeps what failed under MaxRetryError in ``reason``, a socket error under
    # NewConnectionError as its context.
    while (deeper := getattr(root, "reason", None) or root.__cause__ or root.__context__) is not None:
        if not isinstance(deeper, BaseException):
            break
        root = deeper
    if root is err:
        return str(err)
    return str(root) if isinstance(err, TransportError) else f"{err}: {root}"


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
                raise
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
            JobNotFound: the replica has no started pod (yet).
        """
        name = job["metadata"]["name"]
        if job["kind"] == TRAINJOB:
            self._v2_logs(name, replica, follow, emit)
            return
        kind, _, index = replica.partition("-")
        if kind not in v1c.PYTORCHJOB_REPLICA_TYPES or (kind == "worker") != index.isdigit():
            raise ValueError(f"--replica {replica!r}: a PyTorchJob has replicas master and worker-0, worker-1, ...")
        options = {"replica_type": kind, "replica_index": int(index) if index else None, "is_master": False}
        # TrainingClient reads the log of every matching pod that is not Pending, and of none
        # without saying so (``get_job_logs``).
        started = [pod for pod in self.v1.get_job_pods(name, **options) if pod.status and pod.status.phase != "Pending"]
        if not started:
            raise JobNotFound(f"no started pod for {replica} of PyTorchJob {name} yet")
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

        Args:
            job: the job, as :meth:`get_job` returns it.
            phase: one of ``created``, ``running``, ``restarting`` (v1), ``succeeded``, ``failed``.
            timeout: seconds to wait, above 0.
            interval: seconds between polls, above 0.

        Raises:
            WaitEnded: the job reached another final phase (failed, or succeeded) first.
            TimeoutError: ``timeout`` seconds passed.
            ValueError: ``phase`` is not one this kind of job reports.
        """
        name = job["metadata"]["name"]
        table = V1_WAIT if job["kind"] == PYTORCHJOB else V2_WAIT
        if phase != FAILED and phase not in table:
            raise ValueError(f"--for {phase}: a {job['kind']} reports {', '.join([*table, FAILED])}")
        wanted = "Failed" if phase == FAILED else table[phase]
        # TrainingClient polls round(timeout / interval) times, so never if the interval is
        # more than twice the timeout.
        interval = min(interval, timeout)
        if job["kind"] == TRAINJOB:
            self._v2_wait(name, wanted, timeout, interval)
            return

        def stop_if_ended(model: Any) -> None:
            # Called on each poll before TrainingClient looks for ``wanted``, which a job
            # that already succeeded or failed will never reach.
            current = {"kind": PYTORCHJOB, **self._plain(model)}
            reached, _ = job_phase(current)
            conditions = (current.get("status") or {}).get("conditions") or []
            if reached in FINAL and true_condition(conditions, wanted) is None:
                raise WaitEnded(name)

        self.v1.wait_for_job_conditions(
            name, expected_conditions={wanted}, wait_timeout=timeout, polling_interval=interval, callback=stop_if_ended
        )

    def _v2_wait(self, name: str, phase: str, timeout: float, interval: float) -> None:
        # The same loop as TrainingClient.wait_for_job_conditions: a fixed number of polls.
        for _ in range(round(timeout / interval)):
            current, _ = job_phase(self.get_job(name))
            if current == phase:
                return
            if current in FINAL:
                raise WaitEnded(name)
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

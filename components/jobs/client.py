"""Thin access to a cluster's training jobs through the official clients.

- Both kinds are read with the kubernetes client's ``CustomObjectsApi`` (as the API server
  returns them, for ``-o json``), their pods and logs with ``CoreV1Api``, Kueue's Workloads
  and Volcano's and Kueue's queues with ``CustomObjectsApi`` too.
- v1 PyTorchJobs are waited for, created and deleted with ``kubeflow-training`` 1.9.4's
  ``TrainingClient``.
- v2 TrainJobs go through the kubernetes client only. The
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
from collections.abc import Iterator
from typing import Any

from kubeflow.training import TrainingClient
from kubeflow.training.utils.utils import FakeResponse
from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError as TransportError

from trainer.telemetry.metric_names import METRICS_PORT

from ..manifests.jobs.names import KUEUE_API, TRAINER_API
from .replicas import job_selector
from .status import PYTORCHJOB, TRAINJOB, V1_KINDS, is_v1, job_phase, true_condition

V2_GROUP, V2_VERSION = TRAINER_API.split("/")
V2_PLURAL = "trainjobs"
JOB_RESOURCES = {
    PYTORCHJOB: ("kubeflow.org", "v1", "pytorchjobs"),
    TRAINJOB: (V2_GROUP, V2_VERSION, V2_PLURAL),
    **{name: ("kubeflow.org", "v1", kind.plural) for name, kind in V1_KINDS.items() if name != PYTORCHJOB},
}
"""Group, version and plural of each kind of job, the platform's default kinds first: a job is
looked up by name in this order."""
KUEUE_GROUP_VERSION = tuple(KUEUE_API.split("/"))
WORKLOADS = "workloads"
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
"""The label Kueue puts on a job's Workload with the job's UID (kueue v0.19.2
``pkg/controller/constants/constants.go`` ``JobUIDLabel``)."""
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
    """PyTorchJobs and TrainJobs of one namespace (or of all, for ``list -A``).

    Jobs are read as the API server returns them (``CustomObjectsApi``), so ``-o json`` shows
    every field; ``TrainingClient`` waits for, creates and deletes v1 jobs.

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

    def list_jobs(self, all_namespaces: bool = False) -> list[dict[str, Any]]:
        """Every v1 job of each kind and every TrainJob; a kind whose CRD is not installed has none.

        Raises:
            ApiException: the API server refused the request.
        """
        jobs: list[dict[str, Any]] = []
        for kind, (group, version, plural) in JOB_RESOURCES.items():
            try:
                if all_namespaces:
                    items = self.custom.list_cluster_custom_object(group, version, plural)["items"]
                else:
                    items = self.custom.list_namespaced_custom_object(group, version, self.namespace, plural)["items"]
            except ApiException as err:
                if err.status != 404:
                    raise
                continue
            jobs += [{**item, "kind": kind} for item in items]
        return sorted(jobs, key=lambda job: (job["metadata"].get("namespace", ""), job["metadata"]["name"]))

    def get_job(self, name: str) -> dict[str, Any]:
        """The PyTorchJob or TrainJob ``name``.

        Raises:
            JobNotFound: there is neither.
        """
        for kind, (group, version, plural) in JOB_RESOURCES.items():
            try:
                job = self.custom.get_namespaced_custom_object(group, version, self.namespace, plural, name)
            except ApiException as err:
                if err.status != 404:
                    raise
                continue
            return {**job, "kind": kind}
        raise JobNotFound(f"no PyTorchJob or TrainJob named {name!r} in namespace {self.namespace}")

    def pods(self, job: dict[str, Any], selector: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """The job's pods (labelled by the v1 operator, or by JobSet for a TrainJob), or those
        matching ``selector``, which names the job itself."""
        metadata = job["metadata"]
        selector = selector or job_selector(job)
        text = ",".join(f"{key}={value}" for key, value in selector.items())
        namespace = metadata.get("namespace") or self.namespace
        return [self._plain(pod) for pod in self.core.list_namespaced_pod(namespace, label_selector=text).items]

    def objects(self, group_version: tuple[str, str], plural: str, namespaced: bool) -> list[dict[str, Any]] | None:
        """Custom objects of one resource, in the namespace or cluster-wide; ``None`` when the
        resource is not installed (the API server answers 404).

        Raises:
            ApiException: the API server refused the request.
        """
        try:
            if namespaced:
                answer = self.custom.list_namespaced_custom_object(*group_version, self.namespace, plural)
            else:
                answer = self.custom.list_cluster_custom_object(*group_version, plural)
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return sorted(answer["items"], key=lambda item: item["metadata"]["name"])

    def nodes(self) -> list[dict[str, Any]]:
        """Every node of the cluster."""
        return [self._plain(node) for node in self.core.list_node().items]

    def namespace_pods(self) -> list[dict[str, Any]]:
        """Every pod of the namespace."""
        return [self._plain(pod) for pod in self.core.list_namespaced_pod(self.namespace).items]

    def events(self, namespace: str | None = None, reason: str | None = None) -> list[dict[str, Any]]:
        """Events of the namespace (``core/v1``), only those with ``reason`` if given."""
        options = {"field_selector": f"reason={reason}"} if reason else {}
        found = self.core.list_namespaced_event(namespace or self.namespace, **options).items
        return [self._plain(event) for event in found]

    def resource_quotas(self) -> list[dict[str, Any]]:
        """The namespace's ResourceQuotas, with their ``status.hard`` and ``status.used``."""
        return [self._plain(quota) for quota in self.core.list_namespaced_resource_quota(self.namespace).items]

    def pending_position(self, local_queue: str, workload: str) -> dict[str, Any] | None:
        """A pending Workload's entry in Kueue's visibility API (kueue v0.19.2
        ``apis/visibility/v1beta2/types.go``: ``GET .../localqueues/<name>/pendingworkloads``
        answers a ``PendingWorkloadsSummary`` whose items carry ``positionInLocalQueue`` and
        ``positionInClusterQueue``), or ``None`` when it is not listed there."""
        group = f"visibility.{KUEUE_GROUP_VERSION[0]}"
        path = f"/apis/{group}/{KUEUE_GROUP_VERSION[1]}/namespaces/{{namespace}}/localqueues/{{name}}/pendingworkloads"
        summary = self.custom.api_client.call_api(
            path,
            "GET",
            {"namespace": self.namespace, "name": local_queue},
            header_params={"Accept": "application/json"},
            response_type="object",
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
        items = (summary or {}).get("items") or []
        return next((item for item in items if (item.get("metadata") or {}).get("name") == workload), None)

    def running_pods(self) -> list[dict[str, Any]]:
        """Every running pod of the cluster, in any namespace."""
        pods = self.core.list_pod_for_all_namespaces(field_selector="status.phase=Running").items
        return [self._plain(pod) for pod in pods]

    def metrics_text(self, pod: str) -> str:
        """``/metrics`` of a pod's trainer, through the API server's pod proxy.

        Raises:
            ApiException: the pod or its port is unreachable.
        """
        return self.core.connect_get_namespaced_pod_proxy_with_path(f"{pod}:{METRICS_PORT}", self.namespace, "metrics")

    def log(self, pod: str, container: str, options: dict[str, Any]) -> str:
        """A container's log (``CoreV1Api.read_namespaced_pod_log``, with ``tail_lines``,
        ``since_seconds``, ``timestamps`` and ``previous`` as given in ``options``)."""
        return self.core.read_namespaced_pod_log(pod, self.namespace, container=container, **options)

    def follow_log(self, pod: str, container: str, options: dict[str, Any]) -> Iterator[str]:
        """A container's log line by line as it is written, until the container ends."""
        # Watch adds follow=true and yields each line of the stream as it arrives.
        yield from watch.Watch().stream(
            self.core.read_namespaced_pod_log, name=pod, namespace=self.namespace, container=container, **options
        )

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
        table = V1_WAIT if is_v1(job) else V2_WAIT
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
            current = {"kind": job["kind"], **self._plain(model)}
            reached, _ = job_phase(current)
            conditions = (current.get("status") or {}).get("conditions") or []
            if reached in FINAL and true_condition(conditions, wanted) is None:
                raise WaitEnded(name)

        self.v1.wait_for_job_conditions(
            name,
            job_kind=job["kind"],
            expected_conditions={wanted},
            wait_timeout=timeout,
            polling_interval=interval,
            callback=stop_if_ended,
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
        """Create the builder's v1 job (any kind) or TrainJob as it is.

        Raises:
            RuntimeError: the API server refused it.
        """
        if is_v1(manifest):
            model = self.v1.api_client.deserialize(FakeResponse(manifest), f"KubeflowOrgV1{manifest['kind']}")
            self.v1.create_job(job=model)
            return
        try:
            self.custom.create_namespaced_custom_object(V2_GROUP, V2_VERSION, self.namespace, V2_PLURAL, manifest)
        except ApiException as err:
            raise RuntimeError(f"Failed to create TrainJob {manifest['metadata']['name']}: {err.body}") from err

    def delete(self, job: dict[str, Any]) -> None:
        """Delete the job; its pods go with it."""
        if is_v1(job):
            self.v1.delete_job(job["metadata"]["name"], job_kind=job["kind"])
        else:
            self.custom.delete_namespaced_custom_object(
                V2_GROUP, V2_VERSION, self.namespace, V2_PLURAL, job["metadata"]["name"]
            )

    def patch_job(self, job: dict[str, Any], patch: dict[str, Any]) -> None:
        """Merge ``patch`` into the job (a JSON merge patch, as the client sends a dict body to
        a custom object)."""
        group, version, plural = JOB_RESOURCES[job["kind"]]
        self.custom.patch_namespaced_custom_object(
            group, version, self.namespace, plural, job["metadata"]["name"], patch
        )

    def workloads(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        """The Kueue Workloads of a job, found by the job's UID as Kueue labels them.

        Raises:
            ApiException: the API server refused, or Kueue is not installed (404).
        """
        selector = f"{KUEUE_JOB_UID_LABEL}={job['metadata']['uid']}"
        return self.custom.list_namespaced_custom_object(
            *KUEUE_GROUP_VERSION, self.namespace, WORKLOADS, label_selector=selector
        )["items"]

    def patch_workload(self, name: str, patch: dict[str, Any]) -> None:
        """Merge ``patch`` into the Workload ``name``."""
        self.custom.patch_namespaced_custom_object(*KUEUE_GROUP_VERSION, self.namespace, WORKLOADS, name, patch)


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

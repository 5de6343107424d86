"""The Kubernetes metrics the platform's alerts read, as their exporters serve them.

kube-state-metrics (which ACK's ``arms-prometheus`` add-on runs, and kube-prometheus-stack
installs): names and labels from kubernetes/kube-state-metrics ``docs/metrics/workload/
pod-metrics.md`` and ``job-metrics.md`` at v2.20.0. Every pod series carries the pod's ``uid``, so a
pod that a controller deletes and creates again under the same name starts new series. The v1 Training Operator's own counters: kubeflow/trainer
at tag v1.9.4, ``pkg/common/metrics.go``, served on the manager's metrics address (``:8080``,
``cmd/training-operator.v1/main.go`` ``--metrics-bind-address``).
"""

from __future__ import annotations

POD_RESTARTS = "kube_pod_container_status_restarts_total"
"""Restarts of each container in place (labels ``namespace``, ``pod``, ``uid``, ``container``)."""
POD_CREATED = "kube_pod_created"
"""A pod's creation time (labels ``namespace``, ``pod``, ``uid``): one series per incarnation of a name."""
POD_CONTAINER_INFO = "kube_pod_container_info"
"""1 for each container of a pod (labels ``namespace``, ``pod``, ``uid``, ``container``, images)."""
POD_PHASE = "kube_pod_status_phase"
"""1 for a pod's current phase (labels ``namespace``, ``pod``, ``uid``, ``phase``)."""
JOB_FAILED = "kube_job_failed"
"""1 while a batch Job has the condition ``Failed`` with status ``condition`` (labels ``namespace``,
``job_name``, ``condition``)."""
JOB_COMPLETE = "kube_job_complete"
"""1 while a batch Job has the condition ``Complete`` with status ``condition``."""
JOB_CREATED = "kube_job_created"
"""A batch Job's creation time (labels ``namespace``, ``job_name``; no uid): its value changes when
a Job is deleted and created again under the same name, as a JobSet restart does."""
JOB_OWNER = "kube_job_owner"
"""A batch Job's owner (labels ``namespace``, ``job_name``, ``owner_kind``, ``owner_name``)."""
POD_OWNER = "kube_pod_owner"
"""A pod's owner (labels ``namespace``, ``pod``, ``uid``, ``owner_kind``, ``owner_name``): a v1 job's pods are
owned by the job itself (the operator sets it as their controller, ``pkg/controller.v1/common/pod.go``)."""
KUBE_STATE_METRICS = (
    POD_RESTARTS,
    POD_CREATED,
    POD_CONTAINER_INFO,
    POD_PHASE,
    JOB_FAILED,
    JOB_COMPLETE,
    JOB_CREATED,
    JOB_OWNER,
    POD_OWNER,
)

UP = "up"
"""Prometheus's own series per scrape target: 0 while the target does not answer."""

OPERATOR_JOBS_FAILED = "training_operator_jobs_failed_total"
"""Jobs the v1 operator marked failed (labels ``job_namespace``, ``framework``); it counts no job names,
and only failures of replicas whose restart policy is ``Never``
(``pkg/controller.v1/pytorch/pytorchjob_controller.go``): a job failed by its backoff limit, its
deadline or a non-retryable exit code under ``ExitCode`` is not counted."""
OPERATOR_METRICS_PORT = 8080
"""The v1 operator's metrics port, which its Deployment declares without a name."""
OPERATOR = (OPERATOR_JOBS_FAILED,)

JOB_CONDITION = "kube_customresource_training_job_condition"
"""1 while a training job (each Training Operator v1 kind and TrainJob) has a condition of type
``condition`` with status ``True``, 0 while ``False`` (labels ``namespace``, ``training_job``,
``condition``, ``customresource_group``/``_kind``/``_version``; a TrainJob's also ``queue``): served by
kube-state-metrics given :func:`job_state_metrics_config`."""
JOB_CONDITION_NAME = JOB_CONDITION.removeprefix("kube_customresource_")
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"


def job_state_metrics_config(v1_kinds: dict[str, str], trainer_v2: bool) -> dict[str, object]:
    """kube-state-metrics' custom resource state configuration (``--custom-resource-state-config-file``)
    that serves :data:`JOB_CONDITION` for the v1 ``v1_kinds`` (kind → resource plural) and, with
    ``trainer_v2``, TrainJob.

    Its shape is kube-state-metrics v2.20.0's (``pkg/customresourcestate/config.go``; the
    ``docs/metrics/extend/customresourcestate-metrics.md`` example "status conditions on Kubernetes
    Controllers"): a ``Gauge`` over ``status.conditions`` makes one series per condition, labelled from
    the condition's ``type``, valued from its ``status`` (``"True"`` 1, ``"False"`` 0); the resource's
    name and namespace label every series; the metric name is the default prefix ``kube_customresource``
    and the metric's ``name``. kube-state-metrics needs ``list`` and ``watch`` on these resources and on
    ``customresourcedefinitions`` (:func:`job_state_metrics_rules`).

    Every kind's metric has the same name and its own help text. kube-state-metrics v2.12.0 to v2.18.0
    remove a HELP line equal to the one before it, and with it the only header of that resource's
    writer, so the resource's series are not written at all: with one help text for all, only the
    first kind's conditions would be served (``pkg/metrics_store/metrics_writer.go``
    ``SanitizeHeaders`` and ``WriteAll``; kubernetes/kube-state-metrics issue 2366). v2.19.0 blanks a
    repeated header by metric name instead and keeps the series.
    """
    resources = [("kubeflow.org", "v1", kind, plural) for kind, plural in v1_kinds.items()]
    if trainer_v2:
        resources.append(("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs"))
    entries = []
    for group, version, kind, plural in resources:
        labels: dict[str, list[str]] = {"namespace": ["metadata", "namespace"], "training_job": ["metadata", "name"]}
        if kind == "TrainJob":
            labels["queue"] = ["metadata", "labels", QUEUE_NAME_LABEL]
        entries.append(
            {
                "groupVersionKind": {"group": group, "version": version, "kind": kind},
                "resourcePlural": plural,
                "labelsFromPath": labels,
                "metrics": [
                    {
                        "name": JOB_CONDITION_NAME,
                        # One help text per kind: kube-state-metrics v2.12 to v2.18 drop a resource's
                        # series whose HELP line repeats the one before it (SanitizeHeaders).
                        "help": f"Conditions of a {kind}: 1 while the condition's status is True.",
                        "each": {
                            "type": "Gauge",
                            "gauge": {
                                "path": ["status", "conditions"],
                                "labelsFromPath": {"condition": ["type"]},
                                "valueFrom": ["status"],
                            },
                        },
                    }
                ],
            }
        )
    return {"kind": "CustomResourceStateMetrics", "spec": {"resources": entries}}


def job_state_metrics_rules(config: dict[str, object]) -> list[dict[str, object]]:
    """The RBAC rules kube-state-metrics needs for ``config``: ``list`` and ``watch`` on each resource and
    on ``customresourcedefinitions`` (kube-state-metrics v2.20.0 ``customresourcestate-metrics.md``,
    "RBAC-enabled Clusters")."""
    by_group: dict[str, list[str]] = {}
    for entry in config["spec"]["resources"]:  # type: ignore[index]
        by_group.setdefault(entry["groupVersionKind"]["group"], []).append(entry["resourcePlural"])
    rules = [
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["list", "watch"]}
    ]
    rules += [{"apiGroups": [g], "resources": sorted(r), "verbs": ["list", "watch"]} for g, r in by_group.items()]
    return rules

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
KUBE_STATE_METRICS = (
    POD_RESTARTS,
    POD_CREATED,
    POD_CONTAINER_INFO,
    POD_PHASE,
    JOB_FAILED,
    JOB_COMPLETE,
    JOB_CREATED,
    JOB_OWNER,
)

OPERATOR_JOBS_FAILED = "training_operator_jobs_failed_total"
"""Jobs the v1 operator marked failed (labels ``job_namespace``, ``framework``); it counts no job names,
and only failures of replicas whose restart policy is ``Never``
(``pkg/controller.v1/pytorch/pytorchjob_controller.go``): a job failed by its backoff limit, its
deadline or a non-retryable exit code under ``ExitCode`` is not counted."""
OPERATOR_METRICS_PORT = 8080
"""The v1 operator's metrics port, which its Deployment declares without a name."""
OPERATOR = (OPERATOR_JOBS_FAILED,)

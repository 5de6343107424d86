"""The Kubernetes metrics the platform's alerts read, as their exporters serve them.

kube-state-metrics (which ACK's ``arms-prometheus`` add-on runs, and kube-prometheus-stack
installs): names and labels from kubernetes/kube-state-metrics ``docs/metrics/workload/
pod-metrics.md`` and ``job-metrics.md``. The v1 Training Operator's own counters: kubeflow/trainer
at tag v1.9.4, ``pkg/common/metrics.go``, served on the manager's metrics address (``:8080``,
``cmd/training-operator.v1/main.go`` ``--metrics-bind-address``).
"""

from __future__ import annotations

POD_RESTARTS = "kube_pod_container_status_restarts_total"
"""Restarts of each container (labels ``namespace``, ``pod``, ``container``)."""
JOB_FAILED = "kube_job_failed"
"""1 while a batch Job has the condition ``Failed`` with status ``condition`` (labels ``namespace``,
``job_name``, ``condition``)."""
JOB_OWNER = "kube_job_owner"
"""A batch Job's owner (labels ``namespace``, ``job_name``, ``owner_kind``, ``owner_name``)."""
KUBE_STATE_METRICS = (POD_RESTARTS, JOB_FAILED, JOB_OWNER)

OPERATOR_JOBS_FAILED = "training_operator_jobs_failed_total"
"""Jobs the v1 operator marked failed (labels ``job_namespace``, ``framework``); it counts no job names."""
OPERATOR_METRICS_PORT = 8080
"""The v1 operator's metrics port, which its Deployment declares without a name."""
OPERATOR = (OPERATOR_JOBS_FAILED,)

"""The PodMonitors (``monitoring.coreos.com/v1``) that have Prometheus scrape the training
pods and the v1 Training Operator.

Fields are prometheus-operator's (v0.80 API, as the ``cloudcoil-models-prometheus-operator``
0.80.1 models describe it; the tests validate against them). Prometheus-operator gives every
PodMonitor target the ``namespace``, ``pod`` and ``container`` labels, which the GPU exporter's
series carry too, so a job's trainer and GPU series join on them.
"""

from __future__ import annotations

from trainer.telemetry.metric_names import METRICS_PORT_NAME

from ...config import PROJECT
from ..base import MANAGED_BY, NETWORK_LABEL, NODES_LABEL, POOL_LABEL, Manifest
from .kube_metrics import OPERATOR_METRICS_PORT

MONITORING_API = "monitoring.coreos.com/v1"
JOB_LABEL = "training_job"
"""The job a series belongs to, on every series scraped from a job's pods. Not ``job``: Prometheus
sets that to the scrape job."""
POOL_SERIES_LABEL = "pool"
"""The node pool a job's pods run on (their ``ack-training-platform/pool`` label), on every series
scraped from them: a job's bandwidth is compared with earlier jobs' on the same pool."""
NODES_SERIES_LABEL = "nodes"
NETWORK_SERIES_LABEL = "network"
"""A netbench job's node count and network (its pods' ``NODES_LABEL`` and ``NETWORK_LABEL``), on its
series: absent from other jobs'."""
JOB_NAME_POD_LABEL = "app.kubernetes.io/name"
"""Every pod of a platform job carries its job's name here, on both backends: the PyTorchJob's
replica templates and the TrainJob's runtime patch both take ``job_labels`` (``jobs.py``)."""
SCRAPE_INTERVAL = "30s"
"""Twice the finest resolution the alerts need (a step counter over minutes), at little cost."""
OPERATOR_POD_LABELS = {"control-plane": "kubeflow-training-operator"}
"""The v1 operator's pod labels (kubeflow/trainer v1.9.4 ``manifests/base/deployment.yaml``)."""
TRAINER_MONITOR = f"{PROJECT}-trainer"
OPERATOR_MONITOR = f"{PROJECT}-training-operator"


def _meta_label(label: str) -> str:
    """The discovery label Prometheus gives a pod label (non-alphanumerics become ``_``)."""
    return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in label)


def trainer_pod_monitor(namespace: str, watched: list[str] | None = None) -> Manifest:
    """The PodMonitor for every platform job's pods in ``namespace``.

    It selects the pods by the platform's ``managed-by`` label and scrapes the container port
    named ``metrics`` (``trainer/telemetry/metric_names.py``), copying the job name into ``training_job``
    so that a series keeps its job when pods are replaced, the pod's pool into ``pool``
    (empty, so absent, for jobs on the CPU nodes), and a netbench job's shape into ``nodes`` and
    ``network``.

    Args:
        namespace: the training namespace; the PodMonitor lives there.
        watched: the namespaces it watches (the teams' too); only ``namespace`` when unset.

    Returns:
        A complete PodMonitor object.
    """
    return {
        "apiVersion": MONITORING_API,
        "kind": "PodMonitor",
        "metadata": {"name": TRAINER_MONITOR, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "spec": {
            "selector": {"matchLabels": dict(MANAGED_BY)},
            "namespaceSelector": {"matchNames": list(watched or [namespace])},
            "podMetricsEndpoints": [
                {
                    "port": METRICS_PORT_NAME,
                    "path": "/metrics",
                    "interval": SCRAPE_INTERVAL,
                    "relabelings": [
                        {
                            "action": "replace",
                            "sourceLabels": [_meta_label(JOB_NAME_POD_LABEL)],
                            "targetLabel": JOB_LABEL,
                        },
                        *(
                            {"action": "replace", "sourceLabels": [_meta_label(pod_label)], "targetLabel": series}
                            for pod_label, series in (
                                (POOL_LABEL, POOL_SERIES_LABEL),
                                (NODES_LABEL, NODES_SERIES_LABEL),
                                (NETWORK_LABEL, NETWORK_SERIES_LABEL),
                            )
                        ),
                    ],
                }
            ],
        },
    }


def operator_pod_monitor(operator_namespace: str) -> Manifest:
    """The PodMonitor for the v1 Training Operator, whose counters tell that a job failed.

    Its metrics port has no name, so the endpoint names the port number (``portNumber``), which
    prometheus-operator reads from v0.79.0 on (``pkg/apis/monitoring/v1/podmonitor_types.go``;
    v0.78 has only the deprecated ``targetPort``).

    Args:
        operator_namespace: where the operator runs (``kubeflow``).

    Returns:
        A complete PodMonitor object.
    """
    return {
        "apiVersion": MONITORING_API,
        "kind": "PodMonitor",
        "metadata": {"name": OPERATOR_MONITOR, "namespace": operator_namespace, "labels": dict(MANAGED_BY)},
        "spec": {
            "selector": {"matchLabels": dict(OPERATOR_POD_LABELS)},
            "namespaceSelector": {"matchNames": [operator_namespace]},
            "podMetricsEndpoints": [
                {"portNumber": OPERATOR_METRICS_PORT, "path": "/metrics", "interval": SCRAPE_INTERVAL}
            ],
        },
    }

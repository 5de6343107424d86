"""The GPU metrics a job's dashboard, alerts and ``top`` read, as the GPU exporters serve them.

ACK's GPU monitoring 2.0 exporter (installed with the ``arms-prometheus`` add-on's GPU
monitoring) serves the DCGM exporter's metrics under their DCGM names, with the ``namespace``
and ``pod`` of the pod that holds the GPU as labels (ACK docs: "Introduction to metrics" of
GPU Monitoring 2.0, and "ACS GPU pod monitoring metrics" for the label dimensions).

NVIDIA's own dcgm-exporter chart, which a self-hosted prometheus-operator scrapes, adds the same
``pod`` and ``namespace`` labels, but its ServiceMonitor keeps ``honorLabels: false``
(NVIDIA/dcgm-exporter ``deployment/values.yaml``), so Prometheus renames them to
``exported_pod`` and ``exported_namespace`` beside the exporter's own target labels
(Prometheus ``honor_labels``). Queries read both (:func:`per_pod`).
"""

from __future__ import annotations

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
"""Percent of the sample period in which a kernel ran on the GPU."""
GPU_MEMORY_USED = "DCGM_FI_DEV_FB_USED"
"""Framebuffer memory in use, MiB (what nvidia-smi shows as used)."""
GPU_MEMORY_FREE = "DCGM_FI_DEV_FB_FREE"
"""Framebuffer memory free, MiB."""
NAMESPACE_LABEL = "namespace"
POD_LABEL = "pod"

EXPORTED = (GPU_UTIL, GPU_MEMORY_USED, GPU_MEMORY_FREE)

EXPORTED_PREFIX = "exported_"


def per_pod(aggregation: str, metric: str, namespace: str, pod_regex: str = ".+") -> str:
    """PromQL: ``aggregation`` (``avg``, ``sum``) of ``metric`` by the pod that holds the GPU, for
    pods of ``namespace`` whose names match ``pod_regex``, under either exporter's labels; the
    result is labelled ``pod`` either way."""

    def selected(prefix: str) -> str:
        return f'{metric}{{{prefix}{NAMESPACE_LABEL}="{namespace}",{prefix}{POD_LABEL}=~"{pod_regex}"}}'

    renamed = f'label_replace({selected(EXPORTED_PREFIX)}, "{POD_LABEL}", "$1", "{EXPORTED_PREFIX}{POD_LABEL}", "(.+)")'
    return f"{aggregation} by ({POD_LABEL}) ({selected('')}) or {aggregation} by ({POD_LABEL}) ({renamed})"

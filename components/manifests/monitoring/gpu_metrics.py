"""The GPU metrics a job's dashboard, alerts and ``top`` read, as the GPU exporters serve them.

ACK's GPU monitoring 2.0 exporter (installed with the ``arms-prometheus`` add-on's GPU
monitoring) serves the DCGM exporter's metrics under their DCGM names, with the ``namespace``
and ``pod`` of the pod that holds the GPU as labels (ACK docs: "Introduction to metrics" of
GPU Monitoring 2.0, and "ACS GPU pod monitoring metrics" for the label dimensions).

NVIDIA's own dcgm-exporter chart, which a self-hosted prometheus-operator scrapes, adds the same
``pod`` and ``namespace`` labels, but its ServiceMonitor keeps ``honorLabels: false``
(NVIDIA/dcgm-exporter ``deployment/values.yaml``), so Prometheus renames them to
``exported_pod`` and ``exported_namespace`` beside the exporter's own target labels
(Prometheus ``honor_labels``). Queries read both (:func:`per_pod`), or, where the stack names the
namespace the DCGM exporter runs in (``monitoring.exporters.dcgmNamespace``), only that exporter's series
(:func:`from_exporter`): a team's pod scraped by the platform's PodMonitor can serve series of these names,
which then carry the team's namespace as ``namespace`` and whatever pod it likes as ``exported_pod``.
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


def from_exporter(metric: str, dcgm_namespace: str, *matchers: str) -> str:
    """A selector of ``metric`` as the DCGM exporter running in ``dcgm_namespace`` serves it (its pods'
    ``namespace``, which Prometheus sets over any a scraped pod serves), with more label ``matchers`` such as
    ``'exported_pod=~"gpt-.*"'``."""
    joined = ",".join([f'{NAMESPACE_LABEL}="{dcgm_namespace}"', *matchers])
    return f"{metric}{{{joined}}}"


def per_pod(
    aggregation: str, metric: str, namespace: str, pod_regex: str = ".+", *, dcgm_namespace: str | None = None
) -> str:
    """PromQL: ``aggregation`` (``avg``, ``sum``) of ``metric`` by the pod that holds the GPU, for
    pods of ``namespace`` whose names match ``pod_regex``; the result is labelled ``pod``.

    Args:
        dcgm_namespace: where the DCGM exporter runs: only its series are read, which name the GPU's pod as
            ``exported_namespace`` and ``exported_pod``. ``None``: series under either exporter's labels, from
            any namespace.
    """

    def matchers(prefix: str) -> tuple[str, str]:
        return f'{prefix}{NAMESPACE_LABEL}="{namespace}"', f'{prefix}{POD_LABEL}=~"{pod_regex}"'

    def renamed(selector: str) -> str:
        return f'label_replace({selector}, "{POD_LABEL}", "$1", "{EXPORTED_PREFIX}{POD_LABEL}", "(.+)")'

    if dcgm_namespace is not None:
        told = from_exporter(metric, dcgm_namespace, *matchers(EXPORTED_PREFIX))
        return f"{aggregation} by ({POD_LABEL}) ({renamed(told)})"
    own = f"{metric}{{{','.join(matchers(''))}}}"
    exported = f"{metric}{{{','.join(matchers(EXPORTED_PREFIX))}}}"
    return f"{aggregation} by ({POD_LABEL}) ({own}) or {aggregation} by ({POD_LABEL}) ({renamed(exported)})"

"""The GPU metrics a job's dashboard, alerts and ``top`` read, as ACK's GPU exporter serves them.

ACK's GPU monitoring 2.0 exporter (installed with the ``arms-prometheus`` add-on's GPU
monitoring) serves the DCGM exporter's metrics under their DCGM names, with the ``namespace``
and ``pod`` of the pod that holds the GPU as labels (ACK docs: "Introduction to metrics" of
GPU Monitoring 2.0, and "ACS GPU pod monitoring metrics" for the label dimensions).
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

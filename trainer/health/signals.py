"""Whether a GPU node is healthy, from the DCGM exporter's series: one pure function.

The series and their labels are those of NVIDIA/dcgm-exporter at tag 4.5.3-4.8.2:
``etc/default-counters.csv`` collects ``DCGM_FI_DEV_XID_ERRORS`` (a gauge, "value of the last XID
error encountered"), ``DCGM_FI_DEV_ROW_REMAP_FAILURE`` (a gauge, whether remapping of rows has
failed) and ``DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS`` by default; the double-bit ECC counter
``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL``, the retired-page counters and the NVLink error counters are
listed there commented out, so they are read when an exporter is configured to collect them and
count as unmeasured otherwise. Each series carries ``gpu``, ``UUID``, ``modelName`` and
``Hostname`` (``internal/pkg/rendermetrics/render_metrics.go``), and ``Hostname`` is the node's
name: the chart sets ``NODE_NAME`` from ``spec.nodeName`` (``deployment/templates/daemonset.yaml``)
and the exporter takes it first (``internal/pkg/hostname/hostname.go``).

The XIDs that take a node out by default are those after which the GPU cannot take new work until
it is reset, the node rebooted or the board replaced (:data:`NODE_XIDS`); memory errors the GPU
contains or corrects, after which new work runs, only where a stack lists them (:data:`XID_MEANINGS`);
those an application causes (13, 31, 43, 45: the job's own fault, fixed by restarting it) never. Nothing here reads a clock, a socket or the environment; the controller
(:mod:`trainer.health.guard`) and the alert (``components/manifests/monitoring/node_health.py``) share it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

XID = "DCGM_FI_DEV_XID_ERRORS"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
ECC_DBE_VOLATILE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
RETIRED_PENDING = "DCGM_FI_DEV_RETIRED_PENDING"
NVLINK_ERRORS = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)
COUNTERS = (ECC_DBE_VOLATILE, RETIRED_PENDING, *NVLINK_ERRORS)
"""Counters: what counts is how much they grew in the window (``increase``), not their total since boot."""
NODE_CHECK = "nodecheck"
"""The pre-job node check's init container (:mod:`trainer.health.check`). Its failure is not a signal
here: a team's job chooses its pods' init containers and can report any status under this name, so
only the platform's own exporter series take a node out; a failed check is alerted on instead."""
HEALTH_LABEL = "ack-training-platform/gpu-health"
FAILED = "failed"
REASON_ANNOTATION = "ack-training-platform/gpu-health-reason"
SINCE_ANNOTATION = "ack-training-platform/gpu-health-since"
"""The guard's cordon label and notes on a node (:mod:`trainer.health.guard` writes them; the alerts and
``ack-jobs why`` read them)."""
DEFAULT_WINDOW = "10m"
"""How far back a counter's growth counts: a few scrapes, short enough that an error fixed by a
reboot stops counting soon after."""
NODE_NAME_ENV = "NODE_NAME"
"""The node check's node name, from the pod's ``spec.nodeName`` (the builders set it)."""
NODE_LABEL = "Hostname"
GPU_LABEL = "gpu"
NAMESPACE_LABEL = "namespace"
"""The namespace of the pod Prometheus scraped a series from: prometheus-operator relabels it from
``__meta_kubernetes_namespace`` on every PodMonitor and ServiceMonitor target, and passes the
endpoint's ``honorLabels`` (default false) as ``honor_labels`` (v0.79.0 ``pkg/prometheus/promcfg.go``
``generatePodMonitorConfig``, ``generateServiceMonitorConfig``), under which Prometheus keeps a
scraped label that clashes with a target label as ``exported_namespace``. A team's pod can serve
series of any name on its metrics port, but only pods in the exporter's namespace give them that
namespace."""


def exporter_series(metric: str, namespace: str) -> str:
    """PromQL selector of ``metric`` as the DCGM exporter running in ``namespace`` serves it, never
    as a team's pod that serves a series of the same name does."""
    return f'{metric}{{{NAMESPACE_LABEL}="{namespace}"}}'


XID_MEANINGS: Mapping[int, str] = {
    48: "double-bit ECC error",
    63: "ECC page retirement or row remapping pending a GPU reset",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}
"""What the hardware XIDs a stack may list in ``cordonXids`` mean (NVIDIA's Xid catalogue for Ampere
and newer, https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)."""
NODE_XIDS: Mapping[int, str] = {x: XID_MEANINGS[x] for x in (48, 64, 74, 79, 95, 119, 120)}
"""The XIDs that cordon by default: a GPU that raised one takes no new work until it is reset, its
node rebooted or its board serviced (48, 95: an uncorrectable, uncontained memory error; 64: a row
could not be remapped; 74: an NVLink fault; 79: the GPU left the PCIe bus; 119, 120: its GSP
firmware stopped answering). Not by default:

- 63, a row remapping pending: it happens at the next GPU reset, and meanwhile unaffected
  applications keep running and new work can be launched (NVIDIA, "Error Recovery and Response
  Flags", https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/error-recovery-and-response-flags.html;
  NVML ``nvmlDeviceGetRemappedRows``: a pending remapping does not affect future work, error
  containment and dynamic page blacklisting take care of it). The node wants a reset when idle.
- 94, a contained ECC error: the error is contained to the processes that hit it, and new work
  runs without a reset (the same page's "None" recovery action: start a new GPU process).
- 92, a high rate of corrected single-bit errors: corrected, so no work is lost.
"""
APPLICATION_XIDS = frozenset({13, 31, 43, 45})
"""XIDs a job's own fault raises (graphics engine exception, memory page fault, a channel reset
after an application error, preemptive cleanup): the catalogue's action is to restart the
application, so the node stays."""


@dataclass(frozen=True)
class Sample:
    """One series of a Prometheus instant vector.

    Args:
        metric: the series' name (``__name__``), or the counter's name for an ``increase``.
        labels: its labels.
        value: its value.
    """

    metric: str
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class HealthRules:
    """When a node is taken out; every threshold is data, so a stack can tune them.

    Args:
        cordon_xids: XID -> what it means; a GPU that reported one of them in the window cordons its node.
        max_dbe_errors: double-bit ECC errors a GPU may add in the window (0: any cordons).
        max_retired_pending: pages pending retirement a GPU may add in the window.
        max_nvlink_errors: NVLink errors (any of :data:`NVLINK_ERRORS`) a GPU may add in the
            window; ``None``: not a reason to cordon (CRC errors are retried and happen on healthy links).
        row_remap_failure: a failed row remapping cordons.
    """

    cordon_xids: Mapping[int, str] = field(default_factory=lambda: dict(NODE_XIDS))
    max_dbe_errors: float = 0
    max_retired_pending: float = 0
    max_nvlink_errors: float | None = None
    row_remap_failure: bool = True


@dataclass(frozen=True)
class Verdict:
    """What to do with one node.

    Args:
        node: the node's name.
        cordon: whether to take it out.
        reasons: one line per failing GPU signal, such as ``gpu 3 (GPU-…): XID 79 (GPU has fallen off the bus)``.
    """

    node: str
    cordon: bool
    reasons: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        """The reasons in one line (a node annotation, a log line)."""
        return "; ".join(self.reasons)


def _gpu(labels: Mapping[str, str]) -> str:
    if GPU_LABEL not in labels:
        return "node"
    uuid = labels.get("UUID")
    return f"gpu {labels.get(GPU_LABEL, '?')}" + (f" ({uuid})" if uuid else "")


def _failure(sample: Sample, rules: HealthRules) -> str | None:
    """Why this one series takes its node out, or ``None``."""
    value = sample.value
    if sample.metric == XID:
        xid = int(value)
        if xid in rules.cordon_xids:
            return f"XID {xid} ({rules.cordon_xids[xid]})"
        return None
    if sample.metric == ROW_REMAP_FAILURE:
        return "row remapping failed" if rules.row_remap_failure and value >= 1 else None
    if sample.metric == ECC_DBE_VOLATILE:
        return f"{value:g} double-bit ECC errors" if value > rules.max_dbe_errors else None
    if sample.metric == RETIRED_PENDING:
        return f"{value:g} pages pending retirement" if value > rules.max_retired_pending else None
    if sample.metric in NVLINK_ERRORS and rules.max_nvlink_errors is not None:
        if value > rules.max_nvlink_errors:
            return f"{value:g} NVLink errors ({sample.metric})"
    return None


def node_verdicts(samples: Iterable[Sample], rules: HealthRules | None = None) -> dict[str, Verdict]:
    """A verdict for every node the samples name (by ``Hostname``).

    Args:
        samples: the DCGM exporter's series: gauges as they are, counters as their increase over
            the window the caller chose.
        rules: the thresholds; the defaults above when ``None``.

    Returns:
        Node name -> verdict; a node with no failing series is healthy. Series without a
        ``Hostname`` label (an exporter run outside Kubernetes without it) are skipped: they name no node.
    """
    rules = rules or HealthRules()
    reasons: dict[str, list[str]] = {}
    for sample in samples:
        node = sample.labels.get(NODE_LABEL)
        if not node:
            continue
        found = reasons.setdefault(node, [])
        why = _failure(sample, rules)
        if why is not None:
            found.append(f"{_gpu(sample.labels)}: {why}")
    return {node: Verdict(node, bool(found), tuple(sorted(found))) for node, found in sorted(reasons.items())}

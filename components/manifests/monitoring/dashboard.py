"""The Grafana dashboard of a training job, generated with grafana-foundation-sdk, and the
ConfigMap that hands it to Grafana's dashboard sidecar.

Queries name metrics only through ``trainer/telemetry/metric_names.py`` and :mod:`.gpu_metrics`; the
``namespace`` variable picks the training namespace or a team's, and the ``job`` variable one
job among those that served ``trainer_step`` there. Where the stack names the DCGM exporter's namespace
(``monitoring.exporters.dcgmNamespace``), the GPU panels read only that exporter's series.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from grafana_foundation_sdk.builders import dashboard as gf
from grafana_foundation_sdk.builders import prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef, VariableOption, VariableRefresh

from trainer.telemetry import metric_names as trainer

from ..base import MANAGED_BY, Manifest
from . import gpu_metrics as gpu
from .cost_dashboard import cost_panels
from .scraping import JOB_LABEL

if TYPE_CHECKING:
    from ...config.monitoring import ExportersSpec

DASHBOARD_UID = "ack-training-job"
DASHBOARD_FILE = "training.json"
DASHBOARD_CONFIGMAP = "ack-training-platform-dashboard"
SIDECAR_LABEL = {"grafana_dashboard": "1"}
"""The label Grafana's dashboard sidecar looks for by default, as kube-prometheus-stack
configures it (grafana chart ``values.yaml``: ``sidecar.dashboards.label: grafana_dashboard``,
``labelValue: "1"``)."""
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")


def _panel(title: str, unit: str, *queries: tuple[str, str], description: str = "") -> timeseries.Panel:
    panel = timeseries.Panel().title(title).unit(unit).datasource(DATASOURCE).span(12).height(8)
    if description:
        panel = panel.description(description)
    for ref, (expr, legend) in zip("ABCDEFGH", queries, strict=False):
        panel = panel.with_target(prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref))
    return panel


def training_dashboard(
    namespaces: Sequence[str], *, cost_currency: str | None = None, exporters: ExportersSpec | None = None
) -> dict[str, object]:
    """The dashboard of one training job in one of ``namespaces``, as Grafana's JSON model.

    Args:
        namespaces: where jobs run, the training namespace first (the default), then each team's.
        cost_currency: the prices' currency where the cost recording rules run: adds the Cost row.
        exporters: how the exporters' series are told from a team pod's (``monitoring.exporters``); without
            ``dcgmNamespace`` the GPU panels read GPU series from any namespace.

    Returns:
        The dashboard JSON (a dict), ready to import or to put in a ConfigMap.
    """
    namespace = "$namespace"
    job = f'namespace="{namespace}",{JOB_LABEL}="$job"'
    # Pods are named after their job and replica on both backends: <job>-master-0 and
    # <job>-worker-3 (the v1 operator's <job>-<replica type>-<index>), <job>-node-0-0-<suffix>
    # (JobSet's Job <jobset>-<replicated job>-<job index>, whose Indexed pods Kubernetes names
    # <job>-<completion index>-<suffix>). Naming the replica keeps job "gpt" from taking in
    # the pods of job "gpt-large".
    pods = "$job-(master|worker|node)-[0-9].*"
    dcgm = exporters.dcgm_namespace if exporters is not None else None

    def per_pod(aggregation: str, metric: str) -> str:
        return gpu.per_pod(aggregation, metric, namespace, pods, dcgm_namespace=dcgm)

    def series(metric: trainer.Metric) -> str:
        return f"{metric.name}{{{job}}}"

    def per_rank(title: str, unit: str, metric: trainer.Metric, description: str) -> timeseries.Panel:
        return _panel(title, unit, (series(metric), f"rank {{{{{trainer.RANK_LABEL}}}}}"), description=description)

    board = (
        gf.Dashboard("Training job")
        .uid(DASHBOARD_UID)
        .tags(["ack-training-platform", "training"])
        .refresh("30s")
        .time("now-6h", "now")
        # The builders give every variable the same zero id unless told otherwise.
        .with_variable(gf.DatasourceVariable("datasource").id("datasource").label("Data source").type("prometheus"))
        # A fixed list, not a query: the picker offers exactly the namespaces the stack watches,
        # listed in full so a Grafana that does not expand the list itself shows them too.
        .with_variable(
            gf.CustomVariable("namespace")
            .id("namespace")
            .label("Namespace")
            .values(",".join(namespaces))
            .options([VariableOption(selected=i == 0, text=ns, value=ns) for i, ns in enumerate(namespaces)])
            .current(VariableOption(selected=True, text=namespaces[0], value=namespaces[0]))
        )
        .with_variable(
            gf.QueryVariable("job")
            .id("job")
            .label("Job")
            .datasource(DATASOURCE)
            .query(f'label_values({trainer.STEP.name}{{namespace="{namespace}"}}, {JOB_LABEL})')
            # Grafana's default is never: an imported dashboard would list no job at all.
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        )
        .with_row(gf.Row("Training"))
        .with_panel(_panel("Loss", "none", (series(trainer.LOSS), "loss")))
        .with_panel(_panel("Gradient norm", "none", (series(trainer.GRAD_NORM), "grad norm (before clipping)")))
        .with_panel(
            _panel(
                "Throughput",
                "short",
                (series(trainer.SAMPLES_PER_SECOND), "samples/s"),
                (series(trainer.TOKENS_PER_SECOND), "tokens/s"),
            )
        )
        .with_panel(
            _panel(
                "Model FLOPs utilisation",
                "percentunit",
                (series(trainer.MFU), "MFU"),
                description="Share of the GPUs' peak FLOPs the model's arithmetic used; checkpoint time excluded.",
            )
        )
        .with_panel(
            per_rank(
                "Step time per rank",
                "s",
                trainer.STEP_TIME,
                "A rank well above the others is a straggler the whole job waits for.",
            )
        )
        .with_panel(
            per_rank(
                "Peak memory per rank",
                "bytes",
                trainer.PEAK_MEMORY,
                "Accelerator memory on GPUs; a rank near its device's size is about to run out.",
            )
        )
        .with_panel(
            _panel(
                "Skipped non-finite steps",
                "short",
                (f"increase({series(trainer.NONFINITE_STEPS)}[$__rate_interval])", "skipped"),
                description="Steps whose loss or gradients were not finite; a run of them stops training.",
            )
        )
        .with_panel(
            _panel(
                "Checkpoint age",
                "s",
                (f"time() - {series(trainer.CHECKPOINT_TIME)}", "since the last committed checkpoint"),
                description="What a preemption now would lose.",
            )
        )
        .with_row(gf.Row("Network"))
        .with_panel(
            _panel(
                "Fabric bus bandwidth",
                "Bps",
                (series(trainer.FABRIC_BUS_BANDWIDTH), f"{{{{{trainer.SCOPE_LABEL}}}}} {{{{{trainer.OP_LABEL}}}}}"),
                description="Best bus bandwidth of the fabric probe the job took at start (--fabric-probe, "
                "--parallel auto), inside a node and across nodes; docs/network.md.",
            )
        )
        .with_panel(
            _panel(
                "Parallelism",
                "short",
                (
                    f"{series(trainer.SHARD_GROUP)} * on (namespace, {JOB_LABEL}) group_left "
                    f"({trainer.STRATEGY_LABEL}) {series(trainer.PARALLEL_STRATEGY)}",
                    f"{{{{{trainer.STRATEGY_LABEL}}}}}: processes per shard group",
                ),
                description="The strategy the job trains with (chosen by --parallel auto, or given) and how many "
                "processes share each parameter's shards (1: DDP).",
            )
        )
        .with_panel(
            _panel(
                "Device mesh",
                "short",
                (
                    series(trainer.PARALLEL_MESH),
                    " × ".join(f"{label} {{{{{label}}}}}" for label in trainer.MESH_LABELS),
                ),
                description="The mesh the job trains on (chosen by --parallel auto, or --tp and --pp): data-parallel "
                "replicas × pipeline stages × tensor-parallel ranks; docs/trainer.md.",
            )
        )
        .with_row(gf.Row("GPUs"))
        .with_panel(_panel("GPU utilisation per pod", "percent", (per_pod("avg", gpu.GPU_UTIL), "{{pod}}")))
        .with_panel(
            _panel(
                "GPU memory used per pod",
                # DCGM reports framebuffer memory in MiB (dcgm-exporter's default counters).
                "mbytes",
                (per_pod("sum", gpu.GPU_MEMORY_USED), "{{pod}}"),
            )
        )
    )
    if cost_currency is not None:
        board = board.with_row(gf.Row("Cost"))
        for panel in cost_panels(namespace, cost_currency, DATASOURCE):
            board = board.with_panel(panel)
    return json.loads(json.dumps(board.build(), cls=JSONEncoder))


def dashboard_configmap(dashboard: dict[str, object], namespace: str) -> Manifest:
    """The ConfigMap that Grafana's dashboard sidecar loads ``dashboard`` from.

    Args:
        dashboard: the dashboard JSON (:func:`training_dashboard`).
        namespace: where the ConfigMap lives; the sidecar must watch it (kube-prometheus-stack's
            ``sidecar.dashboards.searchNamespace``, else Grafana's own namespace only).

    Returns:
        A complete ConfigMap object.
    """
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": DASHBOARD_CONFIGMAP,
            "namespace": namespace,
            "labels": {**MANAGED_BY, **SIDECAR_LABEL},
        },
        "data": {DASHBOARD_FILE: json.dumps(dashboard, indent=2, sort_keys=True)},
    }


def dashboard_queries(dashboard: dict[str, object]) -> list[str]:
    """Every PromQL expression of ``dashboard``'s panels."""
    panels: list[dict] = dashboard.get("panels", [])  # type: ignore[assignment]
    return [target["expr"] for panel in panels for target in panel.get("targets", []) if "expr" in target]

"""The alerts for every job kind, under ``promtool test rules``, on series derived from what the
platform emits: the jobs from its builders, their pods' labels through its PodMonitor, and their
conditions as kube-state-metrics serves them from the platform's custom resource configuration
(``fixtures.kube_state_metrics``)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml
from fixtures.kube_state_metrics import custom_resource_series
from test_jobs import IMAGE, POOL_1, POOL_8_ERDMA, context
from test_monitoring import operator_config, run_promtool_cases

from components.config import TrainingJobSpec, load_spec
from components.manifests import KINDS, kubeflow_job, train_job
from components.manifests.jobs.pod import pod_labels
from components.manifests.monitoring import kube_metrics as kube
from components.manifests.monitoring.alerts import alerts, job_state_metrics
from components.manifests.monitoring.scraping import trainer_pod_monitor
from components.plan.command import write_job_state_metrics
from trainer.telemetry import metric_names

NS = "training"
SPEC = load_spec(operator_config(), credentials=False)
RULES = alerts(SPEC.monitoring_scope())
KSM_CONFIG = job_state_metrics(SPEC.monitoring_scope())["customResourceState"]


def test_the_plan_writes_what_kube_state_metrics_needs_for_every_kind(tmp_path) -> None:
    """The file the offline plan writes is the configuration the series here come from, for every
    kind the stack runs, with the RBAC kube-state-metrics needs to list and watch them."""
    written = yaml.safe_load(write_job_state_metrics(SPEC, tmp_path).read_text())
    assert written["customResourceState"] == KSM_CONFIG
    kinds = [r["groupVersionKind"]["kind"] for r in KSM_CONFIG["spec"]["resources"]]
    assert kinds == [k.kind for k in KINDS.values()] + ["TrainJob"]
    # Fields of kube-state-metrics v2.20.0 pkg/customresourcestate/config.go (Resource, Generator, Metric).
    for resource in KSM_CONFIG["spec"]["resources"]:
        assert set(resource) <= {"groupVersionKind", "resourcePlural", "labelsFromPath", "metrics", "metricNamePrefix"}
    rules = {g: r for rule in written["rbacRules"] for g in rule["apiGroups"] for r in [rule["resources"]]}
    assert rules["apiextensions.k8s.io"] == ["customresourcedefinitions"]
    assert rules["kubeflow.org"] == sorted(k.plural for k in KINDS.values())
    assert rules["trainer.kubeflow.org"] == ["trainjobs"]
    assert all(rule["verbs"] == ["list", "watch"] for rule in written["rbacRules"])


def test_each_kind_has_its_own_help_text() -> None:
    """kube-state-metrics v2.12.0 to v2.18.0 drop a HELP line equal to the one before it and, with it,
    every series of that resource (``pkg/metrics_store/metrics_writer.go`` ``SanitizeHeaders``: "Removes
    duplicate headers ... for the same family"; ``WriteAll`` writes a store's families only under its
    headers): one help text for every kind would serve the first kind's conditions alone."""
    helps = [m["help"] for r in KSM_CONFIG["spec"]["resources"] for m in r["metrics"]]
    names = {m["name"] for r in KSM_CONFIG["spec"]["resources"] for m in r["metrics"]}
    assert len(names) == 1 and len(set(helps)) == len(helps) == len(KINDS) + 1


def _job(framework: str, name: str = "job") -> dict[str, Any]:
    fields: dict[str, Any] = {"framework": framework, "nodes": 2, "gpus_per_node": 1}
    if framework != "pytorch":
        fields["command"] = ["python", "train.py"]
    return kubeflow_job(TrainingJobSpec(name=name, image=IMAGE, **fields), context(POOL_1, 1))


def _conditions(obj: dict[str, Any], *true: str, false: tuple[str, ...] = ()) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["status"] = {
        "conditions": [{"type": t, "status": "True"} for t in true] + [{"type": t, "status": "False"} for t in false]
    }
    return obj


def _timeline(*states: tuple[int, dict[str, Any]], minutes: int) -> dict[str, str]:
    """promtool values of the series kube-state-metrics serves for an object that is in each
    state from its minute on (``_`` where a series is not served)."""
    starts = [start for start, _ in states] + [minutes]
    served = [custom_resource_series(KSM_CONFIG, obj) for _, obj in states]
    values: dict[str, list[str]] = {}
    for i, series in enumerate(served):
        for name in {n for s in served for n in s}:
            values.setdefault(name, []).extend(
                [str(int(series[name])) if name in series else "_"] * (starts[i + 1] - starts[i])
            )
    return {name: " ".join(v) for name, v in values.items()}


def _case(alert: str, at: str, series: dict[str, str], labels: dict[str, str] | None):
    return (alert, at, series, labels)


# ---- a restarting pod of each kind -------------------------------------------------------------


def _restarting(container: str, restarts: str) -> dict[str, str]:
    pod = f'namespace="{NS}",pod="job-worker-0"'
    return {
        f'{kube.POD_RESTARTS}{{{pod},uid="u1",container="{container}"}}': restarts,
        f'{kube.POD_CREATED}{{{pod},uid="u1"}}': "100x10",
        f'{kube.POD_CONTAINER_INFO}{{{pod},uid="u1",container="{container}"}}': "1x10",
    }


@pytest.mark.parametrize("framework", list(KINDS))
def test_a_restarting_pod_of_each_kind_fires(tmp_path, framework: str) -> None:
    # The container the operator configures, which runs the job's code, as the builder names it.
    spec = KINDS[framework].specs_key
    container = _job(framework)["spec"][spec]["Worker"]["template"]["spec"]["containers"][0]["name"]
    firing = _restarting(container, "0 1 2 3 3 3 3 3 3 3 3")
    quiet = _restarting(container, "0 1 1 1 1 1 1 1 1 1 1")
    labels = {"namespace": NS, "pod": "job-worker-0", "severity": "warning"}
    cases = [_case("TrainingPodRestarting", "10m", firing, labels), _case("TrainingPodRestarting", "10m", quiet, None)]
    run_promtool_cases(tmp_path, RULES, {}, cases)


# ---- a job failed by its backoff limit -------------------------------------------------------


@pytest.mark.parametrize("framework", list(KINDS))
def test_a_job_failed_by_its_backoff_limit_fires_training_job_failed(tmp_path, framework: str) -> None:
    """The operator sets the Failed condition and neither counts the failure nor (under cleanPodPolicy
    None) deletes the pods (v1.9.4 ``common/job.go`` ``ReconcileJobs``): only the condition tells."""
    job = _job(framework)
    running = _conditions(job, "Created", "Running")
    failed = _conditions(job, "Created", "Failed", false=("Running",))
    series = _timeline((0, running), (5, failed), minutes=30)
    labels = {"namespace": NS, "training_job": "job", "severity": "critical"}
    succeeded = _timeline((0, running), (5, _conditions(job, "Created", "Succeeded", false=("Running",))), minutes=30)
    cases = [
        _case("TrainingJobFailed", "9m", series, labels),
        # delivered in its first minutes, not repeated for as long as the failed job is kept
        _case("TrainingJobFailed", "25m", series, None),
        _case("TrainingJobFailed", "9m", succeeded, None),
    ]
    run_promtool_cases(tmp_path, RULES, {}, cases)


def test_a_trainjob_past_its_deadline_fires_trainjob_failed(tmp_path) -> None:
    """Trainer v2.3.0 marks the TrainJob Failed (reason DeadlineExceeded) and deletes its JobSet: no
    Job fails (``pkg/controller/trainjob_controller.go`` ``reconcileDeadline``)."""
    job = train_job(TrainingJobSpec(name="job", image=IMAGE, nodes=2, backend="v2"), context(POOL_1, 1))
    series = _timeline((0, _conditions(job)), (5, _conditions(job, "Failed")), minutes=30)
    labels = {"namespace": NS, "training_job": "job", "severity": "critical"}
    run_promtool_cases(tmp_path, RULES, {}, [_case("TrainJobFailed", "11m", series, labels)])


# ---- a hung rank 0 whose exporter is down ------------------------------------------------------


def _rank0(phase: str) -> dict[str, str]:
    target = f'namespace="{NS}",training_job="gpt",pod="gpt-master-0"'
    return {
        # Stepping until minute 20, then silent: the process stopped answering scrapes as well.
        f"{metric_names.STEP.name}{{{target}}}": "0+10x20 stale",
        f"{metric_names.TRAINING_LOOP.name}{{{target}}}": "1x20 stale",
        f'{kube.UP}{{{target},job="{NS}/ack-training-platform-trainer"}}': "1x20 0x30",
        f'{kube.POD_PHASE}{{namespace="{NS}",pod="gpt-master-0",uid="u1",phase="Running"}}': (
            "1x50" if phase == "Running" else "1x20 0x30"
        ),
    }


def test_a_hung_rank_0_with_its_exporter_down_fires_no_progress(tmp_path) -> None:
    labels = {"namespace": NS, "training_job": "gpt", "pod": "gpt-master-0", "severity": "critical"}
    cases = [
        _case("TrainingNoProgress", "45m", _rank0("Running"), labels),
        # The pod ended (its target went with it): nothing hangs.
        _case("TrainingNoProgress", "45m", _rank0("Succeeded"), None),
    ]
    run_promtool_cases(tmp_path, RULES, {}, cases)


# ---- a job starved by quota --------------------------------------------------------------------


def test_a_v1_job_whose_pods_the_quota_refuses_fires_starved(tmp_path) -> None:
    """A pod over the namespace's ResourceQuota is refused at creation: the job is Created and owns no
    pod, so no pod is ever Pending."""
    job = _job("tensorflow")
    created = _timeline((0, _conditions(job, "Created")), minutes=30)
    owned = {
        **created,
        f'{kube.POD_OWNER}{{namespace="{NS}",pod="job-chief-0",uid="u1",owner_kind="TFJob",owner_name="job"}}': "1x30",
    }
    labels = {"namespace": NS, "training_job": "job", "severity": "warning"}
    cases = [
        _case("TrainingJobStarved", "25m", created, labels),
        # its pods exist (pending ones are TrainingPodPending's)
        _case("TrainingJobStarved", "25m", owned, None),
        # a job that ran keeps quiet
        _case("TrainingJobStarved", "25m", _timeline((0, _conditions(job, "Created", "Running")), minutes=30), None),
    ]
    run_promtool_cases(tmp_path, RULES, {}, cases)


def test_a_trainjob_waiting_in_its_queue_fires_not_admitted(tmp_path) -> None:
    job = train_job(
        TrainingJobSpec(name="job", image=IMAGE, nodes=2, backend="v2"), context(POOL_1, 1, queue="gpu-queue")
    )
    waiting = _timeline((0, _conditions(job, "Suspended")), minutes=30)
    admitted = _timeline((0, _conditions(job, "Suspended")), (5, _conditions(job, false=("Suspended",))), minutes=30)
    labels = {"namespace": NS, "training_job": "job", "queue": "gpu-queue", "severity": "warning"}
    cases = [
        _case("TrainJobNotAdmitted", "25m", waiting, labels),
        _case("TrainJobNotAdmitted", "25m", admitted, None),
    ]
    run_promtool_cases(tmp_path, RULES, {}, cases)


# ---- netbench baselines by shape ---------------------------------------------------------------


def _netbench_series(name: str, nodes: int, network: str, ctx) -> str:
    """The bandwidth series of a netbench job's rank 0, labelled as the PodMonitor relabels its pod."""
    spec = TrainingJobSpec(name=name, image=IMAGE, preset="netbench", nodes=nodes, network=network)
    labels = pod_labels(spec, ctx)
    series = {"namespace": NS, "pod": f"{name}-master-0"}
    relabelings = trainer_pod_monitor(NS)["spec"]["podMetricsEndpoints"][0]["relabelings"]
    # Prometheus names a pod label's discovery label with every other character than a letter or digit as "_".
    discovered = {"__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9]", "_", k): v for k, v in labels.items()}
    for rule in relabelings:
        (source,) = rule["sourceLabels"]
        if source in discovered:
            series[rule["targetLabel"]] = discovered[source]
    text = ",".join(f'{k}="{v}"' for k, v in series.items())
    return f'{metric_names.ALLREDUCE_BUS_BANDWIDTH.name}{{{text},size_bytes="1073741824"}}'


def test_a_two_node_netbench_is_not_held_to_a_single_node_baseline(tmp_path) -> None:
    """A single node's all-reduce runs over NVLink, hundreds of GB/s; a healthy two-node run over the
    fabric is a fraction of that and must not alert."""
    single = _netbench_series("nb-1", 1, "tcp", context(POOL_8_ERDMA, 8))
    double = _netbench_series("nb-2", 2, "rdma", context(POOL_8_ERDMA, 8))
    later_double = _netbench_series("nb-3", 2, "rdma", context(POOL_8_ERDMA, 8))
    labels = {"namespace": NS, "training_job": "nb-3", "pool": "gpu", "nodes": "2", "network": "rdma"}
    cases = [
        _case("AllReduceBandwidthLow", "65m", {single: "300e9x1", double: "_x60 25e9x2"}, None),
        # a later two-node run far under the first one's 25 GB/s still alerts against it
        _case(
            "AllReduceBandwidthLow",
            "125m",
            {double: "25e9x1", later_double: "_x120 10e9x2"},
            {**labels, "severity": "warning"},
        ),
    ]
    run_promtool_cases(tmp_path, RULES, {}, cases)

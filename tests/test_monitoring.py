"""Monitoring, read as policy: what each mode creates, alerts that fire when they should
(``promtool test rules``), objects valid against prometheus-operator's API, and a dashboard
that watches only metrics someone serves."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml
from conftest import ROOT, cfg, missing, stack_config

from components.config import load_spec
from components.manifests.monitoring import gpu_metrics, kube_metrics
from components.manifests.monitoring.alerts import alerts
from components.manifests.monitoring.dashboard import dashboard_queries, training_dashboard
from components.manifests.monitoring.rules import prometheus_rule, rule_group
from components.manifests.monitoring.scraping import operator_pod_monitor, trainer_pod_monitor
from components.plan.records import SECRET
from trainer.telemetry import metric_names

MONITORING = "alicloud:arms/prometheusMonitoring:PrometheusMonitoring"
ALERT_RULE = "alicloud:arms/prometheusAlertRule:PrometheusAlertRule"
CR = "kubernetes:monitoring.coreos.com/v1:"


def operator_config() -> dict[str, Any]:
    """The dev stack on a cluster with its own prometheus-operator, every alert on, and v2 too."""
    config = stack_config("dev")
    config[cfg("monitoring")] = {"prometheus": "operator", "alerts": {"minMfu": 0.25, "minBusBandwidthGbps": 20}}
    config[cfg("trainerV2")] = {"install": True}
    config[cfg("cluster")]["version"] = "1.33.1-aliyun.1"
    return config


def test_arms_mode_registers_scraping_and_rules_with_arms_after_its_add_on(run_stack) -> None:
    plan = run_stack(stack_config("dev"), "dev")
    addon = next(
        a for a in plan.of_type("alicloud:cs/kubernetesAddon:KubernetesAddon") if a.inputs["name"] == "arms-prometheus"
    )
    spec = load_spec(stack_config("dev"), credentials=False)
    monitors = {m.name: m for m in plan.of_type(MONITORING)}
    assert set(monitors) == {"ack-training-platform-trainer", "ack-training-platform-training-operator"}
    for monitor in monitors.values():
        assert monitor.inputs["type"] == "podMonitor" and addon.urn in monitor.dependencies
        assert yaml.safe_load(monitor.inputs["configYaml"])["kind"] == "PodMonitor"
    rules = {r.name: r for r in plan.of_type(ALERT_RULE)}
    assert set(rules) == {a.name for a in alerts(spec.monitoring_scope())}
    for rule in alerts(spec.monitoring_scope()):
        recorded = rules[rule.name]
        assert recorded.inputs["expression"] == rule.expr and recorded.inputs["duration"] == str(rule.for_minutes)
        assert {"name": "severity", "value": rule.severity} in recorded.inputs["labels"]
        assert addon.urn in recorded.dependencies
    # Nothing for a prometheus-operator the cluster does not run.
    assert not [r for r in plan.resources if r.type.startswith(CR)]


def test_operator_mode_creates_the_custom_resources_and_the_dashboard(run_stack) -> None:
    plan = run_stack(operator_config())
    assert {r.name for r in plan.of_type(CR + "PodMonitor")} == {
        "ack-training-platform-trainer",
        "ack-training-platform-training-operator",
    }
    rule = plan.one(CR + "PrometheusRule").inputs
    assert [r["alert"] for r in rule["spec"]["groups"][0]["rules"]] == [
        a.name for a in alerts(load_spec(operator_config(), credentials=False).monitoring_scope())
    ]
    dashboard = plan.one("kubernetes:core/v1:ConfigMap", "ack-training-platform-dashboard").inputs
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["training.json"])["uid"] == "ack-training-job"
    assert not plan.of_type(MONITORING) and not plan.of_type(ALERT_RULE)
    assert not [
        a for a in plan.of_type("alicloud:cs/kubernetesAddon:KubernetesAddon") if a.inputs["name"] == "arms-prometheus"
    ]


def test_monitoring_labels_reach_every_object_a_prometheus_operator_selects(run_stack) -> None:
    # kube-prometheus-stack's Prometheus selects only objects labelled with its release.
    config = operator_config()
    config[cfg("monitoring")]["labels"] = {"release": "kube-prometheus-stack"}
    plan = run_stack(config)
    objects = [*plan.of_type(CR + "PodMonitor"), *plan.of_type(CR + "PrometheusRule")]
    objects.append(plan.one("kubernetes:core/v1:ConfigMap", "ack-training-platform-dashboard"))
    assert len(objects) == 4
    assert all(o.inputs["metadata"]["labels"]["release"] == "kube-prometheus-stack" for o in objects)


def test_no_prometheus_creates_no_monitoring_objects(run_stack) -> None:
    plan = run_stack(stack_config("local"), "local")
    assert not [r for r in plan.resources if r.type.startswith(CR) or r.type.startswith("alicloud:arms")]
    assert plan.outputs["tensorboard"] == "kubectl -n training port-forward svc/tensorboard 6006:6006"


def test_tensorboard_runs_on_the_system_pool_reading_the_output_claim_only(run_stack) -> None:
    plan = run_stack(stack_config("dev"), "dev")
    tensorboard = plan.one("kubernetes:apps/v1:StatefulSet", "tensorboard-statefulset")
    pod = tensorboard.inputs["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"ack-training-platform/pool": "system"}
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "training-output", "readOnly": True}
    container = pod["containers"][0]
    assert all(m["readOnly"] for m in container["volumeMounts"] if m["name"] == "output")
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["resources"]["requests"] == container["resources"]["limits"]
    # The training image in the registry created with the stack, its host known after deploy.
    assert container["image"] == "<registry host, known after deploy>/ml/trainer:v0.1.0"
    assert plan.one("kubernetes:core/v1:PersistentVolumeClaim", "training-output").urn in tensorboard.dependencies
    assert "port-forward svc/tensorboard" in plan.outputs["tensorboard"]
    # An up never waits for its rollout: its first pull may wait on the credential helper.
    assert tensorboard.inputs["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}


def test_a_job_named_tensorboard_is_not_behind_the_tensorboard_service(run_stack) -> None:
    config = stack_config("local")
    config[cfg("jobs")][0]["name"] = "tensorboard"
    plan = run_stack(config, "local")
    selector = plan.one("kubernetes:core/v1:Service", "tensorboard-service").inputs["spec"]["selector"]
    job = plan.one("kubernetes:kubeflow.org/v1:PyTorchJob", "tensorboard")
    for replica in job.inputs["spec"]["pytorchReplicaSpecs"].values():
        pod_labels = replica["template"]["metadata"]["labels"]
        assert not selector.items() <= pod_labels.items()


def test_monitoring_puts_no_secret_in_outputs_or_objects(run_stack) -> None:
    config = operator_config()
    config[cfg("registry")]["username"] = "ml-pull@example.com"
    config[cfg("registryPassword")] = {"secure": "v1:AAAA"}
    plan = run_stack(config)
    monitoring = [r for r in plan.resources if "monitoring" in r.parent or r.name == "monitoring"]
    assert monitoring and SECRET not in json.dumps([r.inputs for r in monitoring])
    assert plan.outputs["tensorboard"] != SECRET and "AAAA" not in json.dumps(plan.outputs)


# --- prometheus-operator's API ----------------------------------------------------------


def strict_errors(obj: dict[str, Any]) -> list[str]:
    """Fields of ``obj`` that prometheus-operator's v0.80 API does not have, or values it refuses.

    The models ignore unknown fields, so what they drop is what the API would prune or refuse.
    """
    from cloudcoil.models.prometheus_operator import v1
    from pydantic import ValidationError

    model = {"PodMonitor": v1.PodMonitor, "PrometheusRule": v1.PrometheusRule}[obj["kind"]]
    try:
        parsed = model.model_validate(obj)
    except ValidationError as err:
        return [str(err)]
    kept = parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def dropped(given: Any, back: Any, path: str) -> list[str]:
        if isinstance(given, dict):
            return [
                p
                for key, value in given.items()
                for p in (dropped(value, back[key], f"{path}.{key}") if key in back else [f"{path}.{key}"])
            ]
        if isinstance(given, list):
            return [p for i, (a, b) in enumerate(zip(given, back, strict=True)) for p in dropped(a, b, f"{path}[{i}]")]
        return [] if given == back else [f"{path}: {given!r} became {back!r}"]

    return dropped(obj, kept, "")


def test_monitoring_objects_are_valid_prometheus_operator_objects() -> None:
    spec = load_spec(operator_config(), credentials=False)
    for obj in (
        trainer_pod_monitor("training"),
        operator_pod_monitor("kubeflow"),
        prometheus_rule(alerts(spec.monitoring_scope()), "training"),
    ):
        assert strict_errors(obj) == [], obj["kind"]


def test_the_schema_check_catches_a_misspelled_field() -> None:
    monitor = trainer_pod_monitor("training")
    monitor["spec"]["podMetricsEndpoints"][0]["relabellings"] = monitor["spec"]["podMetricsEndpoints"][0].pop(
        "relabelings"
    )
    assert strict_errors(monitor) == [".spec.podMetricsEndpoints[0].relabellings"]
    rule = prometheus_rule(alerts(load_spec(operator_config(), credentials=False).monitoring_scope()), "training")
    rule["spec"]["groups"][0]["rules"][0]["severity"] = "critical"
    assert strict_errors(rule) == [".spec.groups[0].rules[0].severity"]


# --- alerts under promtool --------------------------------------------------------------

T = 'namespace="training",training_job="gpt",pod="gpt-master-0"'
LABELS = {"namespace": "training", "training_job": "gpt", "pod": "gpt-master-0"}
STEP, CKPT, EVERY = (metric_names.STEP.name, metric_names.CHECKPOINT_STEP.name, metric_names.CHECKPOINT_EVERY.name)
POD = 'namespace="training",pod="gpt-master-0"'
RESTARTS = kube_metrics.POD_RESTARTS + f'{{{POD},uid="u1",container="pytorch"}}'
CREATED = kube_metrics.POD_CREATED + f'{{{POD},uid="u1"}}'
CONTAINER = kube_metrics.POD_CONTAINER_INFO + f'{{{POD},uid="u1",container="pytorch"}}'
LOOP = metric_names.TRAINING_LOOP.name
JOB_CREATED = kube_metrics.JOB_CREATED + '{namespace="training",job_name="gpt-node-0"}'
COMPLETE_V2 = kube_metrics.JOB_COMPLETE + '{namespace="training",job_name="gpt-node-0",condition="true"}'
FAILED_V2 = kube_metrics.JOB_FAILED + '{namespace="training",job_name="gpt-node-0",condition="true"}'
OWNER = kube_metrics.JOB_OWNER + '{namespace="training",job_name="gpt-node-0",owner_kind="JobSet",owner_name="gpt"}'
BANDWIDTH = metric_names.ALLREDUCE_BUS_BANDWIDTH.name
NET_A = 'namespace="training",training_job="nccl-a",pod="nccl-a-master-0",pool="gpu"'
NET_B = 'namespace="training",training_job="nccl-b",pod="nccl-b-master-0",pool="gpu"'

CONDITION = (
    kube_metrics.JOB_CONDITION + '{{namespace="training",training_job="gpt",customresource_group="kubeflow.org",'
    'customresource_kind="PyTorchJob",customresource_version="v1",condition="{condition}"}}'
)
TRAINJOB_CONDITION = (
    kube_metrics.JOB_CONDITION
    + '{{namespace="training",training_job="gpt",customresource_group="trainer.kubeflow.org",'
    'customresource_kind="TrainJob",customresource_version="v1alpha1",queue="gpu-queue",condition="{condition}"}}'
)
POD_OWNER = kube_metrics.POD_OWNER + f'{{{POD},uid="u1",owner_kind="PyTorchJob",owner_name="gpt"}}'

# alert -> (eval time, series that make it fire, labels it fires with, series that keep it quiet)
CASES: dict[str, tuple[str, dict[str, str], dict[str, str], dict[str, str]]] = {
    "TrainingJobFailed": (
        "15m",
        # The operator serves the counter from the namespace's first failure on, already at 1.
        {kube_metrics.OPERATOR_JOBS_FAILED + '{job_namespace="training",framework="pytorch"}': "_x10 1x10"},
        {"job_namespace": "training", "framework": "pytorch", "severity": "critical"},
        {kube_metrics.OPERATOR_JOBS_FAILED + '{job_namespace="training",framework="pytorch"}': "0x20"},
    ),
    "TrainJobFailed": (
        "11m",
        {FAILED_V2: "0x4 1x16", OWNER: "1x20"},
        {"namespace": "training", "training_job": "gpt", "severity": "critical"},
        {FAILED_V2: "0x20", OWNER: "1x20"},
    ),
    "TrainingPodRestarting": (
        "10m",
        {RESTARTS: "0 1 2 3 3 3 3 3 3 3 3", CREATED: "100x10", CONTAINER: "1x10"},
        {"namespace": "training", "pod": "gpt-master-0", "severity": "warning"},
        {RESTARTS: "0 1 1 1 1 1 1 1 1 1 1", CREATED: "100x10", CONTAINER: "1x10"},
    ),
    "TrainingNoProgress": (
        "45m",
        {f"{STEP}{{{T}}}": "0+10x20 200x30", f"{LOOP}{{{T}}}": "1x50"},  # stuck from minute 20
        {**LABELS, "severity": "critical"},
        {f"{STEP}{{{T}}}": "0+10x50", f"{LOOP}{{{T}}}": "1x50"},
    ),
    "TrainingPodPending": (
        # the autoscaler cannot add a node: the pod waits from minute 2 on
        "25m",
        {kube_metrics.POD_PHASE + f'{{{POD},uid="u1",phase="Pending"}}': "0x2 1x30", CONTAINER: "1x32"},
        {"namespace": "training", "pod": "gpt-master-0", "severity": "warning"},
        # a new node came after 8 minutes
        {kube_metrics.POD_PHASE + f'{{{POD},uid="u1",phase="Pending"}}': "1x8 0x24", CONTAINER: "1x32"},
    ),
    "TrainJobStopped": (
        # activeDeadlineSeconds passed at minute 10: Trainer v2 deletes the JobSet and its Jobs.
        "17m",
        {OWNER: "1x9 stale", COMPLETE_V2: "0x9 stale", FAILED_V2: "0x9 stale"},
        {"namespace": "training", "training_job": "gpt", "severity": "warning"},
        # completed at minute 5, then cleaned up
        {OWNER: "1x9 stale", COMPLETE_V2: "0x4 1x4 stale", FAILED_V2: "0x9 stale"},
    ),
    "TrainingCheckpointStale": (
        "20m",
        {f"{STEP}{{{T}}}": "0+100x30", f"{CKPT}{{{T}}}": "0x30", f"{EVERY}{{{T}}}": "200x30"},
        {**LABELS, "severity": "warning"},
        {f"{STEP}{{{T}}}": "0+100x30", f"{CKPT}{{{T}}}": "0+100x30", f"{EVERY}{{{T}}}": "200x30"},
    ),
    "AllReduceBandwidthLow": (
        "5m",
        {
            f'{BANDWIDTH}{{{T},size_bytes="1048576"}}': "1e9x10",
            f'{BANDWIDTH}{{{T},size_bytes="1073741824"}}': "15e9x10",
        },
        {"namespace": "training", "training_job": "gpt", "severity": "warning"},
        {
            f'{BANDWIDTH}{{{T},size_bytes="1048576"}}': "1e9x10",
            f'{BANDWIDTH}{{{T},size_bytes="1073741824"}}': "25e9x10",
        },
    ),
    "TrainingJobStarved": (
        # the operator's pods are refused by the namespace's quota: the job owns none
        "25m",
        {CONDITION.format(condition="Created"): "1x30"},
        {"namespace": "training", "training_job": "gpt", "severity": "warning"},
        {CONDITION.format(condition="Created"): "1x30", POD_OWNER: "1x30"},
    ),
    "TrainJobNotAdmitted": (
        "25m",
        {TRAINJOB_CONDITION.format(condition="Suspended"): "1x30"},
        {"namespace": "training", "training_job": "gpt", "queue": "gpu-queue", "severity": "warning"},
        {TRAINJOB_CONDITION.format(condition="Suspended"): "1x10 0x20"},
    ),
    "TrainingMfuLow": (
        "50m",
        {f"{metric_names.MFU.name}{{{T}}}": "0.1x60"},
        {**LABELS, "severity": "warning"},
        {f"{metric_names.MFU.name}{{{T}}}": "0.4x60"},
    ),
}


# More situations an alert meets on a cluster: (alert, eval time, series, labels it fires with or None)
MORE_CASES: list[tuple[str, str, dict[str, str], dict[str, str] | None]] = [
    (  # a later failure in a namespace that had one before
        "TrainingJobFailed",
        "15m",
        {kube_metrics.OPERATOR_JOBS_FAILED + '{job_namespace="training",framework="pytorch"}': "1x10 2x10"},
        {"job_namespace": "training", "framework": "pytorch", "severity": "critical"},
    ),
    (  # the netbench pod serves its result for about a minute, then exits
        "AllReduceBandwidthLow",
        "5m",
        {f'{BANDWIDTH}{{{T},size_bytes="1073741824"}}': "_x2 15e9x1"},
        {"namespace": "training", "training_job": "gpt", "severity": "warning"},
    ),
    # The bandwidth alert over a pool's life: before any baseline the fixed floor (20 GB/s) holds ...
    (
        "AllReduceBandwidthLow",
        "5m",
        {f'{BANDWIDTH}{{{NET_A},size_bytes="1073741824"}}': "25e9x2"},
        None,
    ),
    (  # ... then an earlier job of the pool measured 40 GB/s: 25 is under 80% of that, though over the floor
        "AllReduceBandwidthLow",
        "65m",
        {
            f'{BANDWIDTH}{{{NET_A},size_bytes="1073741824"}}': "40e9x1",
            f'{BANDWIDTH}{{{NET_B},size_bytes="1073741824"}}': "_x60 25e9x2",
        },
        {"namespace": "training", "training_job": "nccl-b", "pool": "gpu", "severity": "warning"},
    ),
    (  # ... a later job back at 38 GB/s is healthy
        "AllReduceBandwidthLow",
        "65m",
        {
            f'{BANDWIDTH}{{{NET_A},size_bytes="1073741824"}}': "40e9x1",
            f'{BANDWIDTH}{{{NET_B},size_bytes="1073741824"}}': "_x60 38e9x2",
        },
        None,
    ),
    (  # ... another pool's baseline is not this pool's
        "AllReduceBandwidthLow",
        "65m",
        {
            f'{BANDWIDTH}{{{NET_A.replace("gpu", "other")},size_bytes="1073741824"}}': "40e9x1",
            f'{BANDWIDTH}{{{NET_B},size_bytes="1073741824"}}': "_x60 25e9x2",
        },
        None,
    ),
    (  # ... and a job is not its own baseline: while it is watched, the floor still holds for it
        "AllReduceBandwidthLow",
        "5m",
        {f'{BANDWIDTH}{{{NET_B},size_bytes="1073741824"}}': "15e9x5"},
        {"namespace": "training", "training_job": "nccl-b", "pool": "gpu", "severity": "warning"},
    ),
    (  # a node Job failing for a moment while the JobSet restarts it
        "TrainJobFailed",
        "20m",
        {FAILED_V2: "0x2 1x2 0x16", OWNER: "1x20"},
        None,
    ),
    (  # a failed Job that is no TrainJob's
        "TrainJobFailed",
        "10m",
        {FAILED_V2: "1x20", OWNER.replace('owner_kind="JobSet"', 'owner_kind="CronJob"'): "1x20"},
        None,
    ),
    (  # a failed TrainJob kept for an hour: the alert was delivered in its first minutes
        "TrainJobFailed",
        "40m",
        {FAILED_V2: "1x60", OWNER: "1x60"},
        None,
    ),
    (  # a successful run saving its final checkpoint for 30 minutes with the step frozen
        "TrainingNoProgress",
        "45m",
        {f"{STEP}{{{T}}}": "0+10x20 200x30", f"{LOOP}{{{T}}}": "1x20 0x30"},
        None,
    ),
    (  # the same run a few minutes after its pod ended
        "TrainingNoProgress",
        "55m",
        {f"{STEP}{{{T}}}": "0+10x20 200x30 stale", f"{LOOP}{{{T}}}": "1x20 0x30 stale"},
        None,
    ),
    (  # a v1 ExitCode job: the operator deletes each failed pod and creates it again, a new uid each time
        "TrainingPodRestarting",
        "15m",
        {
            **{
                kube_metrics.POD_CREATED + f'{{{POD},uid="{uid}"}}': values
                for uid, values in (("a", "0x2 stale"), ("b", "_x3 180x2 stale"), ("c", "_x6 360x2 stale"))
            },
            **{
                kube_metrics.POD_RESTARTS + f'{{{POD},uid="{uid}",container="pytorch"}}': values
                for uid, values in (("a", "0x2 stale"), ("b", "_x3 0x2 stale"), ("c", "_x6 0x2 stale"))
            },
            kube_metrics.POD_CREATED + f'{{{POD},uid="d"}}': "_x9 540x10",
            kube_metrics.POD_RESTARTS + f'{{{POD},uid="d",container="pytorch"}}': "_x9 0x10",
            kube_metrics.POD_CONTAINER_INFO + f'{{{POD},uid="d",container="pytorch"}}': "_x9 1x10",
        },
        {"namespace": "training", "pod": "gpt-master-0", "severity": "warning"},
    ),
    (  # the same pod created three times, two restarts: one below the threshold (3), quiet
        "TrainingPodRestarting",
        "15m",
        {
            **{
                kube_metrics.POD_CREATED + f'{{{POD},uid="{uid}"}}': values
                for uid, values in (("a", "0x2 stale"), ("b", "_x3 180x2 stale"))
            },
            **{
                kube_metrics.POD_RESTARTS + f'{{{POD},uid="{uid}",container="pytorch"}}': values
                for uid, values in (("a", "0x2 stale"), ("b", "_x3 0x2 stale"))
            },
            kube_metrics.POD_CREATED + f'{{{POD},uid="d"}}': "_x6 360x10",
            kube_metrics.POD_RESTARTS + f'{{{POD},uid="d",container="pytorch"}}': "_x6 0x10",
            kube_metrics.POD_CONTAINER_INFO + f'{{{POD},uid="d",container="pytorch"}}': "_x6 1x10",
        },
        None,
    ),
    (  # a TrainJob whose JobSet recreated its node Jobs three times (pods never restart in place)
        "TrainingPodRestarting",
        "15m",
        {JOB_CREATED: "100x2 400x2 700x2 1000x10", OWNER: "1x16"},
        {"namespace": "training", "training_job": "gpt", "severity": "warning"},
    ),
    (  # ... and twice, one below the threshold: quiet
        "TrainingPodRestarting",
        "15m",
        {JOB_CREATED: "100x2 400x2 700x12", OWNER: "1x16"},
        None,
    ),
    (  # a JobSet restart: its Jobs are gone for a minute, then created again
        "TrainJobStopped",
        "15m",
        {OWNER: "1x5 stale 1x10", COMPLETE_V2: "0x5 stale 0x10", FAILED_V2: "0x5 stale 0x10"},
        None,
    ),
    (  # a v1 pod that a non-retryable exit code (restartPolicy ExitCode) leaves Failed
        "TrainingJobFailed",
        "10m",
        {
            kube_metrics.POD_PHASE + f'{{{POD},uid="u1",phase="Failed"}}': "0x3 1x10",
            CONTAINER: "1x13",
        },
        {"namespace": "training", "pod": "gpt-master-0", "severity": "critical"},
    ),
    (  # a pod pending that is not a training pod (TensorBoard waiting for a node)
        "TrainingPodPending",
        "25m",
        {
            kube_metrics.POD_PHASE + '{namespace="training",pod="tensorboard-1",uid="t",phase="Pending"}': "1x30",
            kube_metrics.POD_CONTAINER_INFO
            + '{namespace="training",pod="tensorboard-1",uid="t",container="tb"}': "1x30",
        },
        None,
    ),
    (  # a v1 pod with a retryable exit code, Failed until the operator deletes it
        "TrainingJobFailed",
        "10m",
        {kube_metrics.POD_PHASE + f'{{{POD},uid="u1",phase="Failed"}}': "0x3 1 stale", CONTAINER: "1x3 stale"},
        None,
    ),
]


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        missing(
            "promtool",
            ci=".ci/run installs Debian's prometheus package, which ships it",
            install="Debian: apt-get install prometheus",
        )
    return found


def run_promtool_cases(tmp_path, rules, cases, more_cases=()) -> None:
    """Check ``rules`` parse, then that each case fires (and its quiet twin does not)."""
    tool = promtool()
    tmp_path.mkdir(parents=True, exist_ok=True)
    group = rule_group(rules)
    (tmp_path / "full.yaml").write_text(yaml.safe_dump({"groups": [group]}))
    checked = subprocess.run([tool, "check", "rules", str(tmp_path / "full.yaml")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr  # templates in the annotations parse
    # promtool compares annotations too; the expressions, durations and labels are under test here.
    for rule in group["rules"]:
        del rule["annotations"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": [group]}))
    tests = []
    for name, (at, firing, labels, quiet) in cases.items():
        for series, expected in ((firing, [{"exp_labels": labels}]), (quiet, [])):
            tests.append(
                {
                    "interval": "1m",
                    "input_series": [{"series": s, "values": v} for s, v in series.items()],
                    "alert_rule_test": [{"eval_time": at, "alertname": name, "exp_alerts": expected}],
                }
            )
    for name, at, series, labels in more_cases:
        tests.append(
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series.items()],
                "alert_rule_test": [
                    {"eval_time": at, "alertname": name, "exp_alerts": [{"exp_labels": labels}] if labels else []}
                ],
            }
        )
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "tests": tests}))
    result = subprocess.run([tool, "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_fires_when_it_should_and_only_then(tmp_path) -> None:
    rules = alerts(load_spec(operator_config(), credentials=False).monitoring_scope())
    assert {r.name for r in rules} == set(CASES), "every alert needs a firing and a quiet case"
    run_promtool_cases(tmp_path, rules, CASES, MORE_CASES)


def moved(value, namespace: str):
    """A case's series or labels, with the training namespace replaced by ``namespace``."""
    if isinstance(value, dict):
        return {moved(k, namespace): moved(v, namespace) for k, v in value.items()}
    return value.replace('namespace="training"', f'namespace="{namespace}"') if value != "training" else namespace


def test_the_alerts_watch_every_teams_namespace_and_no_other(tmp_path) -> None:
    config = operator_config()
    quota = {"gpus": 8, "cpu": "96", "memory": "768Gi"}
    config[cfg("cluster")]["network"] = "terway"
    config[cfg("teams")] = [
        {"name": "llm", "uid": 2001, "quota": quota},
        {"name": "vision", "uid": 2002, "quota": quota},
    ]
    for job in config[cfg("jobs")]:
        job["team"] = "vision"
    rules = alerts(load_spec(config, credentials=False).monitoring_scope())
    in_team = {name: tuple(moved(part, "vision") for part in case[:4]) for name, case in CASES.items()}
    run_promtool_cases(tmp_path / "team", rules, in_team)
    # A namespace no team owns: every case stays quiet.
    elsewhere = [(name, at, moved(firing, "other"), None) for name, (at, firing, _, _) in CASES.items()]
    run_promtool_cases(tmp_path / "other", rules, {}, elsewhere)


def test_a_job_that_just_started_is_not_stuck(tmp_path) -> None:
    tool = promtool()
    group = rule_group(
        [
            a
            for a in alerts(load_spec(operator_config(), credentials=False).monitoring_scope())
            if a.name == "TrainingNoProgress"
        ]
    )
    del group["rules"][0]["annotations"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": [group]}))
    test = {
        "interval": "1m",
        "input_series": [{"series": f"{STEP}{{{T}}}", "values": "0x12"}],  # loading data for 12 minutes
        "alert_rule_test": [{"eval_time": "12m", "alertname": "TrainingNoProgress", "exp_alerts": []}],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "tests": [test]}))
    result = subprocess.run([tool, "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# --- the dashboard ------------------------------------------------------------------------

PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or", "unless"}


def metric_names_in(expr: str) -> set[str]:
    """Metric names a PromQL expression reads: identifiers that are not functions, keywords,
    label names in matchers or grouping clauses, strings or durations."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    expr = re.sub(r"\b\d+(\.\d+)?([smhdwy]|e\d+)?\b", " ", expr)
    names = re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*\b(?!\s*\()", expr)
    return {n for n in names if n not in PROMQL_WORDS}


def test_the_promql_reader_finds_metrics_and_only_metrics() -> None:
    assert metric_names_in('sum by (pod) (rate(a_total{pod=~"x-.*"}[5m])) / on (pod) b offset 5m') == {"a_total", "b"}


def test_every_panel_reads_metrics_that_are_served() -> None:
    served = {m.name for m in metric_names.ALL} | set(gpu_metrics.EXPORTED) | set(kube_metrics.KUBE_STATE_METRICS)
    queries = dashboard_queries(training_dashboard(["training"]))
    assert len(queries) >= 9
    for query in queries:
        read = metric_names_in(query)
        assert read and read <= served, query
    panels = {p["title"] for p in training_dashboard(["training"])["panels"]}
    assert {"Loss", "Throughput", "Model FLOPs utilisation", "Step time per rank", "Checkpoint age"} <= panels
    assert {"GPU utilisation per pod", "GPU memory used per pod", "Gradient norm"} <= panels
    assert {"Fabric bus bandwidth", "Parallelism", "Device mesh"} <= panels


def test_the_mesh_panel_names_each_dimension_of_the_served_mesh() -> None:
    (mesh,) = [p for p in training_dashboard(["training"])["panels"] if p["title"] == "Device mesh"]
    (target,) = mesh["targets"]
    assert metric_names_in(target["expr"]) == {metric_names.PARALLEL_MESH.name}
    assert target["legendFormat"] == "dp {{dp}} × pp {{pp}} × tp {{tp}}"
    assert metric_names.PARALLEL_MESH.labels == ("dp", "pp", "tp")


def test_the_dashboard_offers_every_namespace_the_stack_watches_and_nothing_else() -> None:
    board = training_dashboard(["training", "llm", "vision"])
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert [o["value"] for o in variables["namespace"]["options"]] == ["training", "llm", "vision"]
    assert variables["namespace"]["current"]["value"] == "training"
    assert 'namespace="$namespace"' in variables["job"]["query"]
    for query in dashboard_queries(board):
        # Every series is the chosen namespace's (GPU series under either exporter's label).
        assert 'namespace="$namespace"' in query and '"training"' not in query, query


def test_the_job_list_of_an_imported_dashboard_fills_itself() -> None:
    # Grafana never queries a variable whose refresh is unset: the job picker would stay empty.
    (job,) = [v for v in training_dashboard(["training"])["templating"]["list"] if v["name"] == "job"]
    assert job["refresh"] in (1, 2)


@pytest.mark.parametrize(
    "labels",
    [
        # ACK's GPU exporter: the GPU's pod and namespace as they are.
        'namespace="training",pod="gpt-node-0-1-x7k2p"',
        # NVIDIA's dcgm-exporter chart under a prometheus-operator (honorLabels false): renamed.
        'namespace="gpu-operator",pod="dcgm-exporter-abcde",exported_namespace="training",'
        'exported_pod="gpt-node-0-1-x7k2p"',
    ],
)
def test_gpu_queries_find_the_jobs_pods_under_either_exporter(tmp_path, labels: str) -> None:
    tool = promtool()
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": []}))
    series = [
        {"series": f'{gpu_metrics.GPU_UTIL}{{{labels},gpu="{gpu}"}}', "values": f"{util}x5"}
        for gpu, util in (("0", 90), ("1", 70))
    ]
    # A pod of another job and one of another namespace stay out.
    series.append(
        {
            "series": f'{gpu_metrics.GPU_UTIL}{{namespace="training",pod="gpt-large-node-0-0-a",gpu="0"}}',
            "values": "5x5",
        }
    )
    series.append(
        {"series": f'{gpu_metrics.GPU_UTIL}{{namespace="other",pod="gpt-node-0-0-b",gpu="0"}}', "values": "5x5"}
    )
    test = {
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [
            {
                "expr": gpu_metrics.per_pod(
                    "avg", gpu_metrics.GPU_UTIL, "training", "gpt-(master|worker|node)-[0-9].*"
                ),
                "eval_time": "4m",
                "exp_samples": [{"labels": '{pod="gpt-node-0-1-x7k2p"}', "value": 80}],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "tests": [test]}))
    result = subprocess.run([tool, "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dashboard", [True, False])
def test_the_platform_gives_its_dashboard_to_a_program_that_reads_it(run_stack, tmp_path, dashboard: bool) -> None:
    # The platform builds the dashboard when a program first reads it (the package's provider
    # exports it); the offline plan's own program never does.
    from components.plan.command import with_unset_credentials
    from components.plan.runner import run_program

    program = tmp_path / "program"
    program.mkdir()
    (program / "Pulumi.yaml").write_text("name: ack-training-platform\nruntime: python\n")
    (program / "__main__.py").write_text(
        (ROOT / "__main__.py").read_text() + '\npulumi.export("dashboard", platform.dashboard)\n'
    )
    config = stack_config("dev")
    config[cfg("monitoring")]["dashboard"] = dashboard
    planned, _, spec = with_unset_credentials(config)
    outputs = run_program(planned, stack="dev", project_dir=program).outputs
    scope = spec.monitoring_scope()
    board = training_dashboard(scope.namespaces, cost_currency=scope.cost_currency)
    assert outputs["dashboard"] == (json.dumps(board, sort_keys=True) if dashboard else None)

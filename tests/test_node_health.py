"""GPU node health: the decision on recorded DCGM series, the alert on the same series under
promtool, the controller end to end against loopback stand-ins of Prometheus and the Kubernetes
API, and the objects it is deployed as, planned under Pulumi's mocks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cfg, stack_config
from fixtures.dcgm_series import EXPORTER_NAMESPACE, RECORDED, gpu, instant_vectors, samples_at, xid_ranges
from loopback_health import NOW, Backends, merge_patch, node, serving, vector
from test_monitoring import operator_config, run_promtool_cases

from components.config import NodeHealthSpec, load_spec
from components.config.loading import ConfigError
from components.manifests.monitoring.alerts import alerts
from components.manifests.monitoring.node_health import FAILED_NODE_CHECKS, NODE_RULES, health_rules
from trainer.health.guard import (
    FAILED,
    HEALTH_LABEL,
    REASON_ANNOTATION,
    SINCE_ANNOTATION,
    GuardError,
    KubeApi,
    cordon_budget,
    query,
)
from trainer.health.signals import NODE_CHECK, NODE_LABEL, XID, HealthRules, Sample, node_verdicts

ROOT = Path(__file__).resolve().parent.parent
PROMETHEUS = "http://prometheus-operated.monitoring:9090"


# --- the decision ------------------------------------------------------------------------


def test_a_node_whose_gpu_reports_xid_79_is_cordoned_and_an_application_xid_is_not() -> None:
    verdicts = node_verdicts(samples_at(14))
    assert {name: v.cordon for name, v in verdicts.items()} == {
        "gpu-a": True,
        "gpu-b": False,
        "gpu-c": False,
        "gpu-d": True,
        "gpu-e": True,
    }
    assert verdicts["gpu-a"].reason == "gpu 3 (GPU-gpu-a-3): XID 79 (GPU has fallen off the bus)"
    assert verdicts["gpu-d"].reason == "gpu 1 (GPU-gpu-d-1): 1 double-bit ECC errors"
    # XID 74 counts though the gauge has read 45 since: the window holds both.
    assert verdicts["gpu-e"].reason == "gpu 2 (GPU-gpu-e-2): XID 74 (NVLink error)"
    # Before the XID was reported, the same node is healthy.
    assert not node_verdicts(samples_at(3))["gpu-a"].cordon


@pytest.mark.parametrize(
    ("sample", "rules", "reason"),
    [
        (Sample(XID, {}, 48), HealthRules(), "XID 48 (double-bit ECC error)"),
        (Sample(XID, {}, 119), HealthRules(), "XID 119 (GSP RPC timeout)"),
        (Sample(XID, {}, 31), HealthRules(), None),
        (Sample(XID, {}, 43), HealthRules(), None),
        (Sample(XID, {}, 79), HealthRules(cordon_xids={48: "x"}), None),
        # A pending row remapping, a contained ECC error and a high corrected-error rate leave the GPU
        # taking new work: no cordon unless a stack lists them.
        (Sample(XID, {}, 63), HealthRules(), None),
        (Sample(XID, {}, 92), HealthRules(), None),
        (Sample(XID, {}, 94), HealthRules(), None),
        (Sample(XID, {}, 95), HealthRules(), "XID 95 (uncontained ECC error)"),
        (Sample(XID, {}, 64), HealthRules(), "XID 64 (ECC page retirement or row remapping failed)"),
        (Sample("DCGM_FI_DEV_ROW_REMAP_FAILURE", {}, 1), HealthRules(), "row remapping failed"),
        (Sample("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", {}, 500), HealthRules(), None),
        (
            Sample("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", {}, 500),
            HealthRules(max_nvlink_errors=100),
            "500 NVLink errors (DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL)",
        ),
        (Sample("DCGM_FI_DEV_RETIRED_PENDING", {}, 2), HealthRules(), "2 pages pending retirement"),
    ],
)
def test_each_signal_and_its_threshold(sample: Sample, rules: HealthRules, reason: str | None) -> None:
    labelled = Sample(sample.metric, {"Hostname": "n1", "gpu": "0"}, sample.value)
    verdict = node_verdicts([labelled], rules)["n1"]
    assert verdict.cordon is (reason is not None)
    assert verdict.reason == (f"gpu 0: {reason}" if reason else "")


def test_series_without_a_node_name_are_skipped() -> None:
    assert node_verdicts([Sample(XID, {"gpu": "0"}, 79)]) == {}


# --- the alert under promtool ------------------------------------------------------------


def health_config(**health: object) -> dict:
    config = operator_config()
    config[cfg("monitoring")]["nodeHealth"] = {
        "enabled": True,
        "prometheusUrl": PROMETHEUS,
        "exporterNamespace": EXPORTER_NAMESPACE,
        **health,
    }
    return config


TEAM = "team-a"
FORGED = (
    'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-forged",Hostname="gpu-c",err_code="79",exported_namespace="gpu-operator"'
)
"""A team's pod serving the XID gauge on its metrics port, naming gpu-c (healthy) and claiming the
exporter's namespace: under honorLabels false its ``namespace`` label is kept as
``exported_namespace`` and the target's, the pod's own namespace, is set."""


def test_the_alert_fires_on_the_recorded_xid_79_and_ecc_error_and_not_on_the_application_xid(tmp_path) -> None:
    rules = [a for a in alerts(load_spec(health_config(), credentials=False).monitoring_scope())]
    unhealthy = [a for a in rules if a.name == "GPUNodeUnhealthy"]
    assert len(unhealthy) == 1

    def labels(node: str, index: int, signal: str) -> dict[str, str]:
        return {
            "Hostname": node,
            "gpu": str(index),
            "UUID": f"GPU-{node}-{index}",
            "signal": signal,
            "severity": "critical",
        }

    def only(node: str) -> dict[str, str]:
        return {s: v for s, v in RECORDED.items() if f'Hostname="{node}"' in s}

    more = [
        ("GPUNodeUnhealthy", "14m", only("gpu-a"), labels("gpu-a", 3, "xid")),
        ("GPUNodeUnhealthy", "14m", only("gpu-b"), None),
        ("GPUNodeUnhealthy", "14m", only("gpu-c"), None),
        ("GPUNodeUnhealthy", "14m", only("gpu-d"), labels("gpu-d", 1, "ecc-dbe")),
        # XID 74 was followed by XID 45 a minute later: the alert still names the NVLink fault.
        ("GPUNodeUnhealthy", "14m", only("gpu-e"), labels("gpu-e", 2, "xid")),
        ("GPUNodeUnhealthy", "3m", only("gpu-a"), None),
    ]
    run_promtool_cases(tmp_path, unhealthy, {}, more)


def test_the_alert_ignores_a_team_pods_series_of_the_exporters_names(tmp_path) -> None:
    (unhealthy,) = [
        a
        for a in alerts(load_spec(health_config(), credentials=False).monitoring_scope())
        if a.name == "GPUNodeUnhealthy"
    ]
    forged = {
        **{s: v for s, v in RECORDED.items() if 'Hostname="gpu-c"' in s},
        f'{FORGED},namespace="{TEAM}"}}': "79x14",
        f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{gpu('gpu-c', 1, TEAM)}}}": "0x7 5x7",
    }
    # The same series from the exporter's namespace fire: only the namespace keeps the forgery out.
    genuine = {
        f'{FORGED},namespace="{EXPORTER_NAMESPACE}"}}': "79x14",
    }
    labels = {"Hostname": "gpu-c", "gpu": "0", "UUID": "GPU-forged", "signal": "xid", "severity": "critical"}
    run_promtool_cases(
        tmp_path,
        [unhealthy],
        {},
        [("GPUNodeUnhealthy", "14m", forged, None), ("GPUNodeUnhealthy", "14m", genuine, labels)],
    )


def test_the_alert_is_there_only_when_node_health_is_enabled() -> None:
    assert "GPUNodeUnhealthy" not in {
        a.name for a in alerts(load_spec(operator_config(), credentials=False).monitoring_scope())
    }


def test_the_default_cordon_xids_need_a_reset_or_service_and_the_others_can_be_listed() -> None:
    assert NodeHealthSpec().cordon_xids == [48, 64, 74, 79, 95, 119, 120]
    spec = load_spec(health_config(cordonXids=[63, 94, 79]), credentials=False).monitoring.node_health
    assert health_rules(spec).cordon_xids == {
        63: "ECC page retirement or row remapping pending a GPU reset",
        79: "GPU has fallen off the bus",
        94: "contained ECC error",
    }
    verdict = node_verdicts([Sample(XID, {"Hostname": "n1", "gpu": "0"}, 94)], health_rules(spec))["n1"]
    assert verdict.reason == "gpu 0: XID 94 (contained ECC error)"


def test_the_alert_and_the_controller_use_the_same_xids() -> None:
    spec = NodeHealthSpec(enabled=True, prometheus_url=PROMETHEUS, cordon_xids=[79, 48])
    rules = health_rules(spec)
    assert set(rules.cordon_xids) == {48, 79}
    expr = next(
        a.expr
        for a in alerts(load_spec(health_config(cordonXids=[79, 48]), credentials=False).monitoring_scope())
        if a.name == "GPUNodeUnhealthy"
    )
    xid = f'{XID}{{namespace="{EXPORTER_NAMESPACE}"}}'
    assert f"{xid} == 48 or {xid} == 79)" in expr and f"{xid} == 94" not in expr


# --- the stand-ins against the facts they model -------------------------------------------


def test_the_prometheus_stand_in_answers_in_the_shape_of_web_api_v1() -> None:
    # web/api/v1/api.go: Response{Status "status", Data "data"}; QueryData{ResultType "resultType",
    # Result "result"}; promql/value.go: a Sample marshals as {"metric": ..., "value": [t, "v"]}, the
    # value by strconv.FormatFloat(f, 'f', -1, 64): "79", "0.5", "1e-07" written out.
    answer = vector([({"Hostname": "n1"}, 79), ({"Hostname": "n2"}, 0.5), ({"Hostname": "n3"}, 1e-7)])
    assert answer == {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"Hostname": "n1"}, "value": [NOW, "79"]},
                {"metric": {"Hostname": "n2"}, "value": [NOW, "0.5"]},
                {"metric": {"Hostname": "n3"}, "value": [NOW, "0.0000001"]},
            ],
        },
    }


def test_the_node_api_stand_in_merges_patches_as_rfc_7386_says() -> None:
    # RFC 7386 section 3's example: members merge, null removes, a list replaces.
    target = {"title": "Goodbye!", "author": {"givenName": "John", "familyName": "Doe"}, "tags": ["example", "sample"]}
    patch = {"title": "Hello!", "author": {"familyName": None}, "tags": ["example"], "phoneNumber": "+01-123-456-7890"}
    assert merge_patch(target, patch) == {
        "title": "Hello!",
        "author": {"givenName": "John"},
        "tags": ["example"],
        "phoneNumber": "+01-123-456-7890",
    }


# --- the controller end to end --------------------------------------------------------------


def run_guard(base: str, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "trainer.health.guard",
        "--once",
        f"--prometheus={base}",
        f"--api={base}",
        "--pool-selector=ack-training-platform/pool=gpu",
        f"--exporter-namespace={EXPORTER_NAMESPACE}",
        *extra,
    ]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


def pool(*names: str, cordoned: tuple[str, ...] = ()) -> dict[str, dict]:
    return {n: node(n, unschedulable=n in cordoned) for n in names}


def test_the_controller_cordons_labels_and_annotates_the_failing_node_only() -> None:
    backends = Backends(
        queries=instant_vectors(14), ranges=xid_ranges(14), nodes=pool("gpu-a", "gpu-b", "gpu-c", "gpu-d")
    )
    backends.nodes["cpu-1"] = node("cpu-1", pool="system")
    with serving(backends) as base:
        done = run_guard(base, "--max-cordoned-share=0.5")
    assert done.returncode == 0, done.stderr
    cordoned = {n for n, obj in backends.nodes.items() if obj["spec"].get("unschedulable")}
    assert cordoned == {"gpu-a", "gpu-d"}
    a = backends.nodes["gpu-a"]
    assert a["metadata"]["labels"] == {"ack-training-platform/pool": "gpu", HEALTH_LABEL: FAILED}
    assert a["metadata"]["annotations"][REASON_ANNOTATION] == "gpu 3 (GPU-gpu-a-3): XID 79 (GPU has fallen off the bus)"
    assert a["metadata"]["annotations"][SINCE_ANNOTATION].endswith("Z")
    assert {kind for _, kind, _ in backends.patches} == {"application/merge-patch+json"}
    assert "cordoned gpu-a: gpu 3" in done.stdout
    # It asked for every signal, the counters as their growth over the window.
    selector = f'{{namespace="{EXPORTER_NAMESPACE}"}}'
    assert f"{XID}{selector}[10m]" in backends.asked
    assert f"increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{selector}[10m])" in backends.asked


def test_the_controller_never_cordons_for_a_team_pods_series_of_the_exporters_names() -> None:
    # A team's pod serves XID 79 and a double-bit ECC error naming gpu-c, which is healthy; gpu-a's
    # XID 79 and gpu-d's ECC error come from the exporter's namespace.
    queries, ranges = instant_vectors(14), xid_ranges(14)
    team = {"gpu": "0", "UUID": "GPU-gpu-c-0", "Hostname": "gpu-c", "namespace": TEAM}
    ranges[f"{XID}[10m]"].append(({**team, "err_code": "79", "exported_namespace": EXPORTER_NAMESPACE}, [79.0] * 10))
    queries["increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m])"].append((team, 5))
    queries["DCGM_FI_DEV_ROW_REMAP_FAILURE"].append((team, 1))
    backends = Backends(queries=queries, ranges=ranges, nodes=pool("gpu-a", "gpu-b", "gpu-c", "gpu-d"))
    with serving(backends) as base:
        done = run_guard(base, "--max-cordoned-share=1")
    assert done.returncode == 0, done.stderr
    assert sorted(name for name, _, _ in backends.patches) == ["gpu-a", "gpu-d"]
    assert not backends.nodes["gpu-c"]["spec"].get("unschedulable")
    # Every query names the exporter's namespace.
    assert backends.asked and all(f'namespace="{EXPORTER_NAMESPACE}"' in q for q in backends.asked)


def test_the_prometheus_stand_in_honours_a_namespace_equality_matcher_only() -> None:
    backends = Backends(queries={"up": [({"namespace": "a"}, 1), ({"namespace": "b"}, 2), ({}, 3)]})
    with serving(backends) as base:
        assert [r["value"][1] for r in query(base, 'up{namespace="a"}')] == ["1"]
        assert [r["value"][1] for r in query(base, "up")] == ["1", "2", "3"]
        for unmodelled in ('up{namespace!="a"}', 'up{namespace=~"a"}', 'up{job="a"}', 'up{namespace="a",job="b"}'):
            with pytest.raises(GuardError, match="HTTP 400"):
                query(base, unmodelled)


def test_the_controller_needs_the_exporters_namespace_as_a_dns_label() -> None:
    done = run_guard("http://127.0.0.1:9", '--exporter-namespace=team-a"} or vector(79) #')
    assert done.returncode == 2
    assert "--exporter-namespace must be a namespace's name (a DNS label)" in done.stderr


def test_the_controller_cordons_for_a_node_xid_the_gauge_no_longer_shows() -> None:
    # gpu-e's gauge has read XID 45 for eight minutes; the XID 74 before it is within the window.
    assert [v for labels, v in instant_vectors(14)[XID] if labels["Hostname"] == "gpu-e" and v] == [45]
    backends = Backends(queries=instant_vectors(14), ranges=xid_ranges(14), nodes=pool("gpu-b", "gpu-e"))
    with serving(backends) as base:
        done = run_guard(base, "--max-cordoned-share=1")
    assert done.returncode == 0, done.stderr
    assert [name for name, _, _ in backends.patches] == ["gpu-e"]
    reason = backends.nodes["gpu-e"]["metadata"]["annotations"][REASON_ANNOTATION]
    assert reason == "gpu 2 (GPU-gpu-e-2): XID 74 (NVLink error)"


def test_the_controller_never_cordons_more_than_its_share_of_the_pool() -> None:
    # Four nodes at a quarter: one may be out, and one already is (cordoned by someone else).
    backends = Backends(
        queries=instant_vectors(14),
        ranges=xid_ranges(14),
        nodes=pool("gpu-a", "gpu-b", "gpu-c", "gpu-d", cordoned=("gpu-c",)),
    )
    with serving(backends) as base:
        done = run_guard(base, "--max-cordoned-share=0.25")
    assert done.returncode == 0, done.stderr
    assert backends.patches == []
    assert "not cordoning gpu-a (pool budget of 25% spent)" in done.stdout
    # The node someone else cordoned stays as it was: the controller patches no node it did not fail.
    assert backends.nodes["gpu-c"] == node("gpu-c", unschedulable=True)


def test_the_controller_leaves_a_healthy_pool_alone() -> None:
    backends = Backends(
        queries=instant_vectors(3), ranges=xid_ranges(3), nodes=pool("gpu-a", "gpu-b", cordoned=("gpu-b",))
    )
    with serving(backends) as base:
        done = run_guard(base)
    assert done.returncode == 0, done.stderr
    assert backends.patches == []
    assert backends.nodes["gpu-b"]["spec"] == {"unschedulable": True}


def test_the_controller_says_so_when_the_series_name_no_node_of_the_pool() -> None:
    # An exporter without NODE_NAME labels its series with the machine's hostname, which on ACK is
    # not the node's name: no node could ever be judged, and the log says why.
    backends = Backends(
        queries={
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": [
                ({"Hostname": "iZbp1abc", "gpu": "0", "namespace": EXPORTER_NAMESPACE}, 0)
            ]
        },
        nodes=pool("cn-hangzhou.10.0.0.1"),
    )
    with serving(backends) as base:
        done = run_guard(base)
    assert done.returncode == 0, done.stderr
    assert "no DCGM series names a node of the pool (they name iZbp1abc)" in done.stdout
    with serving(Backends(queries=instant_vectors(3), ranges=xid_ranges(3), nodes=pool("gpu-a"))) as base:
        assert "no DCGM series names" not in run_guard(base).stdout


def test_the_controller_fails_the_pass_when_prometheus_is_unreachable() -> None:
    done = run_guard("http://127.0.0.1:9")
    assert done.returncode == 1
    assert "pass failed, retrying next interval" in done.stdout


@pytest.mark.parametrize(("size", "share", "budget"), [(4, 0.1, 1), (10, 0.1, 1), (32, 0.1, 3), (8, 0.5, 4)])
def test_the_cordon_budget_is_a_share_of_the_pool_and_at_least_one_node(size: int, share: float, budget: int) -> None:
    assert cordon_budget(size, share) == budget


# --- the stack key ------------------------------------------------------------------------


def test_node_health_without_a_gpu_pool_names_the_key() -> None:
    config = stack_config("local")
    config[cfg("monitoring")] = {
        "prometheus": "operator",
        "nodeHealth": {"enabled": True, "prometheusUrl": PROMETHEUS, "exporterNamespace": EXPORTER_NAMESPACE},
    }
    with pytest.raises(ConfigError) as err:
        load_spec(config, credentials=False)
    assert "monitoring.nodeHealth.enabled: there is no gpuPool whose nodes it could watch" in str(err.value)


@pytest.mark.parametrize(
    ("health", "message"),
    [
        (
            {"enabled": True},
            "monitoring.nodeHealth.prometheusUrl: the controller reads the DCGM exporter's series from Prometheus",
        ),
        (
            {"enabled": True, "prometheusUrl": PROMETHEUS, "cordonXids": [79, 13]},
            "monitoring.nodeHealth.cordonXids: XID 13 is raised by a job's own fault",
        ),
        ({"prometheusUrl": "prometheus:9090"}, "'prometheus:9090' is not a URL"),
        (
            {"enabled": True, "prometheusUrl": PROMETHEUS},
            "monitoring.nodeHealth.exporterNamespace: give the namespace the DCGM exporter's pods run in (such as "
            "gpu-operator): Prometheus also scrapes the teams' training pods, and a team's pod could serve series of "
            "the same names",
        ),
        (
            {"enabled": True, "prometheusUrl": PROMETHEUS, "exporterNamespace": "GPU_Operator"},
            "monitoring.nodeHealth.exporterNamespace",
        ),
        ({"maxCordonedShare": 0}, "monitoring.nodeHealth.maxCordonedShare"),
        ({"image": "registry.example.com/platform/trainer:latest"}, "monitoring.nodeHealth.image"),
        ({"image": "registry.example.com/platform/trainer:v1", "imageTag": "v1"}, "give image or imageTag, not both"),
    ],
)
def test_bad_node_health_settings_name_the_key(health: dict, message: str) -> None:
    config = operator_config()
    config[cfg("monitoring")]["nodeHealth"] = health
    with pytest.raises(ConfigError) as err:
        load_spec(config, credentials=False)
    assert message in str(err.value)


# --- the objects, planned -------------------------------------------------------------------


def test_the_controller_is_deployed_with_nodes_get_list_patch_only(run_stack) -> None:
    plan = run_stack(health_config())
    role = plan.one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole").inputs
    assert (
        role["rules"] == NODE_RULES == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}]
    )
    binding = plan.one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding").inputs
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-node-guard", "namespace": "training"}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    deployment = plan.one("kubernetes:apps/v1:Deployment", "gpu-node-guard-deployment")
    pod = deployment.inputs["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "gpu-node-guard"
    assert pod["nodeSelector"] == {"ack-training-platform/pool": "system"}
    container = pod["containers"][0]
    assert container["command"] == ["python", "-m", "trainer.health.guard"]
    assert f"--prometheus={PROMETHEUS}" in container["args"]
    assert "--pool-selector=ack-training-platform/pool=gpu" in container["args"]
    assert "--max-cordoned-share=0.1" in container["args"]
    # The training image, pinned, from the stack's registry.
    assert container["image"] == "<registry host, known after deploy>/ml/trainer:v0.1.0"
    rule = plan.one("kubernetes:monitoring.coreos.com/v1:PrometheusRule").inputs
    assert "GPUNodeUnhealthy" in [r["alert"] for r in rule["spec"]["groups"][0]["rules"]]


def test_the_controller_runs_the_image_its_key_names(run_stack) -> None:
    own = "registry.example.com/platform/trainer:v0.2.0"
    plan = run_stack(health_config(image=own))
    pod = plan.one("kubernetes:apps/v1:Deployment", "gpu-node-guard-deployment").inputs["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == own


def test_without_a_job_of_the_bundled_trainer_the_controller_needs_its_image() -> None:
    config = health_config()
    for job in config[cfg("jobs")]:
        job.pop("imageTag", None)
        job.update(image="registry.example.com/team/own:v1", command=["python", "train.py"])
    with pytest.raises(ConfigError) as err:
        load_spec(config, credentials=False)
    assert "monitoring.nodeHealth.image: it runs the platform's trainer package, and no job of the stack runs" in str(
        err.value
    )
    config[cfg("monitoring")]["nodeHealth"]["image"] = "registry.example.com/platform/trainer:v0.2.0"
    assert load_spec(config, credentials=False).monitoring_scope().trainer_image == (
        "registry.example.com/platform/trainer:v0.2.0",
        None,
    )


def test_no_controller_unless_enabled(run_stack) -> None:
    plan = run_stack(stack_config("dev"), "dev")
    assert not plan.of_type("kubernetes:apps/v1:Deployment")
    assert not plan.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")


def test_the_recorded_series_are_labelled_as_the_exporter_labels_them() -> None:
    assert gpu("gpu-a", 3) == (
        'gpu="3",UUID="GPU-gpu-a-3",pci_bus_id="00000000:13:00.0",device="nvidia3",'
        'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-a",namespace="gpu-operator"'
    )
    # The XID gauge's err_code and err_msg make each XID a series of its own, stale once another is read.
    xids = {k: v for k, v in RECORDED.items() if k.startswith(f"{XID}{{{gpu('gpu-e', 2)},")}
    assert xids == {
        f'{XID}{{{gpu("gpu-e", 2)},err_code="0",err_msg="No Error"}}': "0 0 0 0 0 stale" + " _" * 11,
        f'{XID}{{{gpu("gpu-e", 2)},err_code="45",err_msg="Preemptive cleanup, due to previous errors -- Most likely '
        f'to see when running multiple cuda"}}': "_ _ _ _ _ _" + " 45" * 11,
        f'{XID}{{{gpu("gpu-e", 2)},err_code="74",err_msg="NVLINK Error"}}': "_ _ _ _ _ 74 stale" + " _" * 10,
    }


def test_a_failed_node_check_alone_never_cordons() -> None:
    # Any team's job can add an init container named nodecheck that exits 69: a pod's report is no verdict.
    verdicts = node_verdicts([Sample(NODE_CHECK, {NODE_LABEL: "gpu-c"}, 1), *samples_at(3)])
    assert not verdicts["gpu-c"].cordon


def test_a_node_with_a_failed_node_check_and_clean_dcgm_series_is_not_cordoned() -> None:
    # kube-state-metrics says gpu-c's check failed; its DCGM series are clean.
    queries = instant_vectors(3)
    queries[FAILED_NODE_CHECKS] = [({"node": "gpu-c", "namespace": "team-a", "pod": "fake-worker-0"}, 69)]
    backends = Backends(queries=queries, ranges=xid_ranges(3), nodes=pool("gpu-a", "gpu-b", "gpu-c", "gpu-d"))
    with serving(backends) as base:
        done = run_guard(base, "--max-cordoned-share=0.5")
    assert done.returncode == 0, done.stderr
    assert backends.patches == []
    # The controller reads the platform's exporter only, never a pod's status.
    assert backends.asked and not [q for q in backends.asked if "kube_pod" in q]


def test_the_node_check_alert_names_the_node_and_the_pod(tmp_path) -> None:
    (alert,) = [
        a
        for a in alerts(load_spec(health_config(), credentials=False).monitoring_scope())
        if a.name == "GPUNodeCheckFailed"
    ]
    assert alert.severity == "warning"
    failed = 'namespace="training",pod="gpt-worker-0",uid="u1"'
    passed = 'namespace="training",pod="gpt-master-0",uid="u2"'
    exitcode = "kube_pod_init_container_status_last_terminated_exitcode"
    series = {
        f'{exitcode}{{{failed},container="nodecheck"}}': "69x5",
        f'kube_pod_info{{{failed},node="gpu-c",host_ip="10.0.0.3"}}': "1x5",
        # Another pod whose check passed, on another node.
        f'{exitcode}{{{passed},container="nodecheck"}}': "0x5",
        f'kube_pod_info{{{passed},node="gpu-a"}}': "1x5",
    }
    quiet = {s: v for s, v in series.items() if "gpt-master-0" in s}
    labels = {"node": "gpu-c", "namespace": "training", "pod": "gpt-worker-0", "severity": "warning"}
    run_promtool_cases(tmp_path, [alert], {}, [(alert.name, "4m", series, labels), (alert.name, "4m", quiet, None)])


def test_the_service_account_token_is_read_at_each_request(tmp_path) -> None:
    # The kubelet rotates a projected token in its file; the loop must send the current one.
    token = tmp_path / "token"
    token.write_text("first\n")
    backends = Backends(nodes=pool("gpu-a"))
    with serving(backends) as base:
        api = KubeApi(base, token)
        api.nodes("ack-training-platform/pool=gpu")
        token.write_text("second\n")
        api.nodes("ack-training-platform/pool=gpu")
    assert backends.tokens == ["Bearer first", "Bearer second"]


def test_the_deployed_command_line_runs_the_controller(run_stack) -> None:
    # The Deployment's own command and arguments, with Prometheus and the API served by the stand-ins.
    plan = run_stack(health_config(cordonXids=[79]))
    container = plan.one("kubernetes:apps/v1:Deployment", "gpu-node-guard-deployment").inputs["spec"]["template"][
        "spec"
    ]["containers"][0]
    backends = Backends(
        queries=instant_vectors(14), ranges=xid_ranges(14), nodes=pool(*(f"gpu-{x}" for x in "abcdefghij"))
    )
    with serving(backends) as base:
        args = [a.replace(PROMETHEUS, base) for a in container["args"] if not a.startswith("--interval")]
        cmd = [sys.executable, *container["command"][1:], *args, f"--api={base}", "--once"]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # XID 79 is listed; gpu-d's ECC error cordons too; gpu-b's XID 13 does not. Ten nodes at a tenth: one.
    assert [name for name, _, _ in backends.patches] == ["gpu-a"]
    assert "not cordoning gpu-d (pool budget of 10% spent)" in done.stdout

"""Teams under Pulumi's mocks, read as policy: no team's objects reach another's, and every
pod the stacks apply passes Pod Security ``baseline``, which every namespace enforces."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import ROOT, STACKS, cfg, stack_config
from network_policy import Endpoint, allowed
from pod_security import baseline_violations, pod_specs
from test_teams import with_teams

from components.config.kinds import V2_FRAMEWORKS
from components.manifests import runtime_name
from components.manifests.base import POD_SECURITY
from components.manifests.fabrics import ERDMA
from components.manifests.monitoring.tensorboard import TENSORBOARD_POD
from components.manifests.tenancy.teams import DNS_PEER, JOB_LABEL, JOB_USER_RULES, TEAM_LABEL
from components.plan.command import with_unset_credentials
from components.plan.runner import run_program

NS = "kubernetes:core/v1:Namespace"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
PV = "kubernetes:core/v1:PersistentVolume"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
QUOTA = "kubernetes:core/v1:ResourceQuota"
JOB = "kubernetes:kubeflow.org/v1:PyTorchJob"
TRAINJOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
PROD_TEAMS = {t["name"]: t for t in stack_config("prod")[cfg("teams")]}


def _ns(resource) -> str | None:
    return resource.inputs["metadata"].get("namespace")


@pytest.fixture(scope="module")
def prod() -> Any:
    """The prod stack's plan, shared by the read-only policy checks below."""
    return run_program(with_unset_credentials(stack_config("prod"))[0], stack="prod", project_dir=ROOT)


# What each namespace of the prod stack enforces: 'llm' runs eRDMA jobs (rdma: true), whose pods are
# unprivileged on the pod network, so it enforces baseline like the others.
PROD_ENFORCE = {"llm": "baseline", "vision": "baseline", "training": "baseline"}


def test_each_team_gets_its_namespace_quota_and_role(prod) -> None:
    namespaces = {n.inputs["metadata"]["name"]: n.inputs["metadata"]["labels"] for n in prod.of_type(NS)}
    assert {name: labels[f"{POD_SECURITY}/enforce"] for name, labels in namespaces.items()} == PROD_ENFORCE
    for name, team in PROD_TEAMS.items():
        labels = namespaces[name]
        assert labels[TEAM_LABEL] == name
        # The eRDMA team's too: its pods are unprivileged, on the pod network.
        assert {k: v for k, v in labels.items() if k.startswith(POD_SECURITY)} == {
            f"{POD_SECURITY}/enforce": "baseline",
            f"{POD_SECURITY}/warn": "restricted",
            f"{POD_SECURITY}/audit": "restricted",
        }
        quota = next(q for q in prod.of_type(QUOTA) if _ns(q) == name).inputs["spec"]["hard"]
        assert quota["requests.nvidia.com/gpu"] == str(team["quota"]["gpus"])
        assert quota["limits.memory"] == team["quota"]["memory"]
        role = next(r for r in prod.of_type(ROLE) if _ns(r) == name)
        assert role.inputs["rules"] == list(JOB_USER_RULES)
    # Nothing cluster-wide is granted to anyone.
    assert not [r for r in prod.resources if r.type.endswith((":ClusterRole", ":ClusterRoleBinding"))]


def test_job_users_can_read_no_secret_and_create_no_pod() -> None:
    for rule in JOB_USER_RULES:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert "secrets" not in rule["resources"]
        if "pods" in rule["resources"]:
            assert "create" not in rule["verbs"]
        assert not {"roles", "rolebindings", "pods/exec", "pods/attach"} & set(rule["resources"])


def test_job_users_can_open_their_tensorboard_with_port_forward_and_nothing_else() -> None:
    # kubectl port-forward svc/NAME gets the Service, then its pod, then creates pods/portforward.
    allowed = {(resource, verb) for rule in JOB_USER_RULES for resource in rule["resources"] for verb in rule["verbs"]}
    assert {("services", "get"), ("pods", "get"), ("pods/portforward", "create")} <= allowed
    # The kubelet's port-forward passes every NetworkPolicy: only the TensorBoard pod may be reached so.
    (forward,) = [rule for rule in JOB_USER_RULES if "pods/portforward" in rule["resources"]]
    assert forward["resourceNames"] == [TENSORBOARD_POD]


def test_each_team_reads_only_its_own_events_in_its_own_tensorboard(prod) -> None:
    deployments = {
        _ns(d): d for d in prod.of_type("kubernetes:apps/v1:StatefulSet") if d.name.endswith("tensorboard-statefulset")
    }
    assert sorted(deployments) == sorted([*PROD_TEAMS, "training"])
    for name, team in PROD_TEAMS.items():
        pod = deployments[name].inputs["spec"]["template"]["spec"]
        # As the team's uid: NFS tells teams apart by uid alone, so it reads what the team's jobs wrote.
        assert pod["securityContext"]["runAsUser"] == team["uid"]
        assert pod["securityContext"]["runAsGroup"] == team.get("gid", team["uid"])
        claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
        assert claims == {"checkpoints"}  # the team's output claim, in its own namespace
        assert all(v["persistentVolumeClaim"]["readOnly"] for v in pod["volumes"] if "persistentVolumeClaim" in v)
        service = prod.one("kubernetes:core/v1:Service", f"{name}-tensorboard-service")
        assert _ns(service) == name
        assert prod.outputs["teamTensorboards"][name] == f"kubectl -n {name} port-forward svc/tensorboard 6006:6006"


def test_role_bindings_name_only_the_teams_own_members(prod) -> None:
    bindings = prod.of_type(BINDING)
    assert sorted(_ns(b) for b in bindings) == sorted(PROD_TEAMS)
    for binding in bindings:
        team = PROD_TEAMS[_ns(binding)]
        assert binding.inputs["roleRef"]["kind"] == "Role"  # a namespaced Role, never a ClusterRole
        assert [(s["kind"], s["name"]) for s in binding.inputs["subjects"]] == [
            (m["kind"], m["name"]) for m in team["members"]
        ]


def test_claims_reach_only_the_teams_own_directory(prod) -> None:
    volumes = {v.inputs["metadata"]["name"]: v.inputs["spec"] for v in prod.of_type(PV)}
    for name in PROD_TEAMS:
        claims = [c for c in prod.of_type(PVC) if _ns(c) == name]
        assert sorted(c.inputs["metadata"]["name"] for c in claims) == ["checkpoints", "datasets"]
        for claim in claims:
            volume = volumes[claim.inputs["spec"]["volumeName"]]
            # Bound both ways: the volume is reserved for this claim in this namespace.
            assert volume["claimRef"]["namespace"] == name
            path = volume["csi"]["volumeAttributes"]["path"]
            assert path == f"/share/training/{name}/{claim.inputs['metadata']['name']}"
    # No volume's directory lies inside another's, so no claim reaches another team's files.
    paths = sorted(v["csi"]["volumeAttributes"]["path"] for v in volumes.values())
    assert all(not b.startswith(a + "/") for a in paths for b in paths)


def test_jobs_run_in_their_team_with_its_claims_and_uid(prod) -> None:
    config = stack_config("prod")
    for job in config[cfg("jobs")]:
        team = PROD_TEAMS[job["team"]]
        built = prod.one(JOB, job["name"]).inputs
        assert built["metadata"]["namespace"] == team["name"]
        for replica in built["spec"]["pytorchReplicaSpecs"].values():
            pod = replica["template"]["spec"]
            gid = team.get("gid", team["uid"])
            assert pod["securityContext"] == {"runAsUser": team["uid"], "runAsGroup": gid, "runAsNonRoot": True}
            claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
            in_namespace = {c.inputs["metadata"]["name"] for c in prod.of_type(PVC) if _ns(c) == team["name"]}
            assert claims <= in_namespace


def test_network_policies_keep_each_teams_pods_in(prod) -> None:
    policies = prod.of_type(POLICY)
    for name in PROD_TEAMS:
        own = {p.inputs["metadata"]["name"]: p.inputs["spec"] for p in policies if _ns(p) == name}
        assert own["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
        assert {"allow-dns", "allow-metrics-scrape"} <= own.keys()
    for policy in policies:
        spec = policy.inputs["spec"]
        for rule in [*spec.get("ingress", []), *spec.get("egress", [])]:
            # No rule is open to every source or destination, and none names an address block.
            assert rule.get("from") or rule.get("to")
            for peer in [*rule.get("from", []), *rule.get("to", [])]:
                # Another namespace only as the cluster's DNS or the ARMS agent's namespace.
                assert set(peer) == {"podSelector"} or peer in (DNS_PEER, ARMS_SCRAPER)
    for job in stack_config("prod")[cfg("jobs")]:
        policy = next(p for p in policies if p.inputs["metadata"]["name"] == f"job-{job['name']}")
        assert _ns(policy) == job["team"]
        selector = {"podSelector": {"matchLabels": {JOB_LABEL: job["name"]}}}
        assert policy.inputs["spec"]["ingress"] == [{"from": [selector]}]
        assert policy.inputs["spec"]["egress"] == [{"to": [selector]}]


ARMS_SCRAPER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "arms-prom"}}}
KUBE_DNS = Endpoint("kube-system", {"k8s-app": "kube-dns"})


def _trainer(team: str, job: str = "vit-finetune") -> Endpoint:
    return Endpoint(team, {"app.kubernetes.io/managed-by": "ack-training-platform", JOB_LABEL: job})


def test_team_pods_resolve_names_through_the_cluster_dns_only(prod) -> None:
    policies = [p.inputs for p in prod.of_type(POLICY)]
    pod = _trainer("vision")
    # Both transports: UDP for most answers, TCP for those too large for a datagram.
    assert allowed(policies, pod, KUBE_DNS, "UDP", 53)
    assert allowed(policies, pod, KUBE_DNS, "TCP", 53)
    # Port 53 anywhere else is a tunnel out: another address, another namespace's pod, a look-alike.
    assert not allowed(policies, pod, Endpoint(None), "UDP", 53)
    assert not allowed(policies, pod, Endpoint(None), "TCP", 53)
    assert not allowed(policies, pod, Endpoint("llm", {"k8s-app": "kube-dns"}), "UDP", 53)
    assert not allowed(policies, pod, Endpoint("kube-system", {"k8s-app": "other"}), "UDP", 53)
    assert not allowed(policies, pod, KUBE_DNS, "TCP", 443)


def test_only_the_monitoring_agent_scrapes_the_teams_trainers(prod) -> None:
    policies = [p.inputs for p in prod.of_type(POLICY)]
    pod = _trainer("vision")
    assert allowed(policies, Endpoint("arms-prom", {"app": "agent"}), pod, "TCP", 9464)
    assert not allowed(policies, Endpoint("llm", {}), pod, "TCP", 9464)
    assert not allowed(policies, Endpoint("vision", {}), pod, "TCP", 9464)
    assert not allowed(policies, Endpoint(None), pod, "TCP", 9464)
    assert not allowed(policies, Endpoint("arms-prom", {}), pod, "TCP", 23456)
    # A job's pods reach each other; another job's pods in the same team do not.
    assert allowed(policies, pod, _trainer("vision"), "TCP", 23456)
    assert not allowed(policies, _trainer("vision", "other"), pod, "TCP", 23456)


def test_the_scraper_namespace_follows_the_prometheus(run_stack) -> None:
    config = with_teams()
    config[cfg("monitoring")] = {"prometheus": "operator", "scraperNamespace": "monitoring"}
    plan = run_stack(config)
    scrape = next(p for p in plan.of_type(POLICY) if p.inputs["metadata"]["name"] == "allow-metrics-scrape")
    assert scrape.inputs["spec"]["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    # An operator's Prometheus of unknown namespace: nothing may scrape.
    config[cfg("monitoring")] = {"prometheus": "operator"}
    names = {p.inputs["metadata"]["name"] for p in run_stack(config).of_type(POLICY)}
    assert "allow-metrics-scrape" not in names and "allow-dns" in names


def test_flannel_teams_get_no_network_policies(run_stack) -> None:
    config = with_teams(network="flannel")
    config[cfg("teams")] = config[cfg("teams")][:1]
    plan = run_stack(config)
    assert not plan.of_type(POLICY)
    assert plan.one(JOB).inputs["metadata"]["namespace"] == "vision"


def test_v2_team_jobs_join_their_teams_queue(run_stack) -> None:
    config = with_teams(backend="v2")
    config[cfg("trainerV2")] = {"kueue": {"enabled": True}}
    plan = run_stack(config)
    job = plan.one(TRAINJOB).inputs
    assert job["metadata"]["namespace"] == "vision"
    queue = job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    queues = [r.inputs for r in plan.resources if r.type.endswith(":LocalQueue")]
    local = next(q for q in queues if q["metadata"]["namespace"] == "vision" and q["metadata"]["name"] == queue)
    cluster_queue = next(
        r.inputs
        for r in plan.resources
        if r.type.endswith(":ClusterQueue") and r.inputs["metadata"]["name"] == local["spec"]["clusterQueue"]
    )
    # Each team's queue admits its own namespace only, up to its own quota.
    assert cluster_queue["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "vision"}}
    quota = {
        f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]}
        for f in cluster_queue["spec"]["resourceGroups"][0]["flavors"]
    }
    assert quota == {
        "default-flavor": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "0"},
        "gpu": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2"},
    }
    assert sorted((q["metadata"]["namespace"], q["metadata"]["name"], q["spec"]["clusterQueue"]) for q in queues) == [
        ("speech", "default", "speech"),
        ("speech", "training", "speech"),
        ("vision", "default", "vision"),
        ("vision", "training", "vision"),
    ]


def _baseline_failures(objects: list[dict[str, Any]]) -> list[str]:
    """Every pod template of ``objects`` that would not pass Pod Security ``baseline``: none may,
    as every namespace the platform applies enforces it."""
    failures = []
    for obj in objects:
        for path, pod, metadata in pod_specs(obj):
            if problems := baseline_violations(pod, metadata):
                failures.append(
                    f"{obj['kind']} {obj['metadata'].get('namespace')}/{obj['metadata']['name']}{path}: {problems}"
                )
    return failures


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_passes_baseline(run_stack, stack: str) -> None:
    plan = run_stack(stack_config(stack), stack)
    assert _baseline_failures(plan.kubernetes_objects()) == []
    # Every namespace the stack creates enforces it.
    for namespace in plan.of_type(NS):
        assert namespace.inputs["metadata"]["labels"].get(f"{POD_SECURITY}/enforce") == "baseline"


def test_v2_erdma_runtimes_pass_baseline(run_stack) -> None:
    config = stack_config("prod")
    netbench = config[cfg("jobs")][1]
    netbench.update(backend="v2")
    del netbench["restartPolicy"]
    objects = run_stack(config, "prod").kubernetes_objects()
    runtimes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterTrainingRuntime"}
    assert {runtime_name(ERDMA, framework) for framework in V2_FRAMEWORKS} <= set(runtimes)
    assert _baseline_failures(objects) == []


def test_erdma_jobs_pass_baseline_and_a_privileged_one_is_caught(prod) -> None:
    objects = prod.kubernetes_objects()
    erdma = [o for o in objects if o["kind"] == "PyTorchJob" and "aliyun/erdma" in json.dumps(o)]
    assert sorted(o["metadata"]["name"] for o in erdma) == ["gpt-pretrain", "nccl-check"]
    assert _baseline_failures(objects) == []
    # The shape eRDMA pods once had, privileged on the host network, is named.
    for job in erdma:
        for spec in job["spec"]["pytorchReplicaSpecs"].values():
            pod = spec["template"]["spec"]
            pod.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
            pod["containers"][0]["securityContext"] = {"privileged": True}
    failures = _baseline_failures(objects)
    assert sorted({f.split(".spec")[0] for f in failures}) == [
        "PyTorchJob llm/gpt-pretrain",
        "PyTorchJob llm/nccl-check",
    ]
    assert all("hostNetwork: true" in f and "container pytorch: privileged" in f for f in failures)


BAD_PODS = [
    ({"hostNetwork": True}, "hostNetwork: true"),
    ({"hostPID": True}, "hostPID: true"),
    ({"hostIPC": True}, "hostIPC: true"),
    ({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}, "hostPath volume root"),
    ({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}, "sysctl kernel.msgmax"),
    ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}, "pod: seccomp Unconfined"),
    ({"securityContext": {"windowsOptions": {"hostProcess": True}}}, "pod: hostProcess"),
    ({"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}, "pod: SELinux {'type': 'spc_t'}"),
]
BAD_CONTAINERS = [
    ({"securityContext": {"privileged": True}}, "container c: privileged"),
    ({"securityContext": {"capabilities": {"add": ["IPC_LOCK", "CHOWN"]}}}, "container c: capabilities ['IPC_LOCK']"),
    ({"securityContext": {"procMount": "Unmasked"}}, "container c: procMount Unmasked"),
    ({"ports": [{"containerPort": 80, "hostPort": 80}]}, "container c: hostPort 80"),
    ({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}, "container c: AppArmor Unconfined"),
]


@pytest.mark.parametrize(("pod", "problem"), BAD_PODS, ids=[p for _, p in BAD_PODS])
def test_baseline_check_catches_pod_fields(pod: dict, problem: str) -> None:
    assert baseline_violations({"containers": [{"name": "c"}], **pod}) == [problem]


@pytest.mark.parametrize(("container", "problem"), BAD_CONTAINERS, ids=[p for _, p in BAD_CONTAINERS])
def test_baseline_check_catches_container_fields(container: dict, problem: str) -> None:
    assert baseline_violations({"containers": [{"name": "c", **container}]}) == [problem]
    assert baseline_violations({"containers": [], "initContainers": [{"name": "c", **container}]}) == [problem]


def test_baseline_check_passes_what_baseline_allows() -> None:
    pod = {
        "containers": [
            {
                "name": "c",
                "securityContext": {"capabilities": {"add": ["CHOWN"]}, "seccompProfile": {"type": "RuntimeDefault"}},
                "ports": [{"containerPort": 9464}],
            }
        ],
        "securityContext": {"runAsUser": 2001, "sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]},
        "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "x"}}, {"name": "m", "emptyDir": {}}],
    }
    assert baseline_violations(pod) == []
    assert baseline_violations(
        pod, {"annotations": {f"{'container.apparmor.security.beta.kubernetes.io/'}c": "unconfined"}}
    )


def test_directories_are_handed_to_each_team_while_nas_trusts_root(run_stack) -> None:
    config = stack_config("prod")
    config[cfg("storage")]["nas"]["userAccess"] = "no_squash"
    plan = run_stack(config, "prod")
    owners = {_ns(j): j for j in plan.of_type("kubernetes:batch/v1:Job")}
    assert sorted(owners) == sorted(PROD_TEAMS)
    for name, owner in owners.items():
        pod = owner.inputs["spec"]["template"]["spec"]
        team = PROD_TEAMS[name]
        assert f"chown {team['uid']}:{team['uid']} /mnt/data /mnt/output" in pod["containers"][0]["command"][-1]
        assert baseline_violations(pod) == []
        claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
        assert claims == {"datasets", "checkpoints"}
        # The team's jobs start once their directories are theirs; other teams' jobs do not wait.
        for job in plan.of_type(JOB):
            assert (owner.urn in job.dependencies) == (_ns(job) == name)
    # Under root_squash root may chown nothing: no such Job is planned.
    assert not run_stack(stack_config("prod"), "prod").of_type("kubernetes:batch/v1:Job")


def test_offline_plan_writes_every_teams_objects(prod, tmp_path) -> None:
    from components.plan.command import write_manifests

    written = {p.name for p in write_manifests(prod, tmp_path)}
    assert len(written) == len(prod.kubernetes_objects())
    for name in PROD_TEAMS:
        assert {
            f"6-role-{name}-job-user.yaml",
            f"6-rolebinding-{name}-job-user.yaml",
            f"3-resourcequota-{name}-team-quota.yaml",
            f"5-persistentvolumeclaim-{name}-datasets.yaml",
            f"6-networkpolicy-{name}-default-deny.yaml",
        } <= written

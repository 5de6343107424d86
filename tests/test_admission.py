"""Each team's admission policy, evaluated as the API server would (real CEL, cel-python) on the
policies the plan deploys: every pod the platform emits into a team's namespace is admitted, and
each hostile pod, made from the team's own job templates one change at a time, is refused."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from admission_cel import (
    admit_mutations,
    admitted_by_policies,
    binds,
    matches,
    refusals,
    request_of,
    template_pod,
    v1_pods,
    v2_pods,
)
from conftest import ROOT, cfg, stack_config, with_pull_secret
from hostile_pods import ATTACKS, Attack, c0
from pod_security import BASELINE_CAPABILITIES, SAFE_SYSCTLS, SELINUX_TYPES, baseline_violations
from test_teams import with_teams
from test_tenancy import BAD_CONTAINERS, BAD_PODS

from components.manifests.base import POD_SECURITY
from components.manifests.tenancy import admission, pod_rules
from components.plan.command import with_unset_credentials
from components.plan.runner import run_program

VAP = "ValidatingAdmissionPolicy"
BINDING = "ValidatingAdmissionPolicyBinding"


def _plan(config: dict[str, Any], stack: str = "prod") -> list[dict[str, Any]]:
    return run_program(with_unset_credentials(config)[0], stack=stack, project_dir=ROOT).kubernetes_objects()


def _with_keys() -> dict[str, Any]:
    """The prod stack with a pull secret, a generated checkpoint key for every job, and one job
    reading a Secret of its own into its environment."""
    config = with_pull_secret(stack_config("prod"))
    for job in config[cfg("jobs")]:
        job["checkpointKey"] = {}
    config[cfg("jobs")][0]["env"] = {"WANDB_API_KEY": {"secretKeyRef": {"name": "wandb", "key": "token"}}}
    return config


@pytest.fixture(scope="module")
def prod() -> list[dict[str, Any]]:
    return _plan(_with_keys())


def _namespaces(objects: list[dict[str, Any]]) -> dict[str, str]:
    """Each namespace's Pod Security ``enforce`` level."""
    return {
        o["metadata"]["name"]: o["metadata"]["labels"].get(f"{POD_SECURITY}/enforce")
        for o in objects
        if o["kind"] == "Namespace"
    }


def _teams(objects: list[dict[str, Any]]) -> set[str]:
    return {o["metadata"]["labels"]["ack-training-platform/team"] for o in objects if o["kind"] == VAP}


POD_BEARING = {"Pod", "ReplicaSet", "DaemonSet", "CronJob", "ReplicationController", "JobSet"}
"""Kinds that make pods and that :func:`platform_pods` does not model: one in a team's namespace
fails the check rather than going unchecked."""


def platform_pods(objects: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """(namespace, what, pod) for every pod the plan's objects make in a team's namespace, as the
    API server sees it after its mutating admission."""
    teams = _teams(objects)
    runtimes = {(o["kind"], o["metadata"]["name"]): o for o in objects if o["kind"].endswith("TrainingRuntime")}
    # A runtime makes no pod of its own: its TrainJobs do, through JobSet.
    automount = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o.get("automountServiceAccountToken", True)
        for o in objects
        if o["kind"] == "ServiceAccount"
    }
    found = []
    for obj in objects:
        namespace = obj["metadata"].get("namespace")
        if namespace not in teams:
            continue
        kind = obj["kind"]
        if kind.endswith("TrainingRuntime"):
            continue
        if kind == "TrainJob":
            ref = obj["spec"]["runtimeRef"]
            pods = v2_pods(obj, runtimes[(ref["kind"], ref["name"])])
        elif any(key.endswith("ReplicaSpecs") for key in obj.get("spec", {})):
            pods = v1_pods(obj)
        elif kind == "Deployment":
            pods = [template_pod(obj, {"pod-template-hash": "5d8f7c"}, "ReplicaSet")]
        elif kind == "Job":
            name = obj["metadata"]["name"]
            pods = [template_pod(obj, {"batch.kubernetes.io/job-name": name, "job-name": name}, "Job")]
        elif kind == "StatefulSet":
            name = obj["metadata"]["name"]
            labels = {"statefulset.kubernetes.io/pod-name": f"{name}-0", "controller-revision-hash": f"{name}-7c9d"}
            pods = [template_pod(obj, labels, "StatefulSet")]
        elif kind in POD_BEARING or "template" in obj.get("spec", {}) or "jobTemplate" in obj.get("spec", {}):
            raise AssertionError(f"{kind} {namespace}/{obj['metadata']['name']} makes pods this check does not model")
        else:
            continue
        accounts = {name: value for (ns, name), value in automount.items() if ns == namespace}
        for pod in pods:
            pod["spec"] = admit_mutations(pod["spec"], accounts)
            found.append((namespace, f"{kind} {namespace}/{obj['metadata']['name']}", pod))
    return found


def refused(objects: list[dict[str, Any]], namespace: str, pod: dict[str, Any]) -> list[str]:
    """Why what the plan deploys refuses ``pod`` in ``namespace``: the namespace's Pod Security
    level, then every bound admission policy."""
    why = []
    if _namespaces(objects).get(namespace) == "baseline":
        why += [f"Pod Security baseline: {v}" for v in baseline_violations(pod["spec"], pod["metadata"])]
    return why + admitted_by_policies(objects, namespace, pod)


def platform_refusals(objects: list[dict[str, Any]]) -> list[str]:
    pods = platform_pods(objects)
    assert pods, "the plan emits no pod into a team's namespace"
    return [f"{what}: {why}" for namespace, what, pod in pods if (why := refused(objects, namespace, pod))]


def _v2_erdma() -> dict[str, Any]:
    config = _with_keys()
    netbench = config[cfg("jobs")][1]
    netbench.update(backend="v2")
    del netbench["restartPolicy"]
    return config


def _owners() -> dict[str, Any]:
    config = stack_config("prod")
    config[cfg("storage")]["nas"]["userAccess"] = "no_squash"
    return config


def _v2_teams() -> dict[str, Any]:
    config = with_teams(backend="v2", checkpointKey={})
    config[cfg("trainerV2")] = {"kueue": {"enabled": True}}
    return config


def _v2_mpi() -> dict[str, Any]:
    """Two teams on the dev stack, the first team's job an MPI job on Trainer v2."""
    config = with_teams(
        backend="v2",
        framework="mpi",
        image="mpi-train:0.1.0",
        nodes=2,
        procsPerNode=1,
        gpusPerNode=0,
        cpu="1",
        memory="2Gi",
        command=["mpirun", "-np", "2", "python", "/app/train_mpi.py"],
    )
    for key in ("imageTag", "trainer"):
        config[cfg("jobs")][0].pop(key, None)
    return config


def _team_import() -> dict[str, Any]:
    config = with_teams()
    config[cfg("datasets")] = [
        {"name": "books", "source": "oss://corpus-bucket/books", "ossRoleName": "books-reader", "imageTag": "v0.1.0"}
    ]
    config[cfg("datasets")][0]["team"] = "vision"
    return config


def _local_team() -> dict[str, Any]:
    """The local stack, every job of every kind and its dataset import given to one team."""
    config = stack_config("local")
    config[cfg("teams")] = [{"name": "vision", "uid": 2000, "quota": {"gpus": 0, "cpu": "16", "memory": "32Gi"}}]
    for job in config[cfg("jobs")]:
        job["team"] = "vision"
    for dataset in config.get(cfg("datasets"), []):
        dataset["team"] = "vision"
    return config


def _node_checks() -> dict[str, Any]:
    """The prod stack with the pre-job node check on both teams' training jobs."""
    config = stack_config("prod")
    for job in config[cfg("jobs")]:
        if job["name"] != "nccl-check":
            job["nodeCheck"] = {"baselineGbps": 300}
    return config


VARIANTS: dict[str, Callable[[], tuple[dict[str, Any], str]]] = {
    "prod": lambda: (stack_config("prod"), "prod"),
    "prod with keys and a pull secret": lambda: (_with_keys(), "prod"),
    "prod with a v2 eRDMA job": lambda: (_v2_erdma(), "prod"),
    "prod with pre-job node checks": lambda: (_node_checks(), "prod"),
    "prod handing directories to the teams": lambda: (_owners(), "prod"),
    "two teams on v2 with Kueue": lambda: (_v2_teams(), "dev"),
    "an MPI job on v2": lambda: (_v2_mpi(), "dev"),
    "a team's OSS import": lambda: (_team_import(), "dev"),
    "every kind of job in one team": lambda: (_local_team(), "local"),
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_pod_the_platform_emits_is_admitted(variant: str) -> None:
    config, stack = VARIANTS[variant]()
    objects = _plan(config, stack)
    assert _teams(objects)
    assert platform_refusals(objects) == []


def test_a_policy_that_denies_everything_fails_the_platform_check(prod) -> None:
    objects = copy.deepcopy(prod)
    for obj in objects:
        if obj["kind"] == VAP:
            obj["spec"]["validations"] = [{"expression": "false", "message": "denied"}]
    failures = platform_refusals(objects)
    assert failures and all(f.endswith("['denied']") for f in failures)


def test_each_team_has_its_own_policy_bound_to_its_namespace_only(prod) -> None:
    teams = {t["name"] for t in stack_config("prod")[cfg("teams")]}
    policies = {o["metadata"]["name"]: o for o in prod if o["kind"] == VAP and matches(o, "pods", "CREATE")}
    bindings = [o for o in prod if o["kind"] == BINDING and o["spec"]["policyName"] in policies]
    assert sorted(policies) == sorted(admission.policy_name(t) for t in teams)
    for binding in bindings:
        assert binding["spec"]["validationActions"] == ["Deny"]
        assert [n for n in [*teams, "training", "kube-system"] if binds(binding, n)] == [
            binding["metadata"]["labels"]["ack-training-platform/team"]
        ]
        policy = policies[binding["spec"]["policyName"]]
        assert policy["spec"]["failurePolicy"] == "Fail"
        (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
        assert rule["resources"] == ["pods", "pods/ephemeralcontainers"]
        assert rule["operations"] == ["CREATE", "UPDATE"]


def test_the_policies_baseline_lists_are_pod_securitys() -> None:
    assert set(pod_rules.BASELINE_CAPABILITIES) == BASELINE_CAPABILITIES
    assert set(pod_rules.SAFE_SYSCTLS) == SAFE_SYSCTLS
    assert set(pod_rules.SELINUX_TYPES) == SELINUX_TYPES


def _base_pods(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each team's first job's first pod, as the platform emits it."""
    first: dict[str, dict[str, Any]] = {}
    for namespace, what, pod in platform_pods(objects):
        if what.startswith("PyTorchJob"):
            first.setdefault(namespace, pod)
    return first


def _others(objects: list[dict[str, Any]], team: str) -> dict[str, Any]:
    """The other team's uid and gid, and a job of the other team."""
    teams = {t["name"]: t for t in stack_config("prod")[cfg("teams")]}
    (other,) = [t for name, t in teams.items() if name != team]
    job = next(j["name"] for j in stack_config("prod")[cfg("jobs")] if j["team"] != team)
    return {"uid": other["uid"], "gid": other.get("gid", other["uid"]), "job": job}


@pytest.mark.parametrize("team", ["llm", "vision"])
@pytest.mark.parametrize(("attack", "change", "reason"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_each_hostile_pod_is_refused(prod, team: str, attack: str, change: Attack, reason: str) -> None:
    base = _base_pods(prod)[team]
    assert refused(prod, team, base) == []
    pod = copy.deepcopy(base)
    change(pod, _others(prod, team))
    why = refused(prod, team, pod)
    assert any(reason in w for w in why), why
    # The team's own policy refuses it, whatever the namespace's Pod Security level.
    assert admitted_by_policies(prod, team, pod)


V2_ATTACKS = [a for a in ATTACKS if a[0] != "a second job label"]
"""On a TrainJob's pod JobSet sets its own label over the template's; the v1 label forged in a
runtime patch is :func:`test_a_v2_pod_cannot_take_a_v1_jobs_key`'s."""


@pytest.fixture(scope="module")
def v2_teams() -> list[dict[str, Any]]:
    return _plan(_v2_teams(), "dev")


@pytest.mark.parametrize(("attack", "change", "reason"), V2_ATTACKS, ids=[a[0] for a in V2_ATTACKS])
def test_each_hostile_pod_is_refused_on_trainer_v2(v2_teams, attack: str, change: Attack, reason: str) -> None:
    (base,) = [pod for ns, what, pod in platform_pods(v2_teams) if what.startswith("TrainJob")]
    assert refused(v2_teams, "vision", base) == []
    pod = copy.deepcopy(base)
    # The other team of with_teams: speech, uid 2002, gid 3002.
    change(pod, {"uid": 2002, "gid": 3002, "job": "speech-job"})
    why = refused(v2_teams, "vision", pod)
    assert any(reason in w for w in why), why
    assert admitted_by_policies(v2_teams, "vision", pod)


BASELINE_ATTACKS = [(f"pod {p}", pod, None) for pod, p in BAD_PODS] + [
    (f"container {p}", None, container) for container, p in BAD_CONTAINERS
]
"""Pod Security baseline's controls (tests/test_tenancy.py), on the eRDMA team's own pod."""


def _changed(pod: dict[str, Any], pod_fields: dict[str, Any] | None, container_fields: dict[str, Any] | None) -> None:
    for key, value in copy.deepcopy(pod_fields or {}).items():
        if isinstance(value, dict):
            pod["spec"].setdefault(key, {}).update(value)
        elif isinstance(value, list):
            pod["spec"].setdefault(key, []).extend(value)
        else:
            pod["spec"][key] = value
    for key, value in copy.deepcopy(container_fields or {}).items():
        if isinstance(value, dict):
            c0(pod).setdefault(key, {}).update(value)
        else:
            c0(pod).setdefault(key, []).extend(value)


@pytest.mark.parametrize(
    ("attack", "pod_fields", "container_fields"), BASELINE_ATTACKS, ids=[a[0] for a in BASELINE_ATTACKS]
)
def test_baseline_holds_in_the_erdma_team(prod, attack, pod_fields, container_fields) -> None:
    assert _namespaces(prod)["llm"] == "baseline"
    pod = copy.deepcopy(_base_pods(prod)["llm"])
    assert "aliyun/erdma" in c0(pod)["resources"]["limits"]
    _changed(pod, pod_fields, container_fields)
    assert any(w.startswith("Pod Security baseline") for w in refused(prod, "llm", pod))
    # The team's policy refuses it too, whatever the namespace's label says.
    assert admitted_by_policies(prod, "llm", pod)


@pytest.mark.parametrize(
    ("attack", "pod_fields", "container_fields", "reason"),
    [
        (
            "privileged on the host network",
            {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"},
            {"securityContext": {"privileged": True}},
            "host namespaces",
        ),
        ("privileged", None, {"securityContext": {"privileged": True}}, "privileged containers"),
        ("hostPath /", {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}, None, "volumes in"),
        ("SYS_ADMIN", None, {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}, "capabilities"),
        ("IPC_LOCK", None, {"securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}, "capabilities"),
    ],
)
def test_an_erdma_pod_gets_no_privilege(prod, attack, pod_fields, container_fields, reason) -> None:
    base = _base_pods(prod)["llm"]
    assert "hostNetwork" not in base["spec"] and "securityContext" not in c0(base)
    assert refused(prod, "llm", base) == []
    pod = copy.deepcopy(base)
    _changed(pod, pod_fields, container_fields)
    assert any(reason in w for w in admitted_by_policies(prod, "llm", pod))


def test_the_erdma_devices_are_only_the_rdma_teams(prod) -> None:
    # The eRDMA team's own pod, moved into the other team's namespace with its ids, is refused there.
    pod = copy.deepcopy(_base_pods(prod)["llm"])
    pod["spec"]["securityContext"].update(runAsUser=2002, runAsGroup=2002)
    why = admitted_by_policies(prod, "vision", pod)
    assert "the eRDMA devices (aliyun/erdma) are for teams with rdma: true" in why
    # So is the other team's own pod asking for them, in its requests alone.
    pod = copy.deepcopy(_base_pods(prod)["vision"])
    c0(pod)["resources"].setdefault("requests", {})["aliyun/erdma"] = "1"
    assert any("eRDMA devices" in w for w in admitted_by_policies(prod, "vision", pod))


def test_a_policy_that_admits_everything_fails_the_hostile_check(prod) -> None:
    objects = copy.deepcopy(prod)
    for obj in objects:
        if obj["kind"] == VAP:
            obj["spec"]["validations"] = [{"expression": "true", "message": "admitted"}]
    pod = copy.deepcopy(_base_pods(objects)["vision"])
    pod["spec"]["securityContext"]["runAsUser"] = 2001
    assert refused(objects, "vision", pod) == []


def test_a_v2_pod_cannot_take_a_v1_jobs_key(run_stack) -> None:
    config = _v2_teams()
    objects = run_stack(config, "dev").kubernetes_objects()
    (pod,) = [p for ns, what, p in platform_pods(objects) if what.startswith("TrainJob")]
    assert refused(objects, "vision", pod) == []
    job = pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"]
    # A v1 job's label set in the TrainJob's runtime patch, naming another job whose key it mounts.
    forged = copy.deepcopy(pod)
    forged["metadata"]["labels"]["training.kubeflow.org/job-name"] = "victim"
    forged["spec"]["volumes"].append({"name": "k", "secret": {"secretName": "victim-checkpoint-key"}})
    assert any("own job" in w for w in refusals(_policy(objects, "vision"), forged))
    # Its own MPI key is its own.
    own = copy.deepcopy(pod)
    own["spec"]["volumes"].append({"name": "k", "secret": {"secretName": f"{job}-mpi-ssh-auth"}})
    assert refusals(_policy(objects, "vision"), own) == []


def _policy(objects: list[dict[str, Any]], team: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == VAP and o["metadata"]["name"] == admission.policy_name(team))


def test_every_namespace_the_platform_applies_enforces_pod_security(run_stack, fixture_pins) -> None:
    config = _v2_teams()
    config[cfg("operator")] = {"volcano": {"enabled": True, "version": "1.12.1"}}
    objects = run_stack(config, "dev").kubernetes_objects()
    levels = {
        o["metadata"]["name"]: o["metadata"].get("labels", {}).get(f"{POD_SECURITY}/enforce")
        for o in objects
        if o["kind"] == "Namespace"
    }
    # The operator's overlay namespace, the charts' namespaces (labelled once Helm created them), Volcano's,
    # the platform's and the teams'.
    assert {"kubeflow", "kubeflow-system", "kueue-system", "volcano-system", "training", "vision", "speech"} <= set(
        levels
    )
    assert {name for name, level in levels.items() if level != "baseline"} == set()


def test_the_pod_stand_ins_put_the_controllers_labels_over_the_templates() -> None:
    # kubeflow/trainer v1.9.4 pkg/controller.v1/common/pod.go createNewPod: "for key, value := range
    # labels { podTemplate.Labels[key] = value }", labels being GenLabels(job name) with the replica's.
    forged = {"training.kubeflow.org/job-name": "victim", "jobset.sigs.k8s.io/jobset-name": "victim"}
    template = {"metadata": {"labels": dict(forged)}, "spec": {"containers": [{"name": "pytorch"}]}}
    job = {
        "kind": "PyTorchJob",
        "metadata": {"name": "mine"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"template": template}}},
    }
    (pod,) = v1_pods(job)
    assert pod["metadata"]["labels"]["training.kubeflow.org/job-name"] == "mine"
    # jobset v0.12.0 pkg/controllers/jobset_controller.go labelAndAnnotateObject: the object's labels
    # copied first ("maps.Copy(labels, obj.GetLabels())"), then "labels[jobset.JobSetNameKey] = js.Name".
    runtime = {
        "spec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {"spec": {"template": {"spec": {"containers": [{"name": "node"}]}}}},
                        }
                    ]
                }
            }
        }
    }
    patch = {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"metadata": {"labels": dict(forged)}}}}}]
    }
    train_job = {
        "metadata": {"name": "mine"},
        "spec": {
            "trainer": {"image": "i", "command": ["c"]},
            "runtimePatches": [{"trainingRuntimeSpec": {"template": {"spec": patch}}}],
        },
    }
    (pod,) = v2_pods(train_job, runtime)
    assert pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "mine"


@pytest.fixture(scope="module")
def every_kind() -> list[dict[str, Any]]:
    return _plan(_local_team(), "local")


def _launcher(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (pod,) = [
        p
        for ns, what, p in platform_pods(objects)
        if what.startswith("MPIJob") and p["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "launcher"
    ]
    return pod


def test_an_mpi_launcher_gets_its_own_accounts_token_and_no_other_pod_does(every_kind) -> None:
    launcher = _launcher(every_kind)
    job = launcher["metadata"]["labels"]["training.kubeflow.org/job-name"]
    # The account the operator binds to exec into the job's Workers, with its token.
    assert launcher["spec"]["serviceAccountName"] == f"{job}-launcher"
    assert any("serviceAccountToken" in str(v) for v in launcher["spec"]["volumes"])
    assert refused(every_kind, "vision", launcher) == []
    # The same pod under a PyTorchJob a member named after the MPIJob.
    forged = copy.deepcopy(launcher)
    forged["metadata"]["ownerReferences"][0]["kind"] = "PyTorchJob"
    assert any("no ServiceAccount token" in w for w in refused(every_kind, "vision", forged))
    # An MPIJob's Worker.
    worker = copy.deepcopy(launcher)
    worker["metadata"]["labels"]["training.kubeflow.org/replica-type"] = "worker"
    assert any("no ServiceAccount token" in w for w in refused(every_kind, "vision", worker))
    # Every other pod of the team, with the token the ServiceAccount plugin would project.
    others = [p for ns, what, p in platform_pods(every_kind) if p["metadata"]["name"] != launcher["metadata"]["name"]]
    assert len(others) > 5
    for pod in others:
        pod = copy.deepcopy(pod)
        pod["spec"].pop("automountServiceAccountToken", None)
        pod["spec"] = admit_mutations(pod["spec"], {})
        assert any("no ServiceAccount token" in w for w in refused(every_kind, "vision", pod)), pod["metadata"]


def test_a_pod_of_a_stack_job_made_by_another_kind_of_controller_is_refused(every_kind) -> None:
    # A member's PyTorchJob or TrainJob named as the stack's TFJob, MPIJob, ...: the operator's
    # label names the stack's job, but the pod's controller is not of its kind.
    pods = [(what, p) for ns, what, p in platform_pods(every_kind) if p["metadata"].get("ownerReferences")]
    kinds = {what.split()[0] for what, _ in pods}
    assert {"PyTorchJob", "MPIJob", "XGBoostJob", "JAXJob"} <= kinds
    for what, pod in pods:
        if not what.split()[0].endswith("Job") or what.startswith("Job "):
            continue
        assert refused(every_kind, "vision", pod) == []
        for impostor in ("PyTorchJob", "Job"):
            forged = copy.deepcopy(pod)
            if forged["metadata"]["ownerReferences"][0]["kind"] == impostor:
                continue
            forged["metadata"]["ownerReferences"][0]["kind"] = impostor
            why = refused(every_kind, "vision", forged)
            assert any("made by that job's kind of controller" in w for w in why), (what, impostor)


def test_a_trainjobs_pod_made_by_another_kind_of_controller_is_refused(v2_teams) -> None:
    (pod,) = [p for ns, what, p in platform_pods(v2_teams) if what.startswith("TrainJob")]
    assert refused(v2_teams, "vision", pod) == []
    forged = copy.deepcopy(pod)
    forged["metadata"]["ownerReferences"][0]["kind"] = "PyTorchJob"
    assert any("kind of controller" in w for w in refused(v2_teams, "vision", forged))


MEMBER = request_of(username="alice", groups=("vision-researchers", "system:authenticated"))
"""A member of the prod stack's team vision (its group)."""


def _stack_job(objects: list[dict[str, Any]], team: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "PyTorchJob" and o["metadata"]["namespace"] == team)


def _as(request: dict[str, Any], operation: str) -> dict[str, Any]:
    return {**request, "operation": operation}


@pytest.mark.parametrize("resource", ["pytorchjobs", "trainjobs"])
def test_members_cannot_take_a_stack_jobs_name(prod, resource: str) -> None:
    job = _stack_job(prod, "vision")
    name = job["metadata"]["name"]
    mine = copy.deepcopy(job)
    mine["kind"] = {"pytorchjobs": "PyTorchJob", "trainjobs": "TrainJob"}[resource]

    def why(obj, operation, request=MEMBER, old=None):
        return admitted_by_policies(prod, "vision", obj, resource=resource, old=old, request=_as(request, operation))

    # Created, or deleted and created again, by a member: refused, naming the rule.
    assert any("keep their names" in w for w in why(mine, "CREATE"))
    assert any("keep their names" in w for w in why(None, "DELETE", old=job))
    # A user of the team by name is a member too.
    user = request_of(username="276543210987654321", groups=("system:authenticated",))
    assert why(mine, "CREATE", request=user)
    # Under another name it is the member's own job.
    other = copy.deepcopy(mine)
    other["metadata"]["name"] = f"{name}-2"
    assert why(other, "CREATE") == []
    assert why(None, "DELETE", old=other) == []
    # Another team's member, and whoever deploys the stack, are not refused by this policy.
    assert why(mine, "CREATE", request=request_of(username="bob", groups=("llm-researchers",))) == []
    assert why(mine, "CREATE", request=request_of()) == []


def test_members_may_suspend_a_stack_job_and_change_nothing_else(prod) -> None:
    job = _stack_job(prod, "vision")

    def why(new):
        return admitted_by_policies(prod, "vision", new, resource="pytorchjobs", old=job, request=_as(MEMBER, "UPDATE"))

    suspended = copy.deepcopy(job)
    suspended["spec"]["runPolicy"]["suspend"] = True
    suspended["metadata"].setdefault("labels", {})["mine"] = "yes"
    assert why(suspended) == []
    changed = copy.deepcopy(job)
    replica = next(iter(changed["spec"]["pytorchReplicaSpecs"].values()))
    replica["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", "cat /var/run/key/*"]
    assert any("keep their names and templates" in w for w in why(changed))
    dropped = copy.deepcopy(job)
    dropped["spec"].pop("pytorchReplicaSpecs")
    assert why(dropped)


def test_each_teams_tensorboard_pod_is_checked(prod) -> None:
    tensorboards = [what for ns, what, pod in platform_pods(prod) if what.startswith("StatefulSet")]
    assert sorted(w.split()[1].split("/")[0] for w in tensorboards) == sorted(_teams(prod))
    # TensorBoard running as the platform's own uid in a team's namespace is refused there.
    objects = copy.deepcopy(prod)
    for obj in objects:
        if obj["kind"] == "StatefulSet" and obj["metadata"]["namespace"] in _teams(prod):
            obj["spec"]["template"]["spec"]["securityContext"].update(runAsUser=1000, runAsGroup=1000)
    failures = platform_refusals(objects)
    assert len(failures) == len(tensorboards) and all(f.startswith("StatefulSet") for f in failures)


@pytest.mark.parametrize("kind", ["DaemonSet", "CronJob", "Pod", "Rollout"])
def test_a_kind_making_pods_the_check_does_not_know_fails_it(prod, kind: str) -> None:
    (statefulset,) = [o for o in prod if o["kind"] == "StatefulSet" and o["metadata"]["namespace"] == "vision"]
    unknown = {**copy.deepcopy(statefulset), "kind": kind}
    with pytest.raises(AssertionError, match=f"{kind} vision/"):
        platform_pods([*prod, unknown])


def test_a_pod_update_is_checked_only_for_ephemeral_containers_labels_and_annotations(prod) -> None:
    # A pod admitted before a change of the policy that the policy now refuses (another uid).
    old = copy.deepcopy(_base_pods(prod)["vision"])
    old["spec"]["securityContext"]["runAsUser"] = 2001
    old["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
    assert admitted_by_policies(prod, "vision", old)

    def why(new, sub_resource=""):
        request = request_of(
            "UPDATE", username="system:serviceaccount:kube-system:job-controller", sub_resource=sub_resource
        )
        return admitted_by_policies(prod, "vision", new, old=old, request=request)

    # Scheduled and bound to a node, it may still be relabelled within its own job.
    bound = copy.deepcopy(_base_pods(prod)["vision"])
    bound["spec"]["nodeName"] = "cn-wulanchabu.10.0.0.7"
    relabelled = copy.deepcopy(bound)
    relabelled["metadata"]["labels"]["example.com/note"] = "x"
    assert admitted_by_policies(prod, "vision", relabelled, old=bound, request=request_of("UPDATE")) == []
    # Its controller removes its finalizer, or marks its status: the pod can go.
    done = copy.deepcopy(old)
    done["metadata"]["finalizers"] = []
    assert why(done) == []
    # Another job's label, a new annotation, an ephemeral container: checked.
    relabelled = copy.deepcopy(old)
    relabelled["metadata"]["labels"]["app.kubernetes.io/name"] = "victim"
    assert any("own job" in w for w in why(relabelled))
    annotated = copy.deepcopy(old)
    annotated["metadata"]["annotations"] = {"container.apparmor.security.beta.kubernetes.io/pytorch": "unconfined"}
    assert any("AppArmor" in w for w in why(annotated))
    debugged = copy.deepcopy(old)
    debugged["spec"]["ephemeralContainers"] = [{"name": "dbg", "image": "busybox"}]
    assert why(debugged, "ephemeralcontainers")


def test_members_get_their_role_binding_after_the_walls(run_stack) -> None:
    plan = run_stack(_with_keys(), "prod")
    types = {
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
        "kubernetes:networking.k8s.io/v1:NetworkPolicy",
    }
    for team in ("llm", "vision"):
        (binding,) = [
            r
            for r in plan.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
            if r.inputs["metadata"]["namespace"] == team
        ]
        walls = [
            r
            for r in plan.resources
            if r.type in types
            and r.inputs["metadata"].get("labels", {}).get("ack-training-platform/team") == team
            # The namespace's own walls; a job's NetworkPolicy, letting its pods reach each other, is its job's.
            and "TrainingNamespace" in r.urn
        ]
        # Both policies with their bindings, and the namespace's NetworkPolicies.
        assert len([r for r in walls if r.type in sorted(types)[:2]]) == 4
        assert any(r.type.endswith("NetworkPolicy") for r in walls)
        assert {r.urn for r in walls} <= set(binding.dependencies)


def test_probes_and_hooks_on_the_pods_own_address_are_admitted(prod) -> None:
    pod = copy.deepcopy(_base_pods(prod)["vision"])
    c0(pod).update(
        livenessProbe={"httpGet": {"path": "/metrics", "port": 9464}},
        readinessProbe={"tcpSocket": {"host": "", "port": 9464}},
        lifecycle={"preStop": {"exec": {"command": ["sleep", "5"]}}},
    )
    assert refused(prod, "vision", pod) == []


def test_members_may_suspend_a_stack_trainjob_and_change_nothing_else(prod) -> None:
    name = _stack_job(prod, "vision")["metadata"]["name"]
    old = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "vision"},
        "spec": {"runtimeRef": {"name": "torch"}, "trainer": {"image": "train:1", "command": ["python"]}},
    }

    def why(new):
        return admitted_by_policies(prod, "vision", new, resource="trainjobs", old=old, request=_as(MEMBER, "UPDATE"))

    suspended = copy.deepcopy(old)
    suspended["spec"]["suspend"] = True
    assert why(suspended) == []
    for field, value in [
        ("trainer", {"image": "train:1", "command": ["sh", "-c", "cat /var/run/key/*"]}),
        ("runtimePatches", [{"manager": "me"}]),
        ("managedBy", "example.com/mine"),
    ]:
        changed = copy.deepcopy(old)
        changed["spec"][field] = value
        assert any("keep their names and templates" in w for w in why(changed)), field

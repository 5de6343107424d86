"""Backend v2: the pure TrainJob and ClusterTrainingRuntime builders, golden manifests, the
official ``kubeflow-trainer-api`` models and Trainer v2.3.0's webhook rules."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import cfg, stack_config
from fixtures.failures import job_failure, jobset_action
from fixtures.models import assert_matches_model
from fixtures.trainer_pods import RESERVED_ENV
from kubeflow_trainer_api.models import (
    TrainerV1alpha1ClusterTrainingRuntime,
    TrainerV1alpha1TrainingRuntime,
    TrainerV1alpha1TrainJob,
)
from test_jobs import (
    CPU_PLACEMENT,
    CUSTOM_COMMAND,
    IMAGE,
    POOL_1,
    POOL_8_ERDMA,
    assert_every_pod_declares_the_metrics_port,
    context,
)

from components.config import TrainingJobSpec, load_spec
from components.manifests import (
    JobContext,
    kueue_values,
    mpi_training_runtime,
    pytorch_job,
    train_job,
    trainer_v2_values,
    training_runtime,
)
from components.manifests.jobs.trainjob import TRAINER_NODE
from components.manifests.platform.images import image_copies

GOLDEN = Path(__file__).parent / "golden" / "v2"

REPRESENTATIVE = {
    "single-node-1gpu": (
        TrainingJobSpec(name="mnist", image=IMAGE, backend="v2"),
        context(POOL_1, 1, image_pull_secret="registry-pull"),
    ),
    "multi-node-4x8-erdma": (
        TrainingJobSpec(
            name="gpt-pretrain",
            image=IMAGE,
            backend="v2",
            nodes=4,
            network="rdma",
            cpu="180",
            memory="1600Gi",
            trainer={"model": "gpt", "max_steps": 100000, "batch_size": 16, "parallel": "auto"},
            topology={"key": "topology.kubernetes.io/zone", "mode": "required"},
            run_policy={"active_deadline_seconds": 86400},
        ),
        context(POOL_8_ERDMA, 8, queue="training"),
    ),
    "cpu-local": (
        TrainingJobSpec(
            name="mnist-cpu",
            image="trainer:0.1.0",
            backend="v2",
            gpus_per_node=0,
            procs_per_node=2,
            cpu="2",
            memory="4Gi",
            trainer={"max_steps": 200, "synthetic_data": True},
        ),
        context(CPU_PLACEMENT, 0),
    ),
    "jax-2x8-erdma": (
        TrainingJobSpec(
            name="jax-train",
            image=IMAGE,
            backend="v2",
            framework="jax",
            nodes=2,
            network="rdma",
            command=["python", "train_jax.py"],
            run_policy={"active_deadline_seconds": 7200},
        ),
        context(POOL_8_ERDMA, 8, queue="training", image_pull_secret="registry-pull"),
    ),
    "xgboost-cpu": (
        TrainingJobSpec(
            name="xgb",
            image=IMAGE,
            backend="v2",
            framework="xgboost",
            nodes=2,
            gpus_per_node=0,
            cpu="4",
            memory="8Gi",
            launcher="python",
            command=["train_xgb.py"],
        ),
        context(CPU_PLACEMENT, 0),
    ),
    "mpi-2x8-erdma": (
        TrainingJobSpec(
            name="hvd",
            image=IMAGE,
            backend="v2",
            framework="mpi",
            nodes=2,
            network="rdma",
            command=["mpirun", "python", "train_hvd.py"],
        ),
        context(POOL_8_ERDMA, 8, queue="training", image_pull_secret="registry-pull"),
    ),
}


def emitted(case: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The runtime a case's job runs on (an MPI job's own), and its TrainJob."""
    spec, ctx = REPRESENTATIVE[case]
    fabric = ctx.placement.fabric if spec.network == "rdma" else None
    if spec.framework == "mpi":
        return mpi_training_runtime(spec, ctx, fabric), train_job(spec, ctx)
    return training_runtime(fabric, spec.framework), train_job(spec, ctx)


@pytest.mark.parametrize("case", REPRESENTATIVE)
def test_golden_manifests(case: str) -> None:
    text = yaml.safe_dump_all(emitted(case), sort_keys=False)
    path = GOLDEN / f"{case}.yaml"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} changed; review and rerun with UPDATE_GOLDEN=1"


ENV_LOCKED_CONTAINERS = {"node", "dataset-initializer", "model-initializer"}
"""Containers a runtime patch may not give env (JobSet plugin ``Validate``)."""
ANCESTOR_CONTAINERS = {
    "trainer": "node",
    "model-initializer": "model-initializer",
    "dataset-initializer": "dataset-initializer",
}
"""``pkg/webhooks/trainingruntime_webhook.go`` ``expectedContainerNames``."""
DNS_1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def runtime_problems(runtime: dict[str, Any]) -> list[str]:
    """The ClusterTrainingRuntime webhook's rules (``validateReplicatedJobs``) and the CRD's
    one-ML-policy rule (``MLPolicy`` XValidation)."""
    problems = []
    policies = {"torch", "mpi", "jax", "xgboost", "flux"} & set(runtime["spec"].get("mlPolicy", {}))
    if len(policies) > 1:
        problems.append("more than one ML policy")
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        ancestor = (
            rjob["template"].get("metadata", {}).get("labels", {}).get("trainer.kubeflow.org/trainjob-ancestor-step")
        )
        if ancestor in ANCESTOR_CONTAINERS:
            if rjob.get("replicas", 1) != 1:
                problems.append(f"{rjob['name']}: replicas always must be 1")
            names = {c["name"] for c in rjob["template"]["spec"]["template"]["spec"]["containers"]}
            if ANCESTOR_CONTAINERS[ancestor] not in names:
                problems.append(f"{rjob['name']}: must contain the required container for the ancestor: {ancestor}")
    return problems


def trainjob_problems(job: dict[str, Any], runtime: dict[str, Any]) -> list[str]:
    """The TrainJob rules of the CRD (name, ``managedBy``, at most 16 patches) and the
    webhook: the torch plugin's reserved env, the JobSet plugin's patch checks."""
    problems = []
    name = job["metadata"]["name"]
    if not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) or len(name) > 63:
        problems.append("metadata.name must match RFC 1035 DNS label format")
    spec = job["spec"]
    ref = spec["runtimeRef"]
    if (ref.get("apiGroup"), ref.get("kind"), ref["name"]) != (
        "trainer.kubeflow.org",
        runtime["kind"],
        runtime["metadata"]["name"],
    ):
        problems.append("runtimeRef does not name the runtime")
    if spec.get("managedBy") not in (None, "trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue"):
        problems.append("managedBy")
    policy = next(p for p in RESERVED_ENV if p in runtime["spec"]["mlPolicy"])
    reserved = sorted(RESERVED_ENV[policy] & {e["name"] for e in spec.get("trainer", {}).get("env", [])})
    if reserved:
        problems.append(f"must not have reserved envs, invalid envs configured: {reserved}")
    patches = spec.get("runtimePatches", [])
    if len(patches) > 16 or len({p["manager"] for p in patches}) != len(patches):
        problems.append("runtimePatches: at most 16, one per manager")
    containers = {
        rjob["name"]: {
            c["name"]
            for c in [
                *rjob["template"]["spec"]["template"]["spec"].get("initContainers", []),
                *rjob["template"]["spec"]["template"]["spec"]["containers"],
            ]
        }
        for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]
    }
    for patch in patches:
        host, _, rest = patch["manager"].partition("/")
        if not (DNS_1123_SUBDOMAIN.match(host) and rest):
            problems.append(f"manager {patch['manager']!r} is not a domain-prefixed path")
        template = patch.get("trainingRuntimeSpec", {}).get("template", {})
        if set(template.get("metadata", {})) - {"labels", "annotations"}:
            problems.append("JobSet patch metadata: only labels and annotations")
        for rjob in template.get("spec", {}).get("replicatedJobs", []):
            if rjob["name"] not in containers:
                problems.append("must not have replicated job that doesn't exist in the runtime job template")
                continue
            pod = rjob.get("template", {}).get("spec", {}).get("template", {})
            if set(pod.get("metadata", {})) - {"labels", "annotations"}:
                problems.append("pod patch metadata: only labels and annotations")
            for kind in ("initContainers", "containers"):
                for c in pod.get("spec", {}).get(kind, []):
                    if c["name"] not in containers[rjob["name"]]:
                        problems.append(
                            f"must not have {kind[:-1]} that doesn't exist in the runtime job {rjob['name']}"
                        )
                    elif kind == "containers" and c.get("env") and c["name"] in ENV_LOCKED_CONTAINERS:
                        problems.append(
                            "must not have envs for the dataset-initializer, model-initializer, node containers"
                        )
    return problems


@pytest.mark.parametrize("case", REPRESENTATIVE)
def test_manifests_fit_official_models_and_webhooks(case: str) -> None:
    runtime, job = emitted(case)
    model = (
        TrainerV1alpha1TrainingRuntime
        if runtime["kind"] == "TrainingRuntime"
        else TrainerV1alpha1ClusterTrainingRuntime
    )
    assert_matches_model(runtime, model)
    assert_matches_model(job, TrainerV1alpha1TrainJob)
    # The models' own parsers take them, and give back the same objects.
    assert model.from_dict(runtime).to_dict() == runtime
    assert TrainerV1alpha1TrainJob.from_dict(job).to_dict() == job
    assert runtime_problems(runtime) == []
    assert trainjob_problems(job, runtime) == []
    trainer = job["spec"]["trainer"]
    resources = trainer["resourcesPerNode"]
    assert resources["limits"] == resources["requests"]
    spec = REPRESENTATIVE[case][0]
    if spec.framework in ("pytorch", "mpi"):
        assert trainer["numProcPerNode"] == int(resources["limits"].get("nvidia.com/gpu", spec.procs_per_node or 1))
    else:
        # Only the torch and MPI plugins read it; the JAX and XGBoost plugins derive their world themselves.
        assert "numProcPerNode" not in trainer
    runtime_env = {
        e["name"]: e["value"]
        for e in runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
            "containers"
        ][0]["env"]
        if "value" in e
    }
    assert runtime_env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"


def test_model_check_catches_an_unknown_field() -> None:
    runtime, job = emitted("single-node-1gpu")
    pod = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    pod["template"]["spec"]["template"]["spec"]["hostNetwork"] = True
    with pytest.raises(AssertionError, match=r"\.spec\.hostNetwork: not a field of TrainerV1alpha1PodSpecPatch"):
        assert_matches_model(job, TrainerV1alpha1TrainJob)
    runtime["spec"]["mlPolicy"]["torch"]["numProcPerNode"] = 8
    with pytest.raises(
        AssertionError, match=r"torch\.numProcPerNode: not a field of TrainerV1alpha1TorchMLPolicySource"
    ):
        assert_matches_model(runtime, TrainerV1alpha1ClusterTrainingRuntime)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda job: job["spec"]["trainer"]["env"].append({"name": "PET_NNODES", "value": "2"}),
            "must not have reserved envs, invalid envs configured: ['PET_NNODES']",
        ),
        (
            lambda job: _pod_patch(job)["containers"][0].update(env=[{"name": "A", "value": "1"}]),
            "must not have envs for the dataset-initializer, model-initializer, node containers",
        ),
        (
            lambda job: _pod_patch(job)["containers"].append({"name": "sidecar"}),
            "must not have container that doesn't exist in the runtime job node",
        ),
        (
            lambda job: job["spec"]["runtimePatches"][0].update(manager="platform"),
            "manager 'platform' is not a domain-prefixed path",
        ),
        (
            lambda job: _replicated_job_patch(job).update(name="worker"),
            "must not have replicated job that doesn't exist in the runtime job template",
        ),
    ],
)
def test_webhook_rules_catch_what_trainer_v2_refuses(change, problem: str) -> None:
    runtime, job = emitted("single-node-1gpu")
    change(job)
    assert problem in trainjob_problems(job, runtime)


def _replicated_job_patch(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]


def _pod_patch(job: dict[str, Any]) -> dict[str, Any]:
    return _replicated_job_patch(job)["template"]["spec"]["template"]["spec"]


def test_the_same_spec_runs_on_either_backend_with_the_same_pods() -> None:
    """Switching the backend changes the API, not what the pods get."""
    spec, ctx = REPRESENTATIVE["multi-node-4x8-erdma"]
    runtime, job = emitted("multi-node-4x8-erdma")
    v1 = pytorch_job(spec.model_copy(update={"backend": "v1"}), ctx)
    v1_pod = v1["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    v1_container = v1_pod["containers"][0]
    runtime_pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    patch = _pod_patch(job)
    v2_env = {
        **{e["name"]: e["value"] for e in runtime_pod["containers"][0]["env"] if "value" in e},
        **{e["name"]: e["value"] for e in job["spec"]["trainer"]["env"]},
    }
    assert v2_env == {e["name"]: e["value"] for e in v1_container["env"]}
    # The runtime's own identity, for TrainJobs without TRAINING_JOB, is what the job's value replaces.
    assert [e["name"] for e in runtime_pod["containers"][0]["env"] if "value" not in e] == [
        "TRAINING_JOB_NAMESPACE",
        "TRAINING_JOB_NAME",
    ]
    assert job["spec"]["trainer"]["resourcesPerNode"] == v1_container["resources"]
    assert patch["volumes"] == v1_pod["volumes"]
    assert (
        runtime_pod["containers"][0]["volumeMounts"] + patch["containers"][0]["volumeMounts"]
        == v1_container["volumeMounts"]
    )
    # Neither backend's eRDMA pod is privileged or on the host network.
    assert "securityContext" not in patch["containers"][0] and "securityContext" not in v1_container
    for key in ("nodeSelector", "tolerations", "serviceAccountName"):
        assert patch[key] == v1_pod[key]
    for key in ("hostNetwork", "dnsPolicy"):
        assert key not in runtime_pod and key not in v1_pod
    assert runtime_pod["terminationGracePeriodSeconds"] == v1_pod["terminationGracePeriodSeconds"]
    assert job["spec"]["trainer"]["numNodes"] == 4 and job["spec"]["trainer"]["numProcPerNode"] == 8
    # v2 sets torchrun's node count, rank and master itself: the command names none of them.
    assert job["spec"]["trainer"]["command"][:4] == ["python", "-m", "trainer.launch", "-m"]


SSH_PRIVATE_KEY_MODE = 0o640
"""How the MPI plugin mounts a job's private key (v2.3.0 ``pkg/constants/constants.go``
``MPISSHPrivateKeyFileMode``): owned by root, and by the pod's ``fsGroup`` when it has one."""
TEAM_CONTEXT = {"runAsUser": 2001, "runAsGroup": 3001, "runAsNonRoot": True}


def _reads_ssh_key(pod: dict[str, Any], container: dict[str, Any]) -> bool:
    """Whether the container's process can read the key: as root, or through a group that owns
    it (the kubelet adds ``fsGroup`` to the process's groups)."""
    uid = container.get("runAsUser", pod.get("runAsUser"))
    groups = {pod.get("runAsGroup"), pod.get("fsGroup"), *pod.get("supplementalGroups", [])}
    owner_group = pod.get("fsGroup", 0)
    return uid == 0 or (owner_group in groups and bool(SSH_PRIVATE_KEY_MODE & 0o040))


@pytest.mark.parametrize("security", [None, TEAM_CONTEXT], ids=["image-user", "team-uid"])
def test_every_mpi_pod_can_read_the_jobs_ssh_key(security: dict[str, Any] | None) -> None:
    """A team's uid, or upstream's user 1000, must read the root-owned key, or mpirun never reaches
    the nodes; the TrainJob's patch merges field by field into the runtime's pods (v2.3.0
    ``pkg/runtime/core/trainingruntime.go`` ``mergeRuntimePatches``: a strategic merge patch)."""
    spec, ctx = REPRESENTATIVE["mpi-2x8-erdma"]
    ctx = dataclasses.replace(ctx, security_context=security)
    runtime, job = mpi_training_runtime(spec, ctx, ctx.placement.fabric), train_job(spec, ctx)
    patches = {
        r["name"]: r["template"]["spec"]["template"]["spec"]
        for r in job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    }
    for replicated in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = replicated["template"]["spec"]["template"]["spec"]
        patch = patches[replicated["name"]]
        merged = {**pod.get("securityContext", {}), **patch.get("securityContext", {})}
        container = {
            **pod["containers"][0].get("securityContext", {}),
            **patch["containers"][0].get("securityContext", {}),
        }
        assert _reads_ssh_key(merged, container), replicated["name"]
        if security is not None:
            # The team's uid stays the process's: no container-level user overrides it.
            assert merged["runAsUser"] == 2001 and "runAsUser" not in container


@pytest.mark.parametrize(
    ("spec", "ctx"),
    [
        *REPRESENTATIVE.values(),
        (CUSTOM_COMMAND.model_copy(update={"backend": "v2"}), context(POOL_8_ERDMA, 8)),
    ],
    ids=[*REPRESENTATIVE, "custom-command"],
)
def test_every_trainjob_pod_declares_the_metrics_port(spec: TrainingJobSpec, ctx: JobContext) -> None:
    # The runtime holds the pods' env and ports; a TrainJob has no field for ports.
    job = train_job(spec, ctx)
    fabric = ctx.placement.fabric if spec.network == "rdma" else None
    runtime = (
        mpi_training_runtime(spec, ctx, fabric) if spec.framework == "mpi" else training_runtime(fabric, spec.framework)
    )
    assert job["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert_every_pod_declares_the_metrics_port(
        [c for rjob in jobs for c in rjob["template"]["spec"]["template"]["spec"]["containers"]]
    )


BUILDS = [
    (
        "queued jobs carry the LocalQueue and leave suspend to Kueue",
        TrainingJobSpec(name="a", image=IMAGE, backend="v2"),
        context(POOL_1, 1, queue="training"),
        lambda j: j["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training" and "suspend" not in j["spec"],
    ),
    (
        "suspend changes in place without a queue",
        TrainingJobSpec(name="a", image=IMAGE, backend="v2", run_policy={"suspend": True}),
        context(POOL_1, 1),
        lambda j: j["spec"]["suspend"] is True and "kueue.x-k8s.io/queue-name" not in j["metadata"]["labels"],
    ),
    (
        "tcp jobs run on the pod network runtime",
        TrainingJobSpec(name="a", image=IMAGE, backend="v2"),
        context(POOL_8_ERDMA, 8),
        lambda j: (
            j["spec"]["runtimeRef"]["name"] == "ack-training-platform-torch"
            and "securityContext" not in _pod_patch(j)["containers"][0]
        ),
    ),
    (
        "shm sized per GPU",
        TrainingJobSpec(name="a", image=IMAGE, backend="v2", memory="512Gi"),
        context(POOL_8_ERDMA, 8),
        lambda j: (
            _pod_patch(j)["volumes"][0] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "128Gi"}}
        ),
    ),
    (
        "user env wins over the runtime's",
        TrainingJobSpec(name="a", image=IMAGE, backend="v2", env={"NCCL_SOCKET_IFNAME": "bond0"}, nccl_debug="INFO"),
        context(POOL_1, 1),
        lambda j: (
            {"name": "NCCL_SOCKET_IFNAME", "value": "bond0"} in j["spec"]["trainer"]["env"]
            and {"name": "NCCL_DEBUG", "value": "INFO"} in j["spec"]["trainer"]["env"]
        ),
    ),
    (
        "netbench preset",
        TrainingJobSpec(name="a", image=IMAGE, backend="v2", preset="netbench", nodes=2),
        context(POOL_8_ERDMA, 8),
        lambda j: j["spec"]["trainer"]["command"] == ["python", "-m", "trainer.launch", "-m", "trainer.bench"],
    ),
    (
        "a custom command is kept as written",
        TrainingJobSpec(name="a", image=IMAGE, backend="v2", command=["torchrun", "train.py"], args=["--x"]),
        context(POOL_1, 1),
        lambda j: j["spec"]["trainer"]["command"] == ["torchrun", "train.py", "--x"],
    ),
]


@pytest.mark.parametrize(("case", "spec", "ctx", "check"), BUILDS, ids=[b[0] for b in BUILDS])
def test_builder(case: str, spec: TrainingJobSpec, ctx: JobContext, check) -> None:
    job = train_job(spec, ctx)
    assert check(job)
    assert_matches_model(job, TrainerV1alpha1TrainJob)


@pytest.mark.parametrize(
    ("spec", "ctx", "message"),
    [
        (
            TrainingJobSpec(name="a", image=IMAGE, elastic={"min_nodes": 1, "max_nodes": 2}),
            context(POOL_1, 1),
            "job 'a' cannot run on Trainer v2: elastic: Trainer v2 has no elastic training (v2.3.0 runs a fixed "
            "numNodes): give a fixed nodes instead, or keep the job on backend v1",
        ),
        (
            TrainingJobSpec(name="a", image=IMAGE, network="rdma"),
            context(POOL_1, 1),
            "job 'a' uses rdma networking but its placement has no RDMA fabric",
        ),
    ],
)
def test_builder_refuses_what_v2_cannot_run(spec, ctx, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        train_job(spec, ctx)


TRAINJOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"
RELEASE = "kubernetes:helm.sh/v3:Release"
MIRROR = "ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/mirror"


def test_one_key_moves_a_stack_to_trainer_v2(run_stack) -> None:
    config = stack_config("dev")
    assert cfg("imageMirror") not in config  # dev pulls the images as the charts name them
    config[cfg("training")]["backend"] = "v2"
    plan = run_stack(config)
    assert not plan.of_type("kubernetes:kubeflow.org/v1:PyTorchJob")
    release = plan.one(RELEASE, "kubeflow-trainer")
    inputs = release.inputs
    # The verified local copy, JobSet in its charts/: installing it reaches no chart registry.
    assert inputs["chart"].endswith("/kubeflow-trainer-v2.3.0")
    assert (inputs["version"], inputs["namespace"]) == (
        "2.3.0",
        "kubeflow-system",
    )
    assert inputs["createNamespace"] is True
    system = {"ack-training-platform/pool": "system"}
    assert inputs["values"] == {
        "jobset": {
            "install": True,
            "controller": {"nodeSelector": system},
            "image": {"repository": "registry.k8s.io/jobset/jobset", "tag": "v0.12.0"},
        },
        "manager": {"nodeSelector": system},
    }
    # One runtime per framework with a v2 policy, so a job submitted later finds its own, and its
    # variant on the GPU pool.
    runtimes = {r.inputs["metadata"]["name"]: r for r in plan.of_type(RUNTIME)}
    assert sorted(runtimes) == [
        "ack-training-platform-jax",
        "ack-training-platform-jax-gpu",
        "ack-training-platform-torch",
        "ack-training-platform-torch-gpu",
        "ack-training-platform-xgboost",
        "ack-training-platform-xgboost-gpu",
    ]
    runtime = runtimes["ack-training-platform-torch"]
    assert all(release.urn in r.dependencies for r in runtimes.values())
    job = plan.one(TRAINJOB)
    assert {release.urn, runtime.urn} | {
        c.urn for c in plan.of_type("kubernetes:core/v1:PersistentVolumeClaim")
    } <= set(job.dependencies)
    # The personal registry's host is known after deploy; the image's path and tag are checked now.
    assert job.inputs["spec"]["trainer"]["image"] == "<registry host, known after deploy>/ml/trainer:v0.1.0"
    assert _pod_patch(job.inputs)["imagePullSecrets"] == [{"name": "registry-pull"}]
    # Same lifecycle as v1: immutable parts replace the job, deleted first; suspend changes in place.
    assert job.delete_before_replace
    assert set(job.replace_on_changes) == {
        "spec.runtimeRef",
        "spec.trainer",
        "spec.runtimePatches",
        "spec.activeDeadlineSeconds",
        "spec.managedBy",
    }
    assert plan.outputs["jobs"]["mnist-dev"]["commands"]["status"] == "kubectl -n training get trainjob mnist-dev -w"


def test_v1_and_v2_run_side_by_side_through_the_mirror(run_stack) -> None:
    config = stack_config("prod")
    netbench = config[cfg("jobs")][1]
    netbench.update(backend="v2")
    del netbench["restartPolicy"]
    plan = run_stack(config, "prod")
    assert sorted(j.name for j in plan.of_type("kubernetes:kubeflow.org/v1:PyTorchJob")) == [
        "gpt-pretrain",
        "vit-finetune",
    ]
    job = plan.one(TRAINJOB).inputs
    assert job["metadata"]["name"] == "nccl-check"
    assert job["spec"]["runtimeRef"]["name"] == "ack-training-platform-torch-erdma"
    assert sorted(r.inputs["metadata"]["name"] for r in plan.of_type(RUNTIME)) == [
        "ack-training-platform-jax",
        "ack-training-platform-jax-erdma",
        "ack-training-platform-jax-gpu",
        "ack-training-platform-torch",
        "ack-training-platform-torch-erdma",
        "ack-training-platform-torch-gpu",
        "ack-training-platform-xgboost",
        "ack-training-platform-xgboost-erdma",
        "ack-training-platform-xgboost-gpu",
    ]
    volcano = plan.one("ack-training-platform:components:TrainingOperator").inputs["volcano"]
    assert volcano == "volcano-sh/volcano v1.12.1 installer/volcano-development.yaml"
    values = plan.one(RELEASE, "kubeflow-trainer").inputs["values"]
    assert values["image"] == {"registry": MIRROR, "repository": "trainer-controller-manager"}
    assert values["jobset"]["image"] == {"repository": f"{MIRROR}/jobset", "tag": "v0.12.0"}


def test_kueue_queues_v2_jobs_with_the_gpu_quota(run_stack) -> None:
    config = stack_config("dev")
    assert cfg("imageMirror") not in config  # dev pulls the images as the charts name them
    config[cfg("training")]["backend"] = "v2"
    config[cfg("trainerV2")] = {"kueue": {"enabled": True}}
    plan = run_stack(config)
    cluster_queue = plan.one("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue").inputs
    # CPU jobs on the CPU flavor, GPU jobs on the GPU pool's, each with the CPU and memory quota.
    flavors = cluster_queue["spec"]["resourceGroups"][0]["flavors"]
    assert {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in flavors} == {
        "default-flavor": {"cpu": "1024", "memory": "8Ti", "nvidia.com/gpu": "0"},
        "gpu": {"cpu": "1024", "memory": "8Ti", "nvidia.com/gpu": "2"},
    }
    assert cluster_queue["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "training"}}
    # The job's own queue, and "default", which Kueue gives a job that names none (one the SDK creates).
    local = {q.inputs["metadata"]["name"]: q for q in plan.of_type("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue")}
    assert {
        name: (q.inputs["metadata"]["namespace"], q.inputs["spec"]["clusterQueue"]) for name, q in local.items()
    } == {"training": ("training", "training"), "default": ("training", "training")}
    job = plan.one(TRAINJOB)
    assert job.inputs["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    assert "suspend" not in job.inputs["spec"]
    kueue = plan.one(RELEASE, "kueue")
    # A TrainJob created before Kueue's webhook would start unadmitted: it waits for Kueue and its queue.
    assert {kueue.urn, local["training"].urn} <= set(job.dependencies)
    assert all(kueue.urn in q.dependencies for q in plan.resources if q.type.startswith("kubernetes:kueue.x-k8s.io/"))
    inputs = kueue.inputs
    assert inputs["chart"].endswith("/kueue-v0.19.2-chart")
    assert (inputs["version"], inputs["namespace"]) == (
        "0.19.2",
        "kueue-system",
    )
    manager = inputs["values"]["controllerManager"]
    assert manager["manager"]["image"] == {
        "repository": "registry.k8s.io/kueue/kueue",
        "tag": "v0.19.2",
        "pullPolicy": "IfNotPresent",
    }
    assert manager["nodeSelector"] == {"ack-training-platform/pool": "system"}
    config = yaml.safe_load(inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert "trainer.kubeflow.org/trainjob" in config["integrations"]["frameworks"]
    # All of a job's pods run within the timeout, new nodes included, or the job goes back to the queue,
    # five times at most: then Kueue deactivates it instead of cycling for ever.
    assert config["waitForPodsReady"] == {
        "timeout": "30m",
        "blockAdmission": False,
        "requeuingStrategy": {"backoffLimitCount": 5},
    }
    assert not plan.of_type("kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass")
    assert "preemption" not in cluster_queue["spec"]


def test_a_v2_job_of_higher_priority_preempts_in_the_queue(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("training")]["backend"] = "v2"
    config[cfg("trainerV2")] = {"kueue": {"enabled": True, "priorities": {"urgent": 1000, "batch": 10}}}
    config[cfg("jobs")][0]["scheduling"] = {"priorityClass": "urgent"}
    plan = run_stack(config)
    classes = plan.of_type("kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass")
    assert {c.inputs["metadata"]["name"]: c.inputs["value"] for c in classes} == {"urgent": 1000, "batch": 10}
    cluster_queue = plan.one("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue").inputs
    assert cluster_queue["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority"}
    assert plan.one(TRAINJOB).inputs["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "urgent"
    config[cfg("trainerV2")]["kueue"]["maxRequeues"] = None
    release = run_stack(config).one(RELEASE, "kueue").inputs
    manager_config = yaml.safe_load(release["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert "requeuingStrategy" not in manager_config["waitForPodsReady"]


def test_kueue_running_already_gets_only_the_queue(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("training")]["backend"] = "v2"
    config[cfg("trainerV2")] = {"kueue": {"enabled": True, "install": False}}
    plan = run_stack(config)
    assert [r.name for r in plan.of_type(RELEASE)] == ["kubeflow-trainer"]
    assert plan.one("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")


def test_a_cluster_with_trainer_v2_gets_only_the_runtimes(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("jobs")][0]["backend"] = "v2"
    config[cfg("trainerV2")] = {"install": False}
    plan = run_stack(config)
    assert not plan.of_type(RELEASE)
    assert {r.urn for r in plan.of_type(RUNTIME)} <= set(plan.one(TRAINJOB).dependencies)
    assert not plan.of_type("kubernetes:kubeflow.org/v1:PyTorchJob")


def test_stacks_without_v2_jobs_install_nothing_of_it(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    assert not plan.of_type(RUNTIME) and not plan.of_type(TRAINJOB)
    assert not any(r.type.endswith(":TrainerV2") for r in plan.resources)


def test_trainer_v2_images_are_listed_for_the_mirror_as_the_chart_pulls_them() -> None:
    config = stack_config("prod")
    config[cfg("trainerV2")] = {"install": True}
    spec = load_spec(config, credentials=False)
    copies = dict(image_copies(spec))
    # The chart writes <image.registry>/<image.repository>:<tag>, the tag defaulting to v<chart version>.
    values = trainer_v2_values(spec.trainer_v2, mirror=MIRROR, node_selector=None)
    manager = f"{values['image']['registry']}/{values['image']['repository']}:v2.3.0"
    assert copies["ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0"] == manager
    jobset = values["jobset"]["image"]  # the JobSet chart writes <repository>:<tag>
    assert copies["registry.k8s.io/jobset/jobset:v0.12.0"] == f"{jobset['repository']}:{jobset['tag']}"
    assert "registry.k8s.io/kueue/kueue:v0.19.2" not in copies
    config[cfg("trainerV2")] = {"install": True, "kueue": {"enabled": True}}
    queued = load_spec(config, credentials=False)
    # The Kueue chart writes <repository>:<tag>.
    kueue = kueue_values(queued.trainer_v2.kueue, mirror=MIRROR, node_selector=None)["controllerManager"]["manager"]
    mirrored_kueue = f"{kueue['image']['repository']}:{kueue['image']['tag']}"
    assert dict(image_copies(queued))["registry.k8s.io/kueue/kueue:v0.19.2"] == mirrored_kueue


def test_local_stack_runs_the_same_job_on_both_backends(run_stack, tmp_path: Path) -> None:
    from components.plan.command import write_manifests

    plan = run_stack(stack_config("local"), "local")
    v1 = plan.one("kubernetes:kubeflow.org/v1:PyTorchJob").inputs
    v2 = plan.one(TRAINJOB).inputs
    assert (v1["metadata"]["name"], v2["metadata"]["name"]) == ("mnist-cpu", "mnist-cpu-v2")
    assert v2["spec"]["trainer"]["command"][-len(v1_flags := _flags(v1)) :] == v1_flags
    assert v2["spec"]["trainer"]["numProcPerNode"] == int(v1["spec"]["nprocPerNode"])
    written = {p.name for p in write_manifests(plan, tmp_path)}
    assert {"6-clustertrainingruntime-ack-training-platform-torch.yaml", "6-trainjob-mnist-cpu-v2.yaml"} <= written
    for path in tmp_path.glob("6-trainjob-*.yaml"):
        assert_matches_model(yaml.safe_load(path.read_text()), TrainerV1alpha1TrainJob)


def _flags(job: dict[str, Any]) -> list[str]:
    command = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    return command[command.index("trainer") + 1 :]


@pytest.mark.parametrize(
    ("exit_code", "conditions", "action"),
    [
        (1, [], "FailJobSet"),  # a bug: a retry fails the same way
        (2, [], "FailJobSet"),  # bad data, agreed by every rank
        (143, ["DisruptionTarget"], "RestartJobSetAndIgnoreMaxRestarts"),  # evicted or preempted, checkpointed
        (137, ["DisruptionTarget"], "RestartJobSetAndIgnoreMaxRestarts"),  # killed after the grace period
        (143, [], "RestartJobSet"),  # SIGTERM from elsewhere: spends one restart
        (137, [], "RestartJobSet"),  # the OOM killer
        (203, [], "RestartJobSet"),  # trainer.launch's transient status: a lost peer or rendezvous
    ],
)
def test_a_v2_job_fails_fast_on_a_bug_and_retries_disruptions_without_limit(
    exit_code: int, conditions: list[str], action: str
) -> None:
    spec = training_runtime()["spec"]["template"]["spec"]
    node_job = spec["replicatedJobs"][0]["template"]["spec"]
    reason, message = job_failure(node_job, TRAINER_NODE, exit_code, conditions)
    assert jobset_action(spec["failurePolicy"], reason, message) == action


def test_trainjob_env_from_a_secret_is_a_reference_not_a_value() -> None:
    from test_jobs import SECRET_ENV

    spec = TrainingJobSpec(name="finetune", image=IMAGE, backend="v2", env=SECRET_ENV)
    job = train_job(spec, REPRESENTATIVE["single-node-1gpu"][1])
    assert_matches_model(job, TrainerV1alpha1TrainJob)
    assert TrainerV1alpha1TrainJob.from_dict(job).to_dict() == job
    env = job["spec"]["trainer"]["env"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hub-token", "key": "token"}}} in env
    assert {"name": "RUN_NOTE", "value": "7"} in env

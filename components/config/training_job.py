"""One training job: what it runs, on how many nodes, with which resources and policies,
and which Kubeflow API runs it (``backend``: the v1 PyTorchJob or the v2 TrainJob)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from .base import (
    _DNS_1035_LABEL,
    JOB_NAME_MAX,
    POOL_LABEL,
    Cpu,
    DnsLabel,
    EnvName,
    EnvValue,
    LabelKey,
    Labels,
    Quantity,
    Spec,
    field_error,
    quantity_bytes,
)
from .job_settings import (
    CheckpointKeySpec,
    ElasticSpec,
    EnvEntry,
    JobVolume,
    RunPolicySpec,
    SchedulingSpec,
    TolerationSpec,
    TopologySpec,
    TrainerArgs,
    check_image_choice,
    check_pinned,
)
from .kinds import PYTHON_LAUNCHER_ONE_PROCESS, TORCH_LAUNCHERS, V2_REFUSED, CodeSource, Framework, Launcher
from .node_health import NodeCheckSpec

Backend = Literal["v1", "v2"]
TORCHRUN_ENV_PREFIX = "PET_"
"""torchrun reads every ``PET_<FLAG>`` variable as its ``--<flag>``. Trainer v2 sets
``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR`` and
``PET_MASTER_PORT`` and its webhook refuses a TrainJob that sets them (kubeflow/trainer
v2.3.0 ``pkg/constants/constants.go`` ``TorchRunReservedEnvNames``,
``pkg/runtime/framework/plugins/torch/torch.go`` ``Validate``); any other ``PET_`` name
would silently change how torchrun starts the trainer, so a v2 job may set none."""
V2_RESERVED_ENV = {
    "jax": ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"),
    "xgboost": ("DMLC_NUM_WORKER", "DMLC_TASK_ID", "DMLC_TRACKER_PORT", "DMLC_TRACKER_URI"),
    "mpi": (
        "OMPI_MCA_orte_default_hostfile",
        "OMPI_MCA_orte_keep_fqdn_hostnames",
        "OMPI_MCA_orte_set_default_slots",
        "OMPI_MCA_plm_rsh_args",
    ),
}
"""What Trainer v2.3.0 sets in a JAX, XGBoost or MPI job's trainer container: the JAX plugin its
``JAX_*`` variables (``pkg/runtime/framework/plugins/jax/jax.go`` ``EnforceMLPolicy``), the
XGBoost plugin its ``DMLC_*`` ones and the MPI plugin OpenMPI's hostfile, slots and ssh
arguments, whose webhooks refuse a TrainJob that sets them (``plugins/xgboost/xgboost.go``,
``plugins/mpi/mpi.go`` ``Validate``; ``pkg/constants`` ``XGBoostReservedEnvNames``,
``MPIReservedEnvNames``)."""


def _nested(a: str, b: str) -> bool:
    return a.startswith(b + "/") or b.startswith(a + "/")


def _job_name(value: str) -> str:
    if len(value) > JOB_NAME_MAX or not _DNS_1035_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a valid job name: use at most {JOB_NAME_MAX} lowercase letters, digits "
            "and '-', starting with a letter and ending with a letter or digit"
        )
    return value


class TrainingJobSpec(Spec):
    """One training job running the bundled trainer (or your own command): a PyTorchJob on backend v1, a
    TrainJob on backend v2."""

    name: Annotated[str, AfterValidator(_job_name)]
    """Job name (DNS-1035 label, at most 40 characters)."""
    preset: Literal["train", "netbench"] = "train"
    """``train`` runs the trainer; ``netbench`` measures all-reduce bandwidth across the nodes."""
    namespace: DnsLabel | None = None
    """Must be the platform's training namespace, which holds the claims and the pull secret (its default);
    with ``team``, the team's namespace."""
    team: DnsLabel | None = None
    """The team (``teams[].name``) the job belongs to: it runs in the team's namespace, with its claims, uid and
    queue. Required when the stack declares teams."""
    labels: Labels = Field(default_factory=dict)
    node_selector: Labels = Field(default_factory=dict)
    """Node labels the pods must also have, beside the pool's ``ack-training-platform/pool``."""
    tolerations: list[TolerationSpec] = Field(default_factory=list)
    """Taints the pods tolerate, beside the pool's."""
    annotations: dict[LabelKey, EnvValue] = Field(default_factory=dict)
    image: str | None = None
    """Full image reference, pinned by tag (not ``latest``) or digest."""
    image_tag: str | None = Field(default=None)
    """Tag in the platform's registry repository (instead of ``image``)."""
    command: list[str] | None = None
    """Your own program and its arguments instead of the bundled trainer: run as is, or started by
    ``launcher``."""
    args: list[str] = Field(default_factory=list)
    """Extra arguments appended to the command (e.g. trainer flags not in ``trainer``)."""
    trainer: TrainerArgs = Field(default_factory=TrainerArgs)
    env: dict[EnvName, EnvEntry] = Field(default_factory=dict)
    """Extra environment variables; numbers are written as text. ``{secretKeyRef: {name, key}}`` reads one
    from a Secret in the job's namespace instead."""
    volumes: list[JobVolume] = Field(default_factory=list)
    """Other claims of the job's namespace to mount in every pod, ``{claim, mountPath, readOnly}``; a
    team's namespace admits only its own claims (the data and output volumes, its datasets' sources)."""
    checkpoint_key: CheckpointKeySpec | None = None
    """Sign checkpoints and load only signed ones: ``{}`` for a generated key, ``{secretKeyRef: {name, key}}``
    for a Secret of yours. Unset: checkpoints are not signed."""
    node_check: NodeCheckSpec | None = None
    """Check each pod's node before training: an all-reduce across its GPUs against the pool's baseline
    (docs/node-health.md). Unset: no check."""
    nodes: int = Field(default=1, ge=1, le=512)
    """Pods, one per node: on v1 one Master plus ``nodes - 1`` Workers, on v2 the TrainJob's ``numNodes``."""
    elastic: ElasticSpec | None = None
    """Elastic job (Workers only, c10d rendezvous) instead of a fixed ``nodes``; v1 only."""
    gpus_per_node: int | None = Field(default=None, ge=0, le=16)
    """GPUs per pod; the GPU pool's ``gpusPerNode`` when unset, 0 for a CPU job."""
    procs_per_node: int | None = Field(default=None, ge=1, le=64)
    """Processes per pod; equals the GPU count for GPU jobs, 1 by default for CPU jobs."""
    cpu: Cpu = "8"
    """CPU request and limit per pod."""
    memory: Quantity = "64Gi"
    """Memory request and limit per pod."""
    shm_size: Quantity | None = Field(default=None)
    """``/dev/shm`` size; 16Gi per GPU (2Gi for CPU jobs) when unset. Counts against ``memory``."""
    network: Literal["tcp", "rdma"] = "tcp"
    """``rdma`` runs NCCL over the GPU pool's RDMA fabric (eRDMA); needs a pool with a fabric."""
    nccl_debug: Literal["INFO", "WARN", "TRACE"] | None = Field(default=None)
    restart_policy: Literal["OnFailure", "ExitCode", "Never"] = Field(default="OnFailure")
    """v1 only: on v2 the platform runtime restarts all of a job's pods together after a failure."""
    run_policy: RunPolicySpec = Field(default_factory=RunPolicySpec)
    scheduling: SchedulingSpec = Field(default_factory=SchedulingSpec)
    topology: TopologySpec | None = Field(default=None)
    """Keep the job's pods in one network domain (docs/network.md); none when unset."""
    framework: Framework = "pytorch"
    """The job kind: on v1 PyTorchJob, TFJob, XGBoostJob, MPIJob, JAXJob or PaddleJob; on v2 ``pytorch``,
    ``jax`` or ``xgboost``, a TrainJob on the platform's runtime for it, or ``mpi``, a TrainJob on a
    TrainingRuntime of its own whose image must run ``sshd`` (docs/job-kinds.md). Every kind but PyTorch runs your
    own ``command``."""
    launcher: Launcher | None = None
    """How ``command`` starts: ``torchrun``, ``accelerate`` or ``deepspeed`` (PyTorch jobs, world and
    rendezvous from the operator) or ``python`` (one process per pod); the command as is when unset."""
    code: CodeSource | None = None
    """Where the code comes from when not from the image: a path on the data volume or a git commit."""
    parameter_servers: int = Field(default=0, ge=0, le=64)
    """TensorFlow: PS pods beside the Chief and ``nodes - 1`` Workers."""
    evaluator: bool = False
    """TensorFlow: one Evaluator pod."""
    backend: Backend | None = None
    """``v1``: a PyTorchJob for the Training Operator; ``v2``: a TrainJob for Kubeflow Trainer v2; the
    stack's ``training.backend`` when unset."""

    @model_validator(mode="after")
    def _check(self) -> TrainingJobSpec:
        if (conflict := framework_conflict(self)) is not None:
            raise field_error(*conflict)
        if self.backend == "v2" and (conflict := v2_conflict(self)) is not None:
            raise field_error(*conflict)
        check_image_choice(self.image, self.image_tag)
        if self.code is not None and self.code.git_url is not None:
            check_pinned(self.code.clone_image, "code.cloneImage")
        if POOL_LABEL in self.node_selector:
            raise field_error(
                "nodeSelector", f"{POOL_LABEL} is the job's pool, set from the GPU pool: drop it from nodeSelector"
            )
        if self.elastic is not None and self.nodes != 1:
            raise field_error("nodes", "an elastic job sizes itself with elastic.minNodes/maxNodes: drop nodes")
        if self.gpus_per_node == 0 and self.network == "rdma":
            raise field_error("network", "rdma networking is for GPU jobs; a CPU job uses tcp")
        if self.gpus_per_node and self.procs_per_node not in (None, self.gpus_per_node):
            raise field_error(
                "procsPerNode",
                f"procsPerNode ({self.procs_per_node}) must equal gpusPerNode ({self.gpus_per_node}): one process drives one GPU",
            )
        if self.shm_size is not None and quantity_bytes(self.shm_size) >= quantity_bytes(self.memory):
            raise field_error(
                "shmSize", f"shmSize {self.shm_size} must be smaller than memory {self.memory}: /dev/shm is memory"
            )
        paths = [v.mount_path.rstrip("/") for v in self.volumes]
        for i, path in enumerate(paths):
            other = next((p for p in paths[:i] if p == path or _nested(p, path)), None)
            if other is not None:
                raise field_error(
                    f"volumes[{i}].mountPath", f"{path} and {other} overlap: mount each claim at a path of its own"
                )
        if self.scheduling.min_available is not None and (problem := gang_problem(self)) is not None:
            raise field_error("scheduling.minAvailable", problem)
        # Without them the pool's GPUs per node set the processes (capacity.pool_problem checks then).
        procs = self.procs_per_node or self.gpus_per_node or (1 if self.gpus_per_node == 0 else None)
        if procs is not None and (mesh := self.trainer.mesh_problem(procs, self.pod_counts)) is not None:
            raise field_error(f"trainer.{mesh[0]}", mesh[1])
        return self

    @property
    def pod_counts(self) -> range:
        """The pod counts the job may run at: its ``nodes``, or an elastic job's range."""
        return range(self.min_pods, self.max_pods + 1)

    @property
    def min_pods(self) -> int:
        """Pods that must run at once: all of them, or an elastic job's minimum."""
        return self.elastic.min_nodes if self.elastic else self.nodes

    @property
    def max_pods(self) -> int:
        return self.elastic.max_nodes if self.elastic else self.nodes

    @property
    def side_pods(self) -> dict[str, int]:
        """The v1 pods beside the nodes, by replica type: an MPIJob's Launcher (it runs ``mpirun``,
        no rank), a TFJob's parameter servers and Evaluator."""
        pods = {
            "Launcher": int(self.framework == "mpi"),
            "PS": self.parameter_servers,
            "Evaluator": int(self.evaluator),
        }
        return {role: count for role, count in pods.items() if count}

    @property
    def gang_pods(self) -> int:
        """Every pod the v1 operator creates for the job (an elastic job's at most): what Volcano's
        PodGroup counts, since the operator makes its ``minMember`` the replica total (kubeflow/trainer
        v1.9.4 ``pkg/controller.v1/common/job.go`` ``ReconcileJobs``)."""
        return self.max_pods + sum(self.side_pods.values())


def gang_problem(job: TrainingJobSpec) -> str | None:
    """Why ``job``'s ``scheduling.minAvailable`` is not a gang it can run with, or ``None``.

    A gang counts pods, not nodes. A fixed-size job needs every pod: fewer admits a part that holds
    its nodes while the rest waits. An elastic job runs from ``elastic.minNodes`` pods on.
    """
    wanted, pods = job.scheduling.min_available, job.gang_pods
    side = job.side_pods
    counted = f"{pods} pods"
    if side:
        nodes = "Workers" if job.framework == "mpi" else "nodes"
        parts = [f"{job.max_pods} {nodes}", *(f"{n} {role}" for role, n in side.items())]
        counted += f" ({', '.join(parts)})"
    if wanted > pods:
        return f"minAvailable ({wanted}) exceeds the job's {counted}"
    if job.elastic is not None:
        if wanted < job.elastic.min_nodes:
            return (
                f"minAvailable ({wanted}) is fewer than elastic.minNodes ({job.elastic.min_nodes}), below which "
                f"torchrun's rendezvous does not start: give {job.elastic.min_nodes} to {pods}, or drop it "
                "(an elastic job's gang is its minNodes)"
            )
        return None
    if wanted < pods:
        return (
            f"minAvailable ({wanted}) is fewer than the job's {counted}: a fixed-size job runs only once all of "
            f"them do, and a part admitted alone holds its nodes while it waits; give {pods} or drop it (the gang is "
            "every pod by default)"
        )
    return None


def v2_conflict(job: TrainingJobSpec) -> tuple[str, str] | None:
    """The first setting of ``job`` that Trainer v2 has no counterpart for, as (key below
    the job, what to do instead); ``None`` when the job can run as a TrainJob.

    The v2.3.0 TrainJob (``pkg/apis/trainer/v1alpha1/trainjob_types.go``) has a fixed
    ``numNodes``, no restart or clean-pod policy and no backoff limit of its own (the
    runtime's JobSet holds the failure policy), and its runtime patches cannot set a pod's
    priority class (a v2 job's priority is Kueue's, checked with the platform); queueing is
    Kueue's (or a runtime's ``podGroupPolicy``), not a job's. The platform has v2 runtimes for
    the frameworks of ``V2_FRAMEWORKS`` and, one per job, for ``mpi``, and Trainer v2 sets each
    one's world itself.
    """
    run, scheduling = job.run_policy, job.scheduling
    keep_v1 = "or keep the job on backend v1"
    if job.framework in V2_REFUSED:
        return ("framework", f"{V2_REFUSED[job.framework]}: run {job.framework} on backend v1")
    if job.framework == "mpi" and job.nodes < 2:
        return (
            "nodes",
            "an MPI TrainJob's launcher is its first node and Trainer v2.3.0 still starts one more node pod for a "
            "single node (plugins/mpi/mpi.go EnforceMLPolicy): give nodes 2 or more, " + keep_v1,
        )
    if job.elastic is not None:
        return (
            "elastic",
            "Trainer v2 has no elastic training (v2.3.0 runs a fixed numNodes): give a fixed nodes instead, " + keep_v1,
        )
    if "restart_policy" in job.model_fields_set:
        return (
            "restartPolicy",
            "a TrainJob has no restart policy: the platform runtime restarts all of a job's pods together after a "
            f"failure, which resumes from the last checkpoint; drop restartPolicy, {keep_v1}",
        )
    if "backoff_limit" in run.model_fields_set:
        return (
            "runPolicy.backoffLimit",
            "a TrainJob has no backoff limit of its own: the platform runtime allows "
            f"{RunPolicySpec.model_fields['backoff_limit'].default} restarts of the whole job; drop backoffLimit, "
            + keep_v1,
        )
    if "clean_pod_policy" in run.model_fields_set:
        return (
            "runPolicy.cleanPodPolicy",
            f"a TrainJob keeps its finished pods until the job is removed from the stack; drop cleanPodPolicy, {keep_v1}",
        )
    if run.ttl_seconds_after_finished is not None:
        return (
            "runPolicy.ttlSecondsAfterFinished",
            f"a TrainJob has no TTL (Trainer v2.3.0's TrainJob spec has none); drop it, {keep_v1}",
        )
    if scheduling.queue is not None:
        return (
            "scheduling.queue",
            "a Volcano queue has no counterpart for a TrainJob: queue v2 jobs with Kueue "
            f"(trainerV2.kueue.enabled: true, which puts every v2 job in the platform's queue) and drop queue, {keep_v1}",
        )
    if scheduling.min_available is not None:
        return (
            "scheduling.minAvailable",
            "a Volcano gang size has no counterpart for a TrainJob: with trainerV2.kueue.enabled Kueue admits all of "
            f"a job's pods together; drop minAvailable, {keep_v1}",
        )
    if job.framework == "xgboost" and (job.gpus_per_node or 0) > 1:
        return ("gpusPerNode", xgboost_gpus_problem(job.gpus_per_node))
    if job.framework in V2_RESERVED_ENV:
        reserved = sorted(set(V2_RESERVED_ENV[job.framework]) & set(job.env))
        if reserved:
            return ("env", f"{', '.join(reserved)}: Trainer v2 sets them for a {job.framework} job; drop them")
        return None
    reserved = sorted(name for name in job.env if name.startswith(TORCHRUN_ENV_PREFIX))
    if reserved:
        return (
            "env",
            f"{', '.join(reserved)}: Trainer v2 sets torchrun's PET_* variables itself (PET_NNODES, "
            "PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT) and torchrun reads any other "
            "as a flag; drop them and give torchrun flags in command",
        )
    return None


def xgboost_gpus_problem(gpus: int) -> str:
    """Why an XGBoost TrainJob cannot have ``gpus`` GPUs per pod (more than one)."""
    return (
        f"{gpus} GPUs per pod: Trainer v2.3.0 counts one XGBoost worker per GPU (DMLC_NUM_WORKER = nodes x GPUs, "
        "plugins/xgboost/xgboost.go) but gives each pod one DMLC_TASK_ID, and the pod runs one process: give "
        "gpusPerNode 0 or 1, or keep the job on backend v1"
    )


def framework_conflict(job: TrainingJobSpec) -> tuple[str, str] | None:
    """The first setting of ``job`` that means nothing for its framework or launcher, as (key
    below the job, why); ``None`` when every setting applies."""
    kind = job.framework
    if job.launcher in ("accelerate", "deepspeed") and job.elastic is not None:
        return ("elastic", f"{job.launcher} needs a fixed world: give nodes instead of elastic")
    if job.backend == "v2" and job.code is not None:
        return ("code", "the platform's Trainer v2 runtimes take code from the image: run this job on backend v1")
    if job.launcher is not None and job.command is None:
        return ("command", f"launcher {job.launcher} starts your command: give command (the script and its arguments)")
    if kind == "pytorch":
        if job.launcher == "python" and job.procs_per_node not in (None, 1):
            return ("procsPerNode", PYTHON_LAUNCHER_ONE_PROCESS)
        if job.parameter_servers or job.evaluator:
            key = "parameterServers" if job.parameter_servers else "evaluator"
            return (key, "parameter servers and an evaluator are TFJob roles: set framework: tensorflow or drop it")
        return None
    bundled = {
        "trainer": "trainer flags are the bundled PyTorch trainer's",
        "preset": "presets run the bundled PyTorch trainer",
        "elastic": "only a PyTorchJob has an elastic policy in the Training Operator v1.9.4",
    }
    for attr, key in (("trainer", "trainer"), ("preset", "preset"), ("elastic", "elastic")):
        if attr in job.model_fields_set:
            return (key, f"{bundled[attr]}: a {kind} job runs your command; drop {key}")
    if job.command is None:
        return ("command", f"a {kind} job runs your own code: give command (the program and its arguments)")
    if job.launcher in TORCH_LAUNCHERS:
        return ("launcher", f"{job.launcher} starts torch processes; a {kind} job uses launcher python or none")
    if kind != "mpi" and job.procs_per_node not in (None, 1):
        return ("procsPerNode", f"a {kind} job runs one process per pod; only mpi runs several (slots per worker)")
    if kind != "tensorflow" and (job.parameter_servers or job.evaluator):
        key = "parameterServers" if job.parameter_servers else "evaluator"
        return (key, f"parameter servers and an evaluator are TFJob roles, not {kind} ones: drop {key}")
    return None

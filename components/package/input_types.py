"""The package's input types, generated from the specs by ``python -m components.package.codegen --write``:
edit the specs, not this file (a test fails while it is stale)."""

import enum
from typing import Any, NotRequired, TypedDict

import pulumi


class GpuPoolSpotStrategy(enum.StrEnum):
    """The values of GpuPoolSpec.spot_strategy."""

    NO_SPOT = "NoSpot"
    SPOT_WITH_PRICE_LIMIT = "SpotWithPriceLimit"
    SPOT_AS_PRICE_GO = "SpotAsPriceGo"


class TaintEffect(enum.StrEnum):
    """The values of TaintSpec.effect."""

    NO_SCHEDULE = "NoSchedule"
    NO_EXECUTE = "NoExecute"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"


class TaintSpec(TypedDict):
    key: NotRequired[pulumi.Input[str]]
    value: NotRequired[pulumi.Input[str]]
    effect: NotRequired[pulumi.Input[TaintEffect]]


class GpuPoolDiskCategory(enum.StrEnum):
    """The values of GpuPoolSpec.disk_category."""

    CLOUD_ESSD = "cloud_essd"
    CLOUD_AUTO = "cloud_auto"
    CLOUD_EFFICIENCY = "cloud_efficiency"


class GpuPoolFabric(enum.StrEnum):
    """The values of GpuPoolSpec.fabric."""

    NONE = "none"
    ERDMA = "erdma"
    RDMA = "rdma"


class NodeCapacitySpec(TypedDict):
    """What one node of the pool can give to pods: the `Allocatable` that
    `kubectl describe node` shows for it (capacity less what ACK keeps for the system)."""

    cpu: pulumi.Input[str]
    """CPU, e.g. `186` or `15800m`."""
    memory: pulumi.Input[str]
    """Memory, e.g. `990Gi`."""


class GpuPoolSpec(TypedDict):
    """An autoscaling node pool of GPU instances, tainted so only GPU work lands there."""

    name: NotRequired[pulumi.Input[str]]
    """Node pool name; nodes are labelled `ack-training-platform/pool=<name>`."""
    instance_types: pulumi.Input[list[pulumi.Input[str]]]
    """ECS instance types in order of preference; later ones are fallbacks when one is sold out."""
    gpus_per_node: pulumi.Input[int]
    """GPUs in each of the instance types (they must agree)."""
    spot_strategy: NotRequired[pulumi.Input[GpuPoolSpotStrategy]]
    """`NoSpot` (on-demand), `SpotAsPriceGo` (spot at market price) or `SpotWithPriceLimit`."""
    spot_price_limit: NotRequired[pulumi.Input[float]]
    """Hourly price cap per instance, required with `SpotWithPriceLimit`."""
    compensate_with_on_demand: NotRequired[pulumi.Input[bool]]
    """Start on-demand nodes, at on-demand price, whenever spot ones cannot be created (price or stock), scale-outs included (spot pools only)."""
    min_size: NotRequired[pulumi.Input[int]]
    """Fewest nodes; 0 lets an idle pool cost nothing."""
    max_size: NotRequired[pulumi.Input[int]]
    """Most nodes the autoscaler may start."""
    desired_size: NotRequired[pulumi.Input[int]]
    """Fixed size: only when `minSize == maxSize` (autoscaling off); must equal them."""
    taint: NotRequired[pulumi.Input[TaintSpec]]
    """Taint on every node; jobs get the matching toleration from the pool."""
    labels: NotRequired[pulumi.Input[dict[str, pulumi.Input[str]]]]
    """Extra node labels."""
    system_disk_gib: NotRequired[pulumi.Input[int]]
    """System disk size; training images are large."""
    data_disk_gib: NotRequired[pulumi.Input[int]]
    """Data disk for container images and local scratch (0: none)."""
    disk_category: NotRequired[pulumi.Input[GpuPoolDiskCategory]]
    auto_repair: NotRequired[pulumi.Input[bool]]
    """Let ACK replace nodes that fail health checks (e.g. a GPU fell off the bus)."""
    fabric: NotRequired[pulumi.Input[GpuPoolFabric]]
    """GPU-to-GPU network across nodes: `none` (TCP), `erdma` (Elastic RDMA on gn8is, ebmgn8is, gn8v, ebmgn8v),
    or `rdma` (Lingjun)."""
    driver_version: NotRequired[pulumi.Input[str]]
    """Pin the NVIDIA driver, e.g. `550.127.08` (ACK label `ack.aliyun.com/nvidia-driver-version`)."""
    low_latency: NotRequired[pulumi.Input[bool]]
    """Start the nodes in an ECS deployment set with the `LowLatency` strategy: ECS places them in one network
    topology range of one zone, for the shortest paths between them. Only the first vSwitch is used (one zone);
    at most 20 nodes; on-demand only."""
    node_capacity: NotRequired[pulumi.Input[NodeCapacitySpec]]
    """What one node gives pods, against which jobs are checked and their `cpu` and `memory` defaults are
    sized; checked against what ECS lists for the type at `pulumi preview`. The platform knows every type of
    ECS's GPU-accelerated compute-optimized family page, listed in the configuration reference under "GPU
    instance types": without nodeCapacity, a type of a family the page lists that is not one of its sizes is
    refused as misspelt, and a pool of a type of another family has GPU jobs that must give their own `cpu`
    and `memory`, which only the platform stack's `pulumi preview` checks against ECS's figures for the
    type."""


class TrainingNamespaceBackend(enum.StrEnum):
    """The values of TrainingNamespaceSpec.backend."""

    V1 = "v1"
    V2 = "v2"


class TrainingNamespaceSpec(TypedDict):
    """The namespace jobs run in, and what every job there shares."""

    namespace: NotRequired[pulumi.Input[str]]
    service_account: NotRequired[pulumi.Input[str]]
    gpu_quota: NotRequired[pulumi.Input[int]]
    """Most GPUs all jobs in the namespace may request together (no quota when unset)."""
    backend: NotRequired[pulumi.Input[TrainingNamespaceBackend]]
    """Kubeflow API of every job without its own `backend`: `v1` (PyTorchJob, Training Operator) or `v2`
    (TrainJob, Kubeflow Trainer v2)."""


class NasFileSystemType(enum.StrEnum):
    """The values of NasSpec.file_system_type."""

    STANDARD = "standard"
    EXTREME = "extreme"


class NasStorageType(enum.StrEnum):
    """The values of NasSpec.storage_type."""

    PERFORMANCE = "Performance"
    CAPACITY = "Capacity"
    PREMIUM = "Premium"
    STANDARD = "standard"
    ADVANCE = "advance"


class NasUserAccess(enum.StrEnum):
    """The values of NasSpec.user_access."""

    ROOT_SQUASH = "root_squash"
    ALL_SQUASH = "all_squash"
    NO_SQUASH = "no_squash"


class NasSpec(TypedDict):
    """A NAS file system shared by every training pod over NFSv3."""

    existing_file_system_id: NotRequired[pulumi.Input[str]]
    """Adopt this file system (needs `existingMountTargetDomain`)."""
    existing_mount_target_domain: NotRequired[pulumi.Input[str]]
    """Mount target domain of the adopted file system, e.g. `xxxx.cn-hangzhou.nas.aliyuncs.com`."""
    file_system_type: NotRequired[pulumi.Input[NasFileSystemType]]
    """`standard` (general purpose) or `extreme` (low latency, for many small files)."""
    storage_type: NotRequired[pulumi.Input[NasStorageType]]
    """Performance/Capacity/Premium for standard; standard/advance for extreme."""
    capacity_gib: NotRequired[pulumi.Input[int]]
    """Provisioned capacity, required for extreme file systems."""
    zone_id: NotRequired[pulumi.Input[str]]
    """Zone of an extreme file system; the first vSwitch's zone when unset (required with an adopted VPC)."""
    access_cidr: NotRequired[pulumi.Input[str]]
    """Source range of the NAS access rule; the node vSwitches' blocks when unset (required with an adopted VPC,
    whose vSwitch blocks the stack does not know). Must lie inside the VPC."""
    user_access: NotRequired[pulumi.Input[NasUserAccess]]
    """How NAS treats the client's uid: `root_squash` maps root (uid 0) to the anonymous user, so a pod running
    as root owns nothing on the file system; `no_squash` trusts root. Jobs run as their team's uid."""
    base_path: NotRequired[pulumi.Input[str]]
    """Directory on the file system that holds the volumes: `/training`, or `/share/training` on extreme NAS."""


class VolumeSpec(TypedDict):
    claim_name: pulumi.Input[str]
    """PersistentVolumeClaim name."""
    size: pulumi.Input[str]
    """Size recorded on the volume, e.g. `500Gi`. NAS bills what is used and does not enforce it here:
    the shared volumes are fixed directories, which get no quota."""


class StorageAccessMode(enum.StrEnum):
    """The values of StorageSpec.access_mode."""

    READ_WRITE_MANY = "ReadWriteMany"
    READ_WRITE_ONCE = "ReadWriteOnce"


class OssSpec(TypedDict):
    """A read-mostly dataset in an OSS bucket, mounted read-only (ossfs) as the data volume
    instead of a NAS claim. No AccessKey: the OSS CSI plugin reads the bucket as a RAM role
    it assumes through RRSA."""

    bucket: pulumi.Input[str]
    """Bucket name."""
    path: NotRequired[pulumi.Input[str]]
    """Directory in the bucket holding the dataset."""
    endpoint: NotRequired[pulumi.Input[str]]
    """OSS endpoint; the region's internal one (`oss-<region>-internal.aliyuncs.com`) when unset."""
    role_name: NotRequired[pulumi.Input[str]]
    """RAM role the OSS CSI plugin assumes (RRSA) to read the bucket. Created, trusted by this cluster's OIDC
    provider for the plugin's service account and allowed to read only this bucket, when unset; required with an
    adopted cluster."""


class StorageSpec(TypedDict):
    """Where datasets and checkpoints live: NAS on ACK, the cluster's own storage locally."""

    nas: NotRequired[pulumi.Input[NasSpec]]
    """NAS file system settings (ACK stacks)."""
    storage_class_name: NotRequired[pulumi.Input[str]]
    """StorageClass the shared volumes use; created for NAS, must already exist locally."""
    create_storage_class: NotRequired[pulumi.Input[bool]]
    """Create the NAS StorageClass (off: it exists already, e.g. on a local cluster)."""
    data: NotRequired[pulumi.Input[VolumeSpec]]
    """Training data volume, mounted read-only in jobs."""
    output: NotRequired[pulumi.Input[VolumeSpec]]
    """Checkpoints and final models."""
    access_mode: NotRequired[pulumi.Input[StorageAccessMode]]
    """NAS volumes are `ReadWriteMany`; single-node local clusters may only offer `ReadWriteOnce`."""
    oss: NotRequired[pulumi.Input[OssSpec]]
    """Serve the data volume from an OSS bucket instead of NAS (large read-mostly datasets)."""


class TrainingJobPreset(enum.StrEnum):
    """The values of TrainingJobSpec.preset."""

    TRAIN = "train"
    NETBENCH = "netbench"


class TolerationEffect(enum.StrEnum):
    """The values of TolerationSpec.effect."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class TolerationSpec(TypedDict):
    """A taint the job's pods tolerate, beside the pool's own."""

    key: pulumi.Input[str]
    value: NotRequired[pulumi.Input[str]]
    """Only the taint with this value (operator `Equal`); any value when unset (operator `Exists`)."""
    effect: pulumi.Input[TolerationEffect]


class TrainerArgsParallel(enum.StrEnum):
    """The values of TrainerArgs.parallel."""

    DDP = "ddp"
    FSDP = "fsdp"
    HSDP = "hsdp"
    AUTO = "auto"


class TrainerArgsLlamaSize(enum.StrEnum):
    """The values of TrainerArgs.llama_size."""

    TINY = "tiny"
    SIZE_1B = "1b"
    SIZE_8B = "8b"
    SIZE_70B = "70b"


class TrainerArgs(TypedDict):
    """Flags for the bundled trainer (`python -m trainer`); unset, each is the trainer's own default."""

    model: NotRequired[pulumi.Input[str]]
    """`cnn` (the MNIST convnet), `gpt` (a small decoder), `llama` (a Llama-family decoder, sized by
    `llamaSize`), or your own model's factory as `package.module:factory`, imported from the job's
    `code`."""
    batch_size: NotRequired[pulumi.Input[int]]
    """Samples per process in each step, or in each micro-step under `--grad-accum`."""
    checkpoint_every: NotRequired[pulumi.Input[int]]
    """Steps between checkpoints; the most work a preemption can lose."""
    max_steps: NotRequired[pulumi.Input[int]]
    """Optimizer steps; with `epochs` the run ends at whichever comes first, and the learning rate
    anneals to that end."""
    epochs: NotRequired[pulumi.Input[int]]
    """Passes over the data; unlimited under `maxSteps` alone, one when neither is set."""
    lr: NotRequired[pulumi.Input[float]]
    """Peak learning rate, reached after the warm-up; the trainer's default for the model when unset."""
    synthetic_data: NotRequired[pulumi.Input[bool]]
    """Train on generated data instead of the data volume (smoke tests)."""
    parallel: NotRequired[pulumi.Input[TrainerArgsParallel]]
    """`ddp` (the trainer's default), `fsdp`, `hsdp` (shard within a node, replicate across nodes), or
    `auto`: chosen at start from the model's size, the GPU memory and a fabric probe."""
    fabric_probe: NotRequired[pulumi.Input[bool]]
    """Time the collectives inside and across nodes at start (a few seconds) and serve the figures;
    `parallel: auto` probes anyway."""
    init_from: NotRequired[pulumi.Input[str]]
    """Pretrained weights to start from, a plain state_dict (`.pt` or `.safetensors`), on the data
    volume (`/mnt/data/...`) or the output volume (`/mnt/output/...`); passed as `MODEL_PATH`. A job that has checkpoints resumes from them instead."""
    final_model_path: NotRequired[pulumi.Input[str]]
    """Where the final weights go (`FINAL_MODEL_PATH`), under `/mnt/output/`; `final_model.pt` in the
    job's output directory when unset."""
    llama_size: NotRequired[pulumi.Input[TrainerArgsLlamaSize]]
    """`model: llama`'s shape: `tiny` (the trainer's default), or Llama 3.2 1B's, Llama 3.1 8B's or 70B's
    (`1b`, `8b`, `70b`)."""
    tp: NotRequired[pulumi.Input[int]]
    """Tensor-parallel processes per sample (`model: llama`), inside one pod: it must divide the pod's processes
    and the model's key-value heads. 1 (the trainer's default) when unset; `parallel: auto` chooses it."""
    pp: NotRequired[pulumi.Input[int]]
    """Pipeline stages (`model: llama`), e.g. one per pod across slow links; `tp × pp` must divide the job's
    processes, the rest being FSDP replicas. 1 when unset; `parallel: auto` chooses it."""


class JobVolume(TypedDict):
    """A PersistentVolumeClaim of the job's namespace mounted in every pod of the job, as arena's
    `--data <claim>:<path>` does."""

    claim: pulumi.Input[str]
    """The claim's name, in the job's namespace."""
    mount_path: pulumi.Input[str]
    """Where the pods see it: an absolute path outside the platform's mounts."""
    read_only: NotRequired[pulumi.Input[bool]]
    """Mount it read-only."""


class SecretKeySelector(TypedDict):
    name: pulumi.Input[str]
    """Secret in the job's namespace."""
    key: pulumi.Input[str]
    """Key inside the Secret."""


class CheckpointKeySpec(TypedDict):
    """The key each checkpoint is signed and checked with (HMAC-SHA256):
    mounted read-only as a file, named by `$CHECKPOINT_KEY_FILE`. A checkpoint that is not signed
    with it is never loaded, so only pods holding the key can write what a resume trusts."""

    secret_key_ref: NotRequired[pulumi.Input[SecretKeySelector]]
    """An existing Secret in the job's namespace and its key. Unset: a random key of 64 characters,
    generated once for the job (pulumi-random) and kept in the Secret `<job>-checkpoint-key`; in the
    stack's state it is a Pulumi secret."""


class NodeCheckSpec(TypedDict):
    """An all-reduce across each pod's GPUs before training starts (an init container running
    `python -m trainer.health.check`); a node below the baseline fails its pod before any step."""

    baseline_gbps: pulumi.Input[float]
    """The pool's all-reduce bus bandwidth across one node's GPUs, GB/s (10^9 bytes per second): the
    `intra-node` `all_reduce` figure of a `netbench` job on the same pool (its `netbench.json`)."""
    min_share: NotRequired[pulumi.Input[float]]
    """Share of the baseline a node must reach."""


class ElasticSpec(TypedDict):
    min_nodes: pulumi.Input[int]
    max_nodes: pulumi.Input[int]
    max_restarts: NotRequired[pulumi.Input[int]]
    """Restarts of the whole worker group torchrun allows after a failure or membership change."""


class TrainingJobNetwork(enum.StrEnum):
    """The values of TrainingJobSpec.network."""

    TCP = "tcp"
    RDMA = "rdma"


class TrainingJobNcclDebug(enum.StrEnum):
    """The values of TrainingJobSpec.nccl_debug."""

    INFO = "INFO"
    WARN = "WARN"
    TRACE = "TRACE"


class TrainingJobRestartPolicy(enum.StrEnum):
    """The values of TrainingJobSpec.restart_policy."""

    ON_FAILURE = "OnFailure"
    EXIT_CODE = "ExitCode"
    NEVER = "Never"


class RunPolicyCleanPodPolicy(enum.StrEnum):
    """The values of RunPolicySpec.clean_pod_policy."""

    NONE = "None"
    RUNNING = "Running"
    ALL = "All"


class RunPolicySpec(TypedDict):
    backoff_limit: NotRequired[pulumi.Input[int]]
    """Pod restarts allowed before the job fails (preemptions count); v1 only: v2 jobs restart whole up to 6 times."""
    active_deadline_seconds: NotRequired[pulumi.Input[int]]
    ttl_seconds_after_finished: NotRequired[pulumi.Input[int]]
    """Seconds after the job ends before the operator deletes it (v1 only). Refused in a stack's `jobs`: the job
    is a Pulumi resource, and one the operator deleted would be created, and trained, again by the next
    `pulumi up --refresh`; remove the job from the stack to delete it. For jobs `ack-jobs submit` creates."""
    clean_pod_policy: NotRequired[pulumi.Input[RunPolicyCleanPodPolicy]]
    """`None` keeps finished pods so their logs stay readable; v1 only (v2 keeps them). Unset, `Running` for an
    MPIJob and a TFJob with PS or an Evaluator, whose pods outlive the job and would keep their GPUs."""
    suspend: NotRequired[pulumi.Input[bool]]
    """Suspend the job: its pods stop, or never start, until this is `false` again (`ack-jobs resume`).
    Of a job's settings, the only one changed in place."""


class SchedulingSpec(TypedDict):
    queue: NotRequired[pulumi.Input[str]]
    """Volcano queue (needs `operator.volcano.enabled`); v1 only: v2 jobs queue with `trainerV2.kueue`."""
    priority_class: NotRequired[pulumi.Input[str]]
    """Pod PriorityClass (v1), or Kueue WorkloadPriorityClass from `trainerV2.kueue.priorities` (v2)."""
    min_available: NotRequired[pulumi.Input[int]]
    """Gang size in pods, an MPIJob's Launcher and a TFJob's PS and Evaluator counted (needs Volcano); v1 only. Every
    pod of a fixed-size job, an elastic job's `minNodes` to `maxNodes`; unset, every pod or `minNodes`."""


class TopologyMode(enum.StrEnum):
    """The values of TopologySpec.mode."""

    PREFERRED = "preferred"
    REQUIRED = "required"


class TopologySpec(TypedDict):
    """Keep a job's pods on nodes that are close in the network: a pod affinity among the job's own pods on a node
    label whose equal values mark one network domain. The Kubernetes scheduler and Volcano (its `nodeorder` and
    `predicates` plugins) both honour it. A GPU v2 job queued by Kueue with `trainerV2.kueue.topology` is placed
    by Kueue instead, on a level of that topology."""

    key: NotRequired[pulumi.Input[str]]
    """The node label, e.g. `topology.kubernetes.io/zone` (on every ACK node), or `alibabacloud.com/asw-id` /
    `alibabacloud.com/point-of-delivery` (ACK Lingjun nodes)."""
    mode: NotRequired[pulumi.Input[TopologyMode]]
    """`preferred` still starts a job the domain cannot hold; `required` leaves it pending instead."""


class TrainingJobFramework(enum.StrEnum):
    """The values of TrainingJobSpec.framework."""

    PYTORCH = "pytorch"
    TENSORFLOW = "tensorflow"
    XGBOOST = "xgboost"
    MPI = "mpi"
    JAX = "jax"
    PADDLE = "paddle"


class TrainingJobLauncher(enum.StrEnum):
    """The values of TrainingJobSpec.launcher."""

    TORCHRUN = "torchrun"
    ACCELERATE = "accelerate"
    DEEPSPEED = "deepspeed"
    PYTHON = "python"


class CodeSource(TypedDict):
    """Where a job's code comes from when not from its image: a directory on the data volume,
    or a git repository at one commit (cloned by an init container into `/mnt/code`)."""

    path: NotRequired[pulumi.Input[str]]
    """A directory on the data volume (`/mnt/data/...`); the command runs there."""
    git_url: NotRequired[pulumi.Input[str]]
    """An `https://` repository the pods can reach, cloned without credentials."""
    commit: NotRequired[pulumi.Input[str]]
    """The full 40-character commit id to check out: a branch or tag moves under a job that restarts."""
    clone_image: NotRequired[pulumi.Input[str]]
    """Image with `git` that clones the repository, pinned."""


class TrainingJobBackend(enum.StrEnum):
    """The values of TrainingJobSpec.backend."""

    V1 = "v1"
    V2 = "v2"


class TrainingJobSpec(TypedDict):
    """One training job running the bundled trainer (or your own command): a PyTorchJob on backend v1, a
    TrainJob on backend v2."""

    name: pulumi.Input[str]
    """Job name (DNS-1035 label, at most 40 characters)."""
    preset: NotRequired[pulumi.Input[TrainingJobPreset]]
    """`train` runs the trainer; `netbench` measures all-reduce bandwidth across the nodes."""
    namespace: NotRequired[pulumi.Input[str]]
    """Must be the platform's training namespace, which holds the claims and the pull secret (its default);
    with `team`, the team's namespace."""
    team: NotRequired[pulumi.Input[str]]
    """The team (`teams[].name`) the job belongs to: it runs in the team's namespace, with its claims, uid and
    queue. Required when the stack declares teams."""
    labels: NotRequired[pulumi.Input[dict[str, pulumi.Input[str]]]]
    node_selector: NotRequired[pulumi.Input[dict[str, pulumi.Input[str]]]]
    """Node labels the pods must also have, beside the pool's `ack-training-platform/pool`."""
    tolerations: NotRequired[pulumi.Input[list[pulumi.Input[TolerationSpec]]]]
    """Taints the pods tolerate, beside the pool's."""
    annotations: NotRequired[pulumi.Input[dict[str, pulumi.Input[str]]]]
    image: NotRequired[pulumi.Input[str]]
    """Full image reference, pinned by tag (not `latest`) or digest."""
    image_tag: NotRequired[pulumi.Input[str]]
    """Tag in the platform's registry repository (instead of `image`)."""
    command: NotRequired[pulumi.Input[list[pulumi.Input[str]]]]
    """Your own program and its arguments instead of the bundled trainer: run as is, or started by
    `launcher`."""
    args: NotRequired[pulumi.Input[list[pulumi.Input[str]]]]
    """Extra arguments appended to the command (e.g. trainer flags not in `trainer`)."""
    trainer: NotRequired[pulumi.Input[TrainerArgs]]
    env: NotRequired[pulumi.Input[dict[str, pulumi.Input[Any]]]]
    """Extra environment variables; numbers are written as text. `{secretKeyRef: {name, key}}` reads one
    from a Secret in the job's namespace instead."""
    volumes: NotRequired[pulumi.Input[list[pulumi.Input[JobVolume]]]]
    """Other claims of the job's namespace to mount in every pod, `{claim, mountPath, readOnly}`; a
    team's namespace admits only its own claims (the data and output volumes, its datasets' sources)."""
    checkpoint_key: NotRequired[pulumi.Input[CheckpointKeySpec]]
    """Sign checkpoints and load only signed ones: `{}` for a generated key, `{secretKeyRef: {name, key}}`
    for a Secret of yours. Unset: checkpoints are not signed."""
    node_check: NotRequired[pulumi.Input[NodeCheckSpec]]
    """Check each pod's node before training: an all-reduce across its GPUs against the pool's baseline. Unset: no check."""
    nodes: NotRequired[pulumi.Input[int]]
    """Pods, one per node: on v1 one Master plus `nodes - 1` Workers, on v2 the TrainJob's `numNodes`."""
    elastic: NotRequired[pulumi.Input[ElasticSpec]]
    """Elastic job (Workers only, c10d rendezvous) instead of a fixed `nodes`; v1 only."""
    gpus_per_node: NotRequired[pulumi.Input[int]]
    """GPUs per pod; the GPU pool's `gpusPerNode` when unset, 0 for a CPU job."""
    procs_per_node: NotRequired[pulumi.Input[int]]
    """Processes per pod; equals the GPU count for GPU jobs, 1 by default for CPU jobs."""
    cpu: NotRequired[pulumi.Input[str]]
    """CPU request and limit per pod."""
    memory: NotRequired[pulumi.Input[str]]
    """Memory request and limit per pod."""
    shm_size: NotRequired[pulumi.Input[str]]
    """`/dev/shm` size; 16Gi per GPU (2Gi for CPU jobs) when unset. Counts against `memory`."""
    network: NotRequired[pulumi.Input[TrainingJobNetwork]]
    """`rdma` runs NCCL over the GPU pool's RDMA fabric (eRDMA); needs a pool with a fabric."""
    nccl_debug: NotRequired[pulumi.Input[TrainingJobNcclDebug]]
    restart_policy: NotRequired[pulumi.Input[TrainingJobRestartPolicy]]
    """v1 only: on v2 the platform runtime restarts all of a job's pods together after a failure."""
    run_policy: NotRequired[pulumi.Input[RunPolicySpec]]
    scheduling: NotRequired[pulumi.Input[SchedulingSpec]]
    topology: NotRequired[pulumi.Input[TopologySpec]]
    """Keep the job's pods in one network domain; none when unset."""
    framework: NotRequired[pulumi.Input[TrainingJobFramework]]
    """The job kind: on v1 PyTorchJob, TFJob, XGBoostJob, MPIJob, JAXJob or PaddleJob; on v2 `pytorch`,
    `jax` or `xgboost`, a TrainJob on the platform's runtime for it, or `mpi`, a TrainJob on a
    TrainingRuntime of its own whose image must run `sshd`. Every kind but PyTorch runs your
    own `command`."""
    launcher: NotRequired[pulumi.Input[TrainingJobLauncher]]
    """How `command` starts: `torchrun`, `accelerate` or `deepspeed` (PyTorch jobs, world and
    rendezvous from the operator) or `python` (one process per pod); the command as is when unset."""
    code: NotRequired[pulumi.Input[CodeSource]]
    """Where the code comes from when not from the image: a path on the data volume or a git commit."""
    parameter_servers: NotRequired[pulumi.Input[int]]
    """TensorFlow: PS pods beside the Chief and `nodes - 1` Workers."""
    evaluator: NotRequired[pulumi.Input[bool]]
    """TensorFlow: one Evaluator pod."""
    backend: NotRequired[pulumi.Input[TrainingJobBackend]]
    """`v1`: a PyTorchJob for the Training Operator; `v2`: a TrainJob for Kubeflow Trainer v2; the
    stack's `training.backend` when unset."""


class DatasetImportSpec(TypedDict):
    """A one-shot copy of a dataset into `<data volume>/<name>`, verified by the sha256 of
    every file against the `SHA256SUMS` at the source, resumed by retries, and refused
    when `<name>` already holds a different dataset."""

    name: pulumi.Input[str]
    """The dataset's directory on the data volume; the Job is `import-<name>`."""
    source: pulumi.Input[str]
    """`https://host/path/` (a directory holding `SHA256SUMS`) or `oss://bucket/path` (read through the OSS
    CSI plugin as a RAM role assumed with RRSA: no AccessKey)."""
    oss_endpoint: NotRequired[pulumi.Input[str]]
    """OSS endpoint of an `oss://` source; the region's internal one when unset."""
    oss_role_name: NotRequired[pulumi.Input[str]]
    """RAM role the OSS CSI plugin reads an `oss://` source as; required in the stack's `datasets`, and the role
    the `DatasetImport` component is given when unset."""
    team: NotRequired[pulumi.Input[str]]
    """Team whose data volume receives the dataset (in the stack's `datasets`): its namespace, and its uid owns
    the files. `training.namespace`'s data volume when unset."""
    image: NotRequired[pulumi.Input[str]]
    """Full reference of an image holding the platform's trainer (the training image), pinned by tag or digest."""
    image_tag: NotRequired[pulumi.Input[str]]
    """Tag of the training image in the platform's registry repository (instead of `image`)."""
    backoff_limit: NotRequired[pulumi.Input[int]]
    """Failed attempts (transfer errors, checksum mismatches) retried before the Job fails."""
    cpu: NotRequired[pulumi.Input[str]]
    """CPU request and limit (hashing runs at a few hundred MB/s per core)."""
    memory: NotRequired[pulumi.Input[str]]
    """Memory request and limit; the copy streams in 1 MiB pieces."""


class VSwitchSpec(TypedDict):
    zone_id: pulumi.Input[str]
    """Zone the vSwitch lives in, one of the region's (`cn-hangzhou-k` in `cn-hangzhou`); pick zones that
    sell your GPU types."""
    cidr: pulumi.Input[str]
    """IPv4 block of the vSwitch; must lie inside `network.vpcCidr`."""


class NetworkSpec(TypedDict):
    """The VPC that the cluster, its nodes and the NAS mount target live in."""

    vpc_id: NotRequired[pulumi.Input[str]]
    """Adopt this existing VPC instead of creating one (needs `vswitchIds`): its id, `vpc-...`, not its name."""
    vswitch_ids: NotRequired[pulumi.Input[list[pulumi.Input[str]]]]
    """Existing vSwitch ids to place nodes in (adopt mode only): `vsw-...`, not their names."""
    vpc_cidr: NotRequired[pulumi.Input[str]]
    """IPv4 block of the VPC. In adopt mode give the real one: the NAS access rule is limited to it."""
    vswitches: NotRequired[pulumi.Input[list[pulumi.Input[VSwitchSpec]]]]
    """vSwitches to create, one per zone (create mode only; at least one)."""
    pod_cidr: NotRequired[pulumi.Input[str]]
    """Pod IP range (Flannel); must overlap neither the VPC nor `serviceCidr`."""
    service_cidr: NotRequired[pulumi.Input[str]]
    """Service IP range; must overlap neither the VPC nor `podCidr`."""


class LocalClusterSpec(TypedDict):
    """A cluster that is not on Alibaba Cloud: kind, minikube, or no cluster at all."""

    context: NotRequired[pulumi.Input[str]]
    """kubeconfig context to deploy to (e.g. `kind-training`); the current context when unset."""
    render_yaml_to_directory: NotRequired[pulumi.Input[str]]
    """Write the manifests to this directory instead of applying them (no cluster needed)."""


class ClusterClusterSpec(enum.StrEnum):
    """The values of ClusterSpec.cluster_spec."""

    ACK_STANDARD = "ack.standard"
    ACK_PRO_SMALL = "ack.pro.small"
    ACK_PRO_XLARGE = "ack.pro.xlarge"
    ACK_PRO_2XLARGE = "ack.pro.2xlarge"
    ACK_PRO_4XLARGE = "ack.pro.4xlarge"


class ApiServerPrivateAccess(enum.StrEnum):
    """The values of ApiServerSpec.private_access."""

    VPN = "vpn"
    CEN = "cen"
    EXPRESS_CONNECT = "express-connect"
    IN_VPC = "in-vpc"


class ApiServerSpec(TypedDict):
    """How Pulumi and kubectl reach the Kubernetes API of a cluster this stack creates.
    Pulumi applies every in-cluster object through it, so a stack must say how."""

    public: NotRequired[pulumi.Input[bool]]
    """Give the API server an internet endpoint. Takes effect when the cluster is created only."""
    allowed_cidrs: NotRequired[pulumi.Input[list[pulumi.Input[str]]]]
    """Source ranges that may reach the API server: where Pulumi, CI and kubectl connect from.
    Required with `public`, and set by each deployer (`pulumi config set --path
    'cluster.apiServer.allowedCidrs[0]' <range>`); `0.0.0.0/0` and special-purpose ranges
    (documentation, loopback, ...) are refused. The list covers the internal endpoint too
    (one load balancer serves both), and the stack adds the VPC and ACK's control plane."""
    private_access: NotRequired[pulumi.Input[ApiServerPrivateAccess]]
    """Without `public`: how the machine running Pulumi reaches the VPC (a VPN gateway, CEN,
    Express Connect, or a runner inside the VPC)."""


class SystemPoolSpec(TypedDict):
    """Untainted nodes for the cluster's own workloads: the Training Operator, Volcano,
    CoreDNS, the CSI controllers and TensorBoard. The GPU pool is tainted and may be empty."""

    enabled: NotRequired[pulumi.Input[bool]]
    """On when this stack creates the cluster; an adopted cluster brings its own nodes."""
    instance_types: NotRequired[pulumi.Input[list[pulumi.Input[str]]]]
    """4-vCPU, 16-GiB general-purpose types in order of preference; later ones are fallbacks."""
    size: NotRequired[pulumi.Input[int]]
    """Nodes (fixed): two keep CoreDNS and the controllers running through a node's loss."""
    system_disk_gib: NotRequired[pulumi.Input[int]]


class AutoscalerSpec(TypedDict):
    """ACK's cluster autoscaler, which grows the GPU pool from zero for pending pods. Node
    pools scale only once it is configured for the cluster (ACK: auto scaling of nodes)."""

    enabled: NotRequired[pulumi.Input[bool]]
    """On when this stack creates the cluster and the GPU pool autoscales; an adopted cluster
    keeps its own settings unless this is `true`."""
    idle_minutes: NotRequired[pulumi.Input[int]]
    """An idle node is removed after it has been unneeded this long (the autoscaler's `cool_down_duration`)."""
    gpu_utilization_threshold: NotRequired[pulumi.Input[float]]
    """A GPU node counts as idle below this share of its GPUs requested."""


class ClusterNetwork(enum.StrEnum):
    """The values of ClusterSpec.network."""

    FLANNEL = "flannel"
    TERWAY = "terway"


class ClusterSpec(TypedDict):
    """The Kubernetes cluster the platform runs in."""

    name: NotRequired[pulumi.Input[str]]
    """Cluster name (also prefixes the cloud resources' names)."""
    existing_cluster_id: NotRequired[pulumi.Input[str]]
    """Adopt this ACK cluster instead of creating one."""
    local: NotRequired[pulumi.Input[LocalClusterSpec]]
    """Use a non-ACK cluster: no cloud resources are created at all."""
    version: NotRequired[pulumi.Input[str]]
    """Kubernetes version, e.g. `1.33.1-aliyun.1`; ACK's default when unset."""
    cluster_spec: NotRequired[pulumi.Input[ClusterClusterSpec]]
    """ACK edition: `ack.standard` (basic), `ack.pro.small` (Pro), or a provisioned Pro control plane."""
    deletion_protection: NotRequired[pulumi.Input[bool]]
    """Refuse deletion of the cluster through the API until switched off."""
    api_server: NotRequired[pulumi.Input[ApiServerSpec]]
    """How Pulumi reaches the API server of a new cluster."""
    system_pool: NotRequired[pulumi.Input[SystemPoolSpec]]
    autoscaler: NotRequired[pulumi.Input[AutoscalerSpec]]
    network: NotRequired[pulumi.Input[ClusterNetwork]]
    """Pod network, chosen when ACK creates the cluster and never changed after (changing it replaces the
    cluster). `terway` gives pods VPC addresses and enforces NetworkPolicy, which team isolation needs;
    `flannel` (an overlay on `podCidr`) enforces none, so it suits one team. For an adopted cluster, say
    which one it runs."""
    shared_network: NotRequired[pulumi.Input[bool]]
    """Accept several teams on Flannel, whose pods can then all reach each other."""
    addons: NotRequired[pulumi.Input[list[pulumi.Input[str]]]]
    """ACK add-ons to install besides those the platform derives (network, storage, node repair, fabric, registry)."""


class RegistryEdition(enum.StrEnum):
    """The values of RegistrySpec.edition."""

    PERSONAL = "personal"
    ENTERPRISE = "enterprise"


class RegistrySpec(TypedDict):
    """Where the training image lives: Alibaba Cloud Container Registry (ACR)."""

    edition: NotRequired[pulumi.Input[RegistryEdition]]
    """ACR personal edition (namespace + repository) or an enterprise instance."""
    namespace: NotRequired[pulumi.Input[str]]
    """ACR namespace."""
    repository: NotRequired[pulumi.Input[str]]
    """Image repository in the namespace."""
    enterprise_instance_id: NotRequired[pulumi.Input[str]]
    """Use this existing enterprise instance (edition enterprise) instead of buying one."""
    enterprise_instance_name: NotRequired[pulumi.Input[str]]
    """Name of the enterprise instance (its registry host is `<name>-registry-vpc.<region>.cr.aliyuncs.com`)."""
    link_vpc: NotRequired[pulumi.Input[bool]]
    """Link the enterprise instance's VPC endpoint to the stack's VPC, without which nodes cannot reach it. On for
    an instance the stack buys; with `enterpriseInstanceId` the stack must say: `false` when the instance is
    linked to this VPC already (the link is then neither made again nor removed on destroy)."""
    namespace_exists: NotRequired[pulumi.Input[bool]]
    """The namespace exists already (another stack's, or made by hand): use it, create nothing."""
    repository_exists: NotRequired[pulumi.Input[bool]]
    """The repository exists already: use it, create nothing (needs `namespaceExists`)."""
    existing_repository_url: NotRequired[pulumi.Input[str]]
    """Adopt any registry: create nothing and pull from this repository URL."""
    username: NotRequired[pulumi.Input[str]]
    """Login for an image pull secret; its password is the secret key `registryPassword`. Required for the
    personal edition, which the password-free ACR credential helper does not cover. With an enterprise instance,
    also the user `pulumi up` pushes `imageMirror`'s copies as (`mirrorFill`)."""


class PlatformImageLock(enum.StrEnum):
    """The values of PlatformSpec.image_lock."""

    REQUIRE = "require"
    WARN = "warn"
    TAG = "tag"


class PlatformMirrorFill(enum.StrEnum):
    """The values of PlatformSpec.mirror_fill."""

    NONE = "none"
    SUBSCRIPTION = "subscription"
    COPY = "copy"


class VolcanoSpec(TypedDict):
    enabled: NotRequired[pulumi.Input[bool]]
    """Install Volcano and start the operator with `--gang-scheduler-name=volcano`."""
    version: NotRequired[pulumi.Input[str]]
    """Volcano release (pinned), installed from its manifest at that tag."""


class OperatorSpec(TypedDict):
    """The Kubeflow Training Operator (v1) that runs PyTorchJobs."""

    install: NotRequired[pulumi.Input[bool]]
    """Install it (off: the cluster has one already)."""
    version: NotRequired[pulumi.Input[str]]
    """Release tag of kubeflow/training-operator, pinned."""
    volcano: NotRequired[pulumi.Input[VolcanoSpec]]


class KueueTopologySpec(TypedDict):
    """Kueue's topology-aware scheduling of GPU v2 jobs: Kueue admits a job only where its pods fit
    together in one domain of the level its `topology.key` names, and pins each pod to a node.

    Kueue counts only GPU nodes that exist and are ready, so it
    never asks the autoscaler for one: the GPU pool needs `minSize` nodes for its largest v2 job."""

    levels: NotRequired[pulumi.Input[list[pulumi.Input[str]]]]
    """Node labels, from the widest network domain to the narrowest, that every GPU node carries:
    `topology.kubernetes.io/zone` on any node; on ACK Lingjun nodes `alibabacloud.com/point-of-delivery`
    then `alibabacloud.com/asw-id`. `kubernetes.io/hostname` is always added
    below them. A node without all of them is left out of Kueue's count."""


class KueueSpec(TypedDict):
    """Queueing and quota for v2 jobs with Kueue."""

    enabled: NotRequired[pulumi.Input[bool]]
    """Create a ClusterQueue with the GPU quota and a LocalQueue in the training namespace, and
    label every v2 job with it (`kueue.x-k8s.io/queue-name`)."""
    install: NotRequired[pulumi.Input[bool]]
    """Install Kueue from its Helm chart with the TrainJob integration and `waitForPodsReady` (off: the
    cluster runs Kueue already, with its TrainJob integration on)."""
    version: NotRequired[pulumi.Input[str]]
    """Kueue Helm chart version (pinned)."""
    pods_ready_timeout_minutes: NotRequired[pulumi.Input[int]]
    """How long an admitted job's pods may take to run, new GPU nodes included; then Kueue evicts the job
    and requeues it, so a job holds its quota only while all of its pods can run."""
    max_requeues: NotRequired[pulumi.Input[int]]
    """Requeues after `podsReadyTimeoutMinutes` before Kueue deactivates the job (it then stays suspended,
    with its Workload's `spec.active` false, until someone sets it back to true); `null` requeues for
    ever. Requeues wait 60 s, doubling up to an hour."""
    priorities: NotRequired[pulumi.Input[dict[str, pulumi.Input[int]]]]
    """Kueue WorkloadPriorityClasses to create, name → value; a v2 job names one in
    `scheduling.priorityClass`. With any, a job of higher priority preempts lower ones in the queue
    (they checkpoint on SIGTERM and are requeued)."""
    cpu_quota: NotRequired[pulumi.Input[str]]
    """CPUs the queue admits at once, for CPU jobs and again for GPU jobs (one flavor each). Kueue
    admits a job only when its queue covers every resource the pods request; GPUs are the quota that
    matters (`training.gpuQuota`)."""
    memory_quota: NotRequired[pulumi.Input[str]]
    """Memory the queue admits at once (see `cpuQuota`)."""
    topology: NotRequired[pulumi.Input[KueueTopologySpec]]
    """Place GPU v2 jobs with Kueue's topology-aware scheduling (`{}`: by zone); unset: GPU jobs
    are admitted by quota alone and a job's `topology` is a pod affinity, as on v1."""


class TrainerV2Spec(TypedDict):
    """Kubeflow Trainer v2 (`trainer.kubeflow.org/v1alpha1`), which runs TrainJobs; it can run
    beside the v1 Training Operator."""

    install: NotRequired[pulumi.Input[bool]]
    """Install its Helm chart (controller, CRDs, webhooks); on when a job runs on backend v2.
    Off: the cluster has Trainer v2 already (the platform's runtimes are still created)."""
    version: NotRequired[pulumi.Input[str]]
    """Release tag of kubeflow/trainer, pinned; the chart version is the tag without `v`."""
    jobset: NotRequired[pulumi.Input[bool]]
    """Install JobSet, which Trainer v2 runs jobs with, as the chart's dependency (off: the cluster
    runs JobSet already)."""
    kueue: NotRequired[pulumi.Input[KueueSpec]]
    runtime_image: NotRequired[pulumi.Input[str]]
    """Full reference, pinned by tag or digest, of the image the platform's runtimes run a TrainJob with
    when the job names none (the Kubeflow SDK's `CustomTrainer`); default: `runtimeImageTag`, else the
    first job's training image."""
    runtime_image_tag: NotRequired[pulumi.Input[str]]
    """Tag of the training image in the platform's registry for the runtimes (instead of `runtimeImage`)."""
    pip_index_url: NotRequired[pulumi.Input[str]]
    """The PyPI index, such as a mirror reachable from the cluster, that pip in the runtimes' trainer
    containers installs from (`PIP_INDEX_URL`); the Kubeflow SDK's `packages_to_install` takes it
    through `pip_index_urls`."""


class TeamQuotaSpec(TypedDict):
    """What all of a team's pods may request together (a ResourceQuota on its namespace)."""

    gpus: pulumi.Input[int]
    """GPUs."""
    cpu: pulumi.Input[str]
    """CPU cores, e.g. `"512"`."""
    memory: pulumi.Input[str]
    """Memory, e.g. `4Ti`."""


class TeamMemberKind(enum.StrEnum):
    """The values of TeamMemberSpec.kind."""

    USER = "User"
    GROUP = "Group"


class TeamMemberSpec(TypedDict):
    """Who may run the team's jobs: a user or group as the cluster's authenticator names it
    (for ACK, a RAM user or role id)."""

    kind: NotRequired[pulumi.Input[TeamMemberKind]]
    name: pulumi.Input[str]


class BudgetPeriod(enum.StrEnum):
    """The values of BudgetSpec.period."""

    DAY = "day"
    WEEK = "week"
    MONTH = "month"


class BudgetSpec(TypedDict):
    """What a team may spend per period before its budget alert fires (in `costs.currency`)."""

    amount: pulumi.Input[float]
    """Spend allowed in one period, in `costs.currency`."""
    period: NotRequired[pulumi.Input[BudgetPeriod]]
    """`day`, `week` or `month`: the last 1, 7 or 30 days, a rolling window, which Prometheus must retain
    (a prometheus-operator's `Prometheus` keeps 24 h unless its `spec.retention` says more)."""
    warn_at: NotRequired[pulumi.Input[float]]
    """Share of `amount` at which a warning fires first; unset (`null`) for none."""


class TeamSpec(TypedDict):
    """One team: a namespace of its own (named after the team), claims on its own NAS
    directory `<basePath>/<team>/<claim>`, a quota, a Kueue LocalQueue when Kueue is on, and
    a Role for its members. Its pods run as `uid`/`gid`."""

    name: pulumi.Input[str]
    """Team name; also its namespace."""
    uid: pulumi.Input[int]
    """User id every pod of the team runs as, and the owner of its NAS directories. Unique per team:
    NFS tells teams apart by uid alone."""
    gid: NotRequired[pulumi.Input[int]]
    """Group id of the team's pods and directories; `uid` when unset."""
    quota: pulumi.Input[TeamQuotaSpec]
    members: NotRequired[pulumi.Input[list[pulumi.Input[TeamMemberSpec]]]]
    """Users and groups bound to the team's Role (jobs, the namespace's runtimes, their pods, logs and events, in its namespace only)."""
    rdma: NotRequired[pulumi.Input[bool]]
    """The team may run eRDMA jobs (`network: rdma`): its pods may request the GPU pool's eRDMA
    devices, which the admission policy refuses to other teams. Its namespace enforces `baseline`
    like every other: eRDMA pods are unprivileged, on the pod network."""
    budget: NotRequired[pulumi.Input[BudgetSpec]]
    """What the team's jobs may cost per period (`costs` prices them); over it, `TeamBudgetExceeded` fires. Needs `monitoring.prometheus: operator`, where the cost rules run. Unset: no
    budget alert."""


class MonitoringPrometheus(enum.StrEnum):
    """The values of MonitoringSpec.prometheus."""

    ARMS = "arms"
    OPERATOR = "operator"
    NONE = "none"


class AlertThresholds(TypedDict):
    """When the platform's alerts fire. A threshold left unset switches its alert off."""

    no_progress_minutes: NotRequired[pulumi.Input[int]]
    """Minutes without a new optimizer step (`trainer_step` unchanged) before a running job counts as stuck.
    `trainer_step` moves at each log step (the trainer's `--log-every`), so keep this well above the time
    between two log steps."""
    checkpoint_intervals: NotRequired[pulumi.Input[int]]
    """How many checkpoint intervals (the job's `checkpointEvery` steps) training may run past its last
    committed checkpoint."""
    restarts_per_hour: NotRequired[pulumi.Input[int]]
    """Restarts of one training pod (in place or recreated) or of one TrainJob's nodes within an hour that count as
    restarting repeatedly."""
    pending_minutes: NotRequired[pulumi.Input[int]]
    """Minutes a training pod may wait for a node before it counts as stuck pending. With Kueue keep it
    below `trainerV2.kueue.podsReadyTimeoutMinutes`, after which Kueue evicts and requeues the job."""
    min_bus_bandwidth_gbps: NotRequired[pulumi.Input[float]]
    """Lowest acceptable all-reduce bus bandwidth of the `netbench` job, GB/s (10^9 bytes per second), at
    its best message size, while it has no baseline yet (`minBusBandwidthOfBaseline`). Unset: no fixed
    floor (what is good depends on the fabric and GPU count)."""
    min_bus_bandwidth_of_baseline: NotRequired[pulumi.Input[float]]
    """A `netbench` job's best all-reduce bus bandwidth alerts below this share of its baseline: the best any
    netbench job on the same pool, with as many nodes and the same network, measured in the 7 days before it."""
    min_mfu: NotRequired[pulumi.Input[float]]
    """Lowest acceptable model FLOPs utilisation (0-1) of a GPU job over 30 minutes. Unset: no alert (what
    is good depends on the model and the GPU)."""


class TensorBoardSpec(TypedDict):
    """TensorBoard over every job's `<output>/<job>/tensorboard` events, on the system nodes."""

    enabled: NotRequired[pulumi.Input[bool]]
    """Run TensorBoard. Left unset in a stack without jobs and without `image`, none runs: there is no
    training image to take it from, and no events to show."""
    image: NotRequired[pulumi.Input[str]]
    """Full image reference with `tensorboard` installed, pinned by tag (not `latest`) or digest; default:
    the first job's training image, which installs it."""
    image_tag: NotRequired[pulumi.Input[str]]
    """Tag of the training image in the platform's registry (instead of `image`), pinned (not `latest`)."""
    cpu: NotRequired[pulumi.Input[str]]
    """CPU requested (and the limit): TensorBoard reads event files and serves a few users."""
    memory: NotRequired[pulumi.Input[str]]
    """Memory requested (and the limit): it holds the loaded scalars of every run in memory."""


class NodeHealthSpec(TypedDict):
    """The GPU node health controller and the `GPUNodeUnhealthy` and `GPUNodeCheckFailed` alerts. Off unless
    enabled."""

    enabled: NotRequired[pulumi.Input[bool]]
    """Deploy the controller (a Deployment of `python -m trainer.health.guard` from `image`, on the system
    nodes) and add the alerts."""
    image: NotRequired[pulumi.Input[str]]
    """Full reference of an image carrying the platform's `trainer` package, pinned by
    tag (not `latest`) or digest: the controller and every job's pre-job node check run from it. Default: the
    image of the first job that runs the bundled trainer (one without a `command` of its own)."""
    image_tag: NotRequired[pulumi.Input[str]]
    """Tag of that image in the platform's registry (instead of `image`), pinned (not `latest`)."""
    prometheus_url: NotRequired[pulumi.Input[str]]
    """Base URL of a Prometheus that scrapes the DCGM exporter, as the controller reaches it from the cluster, such
    as `http://prometheus-operated.monitoring:9090` (its `/api/v1/query` must answer without a login). Required
    when enabled."""
    exporter_namespace: NotRequired[pulumi.Input[str]]
    """The namespace the DCGM exporter's pods run in, such as `gpu-operator`. The controller and the alert read
    only the series Prometheus scraped from pods of that namespace: Prometheus also scrapes the teams' training pods,
    and a team's pod could serve series of the same names naming any node. Required when enabled."""
    max_cordoned_share: NotRequired[pulumi.Input[float]]
    """Share of the GPU pool's nodes that may be cordoned at once (at least one node); failing nodes past it are
    left to the alert."""
    interval_seconds: NotRequired[pulumi.Input[int]]
    """Seconds between two passes of the controller."""
    cordon_xids: NotRequired[pulumi.Input[list[pulumi.Input[int]]]]
    """XIDs (`DCGM_FI_DEV_XID_ERRORS`) that take a node out; default: those after which the GPU takes no new work
    until it is reset, the node rebooted or the board serviced (48, 64, 74, 79, 95, 119, 120). Add 63 (row remapping
    pending), 92 (high corrected error rate) or 94 (contained ECC error) to take nodes out for those too."""
    max_nvlink_errors: NotRequired[pulumi.Input[float]]
    """NVLink errors a GPU may add in 10 minutes before its node is taken out (the exporter must collect the NVLink
    error counters). Unset: NVLink errors alone take no node out."""


class ExportersSpec(TypedDict):
    """How Prometheus labels the series of the exporters the platform reads but does not deploy. Prometheus also
    scrapes the teams' training pods, whose metrics port can serve series of any name, so the cost rules read
    kube-state-metrics' and the DCGM exporter's series only by these labels, the job alerts
    kube-state-metrics' where its label is given, and the dashboard's GPU panels, `ack-jobs top` and
    `ack-jobs cost` (from the stack output `exporters`) the DCGM exporter's where its namespace is given."""

    kube_state_metrics_job: NotRequired[pulumi.Input[str]]
    """The `job` label of kube-state-metrics' series: with prometheus-operator, its ServiceMonitor's `jobLabel`
    value on its Service, else the Service's name (kube-state-metrics' chart: its `app.kubernetes.io/name`, such as
    `kube-state-metrics`; `count by (job) (kube_node_info)` shows it). Its own series never carry `job`, while a team's pod's served `job`
    label is kept as `exported_job`. Required with `costs` under `prometheus: operator`; when set, the job
    alerts read only its series too. Unset: they read kube-state-metrics' series by name (under ARMS the managed
    exporter's job label is not known here)."""
    dcgm_namespace: NotRequired[pulumi.Input[str]]
    """The namespace the DCGM exporter's pods run in, such as `gpu-operator`; its ServiceMonitor must keep
    `honorLabels: false` (NVIDIA's chart does), so that a series names the GPU's pod as `exported_namespace`
    and `exported_pod`. Required with `costs` under `prometheus: operator`; where
    `monitoring.nodeHealth.exporterNamespace` is set too, the same; never the training namespace or a team's,
    whose pods the platform scrapes. Unset: the dashboard's GPU panels,
    `ack-jobs top` and `ack-jobs cost` read GPU series from any namespace."""


class MonitoringSpec(TypedDict):
    """How the platform watches its jobs."""

    prometheus: NotRequired[pulumi.Input[MonitoringPrometheus]]
    """`arms`: ACK's managed Prometheus (the `arms-prometheus` add-on), scraping configured and alert
    rules created through the ARMS API; `operator`: a prometheus-operator the cluster runs already
    (PodMonitor, PrometheusRule and dashboard ConfigMap objects); `none`. Default: `arms` on ACK,
    `none` on a local cluster."""
    alerts: NotRequired[pulumi.Input[AlertThresholds]]
    dashboard: NotRequired[pulumi.Input[bool]]
    """Generate the training dashboard: a ConfigMap for Grafana's dashboard sidecar (`operator`) and
    `dashboards/training.json` in the offline plan's output, to import into ARMS Grafana."""
    labels: NotRequired[pulumi.Input[dict[str, pulumi.Input[str]]]]
    """Labels added to the PodMonitors, the PrometheusRule and the dashboard ConfigMap, such as
    `release: <its release>`, without which kube-prometheus-stack's Prometheus selects none of them;
    with `prometheus: operator` only, the one mode that creates those objects."""
    tensorboard: NotRequired[pulumi.Input[TensorBoardSpec]]
    scraper_namespace: NotRequired[pulumi.Input[str]]
    """The namespace of the Prometheus that scrapes the trainers: on a Terway cluster only its pods may
    reach a team's metrics port. Default: `arms-prom` with `arms`; with `operator` name your
    Prometheus's namespace, or no pod may scrape the teams' jobs."""
    node_health: NotRequired[pulumi.Input[NodeHealthSpec]]
    exporters: NotRequired[pulumi.Input[ExportersSpec]]


class InstancePriceSpec(TypedDict):
    """One ECS instance type's hourly prices, in the table's currency."""

    gpus: pulumi.Input[int]
    """GPUs the instance has (0 for a CPU instance): a pod pays its GPUs' share of the instance."""
    vcpus: pulumi.Input[int]
    """vCPUs the instance has: a pod without GPUs pays its CPU's share of the instance."""
    on_demand: pulumi.Input[float]
    """Pay-as-you-go price per hour."""
    spot: NotRequired[pulumi.Input[float]]
    """Spot price per hour when it was read; required for the instance types of a spot pool."""


class CostsSpec(TypedDict):
    """The prices the platform's cost figures use, with the date and the source they were read from::

        costs:
          date: 2026-11-01
          source: ECS console price calculator, cn-hangzhou, pay-as-you-go and spot
          currency: USD
          instances:
            ecs.gn7i-c32g1.8xlarge: {gpus: 1, vcpus: 32, onDemand: 2.5, spot: 0.9}

    A node of a spot pool (`gpuPool.spotStrategy` other than `NoSpot`) is priced at `spot`, every
    other node at `onDemand`."""

    date: pulumi.Input[str]
    """When the prices were read (`YYYY-MM-DD`); every cost report repeats it."""
    source: pulumi.Input[str]
    """Where they were read: the ECS price calculator, `DescribePrice`, a bill, with the region."""
    currency: pulumi.Input[str]
    """ISO 4217 code of the prices, e.g. `USD` or `CNY`."""
    instances: pulumi.Input[dict[str, pulumi.Input[InstancePriceSpec]]]
    """Prices per ECS instance type (the nodes' `node.kubernetes.io/instance-type` label)."""


class PlatformSpec(TypedDict):
    """Everything one stack deploys. Each field is a stack config key."""

    region: NotRequired[pulumi.Input[str]]
    """Alibaba Cloud region, read from the provider's own key `alicloud:region`."""
    network: NotRequired[pulumi.Input[NetworkSpec]]
    """VPC and vSwitches (ACK stacks; adopt with `vpcId`)."""
    cluster: NotRequired[pulumi.Input[ClusterSpec]]
    gpu_pool: NotRequired[pulumi.Input[GpuPoolSpec]]
    """GPU node pool; CPU-only when unset."""
    storage: NotRequired[pulumi.Input[StorageSpec]]
    registry: NotRequired[pulumi.Input[RegistrySpec]]
    """Container registry for the training image; jobs must then give full image references."""
    image_mirror: NotRequired[pulumi.Input[str]]
    """Pull third-party images (the operator, Volcano, the operator's init container, Trainer v2, JobSet) from
    this registry path instead, e.g. `registry-vpc.cn-hangzhou.aliyuncs.com/mirror`:
    `<mirror>/<last path part>:<tag>`. `python -m components.upstream images` lists what to copy there."""
    image_lock: NotRequired[pulumi.Input[PlatformImageLock]]
    """What a third-party image missing from the stack's image lock does: `require` stops the preview naming it,
    `warn` (the default) pulls it by tag with a warning, `tag` pulls it by tag without one (a local
    cluster only, which pulls the upstream images as a developer's own tools do)."""
    mirror_fill: NotRequired[pulumi.Input[PlatformMirrorFill]]
    """How `imageMirror` gets its copies: `none` (the default), copied before `pulumi up`; `subscription`,
    in the same `up`, by the enterprise instance's artifact subscription for each image from Docker Hub, GCR or
    Quay and by `pulumi up` itself, by digest, for the others (ghcr.io, registry.k8s.io); `copy`, every image by
    `pulumi up` itself. `imageMirror` is then a namespace of its own in `registry`'s enterprise instance, and
    `registry.username` the user the copies are pushed as."""
    operator: NotRequired[pulumi.Input[OperatorSpec]]
    trainer_v2: NotRequired[pulumi.Input[TrainerV2Spec]]
    training: NotRequired[pulumi.Input[TrainingNamespaceSpec]]
    teams: NotRequired[pulumi.Input[list[pulumi.Input[TeamSpec]]]]
    """Teams sharing the platform, each in a namespace of its own; jobs then name their team. Without teams every
    job runs in `training.namespace`."""
    jobs: NotRequired[pulumi.Input[list[pulumi.Input[TrainingJobSpec]]]]
    """Training jobs to run; each becomes a PyTorchJob (backend v1) or a TrainJob (backend v2)."""
    datasets: NotRequired[pulumi.Input[list[pulumi.Input[DatasetImportSpec]]]]
    """Datasets copied onto a data volume, each by a one-shot Job `import-<name>`; jobs read
    them from `/mnt/data/<name>`."""
    monitoring: NotRequired[pulumi.Input[MonitoringSpec]]
    costs: NotRequired[pulumi.Input[CostsSpec]]
    """Hourly prices per instance type, with their date and source: cost recording rules, team budgets and
    `ack-jobs cost`. Unset: no cost rules, and `ack-jobs cost` needs `--prices`."""

"""The package's input types, generated from the specs by ``python -m components.package_codegen --write``:
edit the specs, not this file (a test fails while it is stale)."""

import enum
from typing import Any, NotRequired, TypedDict


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
    key: NotRequired[str]
    value: NotRequired[str]
    effect: NotRequired[TaintEffect]


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
    """What one node of the pool can give to pods: the ``Allocatable`` that
    ``kubectl describe node`` shows for it (capacity less what ACK keeps for the system)."""

    cpu: str
    """CPU, e.g. ``186`` or ``15800m``."""
    memory: str
    """Memory, e.g. ``990Gi``."""


class GpuPoolSpec(TypedDict):
    """An autoscaling node pool of GPU instances, tainted so only GPU work lands there."""

    name: NotRequired[str]
    """Node pool name; nodes are labelled ``ack-training-platform/pool=<name>``."""
    instance_types: list[str]
    """ECS instance types in order of preference; later ones are fallbacks when one is sold out."""
    gpus_per_node: int
    """GPUs in each of the instance types (they must agree)."""
    spot_strategy: NotRequired[GpuPoolSpotStrategy]
    """``NoSpot`` (on-demand), ``SpotAsPriceGo`` (spot at market price) or ``SpotWithPriceLimit``."""
    spot_price_limit: NotRequired[float]
    """Hourly price cap per instance, required with ``SpotWithPriceLimit``."""
    compensate_with_on_demand: NotRequired[bool]
    """Start on-demand instances when spot capacity is gone (spot pools only)."""
    min_size: NotRequired[int]
    """Fewest nodes; 0 lets an idle pool cost nothing."""
    max_size: NotRequired[int]
    """Most nodes the autoscaler may start."""
    desired_size: NotRequired[int]
    """Fixed size: only when ``minSize == maxSize`` (autoscaling off); must equal them."""
    taint: NotRequired[TaintSpec]
    """Taint on every node; jobs get the matching toleration from the pool."""
    labels: NotRequired[dict[str, str]]
    """Extra node labels."""
    system_disk_gib: NotRequired[int]
    """System disk size; training images are large."""
    data_disk_gib: NotRequired[int]
    """Data disk for container images and local scratch (0: none)."""
    disk_category: NotRequired[GpuPoolDiskCategory]
    auto_repair: NotRequired[bool]
    """Let ACK replace nodes that fail health checks (e.g. a GPU fell off the bus)."""
    fabric: NotRequired[GpuPoolFabric]
    """GPU-to-GPU network across nodes: ``none`` (TCP), ``erdma`` (Elastic RDMA on gn8is, ebmgn8is, gn8v, ebmgn8v),
    or ``rdma`` (Lingjun)."""
    driver_version: NotRequired[str]
    """Pin the NVIDIA driver, e.g. ``550.127.08`` (ACK label ``ack.aliyun.com/nvidia-driver-version``)."""
    low_latency: NotRequired[bool]
    """Start the nodes in an ECS deployment set with the ``LowLatency`` strategy: ECS places them in one network
    topology range of one zone, for the shortest paths between them. Only the first vSwitch is used (one zone);
    at most 20 nodes; on-demand only."""
    node_capacity: NotRequired[NodeCapacitySpec]
    """What one node gives pods, against which jobs are checked; required for instance types the platform
    does not know (it knows ``ecs.gn7i-c8g1.2xlarge``, ``ecs.gn7i-c16g1.4xlarge``, ``ecs.ebmgn8v.48xlarge``)."""


class TrainingNamespaceBackend(enum.StrEnum):
    """The values of TrainingNamespaceSpec.backend."""

    V1 = "v1"
    V2 = "v2"


class TrainingNamespaceSpec(TypedDict):
    """The namespace jobs run in, and what every job there shares."""

    namespace: NotRequired[str]
    service_account: NotRequired[str]
    gpu_quota: NotRequired[int]
    """Most GPUs all jobs in the namespace may request together (no quota when unset)."""
    backend: NotRequired[TrainingNamespaceBackend]
    """Kubeflow API of every job without its own ``backend``: ``v1`` (PyTorchJob, Training Operator) or ``v2``
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

    existing_file_system_id: NotRequired[str]
    """Adopt this file system (needs ``existingMountTargetDomain``)."""
    existing_mount_target_domain: NotRequired[str]
    """Mount target domain of the adopted file system, e.g. ``xxxx.cn-hangzhou.nas.aliyuncs.com``."""
    file_system_type: NotRequired[NasFileSystemType]
    """``standard`` (general purpose) or ``extreme`` (low latency, for many small files)."""
    storage_type: NotRequired[NasStorageType]
    """Performance/Capacity/Premium for standard; standard/advance for extreme."""
    capacity_gib: NotRequired[int]
    """Provisioned capacity, required for extreme file systems."""
    zone_id: NotRequired[str]
    """Zone of an extreme file system; the first vSwitch's zone when unset (required with an adopted VPC)."""
    access_cidr: NotRequired[str]
    """Source range of the NAS access rule; the node vSwitches' blocks when unset (required with an adopted VPC,
    whose vSwitch blocks the stack does not know). Must lie inside the VPC."""
    user_access: NotRequired[NasUserAccess]
    """How NAS treats the client's uid: ``root_squash`` maps root (uid 0) to the anonymous user, so a pod running
    as root owns nothing on the file system; ``no_squash`` trusts root. Jobs run as their team's uid."""
    base_path: NotRequired[str]
    """Directory on the file system that holds the volumes: ``/training``, or ``/share/training`` on extreme NAS."""


class VolumeSpec(TypedDict):
    claim_name: str
    """PersistentVolumeClaim name."""
    size: str
    """Size recorded on the volume, e.g. ``500Gi``. NAS bills what is used and does not enforce it here:
    the shared volumes are fixed directories, which get no quota."""


class StorageAccessMode(enum.StrEnum):
    """The values of StorageSpec.access_mode."""

    READ_WRITE_MANY = "ReadWriteMany"
    READ_WRITE_ONCE = "ReadWriteOnce"


class OssSpec(TypedDict):
    """A read-mostly dataset in an OSS bucket, mounted read-only (ossfs) as the data volume
    instead of a NAS claim. No AccessKey: the OSS CSI plugin reads the bucket as a RAM role
    it assumes through RRSA."""

    bucket: str
    """Bucket name."""
    path: NotRequired[str]
    """Directory in the bucket holding the dataset."""
    endpoint: NotRequired[str]
    """OSS endpoint; the region's internal one (``oss-<region>-internal.aliyuncs.com``) when unset."""
    role_name: NotRequired[str]
    """RAM role the OSS CSI plugin assumes (RRSA) to read the bucket. Created, trusted by this cluster's OIDC
    provider for the plugin's service account and allowed to read only this bucket, when unset; required with an
    adopted cluster (set it up as docs/known-limits.md describes)."""


class StorageSpec(TypedDict):
    """Where datasets and checkpoints live: NAS on ACK, the cluster's own storage locally."""

    nas: NotRequired[NasSpec]
    """NAS file system settings (ACK stacks)."""
    storage_class_name: NotRequired[str]
    """StorageClass the shared volumes use; created for NAS, must already exist locally."""
    create_storage_class: NotRequired[bool]
    """Create the NAS StorageClass (off: it exists already, e.g. on a local cluster)."""
    data: NotRequired[VolumeSpec]
    """Training data volume, mounted read-only in jobs."""
    output: NotRequired[VolumeSpec]
    """Checkpoints and final models."""
    access_mode: NotRequired[StorageAccessMode]
    """NAS volumes are ``ReadWriteMany``; single-node local clusters may only offer ``ReadWriteOnce``."""
    oss: NotRequired[OssSpec]
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

    key: str
    value: NotRequired[str]
    """Only the taint with this value (operator ``Equal``); any value when unset (operator ``Exists``)."""
    effect: TolerationEffect


class TrainerArgsModel(enum.StrEnum):
    """The values of TrainerArgs.model."""

    CNN = "cnn"
    GPT = "gpt"
    LLAMA = "llama"


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
    """Flags for the bundled trainer (``python -m trainer``); unset, each is the trainer's own default
    (``trainer/config.py``)."""

    model: NotRequired[TrainerArgsModel]
    """``cnn`` (the MNIST convnet), ``gpt`` (a small decoder) or ``llama`` (a Llama-family decoder, sized by
    ``llamaSize``)."""
    batch_size: NotRequired[int]
    """Samples per process in each step, or in each micro-step under ``--grad-accum``."""
    checkpoint_every: NotRequired[int]
    """Steps between checkpoints; the most work a preemption can lose."""
    max_steps: NotRequired[int]
    """Optimizer steps; with ``epochs`` the run ends at whichever comes first, and the learning rate
    anneals to that end."""
    epochs: NotRequired[int]
    """Passes over the data; unlimited under ``maxSteps`` alone, one when neither is set."""
    lr: NotRequired[float]
    """Peak learning rate, reached after the warm-up; the trainer's default for the model when unset."""
    synthetic_data: NotRequired[bool]
    """Train on generated data instead of the data volume (smoke tests)."""
    parallel: NotRequired[TrainerArgsParallel]
    """``ddp`` (the trainer's default), ``fsdp``, ``hsdp`` (shard within a node, replicate across nodes), or
    ``auto``: chosen at start from the model's size, the GPU memory and a fabric probe (docs/network.md)."""
    fabric_probe: NotRequired[bool]
    """Time the collectives inside and across nodes at start (a few seconds) and serve the figures;
    ``parallel: auto`` probes anyway."""
    init_from: NotRequired[str]
    """Pretrained weights to start from, a plain state_dict (``.pt`` or ``.safetensors``), on the data
    volume (``/mnt/data/...``) or the output volume (``/mnt/output/...``); passed as ``MODEL_PATH``. A job that has checkpoints resumes from them instead."""
    final_model_path: NotRequired[str]
    """Where the final weights go (``FINAL_MODEL_PATH``), under ``/mnt/output/``; ``final_model.pt`` in the
    job's output directory when unset."""
    llama_size: NotRequired[TrainerArgsLlamaSize]
    """``model: llama``'s shape: ``tiny`` (the trainer's default), or Llama 3.2 1B's, Llama 3.1 8B's or 70B's
    (``1b``, ``8b``, ``70b``; docs/trainer.md)."""
    tp: NotRequired[int]
    """Tensor-parallel processes per sample (``model: llama``), inside one pod: it must divide the pod's processes
    and the model's key-value heads. 1 (the trainer's default) when unset; ``parallel: auto`` chooses it."""
    pp: NotRequired[int]
    """Pipeline stages (``model: llama``), e.g. one per pod across slow links; ``tp × pp`` must divide the job's
    processes, the rest being FSDP replicas. 1 when unset; ``parallel: auto`` chooses it."""


class SecretKeySelector(TypedDict):
    name: str
    """Secret in the job's namespace."""
    key: str
    """Key inside the Secret."""


class CheckpointKeySpec(TypedDict):
    """The key each checkpoint is signed and checked with (HMAC-SHA256, ``trainer/integrity.py``):
    mounted read-only as a file, named by ``$CHECKPOINT_KEY_FILE``. A checkpoint that is not signed
    with it is never loaded, so only pods holding the key can write what a resume trusts."""

    secret_key_ref: NotRequired[SecretKeySelector]
    """An existing Secret in the job's namespace and its key. Unset: a random key of 64 characters,
    generated once for the job (pulumi-random) and kept in the Secret ``<job>-checkpoint-key``; in the
    stack's state it is a Pulumi secret."""


class ElasticSpec(TypedDict):
    min_nodes: int
    max_nodes: int
    max_restarts: NotRequired[int]
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
    backoff_limit: NotRequired[int]
    """Pod restarts allowed before the job fails (preemptions count); v1 only: v2 jobs restart whole up to 6 times."""
    active_deadline_seconds: NotRequired[int]
    ttl_seconds_after_finished: NotRequired[int]
    """Seconds after the job ends before the operator deletes it (v1 only). Refused in a stack's ``jobs``: the job
    is a Pulumi resource, and one the operator deleted would be created, and trained, again by the next
    ``pulumi up --refresh``; remove the job from the stack to delete it. For jobs ``ack-jobs submit`` creates."""
    clean_pod_policy: NotRequired[RunPolicyCleanPodPolicy]
    """``None`` keeps finished pods so their logs stay readable; v1 only (v2 keeps them). Unset, ``Running`` for an
    MPIJob and a TFJob with PS or an Evaluator, whose pods outlive the job and would keep their GPUs."""
    suspend: NotRequired[bool]
    """Suspend the job: its pods stop, or never start, until this is ``false`` again (``ack-jobs resume``).
    Of a job's settings, the only one changed in place."""


class SchedulingSpec(TypedDict):
    queue: NotRequired[str]
    """Volcano queue (needs ``operator.volcano.enabled``); v1 only: v2 jobs queue with ``trainerV2.kueue``."""
    priority_class: NotRequired[str]
    """Pod PriorityClass (v1), or Kueue WorkloadPriorityClass from ``trainerV2.kueue.priorities`` (v2)."""
    min_available: NotRequired[int]
    """Gang size in pods, an MPIJob's Launcher and a TFJob's PS and Evaluator counted (needs Volcano); v1 only. Every
    pod of a fixed-size job, an elastic job's ``minNodes`` to ``maxNodes``; unset, every pod or ``minNodes``."""


class TopologyMode(enum.StrEnum):
    """The values of TopologySpec.mode."""

    PREFERRED = "preferred"
    REQUIRED = "required"


class TopologySpec(TypedDict):
    """Keep a job's pods on nodes that are close in the network: a pod affinity among the job's own pods on a node
    label whose equal values mark one network domain. The Kubernetes scheduler and Volcano (its ``nodeorder`` and
    ``predicates`` plugins) both honour it. A GPU v2 job queued by Kueue with ``trainerV2.kueue.topology`` is placed
    by Kueue instead, on a level of that topology. See docs/network.md for which labels ACK sets."""

    key: NotRequired[str]
    """The node label, e.g. ``topology.kubernetes.io/zone`` (on every ACK node), or ``alibabacloud.com/asw-id`` /
    ``alibabacloud.com/point-of-delivery`` (ACK Lingjun nodes)."""
    mode: NotRequired[TopologyMode]
    """``preferred`` still starts a job the domain cannot hold; ``required`` leaves it pending instead."""


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
    or a git repository at one commit (cloned by an init container into ``/mnt/code``)."""

    path: NotRequired[str]
    """A directory on the data volume (``/mnt/data/...``); the command runs there."""
    git_url: NotRequired[str]
    """An ``https://`` repository the pods can reach, cloned without credentials."""
    commit: NotRequired[str]
    """The full 40-character commit id to check out: a branch or tag moves under a job that restarts."""
    clone_image: NotRequired[str]
    """Image with ``git`` that clones the repository, pinned."""


class TrainingJobBackend(enum.StrEnum):
    """The values of TrainingJobSpec.backend."""

    V1 = "v1"
    V2 = "v2"


class TrainingJobSpec(TypedDict):
    """One training job running the bundled trainer (or your own command): a PyTorchJob on backend v1, a
    TrainJob on backend v2."""

    name: str
    """Job name (DNS-1035 label, at most 40 characters)."""
    preset: NotRequired[TrainingJobPreset]
    """``train`` runs the trainer; ``netbench`` measures all-reduce bandwidth across the nodes."""
    namespace: NotRequired[str]
    """Must be the platform's training namespace, which holds the claims and the pull secret (its default);
    with ``team``, the team's namespace."""
    team: NotRequired[str]
    """The team (``teams[].name``) the job belongs to: it runs in the team's namespace, with its claims, uid and
    queue. Required when the stack declares teams."""
    labels: NotRequired[dict[str, str]]
    node_selector: NotRequired[dict[str, str]]
    """Node labels the pods must also have, beside the pool's ``ack-training-platform/pool``."""
    tolerations: NotRequired[list[TolerationSpec]]
    """Taints the pods tolerate, beside the pool's."""
    annotations: NotRequired[dict[str, str]]
    image: NotRequired[str]
    """Full image reference, pinned by tag (not ``latest``) or digest."""
    image_tag: NotRequired[str]
    """Tag in the platform's registry repository (instead of ``image``)."""
    command: NotRequired[list[str]]
    """Your own program and its arguments instead of the bundled trainer: run as is, or started by
    ``launcher``."""
    args: NotRequired[list[str]]
    """Extra arguments appended to the command (e.g. trainer flags not in ``trainer``)."""
    trainer: NotRequired[TrainerArgs]
    env: NotRequired[dict[str, Any]]
    """Extra environment variables; numbers are written as text. ``{secretKeyRef: {name, key}}`` reads one
    from a Secret in the job's namespace instead."""
    checkpoint_key: NotRequired[CheckpointKeySpec]
    """Sign checkpoints and load only signed ones: ``{}`` for a generated key, ``{secretKeyRef: {name, key}}``
    for a Secret of yours. Unset: checkpoints are not signed."""
    nodes: NotRequired[int]
    """Pods, one per node: on v1 one Master plus ``nodes - 1`` Workers, on v2 the TrainJob's ``numNodes``."""
    elastic: NotRequired[ElasticSpec]
    """Elastic job (Workers only, c10d rendezvous) instead of a fixed ``nodes``; v1 only."""
    gpus_per_node: NotRequired[int]
    """GPUs per pod; the GPU pool's ``gpusPerNode`` when unset, 0 for a CPU job."""
    procs_per_node: NotRequired[int]
    """Processes per pod; equals the GPU count for GPU jobs, 1 by default for CPU jobs."""
    cpu: NotRequired[str]
    """CPU request and limit per pod."""
    memory: NotRequired[str]
    """Memory request and limit per pod."""
    shm_size: NotRequired[str]
    """``/dev/shm`` size; 16Gi per GPU (2Gi for CPU jobs) when unset. Counts against ``memory``."""
    network: NotRequired[TrainingJobNetwork]
    """``rdma`` runs NCCL over the GPU pool's RDMA fabric (eRDMA); needs a pool with a fabric."""
    nccl_debug: NotRequired[TrainingJobNcclDebug]
    restart_policy: NotRequired[TrainingJobRestartPolicy]
    """v1 only: on v2 the platform runtime restarts all of a job's pods together after a failure."""
    run_policy: NotRequired[RunPolicySpec]
    scheduling: NotRequired[SchedulingSpec]
    topology: NotRequired[TopologySpec]
    """Keep the job's pods in one network domain (docs/network.md); none when unset."""
    framework: NotRequired[TrainingJobFramework]
    """The job kind: on v1 PyTorchJob, TFJob, XGBoostJob, MPIJob, JAXJob or PaddleJob; on v2 ``pytorch``,
    ``jax`` or ``xgboost``, a TrainJob on the platform's runtime for it, or ``mpi``, a TrainJob on a
    TrainingRuntime of its own whose image must run ``sshd`` (docs/job-kinds.md). Every kind but PyTorch runs your
    own ``command``."""
    launcher: NotRequired[TrainingJobLauncher]
    """How ``command`` starts: ``torchrun``, ``accelerate`` or ``deepspeed`` (PyTorch jobs, world and
    rendezvous from the operator) or ``python`` (one process per pod); the command as is when unset."""
    code: NotRequired[CodeSource]
    """Where the code comes from when not from the image: a path on the data volume or a git commit."""
    parameter_servers: NotRequired[int]
    """TensorFlow: PS pods beside the Chief and ``nodes - 1`` Workers."""
    evaluator: NotRequired[bool]
    """TensorFlow: one Evaluator pod."""
    backend: NotRequired[TrainingJobBackend]
    """``v1``: a PyTorchJob for the Training Operator; ``v2``: a TrainJob for Kubeflow Trainer v2; the
    stack's ``training.backend`` when unset."""


class DatasetImportSpec(TypedDict):
    """A one-shot copy of a dataset into ``<data volume>/<name>``, verified by the sha256 of
    every file against the ``SHA256SUMS`` at the source, resumed by retries, and refused
    when ``<name>`` already holds a different dataset (``trainer/dataset_import.py``)."""

    name: str
    """The dataset's directory on the data volume; the Job is ``import-<name>``."""
    source: str
    """``https://host/path/`` (a directory holding ``SHA256SUMS``) or ``oss://bucket/path`` (read through the OSS
    CSI plugin as a RAM role assumed with RRSA: no AccessKey)."""
    oss_endpoint: NotRequired[str]
    """OSS endpoint of an ``oss://`` source; the region's internal one when unset."""
    oss_role_name: NotRequired[str]
    """RAM role the OSS CSI plugin reads an ``oss://`` source as; required in the stack's ``datasets``, and the role
    the ``DatasetImport`` component is given when unset."""
    team: NotRequired[str]
    """Team whose data volume receives the dataset (in the stack's ``datasets``): its namespace, and its uid owns
    the files. ``training.namespace``'s data volume when unset."""
    image: NotRequired[str]
    """Full reference of an image holding ``trainer/`` (the training image), pinned by tag or digest."""
    image_tag: NotRequired[str]
    """Tag of the training image in the platform's registry repository (instead of ``image``)."""
    backoff_limit: NotRequired[int]
    """Failed attempts (transfer errors, checksum mismatches) retried before the Job fails."""
    cpu: NotRequired[str]
    """CPU request and limit (hashing runs at a few hundred MB/s per core)."""
    memory: NotRequired[str]
    """Memory request and limit; the copy streams in 1 MiB pieces."""

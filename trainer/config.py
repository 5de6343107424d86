"""The run's configuration: one validated :class:`Config`, built from flags and the environment.

Imports no torch: the platform's job spec (``components/config/job_settings.py``) takes the
defaults and choices of the flags it sets from here, so a job and the trainer cannot disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .shapes import GPT_SIZES, LLAMA_SIZES, GPTConfig, LlamaConfig, flag_problem
from .spikes import SPIKE_DEFAULTS

MODELS = ("cnn", "gpt", "llama")
"""``cnn``: the MNIST convnet; ``gpt``: a small decoder (:mod:`trainer.models`); ``llama``: a
Llama-family decoder (:mod:`trainer.models.llama`). ``--model`` takes these or a factory of the job's
code, ``package.module:factory`` (:mod:`trainer.models.spec`)."""
FACTORY_REFERENCE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*\Z")
"""``package.module:factory``: a dotted module path and a name in it."""
DEFAULT_LR = {"cnn": 1e-3, "gpt": 6e-4, "llama": 3e-4}
"""llama: Llama 2's peak rate for its 7B and 13B models (Touvron et al. 2023, table 1); its 70B used 1.5e-4."""
DEFAULT_CLIP_GRAD = {"cnn": None, "gpt": 1.0, "llama": 1.0}
"""gpt: nanoGPT's ``grad_clip = 1.0`` (karpathy/nanoGPT ``train.py``); llama: Llama 2's gradient
clipping of 1.0 (Touvron et al. 2023, section 2.2). The cnn, as PyTorch's MNIST example, does not
clip, nor does a model of the job's code unless told to."""
PARALLEL_CHOICES = ("ddp", "fsdp", "hsdp", "auto")


class UsageError(ValueError):
    """Inconsistent flags or an unusable output directory."""


def model_problem(model: str) -> str | None:
    """What is wrong with a ``--model`` value (a built-in name or ``package.module:factory``),
    or None; a sentence the flag's or the stack key's name goes before."""
    if model in MODELS or FACTORY_REFERENCE.match(model):
        return None
    return (
        f"{model!r}: choose {', '.join(MODELS[:-1])} or {MODELS[-1]}, or name your own model's factory as "
        "package.module:factory (importable from the job's code)"
    )


@dataclass
class Config:
    """Every knob of a run; flags override the environment, which overrides the defaults."""

    model: str = "cnn"
    data_dir: str | None = None
    """None: deterministic synthetic data."""
    output_dir: str = "trainer-output"
    final_model_path: str | None = None
    """Where the final plain state_dict goes; ``<output_dir>/final_model.pt`` when unset."""
    init_from: str | None = None
    """Pretrained weights (a plain state_dict, ``.pt`` or ``.safetensors``) a new run starts
    from; a run that resumes a checkpoint ignores them."""
    batch_size: int = 64
    """Per process, per micro-step."""
    grad_accum: int = 1
    max_steps: int | None = None
    epochs: int | None = None
    """The run ends at whichever of ``max_steps`` and ``epochs`` comes first, and the
    learning rate anneals to that end; with only one given the other is no limit, with
    neither the run is one epoch."""
    lr: float | None = None
    seed: int = 1234
    checkpoint_every: int = 200
    """Optimizer steps between checkpoints: the most work a SIGKILL can lose."""
    keep_checkpoints: int = 3
    """Committed checkpoints kept; the newest one with a finite loss is kept besides."""
    async_checkpoint: bool = False
    """Write checkpoints in a background thread once the state is copied to host memory."""
    checkpoint_key_file: str | None = None
    """A file holding the job's secret key: each commit record is signed with it (HMAC-SHA256)
    and only records it signed are resumed. None: records are not signed or checked."""
    start_fresh: bool = False
    """Train from step 0 when the output directory holds committed checkpoints none of which
    loads; without it such a run stops (exit 2) and names them."""
    replan_epoch: bool = False
    """Resume a checkpoint trained on another dataset (another size or fingerprint) or with
    another ``seed``: the checkpoint's epoch starts over, in the order of this run's data and
    seed. Without it such a resume stops (exit 2), since the saved position in the old order
    would repeat or skip samples of the new one."""
    job_id: str | None = None
    """The run's identity, ``<namespace>/<job name>`` in the platform's jobs (``$TRAINING_JOB``):
    the first run with one claims ``--output-dir`` for it, and a run of another is refused
    there. None: no claim and no check."""
    storage_wait_s: float = 30.0
    """How long a rank waits to see a checkpoint rank 0 picked before all give it up
    (shared storage can show each node a stale listing for a while)."""
    log_every: int = 20
    clip_grad: float | None = None
    """Largest gradient norm (L2, over all parameters); 0: no clipping; None: the model's
    default (:data:`DEFAULT_CLIP_GRAD`). The norm is measured and logged either way."""
    max_nonfinite_steps: int = 20
    """Consecutive steps with non-finite gradients (each skipped) after which the run stops."""
    spike_guard: bool = False
    """On a loss spike, go back to the newest checkpoint and skip the data from there through it."""
    spike_threshold: float = SPIKE_DEFAULTS["threshold"]
    """Mean absolute deviations above the loss's recent level at which a loss is a spike."""
    spike_warmup: int = SPIKE_DEFAULTS["warmup"]
    """Steps whose losses feed the recent level and deviation before any is judged."""
    spike_max_rollbacks: int = SPIKE_DEFAULTS["max_rollbacks"]
    """Rollbacks a run may make; the next spike stops it (exit 65)."""
    spike_skip_extra: int = SPIKE_DEFAULTS["skip_extra"]
    """Steps' worth of samples a rollback skips beyond the spike's own."""
    skip_samples: tuple[tuple[int, int, int], ...] = ()
    """``(epoch, start, stop)`` ranges of sample positions in an epoch's order not to train on
    (``--skip-samples``), as the guard logs the ranges it skipped."""
    fault_nonfinite_steps: tuple[int, ...] = ()
    """Fault injection for tests and cluster drills, from ``$TRAINER_FAULT_NONFINITE_STEPS``
    (comma-separated step numbers): the highest rank's loss at those steps becomes NaN."""
    gpt_size: str = "tiny"
    llama_size: str = "tiny"
    """The Llama shape (:data:`trainer.shapes.LLAMA_SIZES`): tiny, or Llama 3.2 1B, 3.1 8B or 70B's."""
    synthetic_size: int = 60_000
    """Samples (cnn) or windows (gpt, llama) of synthetic data."""
    timeout_s: float = 300.0
    """Collective timeout: how long survivors wait for a dead peer before failing. The checkpoint
    collectives wait ``storage_wait_s`` longer, as a rank may wait that long for shared storage;
    so one rank's checkpoint write may outlast the others' by at most their sum."""
    compile: bool = False
    """torch.compile the model and the loss."""
    peak_tflops: float | None = None
    """Per-device peak FLOP/s (in TFLOP/s) behind MFU; None: looked up from the GPU's name."""
    channels_last: bool = True
    activation_checkpointing: bool = False
    """Recompute the gpt or llama blocks' activations in the backward pass (less memory, more compute)."""
    fsdp: bool = False
    """Whether parameters, gradients and optimizer state are sharded (FSDP2 ``fully_shard``):
    ``--parallel`` fsdp or hsdp (``--fsdp`` is ``--parallel hsdp``); checkpoints record it."""
    parallel: str = "ddp"
    """``ddp``; ``fsdp`` (shard over every process); ``hsdp`` (shard within each node, replicate
    across nodes; plain FSDP on one node); ``auto`` (:mod:`trainer.parallelism.strategy` chooses at start,
    after the fabric probe)."""
    tp: int = 1
    """Tensor-parallel ranks per sample (:mod:`trainer.parallelism.tensor_parallel`); llama only."""
    pp: int = 1
    """Pipeline stages (:mod:`trainer.parallelism.pipeline`); llama only. Beside either, the data-parallel
    replicas are FSDP shards (:mod:`trainer.parallelism.mesh`)."""
    microbatches: int | None = None
    """Micro-batches a pipeline cuts each rank's batch into; None: ``pp``."""
    bucket_mb: float = 25.0
    """DDP's gradient bucket cap, MB (10^6 bytes); 25 is DDP's own default."""
    reshard_after_forward: bool = True
    """FSDP frees the gathered parameters after the forward pass and gathers them again in the
    backward pass (FSDP2's default); False keeps them, one all-gather fewer for more memory."""
    fabric_probe: bool = False
    """Time the collectives inside and across nodes at start (:mod:`trainer.parallelism.fabric`); implied by
    ``--parallel auto`` without ``--fabric-record``."""
    fabric_record: str | None = None
    """A fabric probe's JSON (a netbench job's ``netbench.json``) whose bandwidths ``--parallel
    auto`` uses instead of probing."""
    metrics_port: int | None = None
    """TCP port on which rank 0 serves Prometheus metrics (:mod:`trainer.telemetry.exporter`); None: off."""

    @property
    def epoch_limit(self) -> int | None:
        """Epochs the run may take: ``--epochs``, unlimited under ``--max-steps`` alone, else one."""
        if self.epochs is not None:
            return self.epochs
        return None if self.max_steps is not None else 1

    @property
    def grad_clip(self) -> float | None:
        """The gradient norm to clip to: ``--clip-grad``, else the model's default; None: no clipping."""
        clip = DEFAULT_CLIP_GRAD.get(self.model) if self.clip_grad is None else self.clip_grad
        return clip or None

    @property
    def pipeline_microbatches(self) -> int:
        return self.microbatches or self.pp

    @property
    def base_lr(self) -> float:
        """The peak learning rate: ``--lr``, else the built-in model's default (a factory's
        default is filled in as ``lr`` when the trainer starts)."""
        return self.lr or DEFAULT_LR[self.model]

    def validate(self) -> None:
        problem = model_problem(self.model)
        if problem:
            raise UsageError(f"--model {problem}")
        if self.gpt_size not in GPT_SIZES:
            raise UsageError(f"--gpt-size {self.gpt_size!r}: choose one of {', '.join(GPT_SIZES)}")
        if self.llama_size not in LLAMA_SIZES:
            raise UsageError(f"--llama-size {self.llama_size!r}: choose one of {', '.join(LLAMA_SIZES)}")
        for flag, value in (
            ("--batch-size", self.batch_size),
            ("--grad-accum", self.grad_accum),
            ("--checkpoint-every", self.checkpoint_every),
            ("--log-every", self.log_every),
            ("--keep-checkpoints", self.keep_checkpoints),
            ("--synthetic-size", self.synthetic_size),
            ("--max-nonfinite-steps", self.max_nonfinite_steps),
            ("--spike-warmup", self.spike_warmup),
        ):
            if value < 1:
                raise UsageError(f"{flag} must be at least 1, got {value}")
        for flag, value in (("--max-steps", self.max_steps), ("--epochs", self.epochs)):
            if value is not None and value < 1:
                raise UsageError(f"{flag} must be at least 1, got {value}")
        for flag, value in (
            ("--storage-wait-s", self.storage_wait_s),
            ("--clip-grad", self.clip_grad),
            ("--spike-max-rollbacks", self.spike_max_rollbacks),
            ("--spike-skip-extra", self.spike_skip_extra),
        ):
            if value is not None and value < 0:
                raise UsageError(f"{flag} must not be negative, got {value}")
        for flag, value in (
            ("--lr", self.lr),
            ("--peak-tflops", self.peak_tflops),
            ("--timeout-s", self.timeout_s),
            ("--spike-threshold", self.spike_threshold),
        ):
            if value is not None and not value > 0:
                raise UsageError(f"{flag} must be positive, got {value}")
        # A factory's model is checked for blocks once it is built (trainer.models.spec.build).
        if self.activation_checkpointing and self.model == "cnn":
            raise UsageError("--activation-checkpointing applies to the gpt and llama models' blocks")
        if self.fsdp and self.model == "cnn":
            flag = "--fsdp (--parallel hsdp)" if self.parallel == "hsdp" else f"--parallel {self.parallel}"
            raise UsageError(f"{flag} shards the gpt and llama models; the cnn is small enough for plain DDP")
        if self.fabric_record and self.parallel != "auto":
            raise UsageError("--fabric-record is read by --parallel auto only: add it, or drop --fabric-record")
        if min(self.tp, self.pp, self.microbatches or 1) < 1:
            raise UsageError(
                f"--tp, --pp and --microbatches must be at least 1, got {self.tp}, {self.pp}, {self.microbatches}"
            )
        why = flag_problem(
            self.model, self.parallel, self.llama_size, self.tp, self.pp, self.batch_size, self.pipeline_microbatches
        )
        if why:
            raise UsageError(why)
        if not self.bucket_mb > 0:
            raise UsageError(f"--bucket-mb must be positive, got {self.bucket_mb}")


def token_shape(cfg: Config) -> GPTConfig | LlamaConfig:
    """The shape of a token model (``--gpt-size`` or ``--llama-size``): its vocabulary and sample length."""
    return LLAMA_SIZES[cfg.llama_size] if cfg.model == "llama" else GPT_SIZES[cfg.gpt_size]

"""The run's configuration: one validated :class:`Config`, built from flags and the environment,
with the token models' named shapes (the small GPTs and the Llama family) and what a shape and
batch can be split by at ``--tp`` and ``--pp``.

Imports nothing, torch or project: the platform's job spec (``components/config/job_settings.py``)
takes the defaults and choices of the flags it sets from here and checks a job's sizes, ``tp`` and
``pp`` with the same rules the trainer applies at start, so a job and the trainer cannot disagree,
and the check pulls in no other part of the trainer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GPTConfig:
    """Decoder shape. ``GPT_SIZES`` names the presets."""

    vocab_size: int = 4096
    seq_len: int = 128
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128


GPT_SIZES = {
    "tiny": GPTConfig(),
    # GPT-2 small's shape; the vocabulary is padded to a multiple of 64 for tensor cores.
    "124m": GPTConfig(vocab_size=50304, seq_len=1024, n_layer=12, n_head=12, n_embd=768),
}


@dataclass(frozen=True)
class LlamaConfig:
    """A Llama-family decoder (:class:`trainer.models.llama.Llama`). ``LLAMA_SIZES`` names the presets.

    ``ffn_dim`` is SwiGLU's hidden width, which Meta's reference code derives from ``dim``,
    ``ffn_dim_multiplier`` and ``multiple_of``; here it is given as the result.
    """

    vocab_size: int = 4096
    seq_len: int = 128
    dim: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    ffn_dim: int = 384
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    tied_embeddings: bool = False

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


def ffn_dim(dim: int, multiplier: float, multiple_of: int) -> int:
    """SwiGLU's hidden width as Meta's reference code computes it: two thirds of 4·dim, times
    the multiplier, rounded up to a multiple of ``multiple_of``."""
    hidden = int(multiplier * int(2 * 4 * dim / 3))
    return multiple_of * -(-hidden // multiple_of)


LLAMA_VOCAB = 128256
"""Llama 3's tokenizer (``VOCAB_SIZE`` in meta-llama/llama-models ``models/sku_list.py``)."""
LLAMA_SIZES = {
    # CPU-testable, reading the same corpora as the tiny GPT.
    "tiny": LlamaConfig(),
    # The shapes of meta-llama/llama-models models/sku_list.py (llama3_2_base_models and
    # llama3_1_base_models): dim, n_layers, n_heads, n_kv_heads, ffn_dim_multiplier, multiple_of.
    # Llama 3.2 1B ties its output head to the embedding. Trained here at 2048 tokens a sample.
    "1b": LlamaConfig(LLAMA_VOCAB, 2048, 2048, 16, 32, 8, ffn_dim(2048, 1.5, 256), tied_embeddings=True),
    "8b": LlamaConfig(LLAMA_VOCAB, 2048, 4096, 32, 32, 8, ffn_dim(4096, 1.3, 1024)),
    "70b": LlamaConfig(LLAMA_VOCAB, 2048, 8192, 80, 64, 8, ffn_dim(8192, 1.3, 4096)),
}


def check_split(shape: LlamaConfig, size: str, tp: int, pp: int, batch_size: int, microbatches: int) -> str | None:
    """Why the Llama shape ``size`` or the batch cannot be split at ``tp`` and ``pp``; None if it can.

    Tensor parallelism gives each rank ``n_heads / tp`` query heads and ``n_kv_heads / tp``
    key-value heads, a ``1 / tp`` slice of SwiGLU's width, and (sequence parallel norms) a
    ``1 / tp`` slice of the positions. A pipeline needs a block per stage, an untied output head
    (the embedding sits on the first stage, the head on the last), and, under 1F1B, at least as
    many micro-batches as stages, each an equal part of ``batch_size``.
    """
    if tp > 1:
        parts = {
            "query heads": shape.n_heads,
            "key-value heads": shape.n_kv_heads,
            "SwiGLU width": shape.ffn_dim,
            "sequence length": shape.seq_len,
        }
        for what, n in parts.items():
            if n % tp:
                valid = [d for d in range(1, shape.n_kv_heads + 1) if all(v % d == 0 for v in parts.values())]
                return (
                    f"--tp {tp}: --llama-size {size} has {n} {what}, which {tp} ranks cannot split evenly; "
                    f"choose --tp from {', '.join(map(str, valid))}"
                )
    if pp > 1:
        if shape.n_layers < pp:
            return f"--pp {pp}: --llama-size {size} has {shape.n_layers} blocks; choose --pp up to {shape.n_layers}"
        if shape.tied_embeddings:
            return (
                f"--pp {pp}: --llama-size {size} ties its output head to its embedding, which would sit on the "
                "first and last stages at once; use --tp or --parallel fsdp for it"
            )
        if microbatches < pp or batch_size % microbatches:
            return (
                f"--microbatches {microbatches}: the 1F1B schedule needs at least --pp ({pp}) micro-batches, and "
                f"--batch-size {batch_size} must divide into them evenly; e.g. --microbatches {pp} with a "
                f"--batch-size that is a multiple of {pp}"
            )
    return None


def flag_problem(
    model: str, parallel: str, size: str, tp: int, pp: int, batch_size: int, microbatches: int
) -> str | None:
    """Why the flags ``--tp`` and ``--pp`` cannot go with the others, in the trainer's words (the job
    spec renames the flags as its keys); None when they can.

    Args:
        model: ``--model``.
        parallel: ``--parallel``, resolved (``fsdp`` when left out beside ``--tp`` or ``--pp``).
        size: ``--llama-size``.
        tp: ``--tp``.
        pp: ``--pp``.
        batch_size: ``--batch-size``.
        microbatches: ``--microbatches``, resolved.
    """
    if tp * pp == 1:
        return None
    if model != "llama":
        return f"--tp and --pp split the llama model's layers, not --model {model}"
    if parallel != "fsdp":
        return (
            f"--parallel {parallel} with --tp {tp} and --pp {pp}: beside tensor or pipeline parallelism the "
            "data-parallel replicas are FSDP shards (--parallel fsdp, or leave --parallel out); --parallel auto "
            "chooses --tp and --pp itself"
        )
    return check_split(LLAMA_SIZES[size], size, tp, pp, batch_size, microbatches)


SPIKE_DEFAULTS: dict[str, Any] = {"threshold": 6.0, "warmup": 20, "max_rollbacks": 3, "skip_extra": 0}
"""The loss-spike guard's flags' defaults (:mod:`trainer.spikes`; :class:`Config` holds what each means)."""


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
    """The Llama shape (:data:`LLAMA_SIZES`): tiny, or Llama 3.2 1B, 3.1 8B or 70B's."""
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

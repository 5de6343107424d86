"""What a model is to the trainer, and how ``--model`` finds one.

``--model`` names a factory: ``cnn``, ``gpt`` and ``llama`` stand for the built-in ones below
(:data:`BUILTIN`), and ``package.module:factory`` for a user's, imported from the job's code
(the working directory or ``PYTHONPATH``). A factory takes the run's
:class:`trainer.config.Config` and returns a :class:`ModelSpec`; the trainer then builds the
module with the vocabulary the data needs and trains it as it trains its own: the same data,
DDP or FSDP, checkpoints, resume, metrics and exit statuses. The contract is in
``docs/trainer.md`` ("Your own model").

The shape of the idea is torchtitan's: a per-model bundle the trainer builds from and a registry
of names (``ModelSpec`` in pytorch/torchtitan ``torchtitan/protocols/model_spec.py``, commit
b5bcd76). Here the bundle names no parallelization function: the trainer keeps DDP and FSDP
its own (:mod:`trainer.parallelism.wrap`), and the module names its units of sharding as ``blocks``.

Everything wrong with a factory is a :class:`ModelError`, one line naming ``--model`` and what
was expected, exit status 2 (not retryable).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from ..config import DEFAULT_LR, Config, UsageError, token_shape

IMAGES = "images"
"""Inputs of MNIST's shape: float batches N×1×28×28, integer class targets N (10 classes)."""
TOKENS = "tokens"
"""Windows of ``seq_len`` token ids (int64, N×seq_len), targets the next token of each."""
INPUTS = (IMAGES, TOKENS)

BUILTIN = {name: f"{__name__}:{name}" for name in ("cnn", "gpt", "llama")}
"""The factories the built-in names stand for: they go through :func:`model_spec` as a user's does."""


class ModelError(UsageError):
    """A ``--model`` factory cannot be found, is not callable, or gives something else than the
    contract asks for."""


@dataclass(frozen=True)
class ModelSpec:
    """What a model factory returns.

    Args:
        build: makes the module, given the vocabulary it must cover (:data:`TOKENS` inputs: the
            spec's ``vocab_size``, or the data's declared vocabulary rounded up to a multiple of
            64 when that is larger) or None (:data:`IMAGES`). Built on the meta device
            (``with torch.device("meta")``) the module gets its storage only after FSDP shards
            it, and its ``init_weights(generator)`` draws its weights; built with storage it is
            moved to the device as it is, its weights drawn from torch's default generator,
            seeded with ``--seed`` before ``build`` is called.
        inputs: what the trainer's data feeds the module (:data:`INPUTS`); its ``forward``
            takes a batch of them and returns logits, (N, classes) or (N, seq_len, vocab), and
            the loss is their cross-entropy with the targets.
        seq_len: tokens per sample (:data:`TOKENS` inputs); None for images.
        vocab_size: the model's vocabulary (:data:`TOKENS` inputs); token ids at or above it
            stop the run with a data error.
        lr: the peak learning rate when ``--lr`` is not given.
    """

    build: Callable[[int | None], nn.Module]
    inputs: str
    seq_len: int | None = None
    vocab_size: int | None = None
    lr: float = 3e-4


def cnn(cfg: Config) -> ModelSpec:
    """The MNIST convnet of the PyTorch and Kubeflow examples."""
    from . import MnistCNN

    return ModelSpec(build=lambda vocab: MnistCNN(), inputs=IMAGES, lr=DEFAULT_LR["cnn"])


def _token_model(cfg: Config, make: Callable) -> ModelSpec:
    shape = token_shape(cfg)

    def build(vocab: int | None) -> nn.Module:
        with torch.device("meta"):  # storage comes once it is known how it is sharded
            return make(replace(shape, vocab_size=vocab or shape.vocab_size))

    return ModelSpec(build, TOKENS, shape.seq_len, shape.vocab_size, DEFAULT_LR[cfg.model])


def gpt(cfg: Config) -> ModelSpec:
    """The small GPT (:class:`trainer.models.GPT`), shaped by ``--gpt-size``."""
    from . import GPT

    return _token_model(cfg, GPT)


def llama(cfg: Config) -> ModelSpec:
    """The Llama-family decoder (:class:`trainer.models.llama.Llama`), shaped by ``--llama-size``."""
    from .llama import Llama

    return _token_model(cfg, Llama)


CONTRACT = "a function that takes the trainer's Config and returns a trainer.models.spec.ModelSpec (docs/trainer.md)"


def _factory(reference: str) -> Callable[[Config], object]:
    module_name, _, attr = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ModelError(
            f"--model {reference}: cannot import {module_name} ({type(err).__name__}: {err}); the module must be "
            "importable from the job's code (the working directory or PYTHONPATH)"
        ) from None
    except Exception as err:  # the user's module failed while it ran: its own error, in one line
        raise ModelError(f"--model {reference}: importing {module_name} raised {type(err).__name__}: {err}") from None
    try:
        factory = getattr(module, attr)
    except AttributeError:
        raise ModelError(f"--model {reference}: {module_name} has no {attr!r}; expected {CONTRACT}") from None
    if not callable(factory):
        raise ModelError(
            f"--model {reference}: {attr} is not callable (its type is {type(factory).__name__}); expected {CONTRACT}"
        )
    return factory


def model_spec(cfg: Config) -> ModelSpec:
    """Import and call ``--model``'s factory, and check what it returns.

    Raises:
        ModelError: the factory cannot be imported, is not callable, raised, or returned
            something else than a sound :class:`ModelSpec`.
    """
    reference = BUILTIN.get(cfg.model, cfg.model)
    factory = _factory(reference)
    try:
        spec = factory(cfg)
    except Exception as err:  # a factory's own failure, reported as its own in one line
        raise ModelError(f"--model {cfg.model}: the factory raised {type(err).__name__}: {err}") from None
    if not isinstance(spec, ModelSpec):
        raise ModelError(
            f"--model {cfg.model}: the factory returned a {type(spec).__name__}, not a trainer.models.spec.ModelSpec "
            "(docs/trainer.md)"
        )
    problem = None
    if spec.inputs not in INPUTS:
        problem = f"inputs {spec.inputs!r}; choose {' or '.join(INPUTS)}"
    elif spec.inputs == TOKENS and not (_positive(spec.seq_len) and _positive(spec.vocab_size)):
        problem = (
            f"token inputs without a positive seq_len and vocab_size (got {spec.seq_len!r} and {spec.vocab_size!r})"
        )
    elif not callable(spec.build):
        problem = "its build is not callable"
    elif not (isinstance(spec.lr, (int, float)) and spec.lr > 0):
        problem = f"lr {spec.lr!r} is not a positive number"
    if problem:
        raise ModelError(f"--model {cfg.model}: the factory's ModelSpec has {problem}")
    return spec


def _positive(value: object) -> bool:
    return isinstance(value, int) and value > 0


def build(spec: ModelSpec, cfg: Config, vocab: int | None) -> nn.Module:
    """``spec.build(vocab)``, checked against what the rest of the trainer relies on.

    Raises:
        ModelError: it raised, returned no module, or lacks what its placement or the flags need.
    """
    try:
        model = spec.build(vocab)
    except Exception as err:  # the user's build failing, reported as its own in one line
        raise ModelError(f"--model {cfg.model}: building the model raised {type(err).__name__}: {err}") from None
    if not isinstance(model, nn.Module):
        raise ModelError(f"--model {cfg.model}: build returned a {type(model).__name__}, not a torch.nn.Module")
    if not any(True for _ in model.parameters()):
        raise ModelError(f"--model {cfg.model}: the model has no parameters to train")
    if any(p.is_meta for p in model.parameters()) and not callable(getattr(model, "init_weights", None)):
        raise ModelError(
            f"--model {cfg.model}: the model is on the meta device but has no init_weights(generator) to draw "
            "its weights once it has storage"
        )
    needs = {f"--parallel {cfg.parallel}": cfg.fsdp, "--activation-checkpointing": cfg.activation_checkpointing}
    flags = [flag for flag, on in needs.items() if on]
    if flags and not isinstance(getattr(model, "blocks", None), nn.ModuleList):
        raise ModelError(
            f"--model {cfg.model}: {' and '.join(flags)} {'needs' if len(flags) == 1 else 'need'} the model's "
            "blocks, an nn.ModuleList attribute `blocks` (the units FSDP shards and recomputation repeats)"
        )
    return model


IGNORE_INDEX = -100
"""Target of padding rows, which the loss skips."""


def summed_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy summed over every target, in fp32. Compiled, the upcast fuses into
    the reduction, so fp32 logits (13 GB for GPT-2 small at batch 64) are never stored."""
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), reduction="sum", ignore_index=IGNORE_INDEX
    )

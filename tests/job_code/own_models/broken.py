"""Factories that break the contract of ``trainer.models.spec``, one way each, for the trainer's
errors about them."""

from __future__ import annotations

from torch import nn

from trainer.models.spec import IMAGES, ModelSpec

not_a_function = 42
"""Not callable."""


def returns_a_module(cfg):
    """Returns the model itself rather than a ModelSpec."""
    return nn.Linear(2, 2)


def builds_a_string(cfg):
    """Its build returns no module."""
    return ModelSpec(build=lambda vocab: "a model", inputs=IMAGES)


def has_no_blocks(cfg):
    """A module without blocks, which FSDP cannot shard block by block."""
    return ModelSpec(build=lambda vocab: nn.Sequential(nn.Flatten(), nn.Linear(784, 10)), inputs=IMAGES)


def tokens_without_length(cfg):
    """Token inputs with no sample length."""
    return ModelSpec(build=lambda vocab: nn.Linear(2, 2), inputs="tokens", vocab_size=256)


def raises(cfg):
    """A factory that fails on its own."""
    raise ValueError("no such width: 7")

"""The ``--parallel auto`` rule (trainer/parallelism/strategy.py) over tables of models, memories and fabrics."""

from __future__ import annotations

import pytest

from trainer.parallelism.strategy import Decision, DecisionError, Inputs, decide

GIB = 2**30
B7 = 7_000_000_000
"""A 7B model: 112 GB of fp32 state, 14 GB of bf16 parameters."""
GPT2 = 124_000_000
"""GPT-2 small: 2 GB of state, fits any GPU whole."""


@pytest.mark.parametrize(
    ("inputs", "strategy", "shard_group", "bucket_mb", "reshard"),
    [
        pytest.param(Inputs(GPT2, 1, 1), "single", 1, 25.0, True, id="one process"),
        pytest.param(Inputs(GPT2, 8, 8, 80 * GIB, 2), "ddp", 1, 25.0, True, id="fits, no bandwidth: ddp"),
        pytest.param(
            Inputs(GPT2, 8, 8, 80 * GIB, 2, intra_GBps=150.0),
            "ddp",
            1,
            124.0,
            True,
            id="one node, fast links: ddp, a bucket a quarter of the 496 MB gradient",
        ),
        pytest.param(
            Inputs(GPT2, 32, 8, 80 * GIB, 2, intra_GBps=150.0, inter_GBps=100.0),
            "ddp",
            1,
            124.0,
            True,
            id="4 nodes at 100 GB/s: hsdp saves under half, ddp stays; the bucket capped at a quarter",
        ),
        pytest.param(
            Inputs(GPT2, 2, 1, 80 * GIB, 2, intra_GBps=None, inter_GBps=10.0),
            "ddp",
            1,
            25.0,
            True,
            id="2 one-GPU nodes at 10 GB/s: ddp, DDP's 25 MB is 2.5 ms of the link",
        ),
        pytest.param(
            Inputs(GPT2, 2, 1, 80 * GIB, 2, intra_GBps=None, inter_GBps=40.0),
            "ddp",
            1,
            100.0,
            True,
            id="2 one-GPU nodes at 40 GB/s: 2.5 ms of the link per bucket",
        ),
        pytest.param(
            Inputs(GPT2, 32, 8, 80 * GIB, 2, intra_GBps=150.0, inter_GBps=20.0),
            "hsdp",
            8,
            25.0,
            True,
            id="4 nodes, eRDMA at 20 GB/s: hsdp, a fifth of ddp's estimate",
        ),
        pytest.param(
            Inputs(GPT2, 32, 8, 80 * GIB, 2, intra_GBps=150.0, inter_GBps=2.0),
            "hsdp",
            8,
            25.0,
            True,
            id="4 nodes over 2 GB/s TCP: hsdp keeps the heavy traffic in the node",
        ),
        pytest.param(
            Inputs(B7, 32, 8, 80 * GIB, 2, intra_GBps=150.0, inter_GBps=20.0),
            "hsdp",
            8,
            25.0,
            True,
            id="7B on 80 GB: too big for ddp, 14 GB a GPU sharded in the node",
        ),
        pytest.param(
            Inputs(B7, 32, 8, 80 * GIB, 2),
            "hsdp",
            8,
            25.0,
            True,
            id="7B, nothing measured: the first that fits",
        ),
        pytest.param(
            Inputs(B7, 4, 1, 80 * GIB, 2, inter_GBps=20.0),
            "fsdp",
            4,
            25.0,
            False,
            id="7B on four one-GPU nodes: fsdp; the 13 GiB of gathered parameters fit, kept for the backward pass",
        ),
        pytest.param(
            Inputs(B7, 4, 1, 64 * GIB, 2, inter_GBps=20.0),
            "fsdp",
            4,
            25.0,
            True,
            id="7B on four one-GPU nodes of 64 GB: no room to keep them, gathered twice",
        ),
        pytest.param(
            Inputs(B7, 8, 8, 40 * GIB, 2, intra_GBps=150.0),
            "fsdp",
            8,
            25.0,
            True,
            id="7B on one node of 40 GB GPUs: fsdp, resharding (nothing crosses nodes)",
        ),
        pytest.param(
            Inputs(GPT2, 32, 8, 80 * GIB, 2, intra_GBps=150.0, inter_GBps=2.0, shardable=False),
            "ddp",
            1,
            25.0,
            True,
            id="a model that cannot be sharded stays ddp",
        ),
        pytest.param(
            Inputs(1_334_016, 2, 2, None, 4, intra_GBps=1.1),
            "ddp",
            1,
            1.3,
            True,
            id="the CPU test's tiny gpt: ddp, four buckets of its 5.3 MB gradient",
        ),
        pytest.param(
            Inputs(B7, 12, 5, 40 * GIB, 2, intra_GBps=150.0, inter_GBps=2.0),
            "fsdp",
            12,
            25.0,
            True,
            id="an uneven layout is one flat group: no hsdp",
        ),
    ],
)
def test_the_rule_chooses(inputs: Inputs, strategy: str, shard_group: int, bucket_mb: float, reshard: bool) -> None:
    decision = decide(inputs)
    assert (decision.strategy, decision.shard_group, decision.bucket_mb, decision.reshard_after_forward) == (
        strategy,
        shard_group,
        bucket_mb,
        reshard,
    ), decision.reasons


def test_the_reasons_name_the_estimates_the_choice_rested_on() -> None:
    decision = decide(Inputs(GPT2, 32, 8, 80 * GIB, 2, intra_GBps=150.0, inter_GBps=2.0))
    assert decision.reasons == (
        "model state 1.8 GiB against 40.0 GiB per device fits ddp/hsdp/fsdp",
        "estimated communication per step: ddp 480.5 ms, hsdp 52.3 ms, fsdp 360.4 ms",
    )


def test_the_flags_choose_the_same_by_hand() -> None:
    assert Decision("single", 1, 25.0, True, ()).flags() == ["--parallel", "ddp", "--bucket-mb", "25"]
    assert Decision("fsdp", 32, 25.0, False, ()).flags() == [
        "--parallel",
        "fsdp",
        "--bucket-mb",
        "25",
        "--no-reshard-after-forward",
    ]


def test_a_model_that_fits_nowhere_is_refused_with_what_to_do() -> None:
    with pytest.raises(DecisionError) as err:
        decide(Inputs(70_000_000_000, 8, 8, 24 * GIB, 2))
    assert str(err.value) == (
        "the model's state (1043.1 GiB) does not fit in 12.0 GiB per device even sharded over all 8 processes: "
        "use more GPUs or GPUs with more memory"
    )

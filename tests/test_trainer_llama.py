"""The Llama-family model: its named shapes against Meta's published configurations, its attention
against a plain reference, its memory estimate under ``--parallel auto``, and real two-process
FSDP runs that train and resume bit-identically across a killed worker."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from test_trainer import final_weights, metrics, run, torchrun
from worker_kill import kill_a_worker

from trainer.config import LLAMA_SIZES, Config
from trainer.models.llama import Llama, rope_tables, rotate
from trainer.models.spec import summed_cross_entropy
from trainer.parallelism.auto import memory_inputs
from trainer.parallelism.strategy import DecisionError, Inputs, decide

GIB = 2**30

PUBLISHED = {
    # Llama 3.2 model card (meta-llama/llama-models models/llama3_2/MODEL_CARD.md): 1.23B.
    "1b": 1.23e9,
    # Hugging Face's meta-llama/Llama-3.1-8B and -70B pages: 8.03B and 70.6B parameters.
    "8b": 8.03e9,
    "70b": 70.6e9,
}


def meta_llama(size: str) -> Llama:
    with torch.device("meta"):
        return Llama(LLAMA_SIZES[size])


@pytest.mark.parametrize(("size", "published"), PUBLISHED.items())
def test_named_sizes_have_their_published_parameter_counts(size: str, published: float) -> None:
    model = meta_llama(size)
    assert all(p.is_meta for p in model.parameters())  # nothing allocated
    params = sum(p.numel() for p in model.parameters())
    assert abs(params - published) <= 0.01 * published, params


def test_the_published_shapes() -> None:
    # meta-llama/llama-models models/sku_list.py: dim, layers, heads, kv heads; the SwiGLU widths
    # follow from its ffn_dim_multiplier and multiple_of (Hugging Face's intermediate_size).
    shapes = {k: (c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.ffn_dim, c.vocab_size) for k, c in LLAMA_SIZES.items()}
    assert shapes["1b"] == (2048, 16, 32, 8, 8192, 128256)
    assert shapes["8b"] == (4096, 32, 32, 8, 14336, 128256)
    assert shapes["70b"] == (8192, 80, 64, 8, 28672, 128256)
    one_b = meta_llama("1b")
    assert one_b.output.weight is one_b.tok_embeddings.weight
    assert meta_llama("8b").output.weight is not meta_llama("8b").tok_embeddings.weight


def test_grouped_query_attention_matches_repeated_key_value_heads() -> None:
    torch.manual_seed(0)
    model = Llama(LLAMA_SIZES["tiny"])
    attention, cfg = model.blocks[0].attention, model.cfg
    x = torch.randn(2, 16, cfg.dim)
    cos, sin = rope_tables(cfg, 16, x.device)
    q = rotate(attention.wq(x).view(2, 16, cfg.n_heads, cfg.head_dim), cos, sin).transpose(1, 2)
    k = rotate(attention.wk(x).view(2, 16, cfg.n_kv_heads, cfg.head_dim), cos, sin).transpose(1, 2)
    v = attention.wv(x).view(2, 16, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)
    group = cfg.n_heads // cfg.n_kv_heads
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(cfg.head_dim)
    scores = scores.masked_fill(torch.ones(16, 16, dtype=torch.bool).triu(1), float("-inf"))
    expected = attention.wo((F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(2, 16, -1))
    torch.testing.assert_close(attention(x, cos, sin), expected)


def test_rotary_embedding_makes_scores_depend_on_distance_only() -> None:
    cfg = LLAMA_SIZES["tiny"]
    cos, sin = rope_tables(cfg, 12, torch.device("cpu"))
    q, k = torch.randn(cfg.head_dim), torch.randn(cfg.head_dim)
    at = lambda vec: rotate(vec.expand(1, 12, 1, cfg.head_dim), cos, sin)[0, :, 0]  # noqa: E731
    rq, rk = at(q), at(k)
    torch.testing.assert_close(rq[5] @ rk[2], rq[9] @ rk[6])
    assert not torch.allclose(rq[5] @ rk[2], rq[5] @ rk[4])


def test_flops_count_attention_both_ways() -> None:
    model = meta_llama("8b")
    c = model.cfg
    matmul = sum(p.numel() for p in model.parameters()) - c.vocab_size * c.dim
    attention = 12 * c.n_layers * c.dim * c.seq_len
    assert model.flops_per_token() == 6 * matmul + attention
    assert model.flops_per_token(causal=True) == 6 * matmul + attention / 2
    # The tied 1B counts its one embedding matrix once, as the output head.
    one_b = meta_llama("1b")
    assert one_b.flops_per_token(causal=True) == 6 * sum(p.numel() for p in one_b.parameters()) + 6 * 16 * 2048 * 2048


def auto(size: str, world: int, memory_gib: int, checkpointing: bool, batch: int = 1) -> Inputs:
    """What ``--parallel auto`` sees for a Llama size on ``world`` GPUs of 8 per node."""
    model = meta_llama(size)
    cfg = Config(model="llama", llama_size=size, batch_size=batch, activation_checkpointing=checkpointing)
    return Inputs(
        params=sum(p.numel() for p in model.parameters()),
        world=world,
        local_world=8,
        device_memory_bytes=memory_gib * GIB,
        param_bytes=2,
        **memory_inputs(model, cfg, cuda=True),
    )


def test_auto_refuses_70b_whose_activations_do_not_fit_and_says_why() -> None:
    # 4 nodes of 8 80 GiB GPUs: the fp32 state sharded 32 ways is 32.9 GiB, but 80 layers of
    # 2048 tokens without recomputation keep about 54 GiB of activations, the loss's 3 GiB of them.
    with pytest.raises(DecisionError) as refused:
        decide(auto("70b", 32, 80, checkpointing=False))
    message = str(refused.value)
    assert "sharded over all 32 processes, one needs 97.4 GiB" in message
    assert "optimizer state 16.4 GiB, activations 53.6 GiB, gathered blocks 3.2 GiB" in message
    # The root fully_shard holds the 2.1B parameters of the embedding and the untied head whole,
    # and their gradients, through the backward pass.
    assert "embedding and head whole, with gradients 7.8 GiB" in message
    assert "--activation-checkpointing" in message and "--batch-size" in message
    chosen = decide(auto("70b", 32, 80, checkpointing=True))
    assert chosen.strategy == "fsdp" and chosen.shard_group == 32


def test_auto_shards_8b_that_one_gpu_cannot_hold_and_replicates_1b() -> None:
    assert decide(auto("8b", 8, 80, checkpointing=False)).strategy == "fsdp"  # 120 GiB of state
    assert decide(auto("1b", 8, 80, checkpointing=False)).strategy == "ddp"
    # The activations grow with the batch, the loss's fp32 work on 128,256 logits a token most:
    # 10 samples of 2048 tokens hold about 57 GiB, beside which the 1B's 18 GiB of whole state
    # no longer fits in 72 GiB, while its eighth does; 16 samples fit neither way.
    assert decide(auto("1b", 8, 80, checkpointing=False, batch=10)).strategy == "fsdp"
    with pytest.raises(DecisionError, match="--activation-checkpointing"):
        decide(auto("1b", 8, 80, checkpointing=False, batch=16))


def test_the_activation_estimate_covers_what_a_step_holds_at_its_peak() -> None:
    # The tiny shape with a large vocabulary, in bf16 as on GPUs, where the loss's fp32 work is
    # most of what a training step holds: the estimate must cover the measured peak, not double it.
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    model = Llama(replace(LLAMA_SIZES["tiny"], vocab_size=32768)).to(torch.bfloat16)
    tokens = torch.randint(0, model.cfg.vocab_size, (2, model.cfg.seq_len + 1))
    tracker = MemTracker()
    tracker.track_external(model)
    with tracker:
        summed_cross_entropy(model(tokens[:, :-1]), tokens[:, 1:]).backward()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    held = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"] - 2 * weights  # and gradients
    estimate = memory_inputs(model, Config(model="llama", batch_size=2), cuda=True)["activation_bytes"]
    assert held <= estimate <= 1.25 * held, (held, estimate)


LLAMA = ["--model", "llama", "--batch-size", "4", "--synthetic-size", "400", "--log-every", "6"]


def test_fsdp_llama_learns_and_resumes_bit_identical_after_a_kill(tmp_path: Path) -> None:
    args = ["trainer", *LLAMA, "--parallel", "fsdp", "--checkpoint-every", "12", "--peak-tflops", "0.1"]
    args += ["--max-steps", "36"]
    reference = run(torchrun(*args, "--output-dir", str(tmp_path / "reference")))
    assert reference.returncode == 0, reference.stderr
    assert "training llama on 2 process(es) (FSDP)" in reference.stdout
    rows = metrics(tmp_path / "reference")
    assert rows[-1]["loss"] < rows[0]["loss"] - 0.5 and rows[-1]["tokens_per_s"] > 0
    per_token = meta_llama("tiny").flops_per_token
    for row in rows:
        assert row["mfu"] == pytest.approx(row["tokens_per_s"] * per_token() / (0.1e12 * 2), rel=1e-3, abs=1e-4)
        assert row["mfu_causal"] == pytest.approx(
            row["tokens_per_s"] * per_token(causal=True) / (0.1e12 * 2), rel=1e-3, abs=1e-4
        )
    # A worker killed once the first sharded checkpoint is committed; torchrun restarts both.
    out = tmp_path / "killed"
    status, log = kill_a_worker(
        torchrun(*args, "--output-dir", str(out), restarts=1), out / "checkpoints" / "step-000000012"
    )
    assert status == 0, log
    assert "resumed from step-000000012" in log
    a, b = final_weights(tmp_path / "reference"), final_weights(out)
    assert "blocks.0.attention.wk.weight" in a and a["blocks.0.attention.wk.weight"].shape == (64, 128)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_sharded_llama_starts_from_the_weights_a_whole_one_does_and_recomputes_the_same(tmp_path: Path) -> None:
    # One step at the first step's tiny learning rate: FSDP (meta device, sharded draws) and a
    # single process with activation checkpointing reach the same weights to rounding.
    common = [*LLAMA, "--max-steps", "1", "--synthetic-size", "64"]
    sharded = run(torchrun("trainer", *common, "--parallel", "fsdp", "--output-dir", str(tmp_path / "fsdp")))
    single = [sys.executable, "-m", "trainer", *common, "--batch-size", "8", "--activation-checkpointing"]
    whole = run([*single, "--output-dir", str(tmp_path / "whole")])
    assert sharded.returncode == whole.returncode == 0, sharded.stderr + whole.stderr
    a, b = final_weights(tmp_path / "fsdp"), final_weights(tmp_path / "whole")
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_a_llama_size_for_another_model_is_refused_in_one_line(tmp_path: Path) -> None:
    refused = run(
        [sys.executable, "-m", "trainer", "--model", "gpt", "--llama-size", "8b", "--output-dir", str(tmp_path)]
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == ["error: --llama-size 8b applies to --model llama, not --model gpt"]
    unknown = run(
        [sys.executable, "-m", "trainer", "--model", "llama", "--llama-size", "7b", "--output-dir", str(tmp_path)]
    )
    assert unknown.returncode == 2 and "--llama-size '7b': choose one of tiny, 1b, 8b, 70b" in unknown.stderr
    assert "Traceback" not in refused.stderr + unknown.stderr


def test_a_compiled_llama_trains_on_cpu_as_the_eager_one_does(tmp_path: Path) -> None:
    # Inductor builds the CPU kernels with the host's C++ compiler (gcc here).
    args = [sys.executable, "-m", "trainer", *LLAMA, "--max-steps", "12"]
    eager = run([*args, "--output-dir", str(tmp_path / "eager")])
    assert eager.returncode == 0, eager.stderr
    compiled = run([*args, "--compile", "--output-dir", str(tmp_path / "compiled")], timeout=600)
    assert compiled.returncode == 0, compiled.stderr
    want, got = metrics(tmp_path / "eager"), metrics(tmp_path / "compiled")
    assert [r["step"] for r in got] == [r["step"] for r in want] == [6, 12]
    assert got[0]["compile_s"] > 0 and "compile_s" not in want[0]
    # Inductor fuses and reorders float arithmetic, so equal to rounding, not bit for bit.
    assert all(abs(g["loss"] - w["loss"]) < 1e-4 * w["loss"] for g, w in zip(got, want, strict=True))

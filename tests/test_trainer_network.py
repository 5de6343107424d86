"""The fabric probe and ``--parallel auto``, in real torchrun runs (gloo on CPU)."""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path

import torch
from conftest import free_port
from test_trainer import final_weights, metrics, one_process_pods, run, start, torchrun
from test_trainer_exporter import OFF_ENV, by_label, scrape_when

from trainer.parallelism.fabric import FORMAT, PROBE_SIZES
from trainer.telemetry.metric_names import (
    FABRIC_BUS_BANDWIDTH,
    OP_LABEL,
    PARALLEL_MESH,
    PARALLEL_STRATEGY,
    SCOPE_LABEL,
    SHARD_GROUP,
)

GPT = ["--model", "gpt", "--batch-size", "4", "--synthetic-size", "200", "--log-every", "2", "--max-steps", "6"]


def check_document(document: dict, scopes: set[str], world: int) -> None:
    """The JSON format docs/network.md describes."""
    assert document["format"] == FORMAT and document["version"] == 1
    assert document["world_size"] == world and document["backend"] == "gloo" and document["device"] == "cpu"
    probed = [s for s in document["samples"] if s["scope"] != "world"]
    assert {s["scope"] for s in probed} == scopes
    for scope in scopes:
        for op in ("all_reduce", "all_gather"):
            rows = [s for s in probed if (s["scope"], s["op"]) == (scope, op)]
            assert [s["size_bytes"] for s in rows] == list(PROBE_SIZES)
            assert all(s["busbw_GBps"] > 0 and s["time_ms"] > 0 for s in rows)
            assert document["summary_busbw_GBps"][f"{scope}/{op}"] == max(s["busbw_GBps"] for s in rows)


def test_auto_picks_a_strategy_says_why_and_trains_as_that_strategy_by_flag(tmp_path: Path) -> None:
    auto = run(torchrun("trainer", *GPT, "--parallel", "auto", "--output-dir", str(tmp_path / "auto")))
    assert auto.returncode == 0, auto.stderr
    chosen = re.search(r"--parallel auto chose (\w+) \(as ([^)]*)\): (.*)", auto.stdout)
    assert chosen is not None, auto.stdout
    assert chosen[1] == "ddp" and "1334016 parameters" in chosen[3] and "estimated communication" in chosen[3]
    assert "fabric probe (best bus bandwidth, GB/s): intra-node/all_reduce" in auto.stdout
    flags = chosen[2].split()
    # The bucket follows the gradient's size (a quarter of it), not DDP's 25 MB default.
    assert flags[:3] == ["--parallel", "ddp", "--bucket-mb"] and float(flags[3]) < 25
    check_document(json.loads((tmp_path / "auto" / "fabric-probe.json").read_text()), {"intra-node"}, 2)

    by_hand = run(torchrun("trainer", *GPT, *flags, "--output-dir", str(tmp_path / "flag")))
    assert by_hand.returncode == 0, by_hand.stderr
    assert "--parallel auto" not in by_hand.stdout and "fabric probe" not in by_hand.stdout
    a, b = final_weights(tmp_path / "auto"), final_weights(tmp_path / "flag")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [r["loss"] for r in metrics(tmp_path / "auto")] == [r["loss"] for r in metrics(tmp_path / "flag")]


def test_an_explicit_strategy_wins_and_the_probe_still_measures(tmp_path: Path) -> None:
    result = run(torchrun("trainer", *GPT, "--fsdp", "--fabric-probe", "--output-dir", str(tmp_path)))
    assert result.returncode == 0, result.stderr
    assert "(FSDP)" in result.stdout and "--parallel auto" not in result.stdout
    record = tmp_path / "fabric-probe.json"
    measured = json.loads(record.read_text())["summary_busbw_GBps"]["intra-node/all_reduce"]
    # A later run decides from the recorded figures instead of probing.
    out = tmp_path / "recorded"
    recorded = run(
        [
            sys.executable,
            "-m",
            "trainer",
            *GPT,
            "--parallel",
            "auto",
            "--fabric-record",
            str(record),
            "--output-dir",
            str(out),
        ]
    )
    assert recorded.returncode == 0, recorded.stderr
    assert f"bandwidth recorded in {record}: intra-node {measured:g} GB/s" in recorded.stdout
    assert "fabric probe" not in recorded.stdout and not (out / "fabric-probe.json").exists()


def test_two_one_process_nodes_are_probed_across_the_network(tmp_path: Path) -> None:
    # Two pods of one process each, as the operator launches them: the inter-node groups hold
    # both processes, and a node's own group of one has nothing to measure.
    cmd = [sys.executable, "-m", "trainer", *GPT, "--parallel", "auto", "--output-dir", str(tmp_path)]
    pods = one_process_pods(cmd)
    outputs = [pod.communicate(timeout=180) for pod in pods]
    assert [pod.returncode for pod in pods] == [0, 0], outputs
    check_document(json.loads((tmp_path / "fabric-probe.json").read_text()), {"inter-node"}, 2)
    assert "intra-node not measured, inter-node" in outputs[0][0]


def test_netbench_writes_its_json_and_serves_the_probe(tmp_path: Path) -> None:
    port = free_port()
    out = tmp_path / "bench" / "netbench.json"
    args = ["--max-size", "2MiB", "--iters", "2", "--warmup", "1", "--metrics-port", str(port), "--output", str(out)]
    bench = start(torchrun("trainer.bench", *args, "--serve-after-s", "5"), env=OFF_ENV)
    try:
        served = scrape_when(port, lambda samples: FABRIC_BUS_BANDWIDTH.name in samples)
        stdout, _ = bench.communicate(timeout=120)
    finally:
        bench.kill()
    assert bench.returncode == 0, stdout
    document = json.loads(out.read_text())
    check_document(document, {"intra-node"}, 2)
    world = [s for s in document["samples"] if s["scope"] == "world"]
    assert [s["size_bytes"] for s in world] == [2**20, 2**21]
    served_ops = by_label(served, FABRIC_BUS_BANDWIDTH.name, OP_LABEL)
    assert set(by_label(served, FABRIC_BUS_BANDWIDTH.name, SCOPE_LABEL)) == {"intra-node", "world"}
    assert set(served_ops) == {"all_reduce", "all_gather"}
    summary = document["summary_busbw_GBps"]
    served_pairs = {
        (dict(labels)[SCOPE_LABEL], dict(labels)[OP_LABEL]): value
        for labels, value in served[FABRIC_BUS_BANDWIDTH.name].items()
    }
    assert served_pairs == {tuple(key.split("/")): value * 1e9 for key, value in summary.items()}


def test_a_run_serves_its_strategy_and_the_probe(tmp_path: Path) -> None:
    port = free_port()
    cmd = ["trainer", *GPT, "--max-steps", "100000", "--parallel", "auto", "--metrics-port", str(port)]
    launcher = start(torchrun(*cmd, "--output-dir", str(tmp_path), launcher="trainer.launch"), env=OFF_ENV)
    try:
        served = scrape_when(port, lambda samples: PARALLEL_STRATEGY.name in samples)
        launcher.send_signal(signal.SIGTERM)
        launcher.communicate(timeout=120)
    finally:
        launcher.kill()
    assert served[PARALLEL_STRATEGY.name] == {(("strategy", "ddp"),): 1.0}
    assert served[SHARD_GROUP.name] == {(): 1.0}
    assert [by_label(served, PARALLEL_MESH.name, label) for label in ("dp", "pp", "tp")] == [
        {"2": 1},
        {"1": 1},
        {"1": 1},
    ]
    assert set(by_label(served, FABRIC_BUS_BANDWIDTH.name, SCOPE_LABEL)) == {"intra-node"}


def test_bad_network_flags_are_refused_in_one_line(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"format": "something else"}')
    record = run(
        [
            sys.executable,
            "-m",
            "trainer",
            "--parallel",
            "auto",
            "--fabric-record",
            str(bogus),
            "--output-dir",
            str(tmp_path),
        ]
    )
    assert record.returncode == 2
    assert record.stderr.strip() == (
        f"error: --fabric-record {bogus}: not a fabric probe's JSON (its format must be '{FORMAT}')"
    )
    both = run([sys.executable, "-m", "trainer", "--model", "gpt", "--fsdp", "--parallel", "ddp"])
    assert both.stderr.strip() == "error: --fsdp is --parallel hsdp; it contradicts --parallel ddp"
    unread = run([sys.executable, "-m", "trainer", "--fabric-record", str(bogus)])
    assert (
        unread.stderr.strip()
        == "error: --fabric-record is read by --parallel auto only: add it, or drop --fabric-record"
    )
    bucket = run([sys.executable, "-m", "trainer", "--bucket-mb", "0"])
    assert bucket.stderr.strip() == "error: --bucket-mb must be positive, got 0.0"

"""The metrics endpoint, scraped over HTTP from real runs: rank 0 serves what its
``metrics.jsonl`` logs, the benchmark its bus bandwidth, and nothing is served unless asked."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import free_port
from prometheus_client.parser import text_string_to_metric_families
from test_trainer import ENV, SMALL, metrics, run, start, torchrun, wait_for

from trainer.checkpoints.sharded import MARKER, read_commit, step_dir
from trainer.flags import parse_args
from trainer.telemetry.metric_names import (
    ALLREDUCE_BUS_BANDWIDTH,
    CHECKPOINT_EVERY,
    CHECKPOINT_STEP,
    CHECKPOINT_TIME,
    NONFINITE_STEPS,
    PEAK_MEMORY,
    POD,
    RANK_LABEL,
    RESTARTS,
    SIZE_LABEL,
    STEP,
    STEP_TIME,
    TRAINING,
    TRAINING_LOOP,
)

Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]
OFF_ENV = {k: v for k, v in ENV.items() if k != "METRICS_PORT"}


def scrape(port: int) -> Samples | None:
    """``/metrics`` on ``port``, parsed: values by sample name and labels; None while
    nothing answers there."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return None
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def scrape_when(port: int, ready: Callable[[Samples], bool]) -> Samples:
    """The first scrape of ``port`` that ``ready`` accepts (``wait_for``'s timeout)."""
    seen: list[Samples] = []

    def served() -> bool:
        samples = scrape(port)
        if samples is not None and ready(samples):
            seen.append(samples)
        return bool(seen)

    wait_for(served)
    return seen[0]


def by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    return {dict(labels)[label]: value for labels, value in samples[name].items()}


def test_a_training_run_serves_what_it_logs_while_it_trains(tmp_path: Path) -> None:
    port = free_port()
    # A non-finite step, so the counter has something to count.
    env = {**OFF_ENV, "TRAINER_FAULT_NONFINITE_STEPS": "5"}
    # Async saves: the checkpoint is reported once committed, not when the save starts.
    cmd = ["trainer", "--max-steps", "100000", "--checkpoint-every", "20", "--async-checkpoint"]
    cmd += ["--metrics-port", str(port)]
    launcher = start(torchrun(*cmd, "--output-dir", str(tmp_path), *SMALL, launcher="trainer.launch"), env=env)
    seen: list[Samples] = []

    def exported_a_step_after_a_checkpoint() -> bool:
        samples = scrape(port)
        if samples is None or CHECKPOINT_TIME.name not in samples:  # served once one commits
            return False
        seen.append(samples)
        return samples[STEP.name][()] > samples[CHECKPOINT_STEP.name][()]

    try:
        wait_for(exported_a_step_after_a_checkpoint)
        samples = seen[-1]
        step = int(samples[STEP.name][()])
        wait_for(lambda: any(r["step"] == step for r in metrics(tmp_path)))
        launcher.send_signal(signal.SIGTERM)
        log, _ = launcher.communicate(timeout=120)
    finally:
        launcher.kill()
    row = next(r for r in metrics(tmp_path) if r["step"] == step)
    for metric in TRAINING:
        if metric.column in row:
            assert samples[metric.name][()] == row[metric.column], metric.name
        elif metric.column is not None:
            assert metric.name not in samples, f"{metric.name} is served with no value to serve"
    assert samples[NONFINITE_STEPS.name][()] == 1
    step_times = by_label(samples, STEP_TIME.name, RANK_LABEL)
    assert set(step_times) == {"0", "1"}
    assert sum(step_times.values()) / 2 == pytest.approx(row["step_time_s"], abs=1e-5)
    memory = by_label(samples, PEAK_MEMORY.name, RANK_LABEL)
    assert set(memory) == {"0", "1"}
    assert max(memory.values()) / 2**20 == pytest.approx(row["peak_memory_mb"], abs=0.051)
    checkpoint = int(samples[CHECKPOINT_STEP.name][()])
    assert 0 < checkpoint < step and checkpoint % 20 == 0
    marker = step_dir(tmp_path / "checkpoints", checkpoint) / MARKER
    assert read_commit(marker.parent)["step"] == checkpoint
    # Taken once the marker is written: not before it, and not in the future.
    assert marker.stat().st_mtime <= samples[CHECKPOINT_TIME.name][()] <= time.time()
    assert samples[CHECKPOINT_EVERY.name][()] == 20 and samples[RESTARTS.name][()] == 0
    assert samples[TRAINING_LOOP.name][()] == 1
    assert launcher.returncode == 143, log


def test_every_pod_of_a_run_is_a_live_scrape_target(tmp_path: Path) -> None:
    # Two pods of one process each, as the operator starts them, each with its own port (on
    # a cluster they have their own addresses). Rank 0's pod serves the run; the other pod
    # serves its restarts, so Prometheus sees no target down in a healthy job.
    ports = [free_port(), free_port()]
    master = free_port()
    env = {**OFF_ENV, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(master)}
    cmd = [sys.executable, "-m", "trainer", "--max-steps", "100000", "--checkpoint-every", "100000", *SMALL]
    cmd += ["--output-dir", str(tmp_path)]
    pods = [start(cmd, env={**env, "RANK": str(rank), "METRICS_PORT": str(ports[rank])}) for rank in range(2)]
    try:
        wait_for(lambda: (scrape(ports[0]) or {}).get(STEP.name) is not None and scrape(ports[1]) is not None)
        rank0, other = scrape(ports[0]), scrape(ports[1])
    finally:
        for pod in pods:
            pod.kill()
            pod.communicate()
    assert {metric.name for metric in POD} <= set(rank0)
    # No checkpoint yet: step 0, so the stale-checkpoint alert can still fire; no time.
    assert rank0[CHECKPOINT_STEP.name][()] == 0 and CHECKPOINT_TIME.name not in rank0
    assert set(other) == {metric.name for metric in POD} and other[RESTARTS.name][()] == 0


def test_the_benchmark_serves_bus_bandwidth_by_message_size() -> None:
    port = free_port()
    args = ["--max-size", "4MiB", "--iters", "2", "--warmup", "1", "--metrics-port", str(port)]
    bench = start(torchrun("trainer.bench", *args, "--serve-after-s", "5"), env=OFF_ENV)
    try:
        served = scrape_when(port, lambda samples: len(samples.get(ALLREDUCE_BUS_BANDWIDTH.name, {})) == 3)
        out, _ = bench.communicate(timeout=120)
    finally:
        bench.kill()
    # Rank 1 exits while rank 0 holds: the job still succeeds.
    assert bench.returncode == 0, out
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    served = by_label(served, ALLREDUCE_BUS_BANDWIDTH.name, SIZE_LABEL)
    assert set(served) == {str(r["size_bytes"]) for r in rows} and len(rows) == 3
    for r in rows:
        assert served[str(r["size_bytes"])] / 1e9 == pytest.approx(r["busbw_GBps"], abs=0.00051)


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (its sockets in the LISTEN state)."""
    sockets = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            sockets.add(target.removeprefix("socket:[").removesuffix("]"))
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in sockets:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.mark.parametrize("on", [False, True], ids=["off-by-default", "on-with-the-env"])
def test_metrics_are_served_only_when_a_port_is_given(tmp_path: Path, on: bool) -> None:
    port = free_port()
    env = {**OFF_ENV, "METRICS_PORT": str(port)} if on else OFF_ENV
    cmd = [sys.executable, "-m", "trainer", "--max-steps", "100000", "--output-dir", str(tmp_path), *SMALL]
    trainer = start(cmd, env=env)
    try:
        wait_for(lambda: (tmp_path / "metrics.jsonl").is_file() and len(metrics(tmp_path)) >= 1)
        listening = listening_ports(trainer.pid)
        trainer.send_signal(signal.SIGTERM)
        log, _ = trainer.communicate(timeout=120)
    finally:
        trainer.kill()
    assert listening == ({port} if on else set()), log
    assert ("serving metrics on port" in log) is on


def test_a_resumed_run_serves_the_checkpoint_it_resumed(tmp_path: Path) -> None:
    trainer = [sys.executable, "-m", "trainer", "--output-dir", str(tmp_path), *SMALL]
    first = run([*trainer, "--max-steps", "20", "--checkpoint-every", "20"])
    assert first.returncode == 0, first.stderr
    port = free_port()
    resumed = start([*trainer, "--max-steps", "100000", "--checkpoint-every", "1000", "--metrics-port", str(port)])
    try:
        served = scrape_when(port, lambda samples: CHECKPOINT_TIME.name in samples)
        resumed.send_signal(signal.SIGTERM)
        log, _ = resumed.communicate(timeout=120)
    finally:
        resumed.kill()
    assert "resumed from step-000000020" in log
    marker = step_dir(tmp_path / "checkpoints", 20) / MARKER
    assert served[CHECKPOINT_STEP.name][()] == 20
    assert served[CHECKPOINT_TIME.name][()] == marker.stat().st_mtime


def test_a_port_in_use_costs_a_warning_not_the_run(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run(
            torchrun("trainer", "--max-steps", "20", "--output-dir", str(tmp_path), *SMALL, "--metrics-port", str(port))
        )
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: --metrics-port {port}: cannot serve metrics (Address already in use); going on without them"
    ]
    assert (tmp_path / "final_model.pt").is_file()


@pytest.mark.parametrize(
    ("argv", "env", "port"),
    [
        ([], {}, None),
        ([], {"METRICS_PORT": "9464"}, 9464),
        ([], {"METRICS_PORT": ""}, None),
        (["--metrics-port", "8000"], {"METRICS_PORT": "9464"}, 8000),
    ],
)
def test_metrics_port_defaults_to_the_env_else_off(monkeypatch: pytest.MonkeyPatch, argv, env, port) -> None:
    monkeypatch.delenv("METRICS_PORT", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert parse_args(argv).metrics_port == port


@pytest.mark.parametrize(("argv", "env"), [(["--metrics-port", "70000"], {}), ([], {"METRICS_PORT": "metrics"})])
def test_a_bad_metrics_port_is_refused_naming_the_flag_and_env(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv, env
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
    value = argv[-1] if argv else env["METRICS_PORT"]
    assert capsys.readouterr().err.endswith(
        f"error: argument --metrics-port: {value!r} is not a TCP port "
        "(1-65535; empty for no metrics; the default comes from $METRICS_PORT)\n"
    )

"""Run every benchmark, alternating the sides of each comparison, and print medians.

    python -m bench [--repeats 3] [--steps 300] [--only NAME ...]
    python -m bench --only gpt --gpt-size 124m --gpt-batch-size 32   # on a GPU: tokens/s and MFU
    python -m bench --only checkpoint-format                         # full-state vs sharded saves
    python -m bench --only staging                                   # async saves: fresh vs reused host memory

This machine's speed drifts, so each comparison runs its sides in turn (A, B, A, B, …)
in fresh processes and reports medians and the ratio of medians. Results also go to
``out/bench/results.json`` (ignored by git); ``--results bench/results.json`` refreshes the
tracked figures docs/benchmarks.md quotes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def _env(threads: int) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


def loop(kind: str, procs: int, threads: int, steps: int) -> float:
    """Samples/s of one run of ``bench.loops``."""
    launcher = [PY, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={procs}"] if procs > 1 else [PY]
    out = subprocess.run(
        [*launcher, "-m", "bench.loops", "--kind", kind, "--steps", str(steps)],
        cwd=ROOT,
        env=_env(threads),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["samples_per_s"]


def compare(name: str, a: tuple, b: tuple, repeats: int, steps: int) -> dict[str, Any]:
    """Alternate ``a`` and ``b`` (each ``(kind, procs, threads)``) ``repeats`` times."""
    runs: dict[str, list[float]] = {"a": [], "b": []}
    for _ in range(repeats):
        runs["a"].append(loop(*a, steps))
        runs["b"].append(loop(*b, steps))
    med_a, med_b = statistics.median(runs["a"]), statistics.median(runs["b"])
    result = {
        "name": name,
        "steps": steps,
        "a": list(a),
        "b": list(b),
        "runs": runs,
        "median_a": med_a,
        "median_b": med_b,
        "ratio": round(med_a / med_b, 3),
    }
    print(f"{name}: {a} {med_a:.0f} samples/s vs {b} {med_b:.0f} samples/s -> ratio {result['ratio']}", flush=True)
    return result


def checkpoint_overhead(repeats: int) -> dict[str, Any]:
    code = (
        "import json, statistics, tempfile, time, torch\n"
        "from trainer.data import synthetic_images\n"
        "from trainer.config import Config\n"
        "from trainer.parallelism.topology import topology\n"
        "from trainer.loop import Trainer\n"
        "from trainer.models.spec import model_spec\n"
        "torch.set_num_threads(2)\n"
        "cfg = Config(output_dir=tempfile.mkdtemp(), max_steps=10**6)\n"
        "t = Trainer(cfg, topology(), synthetic_images(8192, 1), model_spec(cfg))\n"
        "perm = t.progress.order.permutation(0); steps = []; saves = []\n"
        "for i in range(60):\n"
        "    s = time.perf_counter(); t.train_step(perm); steps.append(time.perf_counter() - s)\n"
        "    t.progress.position %= 8192 - 64\n"
        f"for i in range({repeats * 2}):\n"
        "    s = time.perf_counter(); t.progress.step += 1; t.checkpoints.save('bench', torch.zeros(()), wait=True); saves.append(time.perf_counter() - s)\n"
        "print(json.dumps({'step_s': statistics.median(steps[10:]), 'save_s': statistics.median(saves)}))\n"
    )
    out = subprocess.run([PY, "-c", code], cwd=ROOT, env=_env(2), capture_output=True, text=True, check=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    every = 200
    row.update(checkpoint_every=every, overhead=round(row["save_s"] / (every * row["step_s"]), 4))
    print(
        f"checkpoint: save {row['save_s'] * 1e3:.1f} ms, step {row['step_s'] * 1e3:.1f} ms, "
        f"overhead at --checkpoint-every {every}: {row['overhead']:.2%}",
        flush=True,
    )
    return row


def kill_to_resume(repeats: int) -> dict[str, Any]:
    """Seconds from SIGKILL of a worker to the restarted run resuming, and steps lost."""
    times, lost = [], []
    for _ in range(repeats):
        out = tempfile.mkdtemp(prefix="bench-kill-")
        cmd = [
            PY,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node=2",
            "--max-restarts=1",
            "-m",
            "trainer",
            "--max-steps",
            "100000",
            "--checkpoint-every",
            "40",
            "--log-every",
            "5",
            "--synthetic-size",
            "8192",
            "--output-dir",
            out,
        ]
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**_env(1), "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        killed_at = None
        last_step = 0
        timer = threading.Timer(120, proc.kill)
        timer.start()
        for line in proc.stdout:
            if match := re.match(r"step=(\d+)", line):
                last_step = int(match[1])
            if killed_at is None and "checkpoint step-000000040" in line:
                time.sleep(0.5)
                workers = [
                    int(p)
                    for p in subprocess.run(
                        ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
                    ).stdout.split()
                ]
                os.kill(max(workers), signal.SIGKILL)
                killed_at = time.perf_counter()
                rows = Path(out, "metrics.jsonl").read_text().splitlines()
                killed_step = max(last_step, json.loads(rows[-1])["step"])
            elif killed_at is not None and line.startswith("resumed from"):
                times.append(time.perf_counter() - killed_at)
                lost.append(killed_step - 40)
                break
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        timer.cancel()
    row = {"seconds": times, "median_s": statistics.median(times), "steps_lost": lost}
    print(
        f"kill-to-resumed: median {row['median_s']:.2f} s over {len(times)} runs; steps logged past the "
        f"checkpoint when killed (redone after resume): {lost}",
        flush=True,
    )
    return row


def gpt_run(size: str, steps: int, extra: list[str]) -> dict[str, float]:
    """Median tokens/s (and MFU where the trainer reports it) of one trainer run of the gpt
    model, leaving out the first log window, which holds warm-up and compilation."""
    from trainer.telemetry.metrics import MFU_KEYS  # torch: only for the benchmarks that train

    out = tempfile.mkdtemp(prefix="bench-gpt-")
    log_every = max(1, steps // 6)
    cmd = [PY, "-m", "trainer", "--model", "gpt", "--gpt-size", size, "--max-steps", str(steps)]
    cmd += ["--log-every", str(log_every), "--checkpoint-every", str(steps + 1), "--output-dir", out, *extra]
    subprocess.run(cmd, cwd=ROOT, env=_env(os.cpu_count() or 1), capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in Path(out, "metrics.jsonl").read_text().splitlines()][1:]
    result = {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in rows)}
    for key in MFU_KEYS:
        if all(key in r for r in rows):
            result[key] = statistics.median(r[key] for r in rows)
    return result


def gpt_compile(size: str, batch: int, steps: int, repeats: int) -> dict[str, Any]:
    """The trainer's gpt model eager against ``--compile``, alternated."""
    from trainer.telemetry.metrics import MFU_KEYS

    sides = {"eager": ["--batch-size", str(batch)], "compile": ["--batch-size", str(batch), "--compile"]}
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    for _ in range(repeats):
        for side, extra in sides.items():
            runs[side].append(gpt_run(size, steps, extra))
    row: dict[str, Any] = {"gpt_size": size, "batch_size": batch, "steps": steps, "runs": runs}
    for side in sides:
        row[f"{side}_tokens_per_s"] = statistics.median(r["tokens_per_s"] for r in runs[side])
        for key in MFU_KEYS:
            if all(key in r for r in runs[side]):
                row[f"{side}_{key}"] = statistics.median(r[key] for r in runs[side])
    row["ratio"] = round(row["compile_tokens_per_s"] / row["eager_tokens_per_s"], 3)
    mfu = (
        f", MFU {row['compile_mfu']:.1%} (attention non-causal, as PaLM and nanoGPT count it; causal "
        f"{row['compile_mfu_causal']:.1%})"
        if "compile_mfu_causal" in row
        else ""
    )
    print(
        f"gpt {size}, batch {batch}: --compile {row['compile_tokens_per_s']:.0f} tokens/s{mfu} vs eager "
        f"{row['eager_tokens_per_s']:.0f} tokens/s -> ratio {row['ratio']}",
        flush=True,
    )
    return row


def checkpoint_formats(repeats: int) -> dict[str, Any]:
    """GPT-2 small's state saved the former way (gathered to rank 0, one file) and sharded
    (DCP, sync and async), 2 processes on CPU, sides alternated, medians."""
    sides = ("full", "dcp", "dcp-async")
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for _ in range(repeats):
        for side in sides:
            out = tempfile.mkdtemp(prefix="bench-ckpt-")
            cmd = [PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
            cmd += ["-m", "bench.checkpoints", "--side", side, "--dir", str(Path(out) / "checkpoint")]
            done = subprocess.run(cmd, cwd=ROOT, env=_env(1), capture_output=True, text=True, check=True)
            runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
            shutil.rmtree(out)
    row: dict[str, Any] = {"world_size": 2, "model": "gpt 124m + AdamW, FSDP2", "runs": runs}
    for side in sides:
        row[side] = {
            "save_s": statistics.median(r["seconds"] for r in runs[side]),
            "peak_rss_rank0_mib": statistics.median(r["peak_rss_mib"][0] for r in runs[side]),
            "peak_rss_rank1_mib": statistics.median(r["peak_rss_mib"][1] for r in runs[side]),
            "rss_before_rank0_mib": statistics.median(r["peak_rss_before_mib"][0] for r in runs[side]),
            "rss_before_rank1_mib": statistics.median(r["peak_rss_before_mib"][1] for r in runs[side]),
        }
        if side == "dcp-async":
            row[side]["blocked_s"] = statistics.median(r["blocked_seconds"] for r in runs[side])
        print(f"checkpoint {side}: {row[side]}", flush=True)
    return row


def staging(repeats: int, saves: int = 5) -> dict[str, Any]:
    """Training time blocked per async save, host memory staged fresh at every save vs one
    stager for the run (bench.staging), one process on CPU, sides alternated in fresh
    processes. A process's first save allocates either way: the figure is the median of the
    later ones, and its median over the repeats."""
    sides = ("fresh", "reused")
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for _ in range(repeats):
        for side in sides:
            out = tempfile.mkdtemp(prefix="bench-staging-")
            cmd = [PY, "-m", "bench.staging", "--side", side, "--saves", str(saves), "--dir", out]
            done = subprocess.run(cmd, cwd=ROOT, env=_env(1), capture_output=True, text=True, check=True)
            runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
            shutil.rmtree(out)
    row: dict[str, Any] = {"model": "gpt n_embd 512, 8 layers + AdamW, 1 process", "saves": saves, "runs": runs}
    for side in sides:
        row[side] = {
            "first_save_blocked_s": statistics.median(r["blocked_s"][0] for r in runs[side]),
            "later_saves_blocked_s": statistics.median(statistics.median(r["blocked_s"][1:]) for r in runs[side]),
        }
    row["state_mib"] = round(runs["fresh"][0]["state_bytes"] / 2**20, 1)
    row["ratio"] = row["fresh"]["later_saves_blocked_s"] / row["reused"]["later_saves_blocked_s"]
    print(f"async save staging ({row['state_mib']} MiB): {row}", flush=True)
    return row


def plan_vs_imports(repeats: int) -> dict[str, Any]:
    commands = {
        "plan": [PY, "-m", "components.plan", "--stack", "prod"],
        # The top-level packages load their submodules lazily, so this is the floor...
        "imports": [PY, "-c", "import pulumi, pulumi_kubernetes, pulumi_alicloud"],
        # ...and this is what any program creating these resources has to import.
        "sdk_modules": [
            PY,
            "-c",
            "import pulumi, pulumi.runtime.mocks, pulumi_alicloud.cs, pulumi_alicloud.nas, "
            "pulumi_alicloud.vpc, pulumi_alicloud.cr, pulumi_kubernetes.core.v1, "
            "pulumi_kubernetes.storage.v1, pulumi_kubernetes.apiextensions, "
            "pulumi_kubernetes.kustomize.v2, pulumi_kubernetes.helm.v4, pydantic, yaml",
        ],
    }
    # dev with the upstream copies registers the operator's objects (3.7 MB of CRDs) as well; only
    # where they are prepared (ACK_TRAINING_UPSTREAM, or the checkout's .upstream/).
    if os.environ.get("ACK_TRAINING_UPSTREAM") or (ROOT / ".upstream").is_dir():
        commands["plan_dev"] = [PY, "-m", "components.plan", "--stack", "dev"]
    runs: dict[str, list[float]] = {key: [] for key in commands}
    cpu: dict[str, list[float]] = {key: [] for key in commands}
    for _ in range(repeats):
        for key, cmd in commands.items():
            start, used = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True)
            runs[key].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[key].append(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime)
    row = {"runs": runs, "cpu_runs": cpu, **{f"{key}_s": statistics.median(times) for key, times in runs.items()}}
    row |= {f"{key}_cpu_s": statistics.median(times) for key, times in cpu.items()}
    print(
        f"plan --stack prod: {row['plan_s']:.2f} s; bare import of pulumi, pulumi_kubernetes, pulumi_alicloud: "
        f"{row['imports_s']:.2f} s; import of the SDK modules the program uses: {row['sdk_modules_s']:.2f} s"
        + (
            f"; plan --stack dev with the copies: {row['plan_dev_cpu_s']:.2f} CPU-s"
            if "plan_dev" in row["runs"]
            else ""
        ),
        flush=True,
    )
    return row


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument(
        "--only",
        nargs="*",
        help="efficiency tutorial-1 tutorial-2 threads checkpoint checkpoint-format staging resume plan gpt",
    )
    p.add_argument("--gpt-size", default="tiny", help="gpt benchmark model: tiny (CPU) or 124m (GPU)")
    p.add_argument("--gpt-batch-size", type=int, default=16, help="gpt benchmark batch per process")
    p.add_argument("--gpt-steps", type=int, default=60, help="gpt benchmark steps per run")
    p.add_argument(
        "--results",
        type=Path,
        default=Path("out/bench/results.json"),
        help="JSON file the runs are merged into; bench/results.json is the tracked one the docs quote",
    )
    args = p.parse_args()
    want = set(
        args.only
        or [
            "efficiency",
            "tutorial-1",
            "tutorial-2",
            "threads",
            "checkpoint",
            "checkpoint-format",
            "staging",
            "resume",
            "plan",
            "gpt",
        ]
    )
    # --only refreshes its entries and keeps the others, so bench/results.json stays the docs' source.
    path = args.results
    path.parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    results["cpus"] = os.cpu_count()  # repeats show as the length of each entry's runs
    r, s = args.repeats, args.steps
    if "efficiency" in want:
        results["efficiency"] = compare("trainer / bare loop, 1 process", ("trainer", 1, 2), ("bare", 1, 2), r, s)
    if "tutorial-1" in want:
        results["tutorial_1"] = compare("trainer / tutorial, 1 process", ("trainer", 1, 2), ("tutorial", 1, 2), r, s)
    if "tutorial-2" in want:
        results["tutorial_2"] = compare("trainer / tutorial, 2 processes", ("trainer", 2, 1), ("tutorial", 2, 1), r, s)
    if "threads" in want:
        results["threads"] = compare(
            "trainer 2 processes: 1 thread / 2 threads each", ("trainer", 2, 1), ("trainer", 2, 2), r, s
        )
    if "checkpoint" in want:
        results["checkpoint"] = checkpoint_overhead(r)
    if "resume" in want:
        results["resume"] = kill_to_resume(r)
    if "checkpoint-format" in want:
        results["checkpoint_format"] = checkpoint_formats(r)
    if "staging" in want:
        results["staging"] = staging(r)
    if "plan" in want:
        results["plan"] = plan_vs_imports(max(r, 5))
    if "gpt" in want:
        results["gpt"] = gpt_compile(args.gpt_size, args.gpt_batch_size, args.gpt_steps, r)
    path.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

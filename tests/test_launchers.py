"""Your own code under each launcher: the command the builder emits is run here as the pod
would run it, one process is killed mid-run, and the status the restart policy sees is checked
(``restartPolicy: ExitCode`` retries 128-255 and fails the job on 1-127)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_jobs import IMAGE, POOL_8_ERDMA, context

from components.config import TrainingJobSpec
from components.manifests import CPU_PLACEMENT, kubeflow_job

ROOT = Path(__file__).resolve().parent.parent

USER_SCRIPT = """\
import os, signal, sys, time
from pathlib import Path
# Stopped, it checkpoints and ends cleanly, as a well-behaved script does.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
rank = os.environ.get("RANK", "0")
Path(sys.argv[1], f"pid-{rank}").write_text(str(os.getpid()))
if len(sys.argv) > 2:
    sys.exit(int(sys.argv[2]))
time.sleep(120)
"""
"""A user's training script: it says where it runs, then works until stopped (and then exits
0, having saved its work), or exits with the status it is given."""


def pod_command(job: TrainingJobSpec) -> list[str]:
    """The container command of a one-node job's Master, as the builder emits it."""
    manifest = kubeflow_job(job, context(CPU_PLACEMENT, 0))
    return manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]


def start(command: list[str], tmp_path: Path) -> subprocess.Popen:
    # The image runs ``python``; here that is this interpreter.
    command = [sys.executable if part == "python" else part for part in command]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    return subprocess.Popen(command, cwd=tmp_path, env=env, start_new_session=True)


def wait_for_pids(tmp_path: Path, count: int, proc: subprocess.Popen) -> list[int]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        files = sorted(tmp_path.glob("pid-*"))
        if len(files) == count and all(f.read_text() for f in files):
            return [int(f.read_text()) for f in files]
        assert proc.poll() is None, f"the launcher exited {proc.returncode} before the script started"
        time.sleep(0.2)
    raise AssertionError("the user script did not start")


def user_job(launcher: str, tmp_path: Path, *script_args: str, procs: int = 1) -> TrainingJobSpec:
    (tmp_path / "train.py").write_text(USER_SCRIPT)
    return TrainingJobSpec(
        name="own-code",
        image=IMAGE,
        gpus_per_node=0,
        procs_per_node=procs,
        launcher=launcher,
        command=["train.py", str(tmp_path)],
        args=list(script_args),
        restart_policy="ExitCode",
    )


def status_after(command: list[str], tmp_path: Path, procs: int, stop) -> int:
    """The launcher's exit status after ``stop(launcher, script pids)`` once the script runs."""
    proc = start(command, tmp_path)
    try:
        stop(proc, wait_for_pids(tmp_path, procs, proc))
        return proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("launcher", "procs"),
    [("python", 1), ("torchrun", 2), ("deepspeed", 2)],
)
def test_a_killed_process_is_retried(launcher: str, procs: int, tmp_path: Path) -> None:
    command = pod_command(user_job(launcher, tmp_path, procs=procs))
    status = status_after(command, tmp_path, procs, lambda _, pids: os.kill(pids[-1], signal.SIGKILL))
    assert status == 128 + signal.SIGKILL


@pytest.mark.parametrize("launcher", ["python", "torchrun"])
def test_an_evicted_pod_is_retried(launcher: str, tmp_path: Path) -> None:
    command = pod_command(user_job(launcher, tmp_path))
    status = status_after(command, tmp_path, 1, lambda launcher, _: launcher.send_signal(signal.SIGTERM))
    assert status == 128 + signal.SIGTERM


@pytest.mark.parametrize("launcher", ["python", "torchrun"])
def test_a_script_error_ends_the_job(launcher: str, tmp_path: Path) -> None:
    proc = start(pod_command(user_job(launcher, tmp_path, "3")), tmp_path)
    assert proc.wait(timeout=120) == 3


def test_a_missing_program_is_not_retried(tmp_path: Path) -> None:
    proc = start([sys.executable, "-m", "trainer.run", "no-such-program-here"], tmp_path)
    assert proc.wait(timeout=60) == 127


def test_accelerate_takes_its_world_from_the_operator() -> None:
    """accelerate's flags from the variables both backends inject (``launchers.py`` cites them)."""
    job = TrainingJobSpec(
        name="acc", image=IMAGE, nodes=4, launcher="accelerate", command=["train.py"], args=["--bf16"]
    )
    manifest = kubeflow_job(job, context(POOL_8_ERDMA, 8))
    master = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert master["command"] == [
        "python",
        "-m",
        "trainer.run",
        "accelerate",
        "launch",
        "--num_machines=4",
        "--num_processes=32",
        "--machine_rank=$(PET_NODE_RANK)",
        "--main_process_ip=$(PET_MASTER_ADDR)",
        "--main_process_port=$(PET_MASTER_PORT)",
        "--multi_gpu",
        "train.py",
        "--bf16",
    ]


def test_torch_launchers_meet_at_the_master_on_several_nodes() -> None:
    for launcher in ("torchrun", "deepspeed"):
        job = TrainingJobSpec(name="ds", image=IMAGE, nodes=2, launcher=launcher, command=["train.py"])
        pod = kubeflow_job(job, context(POOL_8_ERDMA, 8))["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
        assert pod["spec"]["containers"][0]["command"] == [
            "python",
            "-m",
            "trainer.launch",
            "--nproc-per-node=8",
            "--master-addr=$(MASTER_ADDR)",
            "--master-port=$(MASTER_PORT)",
            "train.py",
        ]

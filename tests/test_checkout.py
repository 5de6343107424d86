"""Running the project's entry points from a checkout leaves git with nothing to report:
what they write goes to ignored folders (out/, site/, .venv)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from checkout import ROOT, copy_checkout, git, linked_venv

ENTRY_POINTS = [
    ["./dev", "quickstart"],
    ["./dev", "plan", "dev"],
    ["./dev", "bench", "--only", "plan", "--repeats", "1"],
    ["./dev", "docs"],
]


def test_entry_points_write_nothing_git_tracks(tmp_path: Path) -> None:
    checkout = copy_checkout(tmp_path)
    launcher = Path(sys.prefix) / "bin" / "ack-jobs"
    ours = launcher.read_bytes() if launcher.exists() else None
    env = {**os.environ, "DEV_NO_INSTALL": "1", "NO_MKDOCS_2_WARNING": "1"}
    for argv in ENTRY_POINTS:
        done = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        assert git("status", "--porcelain", cwd=checkout) == "", f"{' '.join(argv)} left files git reports"
    assert (checkout / "out" / "bench" / "results.json").is_file()
    # The copy's quickstart writes its own launcher, not the one of the venv the tests run in.
    assert (launcher.read_bytes() if launcher.exists() else None) == ours


def dev_alone(dest: Path) -> Path:
    """``dev`` and the files it reads, with a ``.venv`` of its own whose packages are this
    interpreter's: what ``./dev`` writes into its venv stays in ``dest``."""
    for name in ("dev", "requirements.txt", "requirements-dev.txt", "requirements-kinds.txt"):
        shutil.copy2(ROOT / name, dest / name)
    linked_venv(dest / ".venv")
    return dest


def test_dev_test_runs_on_every_core_unless_told(tmp_path: Path) -> None:
    checkout = dev_alone(tmp_path)
    env = {**os.environ, "DEV_NO_INSTALL": "1"}
    workers = len(os.sched_getaffinity(0)) + 1
    for args, shown in (
        ([], f"-n {workers} --version"),
        (["-n", "1"], "-n 1 --version"),
        (["--numprocesses=2"], "--numprocesses=2 --version"),
        (["-p", "no:xdist"], "-p no:xdist --version"),
        (["--pdb"], "--pdb --version"),
    ):
        done = subprocess.run(
            ["./dev", "test", *args, "--version"], cwd=checkout, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines()[0] == f"== pytest {shown}"
    infra = subprocess.run(
        ["./dev", "test-infra", "--version"], cwd=checkout, env=env, capture_output=True, text=True, timeout=120
    )
    assert infra.stderr.splitlines()[0] == f"== pytest -n {workers} -m not trainer --version"

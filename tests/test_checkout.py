"""Running the project's entry points from a checkout leaves git with nothing to report:
what they write goes to ignored folders (out/, site/, .venv)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from checkout import copy_checkout, git

ENTRY_POINTS = [
    ["./dev", "quickstart"],
    ["./dev", "plan", "dev"],
    ["./dev", "bench", "--only", "plan", "--repeats", "1"],
    ["./dev", "docs"],
]


def test_entry_points_write_nothing_git_tracks(tmp_path: Path) -> None:
    checkout = copy_checkout(tmp_path)
    env = {**os.environ, "DEV_NO_INSTALL": "1", "NO_MKDOCS_2_WARNING": "1"}
    for argv in ENTRY_POINTS:
        done = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        assert git("status", "--porcelain", cwd=checkout) == "", f"{' '.join(argv)} left files git reports"
    assert (checkout / "out" / "bench" / "results.json").is_file()

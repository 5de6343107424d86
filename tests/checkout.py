"""A throwaway copy of this checkout: the files git tracks or would track, committed in a
fresh repository, with a ``.venv`` of its own whose programs and packages are those of the
interpreter running the tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def copy_checkout(dest: Path) -> Path:
    """Copy the working tree (uncommitted edits included, ignored files left out) into
    ``dest`` and commit it there, so ``git status`` in the copy shows what a command wrote."""
    files = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    git("init", "-q", cwd=dest)
    # .gitignore's `.venv/` matches directories only, not this link.
    (dest / ".git" / "info" / "exclude").write_text("/.venv\n")
    linked_venv(dest / ".venv")
    git("add", "-A", cwd=dest)
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "copy", cwd=dest)
    return dest


def linked_venv(venv: Path) -> Path:
    """A venv at ``venv`` that runs this interpreter's programs and packages through links, in
    folders of its own: what ``./dev`` writes into ``bin/`` (the ``ack-jobs`` launcher) lands in
    the copy, never in the venv the tests run in."""
    (venv / "bin").mkdir(parents=True)
    shutil.copy2(Path(sys.prefix) / "pyvenv.cfg", venv / "pyvenv.cfg")
    (venv / "lib").symlink_to(Path(sys.prefix) / "lib", target_is_directory=True)
    for program in (Path(sys.prefix) / "bin").iterdir():
        if program.name != "ack-jobs":
            (venv / "bin" / program.name).symlink_to(program)
    return venv

"""The documentation site: it builds with ``mkdocs build --strict``, the README stays a
front page, and every shell block marked ``<!-- runs offline -->`` runs, in a copy of the
checkout, printing what the page shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from checkout import ROOT, copy_checkout

MARKER = "<!-- runs offline -->"
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
README_LINES = 200
# Durations (`planned in 1.55s`, `0.44 seconds`) differ from run to run.
DURATION = re.compile(r"\b\d+(\.\d+)?\s?(ms|s|seconds)\b")


@dataclass
class Block:
    page: str
    line: int
    lang: str
    body: str


def offline_blocks(text: str, page: str) -> list[Block]:
    """The fenced blocks right after a marker line; a marker before anything else is an error."""
    lines, blocks = text.splitlines(), []
    for number, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        start = next((i for i in range(number + 1, len(lines)) if lines[i].strip()), len(lines))
        if start == len(lines) or not lines[start].startswith("```"):
            raise ValueError(f"{page}:{number + 1}: {MARKER} must be followed by a ```bash or ```console block")
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
        blocks.append(Block(page, start + 1, lines[start][3:].strip(), "\n".join(lines[start + 1 : end])))
    return blocks


def session(body: str) -> list[tuple[str, str]]:
    """A console block as (command, output shown) pairs: ``$ `` starts a command, a trailing
    backslash continues it, and the lines up to the next ``$ `` are its output."""
    steps: list[tuple[str, list[str]]] = []
    continued = False
    for line in body.splitlines():
        if continued:
            steps[-1] = (steps[-1][0] + "\n" + line, [])
        elif line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        continued = line.endswith("\\") and (line.startswith("$ ") or continued)
    return [(command, "\n".join(shown)) for command, shown in steps]


def normalise(text: str, checkout: Path) -> str:
    return DURATION.sub("<time>", text.replace(str(checkout), "<checkout>")).strip()


def run(command: str, checkout: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def check(block: Block, checkout: Path) -> None:
    where = f"{block.page}:{block.line}"
    if block.lang == "bash":
        done = run(block.body, checkout)
        assert done.returncode == 0, f"{where} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        return
    assert block.lang == "console", f"{where}: a {MARKER} block is ```bash or ```console, not {block.lang!r}"
    for command, shown in session(block.body):
        done = run(command, checkout)
        assert done.returncode == 0, f"{where}: `{command}` exited {done.returncode}:\n{done.stdout}{done.stderr}"
        printed = normalise(done.stdout + done.stderr, checkout)
        assert printed == normalise(shown, checkout), f"{where}: `{command}` printed:\n{printed}"


BLOCKS = [block for page in PAGES for block in offline_blocks(page.read_text(), page.relative_to(ROOT).as_posix())]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_checkout(tmp_path_factory.mktemp("checkout"))


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.page}:{b.line}" for b in BLOCKS])
def test_offline_blocks_run_as_shown(block: Block, checkout: Path) -> None:
    check(block, checkout)


def test_a_block_whose_output_changed_fails(tmp_path: Path) -> None:
    page = f"{MARKER}\n\n```console\n$ echo one \\\n    two\none three\n```\n"
    (block,) = offline_blocks(page, "page.md")
    assert session(block.body) == [("echo one \\\n    two", "one three")]
    with pytest.raises(AssertionError, match=r"printed:\n\s*one two"):
        check(block, tmp_path)


def test_a_marker_without_a_block_is_reported() -> None:
    with pytest.raises(ValueError, match=r"page.md:1: .* must be followed by a ```bash or ```console block"):
        offline_blocks(f"{MARKER}\nsome prose\n", "page.md")


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    # --strict turns every warning (a broken link or anchor, a nav entry to a missing page) into a failure.
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "configuration" / "index.html").is_file()
    home = (tmp_path / "site" / "index.html").read_text()
    last_row = re.findall(r"^\| \[([^]]+)\]\(docs/", (ROOT / "README.md").read_text(), re.M)[-1]
    assert last_row in home, "the site's home page is not the README"


def test_the_readme_is_a_front_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_LINES
    for page in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / page).is_file(), f"README links to {page}, which does not exist"


def test_the_readmes_job_and_dataset_examples_are_valid_stack_entries() -> None:
    from components.config import DatasetImportSpec, TrainingJobSpec

    readme = (ROOT / "README.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "ack-training-platform:jobs:" in b]
    config = yaml.safe_load(block)
    jobs = [TrainingJobSpec.model_validate(job) for job in config["ack-training-platform:jobs"]]
    # Every kind and every launcher has its line.
    assert {job.framework for job in jobs} == {"pytorch", "tensorflow", "xgboost", "mpi", "jax", "paddle"}
    assert {job.launcher for job in jobs} >= {"torchrun", "accelerate", "deepspeed", "python"}
    for dataset in config["ack-training-platform:datasets"]:
        DatasetImportSpec.model_validate(dataset)

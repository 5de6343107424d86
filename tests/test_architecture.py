"""The layering rules of docs/architecture.md, checked against the source's imports, and the
page's generated part and contributor map against the checkout."""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

from components.package import architecture as arch

GRAPH = arch.graph()


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    upward = [
        f"{module} ({arch.layer_of(module).name}) imports {target} ({arch.layer_of(target).name})"
        for module, targets in sorted(GRAPH.items())
        for target in sorted(targets)
        if arch.rank(target) > arch.rank(module)
    ]
    assert upward == []


def test_no_import_loop() -> None:
    assert arch.loops(GRAPH) == []


def test_a_loop_is_found_where_there_is_one() -> None:
    edges = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset({"a"})}
    assert arch.loops(edges) == [["a", "b", "c"]]
    assert arch.longest_chain({"a": frozenset({"b"}), "b": frozenset(), "c": frozenset({"a"})}) == ["c", "a", "b"]


def test_imports_count_a_reexported_name_as_an_import_of_the_module_that_defines_it() -> None:
    # components/training_job.py imports pod_template through components/manifests/__init__.py.
    assert "components.manifests.jobs.pod" in GRAPH["components.training_job"]
    assert "components.manifests" not in GRAPH["components.training_job"]
    # Type-checking imports count: a part of the specs that named the platform spec would be a loop.
    assert "components.config.training_job" in GRAPH["components.config.operator"]


def test_the_longest_chain_of_imports_stays_within_the_floors_allowed() -> None:
    chain = arch.longest_chain(GRAPH)
    assert len(chain) <= arch.MAX_FLOORS, " -> ".join(chain)


@pytest.mark.parametrize("folder", ["components", "components/manifests", "trainer"])
def test_a_folder_holds_at_most_twenty_modules_directly(folder: str) -> None:
    assert len(arch.folders()[folder]) <= arch.MAX_DIRECT, sorted(arch.folders()[folder])


def test_every_folder_holds_at_most_twenty_modules_directly() -> None:
    crowded = {folder: len(held) for folder, held in arch.folders().items() if len(held) > arch.MAX_DIRECT}
    assert crowded == {}


COMPONENTS = sorted(m for m in arch.modules() if arch.layer_of(m).name == "components" and m != "components")
ENTRY_POINTS = {
    m
    for m, path in arch.modules().items()
    if m.startswith("trainer") and 'if __name__ == "__main__"' in path.read_text()
}
COMMANDS = {m for m in arch.modules() if arch.is_command(m)} | ENTRY_POINTS


def test_the_commands_are_the_ones_a_person_runs() -> None:
    assert {"components.plan.command", "components.upstream.command", "components.jobs.cli"} <= COMMANDS
    assert "components.plan.runner" not in COMMANDS and "components.upstream.digests" not in COMMANDS
    assert "components.images.mirror" in COMPONENTS and "components.registry" in COMPONENTS


@pytest.mark.parametrize("module", COMPONENTS)
def test_a_component_loads_no_command_line_module(module: str) -> None:
    # A clean interpreter: what importing the component loads, lazily imported or not.
    code = f"import importlib, json, sys; importlib.import_module({module!r}); print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert sorted(loaded & COMMANDS) == []
    assert "torch" not in loaded


def test_the_trainer_imports_nothing_of_the_platform() -> None:
    assert not [
        (m, t) for m, targets in GRAPH.items() if m.startswith("trainer") for t in targets if t.startswith("components")
    ]


def _imported_tops(path) -> set[str]:
    """The top-level packages a module imports, anywhere in it (absolute imports only)."""
    tops = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            tops |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            tops.add(node.module.split(".")[0])
    return tops


def test_the_trainer_imports_no_pulumi_and_the_platform_no_torch() -> None:
    # The training image carries no Pulumi SDK, and the platform's program no torch: an import of
    # either would fail there, while this checkout's venv, which has both, would not notice.
    crossing = sorted(
        (module, top)
        for module, path in arch.modules().items()
        for top in _imported_tops(path)
        if (module.startswith("trainer") and top.startswith("pulumi"))
        or (module.startswith("components") and top == "torch")
    )
    assert crossing == []


def test_the_pages_generated_part_is_current() -> None:
    page = arch.PAGE.read_text()
    assert arch.page_with_generated(page) == page, "run python -m components.package.architecture --write"


def test_the_generated_part_lists_every_module() -> None:
    page = arch.generated()
    for module, path in arch.modules().items():
        folder = path.parent.relative_to(ROOT).as_posix()
        assert f"#### `{folder}/`" in page
        assert f"| `{path.name}` | {arch.layer_of(module).name} |" in page


def _map() -> str:
    page = arch.PAGE.read_text()
    return page[page.index("## Where a change goes") : page.index("## Commands that moved")]


def test_the_contributor_map_names_ten_changes_each_with_a_test() -> None:
    rows = [
        line for line in _map().splitlines() if line.startswith("| ") and not line.startswith(("| change", "| ---"))
    ]
    assert len(rows) == 10
    for row in rows:
        assert re.search(r"`tests/test_\w+\.py`", row.split("|")[3]), row


def test_every_path_and_command_in_the_contributor_map_exists() -> None:
    text = _map()
    paths = re.findall(r"`((?:components|trainer|tests)/[\w/.]*)`", text)
    assert len(paths) > 20
    assert [p for p in paths if not (ROOT / p).exists()] == []
    commands = re.findall(r"`python -m ([\w.]+)", text)
    assert commands
    assert [c for c in commands if c not in arch.modules() and f"{c}.__main__" not in arch.modules()] == []


def test_a_module_takes_the_layer_of_its_most_specific_pattern() -> None:
    assert arch.layer_of("components.upstream.command").name == "commands"
    assert arch.layer_of("components.upstream.digests").name == "sources"
    assert arch.layer_of("components.config.platform").name == "specs"
    assert arch.layer_of("components.registry").name == "components"
    assert arch.rank("components.config.platform") < arch.rank("components.registry") < arch.rank("components.jobs.cli")


def test_the_moved_commands_run_under_their_new_paths() -> None:
    page = arch.PAGE.read_text()
    moved = page[page.index("## Commands that moved") : page.index(arch.BEGIN)]
    new = re.findall(r"\| `python -m [\w.]+[^`]*` \| `python -m ([\w.]+)", moved)
    assert len(new) == 3
    assert [module for module in new if module not in arch.modules()] == []


def test_the_wheel_lists_every_package() -> None:
    listed = set(re.findall(r'"ack_training_platform\.([\w.]+)"', (ROOT / "pyproject.toml").read_text()))
    packages = {module for module, path in arch.modules().items() if path.name == "__init__.py"}
    assert sorted(packages - listed) == []


def test_the_former_model_spec_module_still_imports() -> None:
    # Own models written against docs/trainer.md before the move import it by this name.
    from trainer import model_spec
    from trainer.models import spec

    assert (model_spec.ModelSpec, model_spec.TOKENS, model_spec.IMAGES) == (spec.ModelSpec, spec.TOKENS, spec.IMAGES)


def _run(module: str, *args: str, cwd=ROOT, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    ("former", "args"),
    [
        ("components.plugins", ["--commands"]),
        ("components.reference", []),
        # Without --write the generator only says how to run it: nothing is written.
        ("components.package_codegen", []),
    ],
)
def test_a_moved_command_still_runs_under_its_former_name_for_one_release(former: str, args: list[str]) -> None:
    old, new = _run(former, *args), _run(arch.FORMER_COMMANDS[former], *args)
    assert (old.returncode, old.stdout) == (new.returncode, new.stdout)
    assert old.stdout or new.stderr
    note = f"python -m {former} is now python -m {arch.FORMER_COMMANDS[former]}; the old name goes in the next release"
    assert old.stderr == note + "\n" + new.stderr


@pytest.mark.parametrize(
    ("former", "new", "names"),
    [
        ("trainer.tokens", "trainer.data.tokens", ["open_corpus", "write_tokens", "open_tokens", "DataError"]),
        ("trainer.strategy", "trainer.parallelism.strategy", ["Inputs", "decide", "Decision", "DecisionError"]),
    ],
)
def test_a_moved_module_still_imports_under_its_former_name_for_one_release(
    former: str, new: str, names: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, former, raising=False)
    with pytest.warns(DeprecationWarning, match=f"^{former} is now {new}; the old name goes in the next release$"):
        old = importlib.import_module(former)
    moved = importlib.import_module(new)
    assert [getattr(old, name) is getattr(moved, name) for name in names] == [True] * len(names)


def test_the_wheel_ships_the_former_names(installed_package) -> None:
    env = {**os.environ, "PYTHONPATH": str(installed_package)}
    done = _run("ack_training_platform.components.reference", cwd=installed_package, env=env)
    assert done.returncode == 0, done.stderr
    assert "python -m components.reference is now python -m components.package.reference" in done.stderr
    assert "| key | type | default | meaning |" in done.stdout
    code = (
        "import warnings; warnings.simplefilter('ignore');"
        "from ack_training_platform.trainer.tokens import open_corpus as a;"
        "from ack_training_platform.trainer.data.tokens import open_corpus as b;"
        "from ack_training_platform.trainer.strategy import decide as c;"
        "from ack_training_platform.trainer.parallelism.strategy import decide as d;"
        "print(a is b and c is d)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=installed_package, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.stdout == "True\n", done.stderr

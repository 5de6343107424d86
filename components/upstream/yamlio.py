"""Reading YAML: libyaml's loader where it is installed, a stack file's keys each given once, and
a stack file found and read, as the offline plan and the upstream command read it.

Pure: no Pulumi.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""The safe loader, in C (libyaml) where PyYAML was built with it: several times faster on the
operator's 50,000 lines of CRDs than the pure-Python one, with the same results."""


class DuplicateKey(yaml.YAMLError):
    """A mapping gives one key twice; YAML loaders keep the last value without a word.

    Args:
        key: the key's path from the document's root (``config.ack-training-platform:gpuPool.maxSize``).
        line: the line of its second appearance.
        first: the line of its first.
    """

    def __init__(self, key: str, line: int, first: int):
        super().__init__(key, line, first)
        self.key, self.line, self.first = key, line, first

    def describe(self, key: str | None = None) -> str:
        """The problem, naming the key as ``key`` (default: its path)."""
        return (
            f"line {self.line}: {key or self.key} is given twice (first on line {self.first}), and YAML would keep "
            "only the last: remove one"
        )

    def __str__(self) -> str:
        return self.describe()


def load_yaml(text: str) -> Any:
    """The one document in ``text``, refusing a key given twice in any mapping.

    Raises:
        DuplicateKey: names the key by its path (``config.ack-training-platform:gpuPool.maxSize``)
            and both lines.
        yaml.YAMLError: ``text`` is not YAML.
    """
    loader = LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _refuse_duplicates(node, "")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _refuse_duplicates(node: yaml.Node, path: str) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            where = f"{path}.{name}" if path else str(name)
            line = key.start_mark.line + 1
            if name is not None and name in seen:
                raise DuplicateKey(where, line, seen[name])
            if name is not None:
                seen[name] = line
            _refuse_duplicates(value, where)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _refuse_duplicates(item, f"{path}[{i}]")


class StackFileError(Exception):
    """The stack could not be read (missing file, bad YAML); exit status 2."""


def find_project_dir(start: Path | None = None) -> Path:
    """The nearest directory at or above ``start`` holding ``Pulumi.yaml``."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if (directory / "Pulumi.yaml").is_file():
            return directory
    raise StackFileError(f"no Pulumi.yaml in {here} or above: run from the project directory")


def read_stack_file(path: Path) -> dict[str, Any]:
    """The ``config:`` section of a stack file.

    Raises:
        StackFileError: missing file, bad YAML, a key given twice or a section that is not a mapping.
    """
    try:
        document = load_yaml(path.read_text()) or {}
    except FileNotFoundError:
        raise StackFileError(f"{path}: no such stack file") from None
    except DuplicateKey as err:
        raise StackFileError(f"{path}: {err.describe(err.key.removeprefix('config.'))}") from None
    except yaml.YAMLError as err:
        raise StackFileError(f"{path}: not valid YAML: {err}") from None
    config = document.get("config", {}) if isinstance(document, dict) else None
    if not isinstance(config, dict):
        raise StackFileError(f"{path}: 'config' must be a mapping of stack keys")
    return config


def stack_path(project_dir: Path, stack: str) -> Path:
    return project_dir / "stacks" / f"Pulumi.{stack}.yaml"

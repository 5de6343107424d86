"""The docs' stack-config reference (docs/configuration.md), generated from the config models,
and the table of GPU instance types the platform knows, generated from its data
(components/config/gpus/instance_data.py).

python -m components.package.reference            # print the reference
python -m components.package.reference --write    # update docs/configuration.md between its markers
"""

from __future__ import annotations

import argparse
import sys
from ipaddress import IPv4Network
from pathlib import Path
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from ..config import PROJECT, REGION_KEY, PlatformSpec
from ..config.base import model_of
from ..config.gpus.types import instance_type_table

START = "<!-- config-reference:start -->"
END = "<!-- config-reference:end -->"
TYPES_START = "<!-- gpu-instance-types:start -->"
TYPES_END = "<!-- gpu-instance-types:end -->"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _type_name(annotation: Any) -> str:
    """A type as a stack file's author reads it: ``list[CIDR]``, ``int or None``."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _type_name(args[0])
    if origin in (Union, UnionType):
        named = " or ".join(_type_name(arg) for arg in args if arg is not NoneType)
        return f"{named} or None" if NoneType in args else named
    if origin is Literal:
        return f"one of {list(args)}"
    if origin is list:
        return f"list[{_type_name(args[0])}]"
    if origin is dict:
        return f"dict[{_type_name(args[0])}, {_type_name(args[1])}]"
    if annotation is IPv4Network:
        return "CIDR"
    return annotation.__name__ if isinstance(annotation, type) else str(annotation)


def _default(field: Any) -> str:
    if field.default is not PydanticUndefined:
        return "—" if field.default is None else f"`{field.default}`"
    if field.default_factory is not None:
        value = field.default_factory()
        return "see below" if isinstance(value, BaseModel) else f"`{value}`"
    return "**required**"


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        if model is PlatformSpec and name == "region":
            continue
        key = f"{prefix}{field.alias or name}"
        nested = model_of(field.annotation)
        doc = field.description or (nested.__doc__ or "" if nested is not None else "")
        doc = " ".join(doc.split()).replace("|", "\\|").replace("``", "`")
        rows.append(f"| `{key}` | {_type_name(field.annotation).replace('|', 'or')} | {_default(field)} | {doc} |")
        if nested is not None:
            sep = "[]." if "list[" in str(field.annotation) else "."
            rows += _rows(nested, key + sep)
    return rows


def reference() -> str:
    """The reference as Markdown."""
    head = [
        f"Every key lives under the `{PROJECT}:` namespace of a stack file; the region is the provider's "
        f"own `{REGION_KEY}`. Secrets: `registryPassword` (`pulumi config set --secret registryPassword ...`). "
        "`python -m components.plan --schema` prints the same as JSON schema.",
        "",
        "| key | type | default | meaning |",
        "|---|---|---|---|",
    ]
    return "\n".join(head + _rows(PlatformSpec, ""))


def _replace_block(text: str, start: str, end: str, body: str) -> str:
    before, _, rest = text.partition(start)
    _, _, after = rest.partition(end)
    return f"{before}{start}\n{body}\n{end}{after}"


def update_page(path: Path = PAGE) -> bool:
    """Rewrite the blocks between the markers; return whether anything changed."""
    text = path.read_text()
    updated = _replace_block(text, START, END, reference())
    updated = _replace_block(updated, TYPES_START, TYPES_END, instance_type_table())
    if updated != text:
        path.write_text(updated)
    return updated != text


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m components.package.reference")
    parser.add_argument("--write", action="store_true", help=f"update {PAGE.name} in place")
    args = parser.parse_args()
    if args.write:
        print(f"{PAGE.name} updated" if update_page() else f"{PAGE.name} already up to date")
    else:
        print(reference())
    return 0


if __name__ == "__main__":
    sys.exit(main())

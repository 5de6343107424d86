"""The docs site's home page is the README, with its ``docs/`` links made relative to the
site, so the front page exists once and cannot drift from a copy."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files

README = Path(__file__).with_name("README.md")


def on_files(files: Files, config) -> Files:  # noqa: ANN001 - mkdocs passes its MkDocsConfig
    files.append(File.generated(config, "index.md", content=README.read_text().replace("](docs/", "](")))
    return files

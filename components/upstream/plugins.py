"""The Pulumi plugins a ``pulumi up`` of this program downloads, from the installed packages.

Each Pulumi provider SDK on PyPI ships a ``pulumi-plugin.json`` naming the plugin it needs
(``resource``, ``name``, ``version``, and ``server`` for one hosted elsewhere); the CLI
downloads each on the first run. A runner that cannot reach Pulumi's servers (mainland
China) installs them beforehand from archives fetched once elsewhere::

    python -m components.upstream.plugins            # the plugins, their archives, the install commands
    python -m components.upstream.plugins --commands --server https://<mirror>/plugins | sh   # install from a mirror

The list follows ``requirements.txt`` and what its packages require in turn, as installed
(``packaging`` reads their markers; Pulumi's SDK requires it), so it names every plugin a new
dependency brings.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements.txt"
DEFAULT_SERVER = "https://get.pulumi.com/releases/plugins"
"""Where the CLI downloads a plugin whose package names no server (pulumi/pulumi
``sdk/go/common/workspace/plugins.go``, ``getPulumiSource``)."""
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True)
class Plugin:
    """A plugin one installed package declares.

    Args:
        name: the plugin's name (``alicloud``).
        version: its version, the package's.
        kind: ``resource`` for a provider.
        server: where the CLI fetches it from.
        package: the distribution that declares it.
    """

    name: str
    version: str
    kind: str
    server: str
    package: str

    def archive(self, os_name: str = "linux", arch: str = "amd64") -> str:
        """The archive the CLI downloads (``standardAssetName`` in the same Go file)."""
        return f"pulumi-{self.kind}-{self.name}-v{self.version}-{os_name}-{arch}.tar.gz"

    def install_command(self, folder: str = "<folder>", *, server: str | None = None) -> str:
        """The CLI command that installs it from an archive in ``folder``, or from ``server``
        (a mirror serving the archives under their own names)."""
        source = f"--server {server}" if server else f"--file {folder}/{self.archive()}"
        return f"pulumi plugin install {self.kind} {self.name} {self.version} {source}"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def required_distributions(requirements: Path = REQUIREMENTS) -> list[metadata.Distribution]:
    """The installed distributions ``requirements`` names and everything they require, in
    the file's order, each once.

    Raises:
        metadata.PackageNotFoundError: a required distribution is not installed.
    """
    pending = [m.group(1) for line in requirements.read_text().splitlines() if (m := _NAME.match(line.split("#")[0]))]
    seen: dict[str, metadata.Distribution] = {}
    while pending:
        name = _canonical(pending.pop(0))
        if name in seen:
            continue
        dist = metadata.distribution(name)
        seen[name] = dist
        for text in dist.requires or []:
            requirement = Requirement(text)
            # Only what this interpreter installs: no extras, no other platform's markers.
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return list(seen.values())


def plugins(requirements: Path = REQUIREMENTS) -> list[Plugin]:
    """Every plugin the packages of ``requirements`` declare, by name."""
    found = []
    for dist in required_distributions(requirements):
        for file in dist.files or []:
            if file.name != "pulumi-plugin.json":
                continue
            declared = json.loads(file.read_text())
            if not declared.get("resource"):
                continue
            found.append(
                Plugin(
                    name=declared["name"],
                    version=declared["version"].removeprefix("v"),
                    kind="resource",
                    server=declared.get("server") or DEFAULT_SERVER,
                    package=f"{dist.metadata['Name']}=={dist.version}",
                )
            )
    return sorted(found, key=lambda p: p.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.upstream.plugins", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requirements", type=Path, default=REQUIREMENTS, help="the program's requirements file")
    parser.add_argument("--commands", action="store_true", help="print only the install commands, one a line")
    parser.add_argument("--server", metavar="URL", help="install from this mirror of the plugin archives")
    args = parser.parse_args(argv)
    try:
        found = plugins(args.requirements)
    except metadata.PackageNotFoundError as err:
        print(f"error: {err.args[0]} is required by {args.requirements} but not installed", file=sys.stderr)
        return 2
    for plugin in found:
        if args.commands:
            print(plugin.install_command(server=args.server))
            continue
        print(f"{plugin.name} {plugin.version}  ({plugin.package})")
        print(f"  download: {plugin.server}/{plugin.archive()}")
        print(f"  install:  {plugin.install_command(server=args.server)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

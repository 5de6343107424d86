"""Installs ``components/`` and ``trainer/`` as ``ack_training_platform.components`` and
``ack_training_platform.trainer``, so that an installed copy never shadows, or is shadowed
by, a consumer's own ``components`` or ``trainer`` package (a common Pulumi layout), and the
names on PyPI that are not ours are never imported in their place.

The checkout keeps its layout: ``python -m components.plan`` and ``python -m trainer`` run
from it as they are. The import statements of the copies the wheel holds are rewritten to
the namespaced names when the wheel is built; nothing else in them changes.
"""

import re
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

NAMESPACE = "ack_training_platform"
_OWN_IMPORT = re.compile(r"^(\s*)(from|import)(\s+)(components|trainer)(?=[\s.])", re.MULTILINE)


def namespaced(source: str) -> str:
    """``source`` with each import of ``components`` or ``trainer`` made one of ``NAMESPACE``'s."""
    return _OWN_IMPORT.sub(rf"\1\2\3{NAMESPACE}.\4", source)


class NamespacedBuild(build_py):
    def build_module(self, module, module_file, package):
        outfile, copied = super().build_module(module, module_file, package)
        path = Path(outfile)
        path.write_text(namespaced(path.read_text()))
        return outfile, copied


setup(cmdclass={"build_py": NamespacedBuild})

"""ack-training-platform as installed: ``ack_training_platform.components`` (the Pulumi
components, specs, builders and ``ack-jobs``) and ``ack_training_platform.trainer``, under
one name of this project's, so a program with its own ``components/`` or ``trainer/`` keeps
them.

The wheel places both packages inside this one (pyproject.toml's ``package-dir``). In a
checkout they stay at the top level, beside ``__main__.py``; this package then also looks
there, so ``ack_training_platform.trainer`` names the same files in both layouts.
"""

from pathlib import Path

_here = Path(__file__).resolve().parent
if not (_here / "components").is_dir():
    __path__.append(str(_here.parent))  # noqa: F821 (a package's own __path__)

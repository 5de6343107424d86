"""The former name of :mod:`trainer.parallelism.strategy`, kept for one release so that a script
written against it (``from trainer.strategy import Inputs, decide``) still imports; the old name
goes in the next release. The names are the new module's own objects, not copies."""

import warnings

from ..parallelism.strategy import *  # noqa: F403

warnings.warn(
    "trainer.strategy is now trainer.parallelism.strategy; the old name goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)

"""The former name of :mod:`trainer.data.tokens`, kept for one release so that a script written
against it (``from trainer.tokens import open_corpus``) still imports; the old name goes in the
next release. The names are the new module's own objects, not copies."""

import warnings

from ..data.tokens import *  # noqa: F403

warnings.warn(
    "trainer.tokens is now trainer.data.tokens; the old name goes in the next release", DeprecationWarning, stacklevel=2
)

"""The former name of :mod:`trainer.models.spec`, kept for one release so that a model written
against it (``from trainer.model_spec import TOKENS, ModelSpec``) still imports."""

from .models.spec import *  # noqa: F403

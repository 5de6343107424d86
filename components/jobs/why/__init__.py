"""Why a job waits (``ack-jobs why``): :func:`.cause.why` turns the job, its pods, its PodGroup
or Workload, the namespace's quotas, the pool's nodes and the recent events into one sentence."""

from .cause import why
from .observed import Observed, Why

__all__ = ["Observed", "Why", "why"]

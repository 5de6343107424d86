"""``python -m components.jobs``: the same commands as ``ack-jobs``."""

from .cli import main

main()

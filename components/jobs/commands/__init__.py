"""The ``ack-jobs`` commands: their flags in :mod:`.flags`, which needs no ``[jobs]`` extra, so
that ``--help`` works without it; the run in :mod:`.dispatch`; one module per area."""

"""The pinned upstream sources: fetching them, verifying local copies, image digests and their lock, and the ``python -m components.upstream`` command."""

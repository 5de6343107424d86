"""The former name of ``python -m components.upstream.plugins``, kept for one release (:mod:`.__main__`)."""

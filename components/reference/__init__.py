"""The former name of ``python -m components.package.reference``, kept for one release (:mod:`.__main__`)."""

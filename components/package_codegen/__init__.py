"""The former name of ``python -m components.package.codegen``, kept for one release (:mod:`.__main__`)."""

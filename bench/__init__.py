"""Benchmarks: ``python -m bench`` (or ``./dev bench``); figures go in docs/benchmarks.md."""

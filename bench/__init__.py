"""Benchmarks: ``python -m bench`` (or ``./dev bench``); figures go in the README."""

"""A stand-in Prometheus query API that answers from stored series by their labels, for the PromQL the job
commands send about GPUs (:func:`components.manifests.monitoring.gpu_metrics.per_pod`, ``ack-jobs cost``'s
utilisation query): ``or`` of terms, each a selector, ``label_replace`` of one, or ``avg``/``sum by (label)``
of either. Anything else is answered 400, so a query outside that set fails a test rather than being
answered wrongly.

It models Prometheus's evaluation as the project's promtool (2.42.0, ``.tools/usr/bin/promtool``) performs
it, which :func:`test_gpu_exporters_forged.test_the_selector_stand_in_answers_as_promtool_evaluates` checks on
the same queries and series (the engine's source was not read for it):

- label matchers ``=``, ``!=``, ``=~``, ``!~``; a regular expression matches the whole value, and a label a
  series lacks reads as the empty string;
- ``label_replace``: where the regular expression matches the whole source value, the destination label is
  set to the expanded replacement; else the series is kept as it is;
- ``or``: every left-hand series, and the right-hand ones whose label set no left-hand series has; an
  aggregation ``by`` keeps only the named label (and drops the metric name).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Labels = dict[str, str]
Series = list[tuple[Labels, list[tuple[float, float]]]]
"""Stored series: labels (``__name__`` included) and their ``(time, value)`` samples."""

MATCHER = re.compile(r'\s*([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')
SELECTOR = re.compile(r"^([a-zA-Z_:][\w:]*)\{(.*)\}$")
LABEL_REPLACE = re.compile(r'^label_replace\((.+), "(\w+)", "(.*)", "(\w+)", "(.*)"\)$')
AGGREGATION = re.compile(r"^(avg|sum) by \((\w+)\) \((.+)\)$")


class Unmodelled(ValueError):
    """A query this stand-in does not evaluate."""


def _split_or(query: str) -> list[str]:
    terms, depth, quoted, start, i = [], 0, False, 0, 0
    while i < len(query):
        char = query[i]
        if char == '"' and query[i - 1] != "\\":
            quoted = not quoted
        elif not quoted and char in "({":
            depth += 1
        elif not quoted and char in ")}":
            depth -= 1
        elif not quoted and depth == 0 and query.startswith(" or ", i):
            terms.append(query[start:i])
            start = i = i + 4
            continue
        i += 1
    return [*terms, query[start:]]


def _matches(labels: Labels, matchers: list[tuple[str, str, str]]) -> bool:
    for name, op, value in matchers:
        have = labels.get(name, "")
        hit = re.fullmatch(value, have, re.S) is not None if op in ("=~", "!~") else have == value
        if hit != (op in ("=", "=~")):
            return False
    return True


def _select(expr: str, series: Series) -> Series:
    found = SELECTOR.match(expr.strip())
    if not found:
        raise Unmodelled(expr)
    matchers = [(m[1], m[2], m[3].replace('\\"', '"')) for m in MATCHER.finditer(found[2])]
    if "".join(m[0] for m in MATCHER.finditer(found[2])) != found[2]:
        raise Unmodelled(expr)
    return [
        (labels, samples) for labels, samples in series if labels["__name__"] == found[1] and _matches(labels, matchers)
    ]


def _term(expr: str, series: Series) -> Series:
    if aggregated := AGGREGATION.match(expr):
        how, by, inner = aggregated.groups()
        groups: dict[str, list[list[tuple[float, float]]]] = {}
        for labels, samples in _term(inner, series):
            groups.setdefault(labels.get(by, ""), []).append(samples)
        combine: Callable[[list[float]], float] = sum if how == "sum" else (lambda vs: sum(vs) / len(vs))
        out: Series = []
        for key, members in groups.items():
            times = sorted({t for samples in members for t, _ in samples})
            values = [(t, combine([v for samples in members for u, v in samples if u == t])) for t in times]
            out.append(({by: key} if key else {}, values))
        return out
    if replaced := LABEL_REPLACE.match(expr):
        inner, dst, replacement, src, regex = replaced.groups()
        out = []
        for labels, samples in _term(inner, series):
            hit = re.fullmatch(regex, labels.get(src, ""), re.S)
            out.append(({**labels, dst: hit.expand(replacement.replace("$", "\\"))} if hit else labels, samples))
        return out
    return _select(expr, series)


def evaluate(query: str, series: Series) -> Series:
    """``query`` over ``series``, as Prometheus would answer it.

    Raises:
        Unmodelled: the query is outside what this stand-in evaluates.
    """
    answer: Series = []
    for term in _split_or(query.strip()):
        seen = [{k: v for k, v in labels.items() if k != "__name__"} for labels, _ in answer]
        for labels, samples in _term(term.strip(), series):
            if {k: v for k, v in labels.items() if k != "__name__"} not in seen:
                answer.append((labels, samples))
    return answer


def instant_route(
    series: Series, at: float, asked: list[str]
) -> Callable[[dict[str, list[str]], Any], tuple[int, Any]]:
    """A handler of ``GET /api/v1/query`` answering at time ``at`` (the last sample at or before it)."""

    def query(params: dict[str, list[str]], _: Any) -> tuple[int, Any]:
        asked.append(params["query"][0])
        try:
            found = evaluate(params["query"][0], series)
        except Unmodelled as err:
            return 400, {"status": "error", "errorType": "bad_data", "error": f"unmodelled: {err}"}
        result = []
        for labels, samples in found:
            before = [v for t, v in samples if t <= at]
            if before:
                metric = {k: v for k, v in labels.items() if k != "__name__"}
                result.append({"metric": metric, "value": [at, repr(before[-1])]})
        return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}

    return query


def range_route(series: Series, asked: list[str]) -> Callable[[dict[str, list[str]], Any], tuple[int, Any]]:
    """A handler of ``GET /api/v1/query_range`` answering with each series' samples within the range."""

    def query_range(params: dict[str, list[str]], _: Any) -> tuple[int, Any]:
        asked.append(params["query"][0])
        start, end = float(params["start"][0]), float(params["end"][0])
        try:
            found = evaluate(params["query"][0], series)
        except Unmodelled as err:
            return 400, {"status": "error", "errorType": "bad_data", "error": f"unmodelled: {err}"}
        result = [
            {
                "metric": {k: v for k, v in labels.items() if k != "__name__"},
                "values": [[t, repr(v)] for t, v in samples if start <= t <= end],
            }
            for labels, samples in found
        ]
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}

    return query_range

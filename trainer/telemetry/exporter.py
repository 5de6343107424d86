"""Prometheus metrics over HTTP, served by rank 0 of a training run or of ``trainer.bench``.

What is served is :mod:`trainer.telemetry.metric_names`' table (``TRAINING`` or ``BENCHMARK``), in a
registry of its own; the first process of each other pod of a run serves the short ``POD``
table, and a value for a metric outside a process's table is dropped. Metrics are off unless
a port is given (``--metrics-port``, default ``$METRICS_PORT``, which the platform's jobs
set): the other processes, and all of them when metrics are off, get the no-op
:class:`Exporter`, and ``prometheus_client`` is not even imported.

Metrics never cost a run: a port that cannot be bound (on the host network another pod on
the node may hold it) or a missing ``prometheus_client`` gives one warning, and the run goes
on without them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..console import log, warn
from .metric_names import CHECKPOINT_STEP, CHECKPOINT_TIME, PEAK_MEMORY, RANK_LABEL, STEP_TIME, Metric

Change = tuple[Metric, Mapping[str, str], float]
"""A metric, its label values by label name, and its new value."""


class Exporter:
    """The no-op exporter: what a run uses when metrics are off and on every rank but 0.
    :class:`PrometheusExporter` serves what it is given."""

    def set(self, metric: Metric, value: float, **labels: str) -> None:
        """Make ``metric`` read ``value`` for the given label values.

        A counter is raised to ``value`` by the difference, so it counts from this process's
        start (Prometheus reads a restart as a counter reset) and reads what the run's
        ``metrics.jsonl`` column shows.

        Args:
            metric: an entry of the tables; one outside this exporter's table is dropped.
            value: the new reading.
            labels: a value for each of ``metric.labels``.
        """

    def log_step(self, row: Mapping[str, Any], step_times: Sequence[float], peak_memory_bytes: Sequence[float]) -> None:
        """Export a ``metrics.jsonl`` row and the per-rank readings behind it, as one update.

        Args:
            row: the log row; every table metric with a ``column`` in it takes that value.
            step_times: each rank's mean step time over the log window, in seconds, by rank.
            peak_memory_bytes: each rank's peak memory, in bytes, by rank.
        """

    def checkpoint_committed(self, step: int, unix_time: float) -> None:
        """Record a committed checkpoint.

        Args:
            step: its step.
            unix_time: when it was committed (seconds since the epoch).
        """

    def hold(self, seconds: float) -> None:
        """Keep serving for ``seconds`` before returning, so Prometheus scrapes a short job's
        result; returns at once when nothing is served."""

    def close(self) -> None:
        """Stop serving."""


class PrometheusExporter(Exporter):
    """Serves ``/metrics`` on ``port``, on every address of the host.

    Scrapes read a consistent snapshot: a log step's values are all replaced under one lock,
    so a scrape never pairs one step's ``trainer_step`` with another's loss. Until a metric
    has a value it is left out rather than read as 0 (a run without a checkpoint yet has no
    checkpoint time an alert could take for 1970).

    Args:
        port: the TCP port.
        metrics: the table entries to serve.

    Raises:
        OSError: the port cannot be bound.
        ImportError: ``prometheus_client`` is not installed.
    """

    def __init__(self, port: int, metrics: Iterable[Metric]):
        from prometheus_client import CollectorRegistry, start_http_server

        self.port = port
        self.lock = threading.Lock()
        self.values: dict[Metric, dict[tuple[str, ...], float]] = {metric: {} for metric in metrics}
        registry = CollectorRegistry()
        registry.register(self)
        self.server, self.thread = start_http_server(port, registry=registry)
        log(f"serving metrics on port {port} (/metrics)")

    def _families(self, values: Mapping[Metric, Mapping[tuple[str, ...], float]]) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        for metric, samples in values.items():
            kind = CounterMetricFamily if metric.kind == "counter" else GaugeMetricFamily
            family = kind(metric.name, metric.help, labels=metric.labels)
            for labels, value in samples.items():
                family.add_metric(labels, value)
            yield family

    def describe(self) -> Iterator[Any]:
        """The served families without samples, by which the registry knows their names."""
        return self._families({metric: {} for metric in self.values})

    def collect(self) -> Iterator[Any]:
        """The families that have a value, as of one moment; called by each scrape."""
        with self.lock:
            snapshot = {metric: dict(samples) for metric, samples in self.values.items() if samples}
        return self._families(snapshot)

    def _update(self, changes: Iterable[Change]) -> None:
        with self.lock:
            for metric, labels, value in changes:
                if set(labels) != set(metric.labels):
                    raise ValueError(f"{metric.name} takes labels {metric.labels}, got {tuple(labels)}")
                samples = self.values.get(metric)
                if samples is None:
                    continue  # not in this process's table: rank 0 serves it
                key = tuple(labels[name] for name in metric.labels)
                if metric.kind == "counter":
                    value = max(value, samples.get(key, 0.0))
                samples[key] = float(value)

    def set(self, metric: Metric, value: float, **labels: str) -> None:
        self._update([(metric, labels, value)])

    def log_step(self, row: Mapping[str, Any], step_times: Sequence[float], peak_memory_bytes: Sequence[float]) -> None:
        changes: list[Change] = [
            (metric, {}, row[metric.column])
            for metric in self.values
            if metric.column is not None and metric.column in row
        ]
        for rank, (step_time, memory) in enumerate(zip(step_times, peak_memory_bytes, strict=True)):
            labels = {RANK_LABEL: str(rank)}
            changes += [(STEP_TIME, labels, step_time), (PEAK_MEMORY, labels, memory)]
        self._update(changes)

    def checkpoint_committed(self, step: int, unix_time: float) -> None:
        self._update([(CHECKPOINT_STEP, {}, step), (CHECKPOINT_TIME, {}, unix_time)])

    def hold(self, seconds: float) -> None:
        if seconds > 0:
            log(f"serving metrics for {seconds:g} s more")
            time.sleep(seconds)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(port: int | None, metrics: Iterable[Metric]) -> Exporter:
    """An exporter serving ``metrics`` on ``port``, or the no-op one.

    Args:
        port: the TCP port; None on every rank but 0 and when metrics are off.
        metrics: the table entries to serve (``TRAINING`` or ``BENCHMARK``).

    Returns:
        A :class:`PrometheusExporter`, or the no-op :class:`Exporter` when ``port`` is None
        or serving fails (which it reports in a warning).
    """
    if port is None:
        return Exporter()
    try:
        return PrometheusExporter(port, metrics)
    except ImportError:
        warn(f"--metrics-port {port}: prometheus_client is not installed; going on without metrics")
    except OSError as err:
        warn(f"--metrics-port {port}: cannot serve metrics ({err.strerror or err}); going on without them")
    return Exporter()

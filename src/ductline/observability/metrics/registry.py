"""The in-process registry of the metrics' values (`Registry`): counters and
histograms kept as they are recorded and forwarded to the sinks, gauges read on
demand from their sources."""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from ductline.errors import StoreError
from ductline.observability.metrics.specs import (AWAITING, BUCKETS, CHILDREN, DELAYED, EVENTS_WAITING, QUEUE_READY,
                                                  QUEUE_WORKERS, READY, RUNS, RUNS_TRIGGERED, SPECS, THROTTLED,
                                                  LabelValues, MetricSpec)

log = logging.getLogger("ductline.observability")


class Sink(Protocol):
    """Receives every increment and sample as it is recorded."""

    def add(self, spec: MetricSpec, value: float, labels: dict[str, str]) -> None: ...

    def observe(self, spec: MetricSpec, value: float, labels: dict[str, str]) -> None: ...


@dataclass(slots=True)
class Histogram:
    """Samples of one histogram series: count, sum, min, max and bucket counts
    (``buckets[i]`` counts the samples <= ``BUCKETS[i]``, not cumulative)."""

    count: int = 0
    sum: float = 0.0
    min: float = math.inf
    max: float = -math.inf
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))

    def observe(self, value: float) -> None:
        self.count += 1
        self.sum += value
        self.min = min(self.min, value)
        self.max = max(self.max, value)
        for i, bound in enumerate(BUCKETS):
            if value <= bound:
                self.buckets[i] += 1
                break

    def cumulative(self) -> list[tuple[float, int]]:
        """``[(upper_bound, samples <= bound), ...]`` without the ``+Inf`` bucket."""
        total, out = 0, []
        for bound, n in zip(BUCKETS, self.buckets):
            total += n
            out.append((bound, total))
        return out

    def copy(self) -> "Histogram":
        return Histogram(self.count, self.sum, self.min, self.max, list(self.buckets))


def label_values(spec: MetricSpec, labels: dict[str, Any]) -> LabelValues:
    """The values of the spec's labels, in order (missing ones are ``""``);
    every other key is dropped."""
    return tuple("" if labels.get(k) is None else str(labels[k]) for k in spec.labels)


class Registry:
    """Counters and histograms of `METRICS`, plus the gauges read on demand.

    Thread-safe: events arrive from the worker loop, triggers from any thread,
    scrapes from the HTTP server's threads.
    """

    def __init__(self, gauge_source: Callable[[], dict[str, tuple[int, int, int]]] | None = None,
                 run_source: Callable[[], dict[tuple[str, str], int]] | None = None,
                 wait_source: Callable[[], dict[str, int]] | None = None,
                 queue_source: Callable[[], dict[str, tuple[int, int]]] | None = None,
                 child_source: Callable[[], dict[tuple[str, str], int]] | None = None) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[LabelValues, float]] = {}
        self._histograms: dict[str, dict[LabelValues, Histogram]] = {}
        self._sinks: list[Sink] = []
        self.gauge_source = gauge_source
        self.run_source = run_source
        self.wait_source = wait_source
        self.queue_source = queue_source  # {queue: (ready jobs, live workers)}
        self.child_source = child_source

    # -- sinks ---------------------------------------------------------------------
    def add_sink(self, sink: Sink) -> None:
        with self._lock:
            self._sinks.append(sink)

    def remove_sink(self, sink: Sink) -> None:
        with self._lock:
            if sink in self._sinks:
                self._sinks.remove(sink)

    def _targets(self) -> list[Sink]:
        with self._lock:
            return list(self._sinks)

    # -- recording -------------------------------------------------------------------
    def add(self, name: str, value: float = 1, **labels: Any) -> None:
        """Increment a counter (unknown metric names raise ``KeyError``)."""
        spec = SPECS[name]
        key = label_values(spec, labels)
        with self._lock:
            series = self._counters.setdefault(name, {})
            series[key] = series.get(key, 0) + value
        clean = dict(zip(spec.labels, key))
        for sink in self._targets():
            try:
                sink.add(spec, value, clean)
            except Exception:
                log.exception("metrics sink %r failed", sink)

    def observe(self, name: str, value: float, **labels: Any) -> None:
        """Record a histogram sample (seconds)."""
        spec = SPECS[name]
        key = label_values(spec, labels)
        value = max(0.0, float(value))
        with self._lock:
            self._histograms.setdefault(name, {}).setdefault(key, Histogram()).observe(value)
        clean = dict(zip(spec.labels, key))
        for sink in self._targets():
            try:
                sink.observe(spec, value, clean)
            except Exception:
                log.exception("metrics sink %r failed", sink)

    # -- reading -----------------------------------------------------------------------
    def counters(self, name: str) -> dict[LabelValues, float]:
        with self._lock:
            return dict(self._counters.get(name, {}))

    def histograms(self, name: str) -> dict[LabelValues, Histogram]:
        with self._lock:
            return {k: h.copy() for k, h in self._histograms.get(name, {}).items()}

    def counter(self, name: str, **labels: Any) -> float:
        """The sum of a counter over the series matching the given labels."""
        spec = SPECS[name]
        return sum(v for k, v in self.counters(name).items() if _matches(spec, k, labels))

    def histogram(self, name: str, **labels: Any) -> Histogram:
        """The series matching the given labels, merged into one `Histogram`."""
        spec = SPECS[name]
        merged = Histogram()
        for key, h in self.histograms(name).items():
            if _matches(spec, key, labels):
                merged.count += h.count
                merged.sum += h.sum
                merged.min = min(merged.min, h.min)
                merged.max = max(merged.max, h.max)
                merged.buckets = [a + b for a, b in zip(merged.buckets, h.buckets)]
        return merged

    def gauges(self) -> dict[str, dict[LabelValues, float]]:
        """``{"ductline.jobs.ready": {(pipeline,): n}, "ductline.jobs.delayed": {...},
        "ductline.jobs.throttled": {...}}``,
        ``"ductline.runs": {(pipeline, status): n}``, ``"ductline.runs.triggered":
        {(pipeline,): n}``, read now from the gauge sources (empty without them, or
        if the database fails)."""
        gauges: dict[str, dict[LabelValues, float]] = {}
        if self.gauge_source is not None:
            try:
                depths = self.gauge_source()
            except StoreError as exc:
                log.warning("queue depth gauges unavailable: %s", exc)
            else:
                gauges[READY] = {(p,): float(r) for p, (r, _, _) in depths.items()}
                gauges[DELAYED] = {(p,): float(d) for p, (_, d, _) in depths.items()}
                gauges[THROTTLED] = {(p,): float(t) for p, (_, _, t) in depths.items()}
        if self.run_source is not None:
            try:
                runs = self.run_source()
            except StoreError as exc:
                log.warning("run gauges unavailable: %s", exc)
            else:
                gauges[RUNS] = {key: float(n) for key, n in runs.items()}
                triggered: dict[LabelValues, float] = {}
                for (pipeline, _), n in runs.items():
                    triggered[(pipeline,)] = triggered.get((pipeline,), 0.0) + n
                gauges[RUNS_TRIGGERED] = triggered
        if self.wait_source is not None:
            try:
                waiting = self.wait_source()
            except StoreError as exc:
                log.warning("event wait gauge unavailable: %s", exc)
            else:
                gauges[EVENTS_WAITING] = {(p,): float(n) for p, n in waiting.items()}
        if self.queue_source is not None:
            try:
                queues = self.queue_source()
            except StoreError as exc:
                log.warning("queue gauges unavailable: %s", exc)
            else:
                gauges[QUEUE_READY] = {(q,): float(r) for q, (r, _) in queues.items()}
                gauges[QUEUE_WORKERS] = {(q,): float(w) for q, (_, w) in queues.items()}
        if self.child_source is not None:
            try:
                family = self.child_source()
            except StoreError as exc:
                log.warning("child run gauges unavailable: %s", exc)
            else:
                gauges[AWAITING] = {(p,): float(n) for (p, kind), n in family.items() if kind == "awaiting"}
                gauges[CHILDREN] = {(p,): float(n) for (p, kind), n in family.items() if kind == "children"}
        return gauges


def _matches(spec: MetricSpec, key: LabelValues, labels: dict[str, Any]) -> bool:
    values = dict(zip(spec.labels, key))
    return all(values.get(k) == str(v) for k, v in labels.items())

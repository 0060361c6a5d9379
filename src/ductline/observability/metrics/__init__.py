"""Metrics: one event subscriber feeding one small in-process registry.

`MetricsSubscriber` turns the engine events of `ductline.observability.events`
into counter increments and histogram samples of the metrics in `METRICS` (the
seeds' names, prefixed ``ductline.``). The `Registry` keeps the values (the
Prometheus endpoint reads them at scrape time) and forwards every increment and
sample to its sinks (OpenTelemetry metrics, StatsD) as it happens.

Labels are a fixed set per metric -- ``pipeline``, ``step``, ``result``,
``reason`` -- and anything else an event carries (run ids, job ids, attempts) is
dropped here, so no sink can ever get a label per run.

The gauges of ready and delayed jobs per pipeline are never kept up to date by
events: they are read on demand (a scrape, a collection, a StatsD tick) from ONE
aggregate query over the pending jobs (`queue_depths`), never by loading rows.
Durations are in seconds everywhere.

The parts, a module each: the catalogue of metrics (`ductline.observability.metrics.specs`),
the `Registry` (`.registry`), the gauges' sources (`.gauges`) and the subscriber
(`.subscriber`).
"""

from __future__ import annotations

from ductline.observability.metrics.gauges import (CachedReading, ChildCounts, EventWaits, QueueDepths, QueueServing,
                                                   RunCounts, queue_depths)
from ductline.observability.metrics.registry import Histogram, Registry, Sink, label_values
from ductline.observability.metrics.specs import (AWAITING, BUCKETS, CHILDREN, COUNTER, DELAYED, EVENTS_WAITING, GAUGE,
                                                  HISTOGRAM, METRICS, PIPELINE, QUEUE_READY, QUEUE_WORKERS, READY,
                                                  RUNS, RUNS_TRIGGERED, SPECS, STEP, THROTTLED, LabelValues,
                                                  MetricSpec)
from ductline.observability.metrics.subscriber import FAILED_LABELS, MetricsSubscriber, failure_cost

__all__ = ["AWAITING", "BUCKETS", "CHILDREN", "COUNTER", "DELAYED", "EVENTS_WAITING", "FAILED_LABELS", "GAUGE",
           "HISTOGRAM", "METRICS", "PIPELINE", "QUEUE_READY", "QUEUE_WORKERS", "READY", "RUNS", "RUNS_TRIGGERED",
           "SPECS", "STEP", "THROTTLED", "CachedReading", "ChildCounts", "EventWaits", "Histogram", "LabelValues",
           "MetricSpec", "MetricsSubscriber", "QueueDepths", "QueueServing", "Registry", "RunCounts", "Sink",
           "failure_cost", "label_values", "queue_depths"]

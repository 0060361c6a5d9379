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
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol

from ductline.errors import StoreError
from ductline.model import stops
from ductline.model.states import HaltReason, RunStatus
from ductline.observability.events import EventName

log = logging.getLogger("ductline.observability")

COUNTER = "counter"
HISTOGRAM = "histogram"
GAUGE = "gauge"

# Histogram bucket upper bounds, in seconds (attempts of milliseconds up to runs of a day).
BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                              120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric: ``name`` is the dotted name (``ductline.job.completed``)."""

    name: str
    kind: str
    labels: tuple[str, ...]
    description: str
    unit: str = ""

    @property
    def prometheus_name(self) -> str:
        """``ductline_job_completed`` (the exposition adds ``_total``),
        ``ductline_job_runtime_seconds``, ``ductline_jobs_ready``."""
        base = self.name.replace(".", "_")
        return f"{base}_seconds" if self.unit == "s" else base


PIPELINE = ("pipeline",)
STEP = ("pipeline", "step")

METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("ductline.pipeline.triggered", COUNTER, PIPELINE, "Runs triggered."),
    MetricSpec("ductline.pipeline.completed", COUNTER, PIPELINE, "Runs that completed."),
    MetricSpec("ductline.pipeline.halted", COUNTER, ("pipeline", "reason"),
               "Runs halted (a step failed for good), by halt reason."),
    MetricSpec("ductline.pipeline.failed", COUNTER, ("pipeline", "reason"),
               "Runs failed by their whole-run deadline."),
    MetricSpec("ductline.pipeline.cancelled", COUNTER, PIPELINE, "Runs cancelled."),
    MetricSpec("ductline.pipeline.runtime", HISTOGRAM, ("pipeline", "result"),
               "Run duration, first attempt start to end, by how the run ended.", "s"),
    MetricSpec("ductline.job.enqueued", COUNTER, STEP, "Step runs (jobs) created."),
    MetricSpec("ductline.job.attempts", COUNTER, ("pipeline", "step", "result"),
               "Attempts that ended, by result (success, error, timed_out, crashed, cancelled)."),
    # The design's name for the same count, kept so existing dashboards keep working;
    # job.attempts says what it counts (an errored attempt is not a completed job).
    MetricSpec("ductline.job.completed", COUNTER, ("pipeline", "step", "result"),
               "Same as ductline.job.attempts (kept for compatibility)."),
    # Failed attempts (error, timeout, crash) by what they cost: a free one came before
    # its step crossed a boundary (ductline.cross_boundary) and is retried as usual; a
    # paid one came after, so its step is not run again and the run halts unsafe_to_retry.
    MetricSpec("ductline.job.failures.free", COUNTER, ("pipeline", "step", "result"),
               "Failed attempts before their step crossed its boundary (retried as usual)."),
    MetricSpec("ductline.job.failures.paid", COUNTER, ("pipeline", "step", "result"),
               "Attempts that ended unsuccessfully after their step crossed its boundary (not retried; the run "
               "halts unsafe_to_retry)."),
    MetricSpec("ductline.job.runtime", HISTOGRAM, ("pipeline", "step", "result"),
               "Attempt duration, claim to recorded outcome.", "s"),
    MetricSpec("ductline.job.pickup_latency", HISTOGRAM, STEP,
               "From a job's not-before time to the start of its attempt.", "s"),
    MetricSpec("ductline.timeout.overrun", HISTOGRAM, STEP,
               "From an attempt's deadline to its child process being gone.", "s"),
    MetricSpec("ductline.thread.undead", COUNTER, STEP, "Thread attempts that could not be stopped."),
    MetricSpec("ductline.process.undead", COUNTER, STEP, "Child processes that survived SIGKILL."),
    MetricSpec("ductline.lease.lost", COUNTER, STEP, "Attempts whose lease was lost to a rescue (killed; a run's stop "
               "counts in job.completed)."),
    MetricSpec("ductline.jobs.ready", GAUGE, PIPELINE, "Pending jobs whose not-before time has passed."),
    MetricSpec("ductline.jobs.delayed", GAUGE, PIPELINE, "Pending jobs waiting for their not-before time."),
    MetricSpec("ductline.jobs.throttled", GAUGE, PIPELINE,
               "Pending jobs waiting for a slot of their step's concurrency limit."),
    # Read from the database, so every worker exports the same values, wherever the
    # runs were triggered (a web app, a script) and whoever ran them.
    MetricSpec("ductline.runs", GAUGE, ("pipeline", "status"),
               "Runs in the database, by status (pruned runs are not counted)."),
    MetricSpec("ductline.runs.triggered", GAUGE, PIPELINE,
               "Runs ever triggered that are still in the database (all statuses)."),
    MetricSpec("ductline.steps.marked_succeeded", COUNTER, STEP,
               "Step runs an operator marked succeeded without running them (ductline mark-succeeded)."),
    MetricSpec("ductline.schedule.runs", COUNTER, ("pipeline", "reason"),
               "Runs started for schedule ticks, by reason: tick (the latest due tick), catch_up (an older "
               "missed tick run after downtime) or backfill."),
    MetricSpec("ductline.events.received", COUNTER, PIPELINE,
               "Events sent to runs and kept (a repeated send with the same key is not counted)."),
    MetricSpec("ductline.events.waiting", GAUGE, PIPELINE,
               "Step runs waiting for an event (deferred: no slot held)."),
    # A queue with ready jobs and no live worker is work nobody will do.
    MetricSpec("ductline.queue.ready", GAUGE, ("queue",), "Pending jobs ready to claim, by queue."),
    MetricSpec("ductline.queue.workers", GAUGE, ("queue",), "Live workers serving the queue."),
    MetricSpec("ductline.jobs.awaiting", GAUGE, PIPELINE,
               "Step runs awaiting their child runs (waiting parents, one row each, no slot)."),
    MetricSpec("ductline.runs.children", GAUGE, PIPELINE,
               "Child runs not yet ended (pending, running or paused), by their own pipeline."),
)

SPECS: dict[str, MetricSpec] = {m.name: m for m in METRICS}
READY = "ductline.jobs.ready"
DELAYED = "ductline.jobs.delayed"
THROTTLED = "ductline.jobs.throttled"
RUNS = "ductline.runs"
RUNS_TRIGGERED = "ductline.runs.triggered"
EVENTS_WAITING = "ductline.events.waiting"
QUEUE_READY = "ductline.queue.ready"
QUEUE_WORKERS = "ductline.queue.workers"
AWAITING = "ductline.jobs.awaiting"
CHILDREN = "ductline.runs.children"

LabelValues = tuple[str, ...]


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


# -- the gauges' one aggregate query --------------------------------------------------------
def queue_depths(store: Any) -> dict[str, tuple[int, int, int]]:
    """``{pipeline: (ready, delayed, throttled)}`` of the pending jobs, from one aggregate
    query (``metrics_queue_depths``) over the partial index of pending jobs.
    Read-only; pipelines without pending jobs are absent."""
    with store.dialect.reader() as session:
        rows = session.fetch("metrics_queue_depths", {})
    return {r["pipeline"]: (int(r["ready"] or 0), int(r["delayed"] or 0), int(r["throttled"] or 0))
            for r in rows}


class CachedReading:
    """A gauge source over one database reading (`read`), shared by every reader for
    ``cache_seconds`` so simultaneous readers cost one query. With a ``zero``, a key
    once seen reads ``zero`` when the database no longer has it (a pipeline whose
    queue drained reads 0 instead of vanishing); keys come sorted then."""

    def __init__(self, store: Any, cache_seconds: float, zero: Any = None, known: Iterable[Any] = ()) -> None:
        self.store = store
        self.cache_seconds = cache_seconds
        self._zero = zero
        self._known = set(known)
        self._lock = threading.Lock()
        self._cached: dict[Any, Any] | None = None
        self._at = 0.0

    def read(self) -> dict[Any, Any]:
        """One reading from the database."""
        raise NotImplementedError

    def __call__(self) -> dict[Any, Any]:
        with self._lock:
            now = time.monotonic()
            if self._cached is None or now - self._at >= self.cache_seconds:
                found = self.read()
                if self._zero is not None:
                    self._known.update(found)
                    found = {key: found.get(key, self._zero) for key in sorted(self._known)}
                self._cached, self._at = found, now
            return dict(self._cached)

    def _fetch(self, statement: str) -> list[dict[str, Any]]:
        with self.store.dialect.reader() as session:
            rows: list[dict[str, Any]] = session.fetch(statement, {})
        return rows


class QueueDepths(CachedReading):
    """The ready, delayed and running jobs per pipeline (`queue_depths`); a pipeline
    once seen reads ``(0, 0, 0)``."""

    def __init__(self, store: Any, cache_seconds: float = 1.0, pipelines: Iterable[str] = ()) -> None:
        super().__init__(store, cache_seconds, zero=(0, 0, 0), known=pipelines)

    def read(self) -> dict[str, tuple[int, int, int]]:
        return queue_depths(self.store)


class QueueServing(CachedReading):
    """The ready jobs and live workers of each queue (`ductline.store.fleet`) as
    ``{queue: (ready, workers)}``; a queue once seen reads ``(0, 0)``."""

    def __init__(self, store: Any, cache_seconds: float = 1.0) -> None:
        super().__init__(store, cache_seconds, zero=(0, 0))

    def read(self) -> dict[str, tuple[int, int]]:
        from ductline.model.serving import workers_per_queue
        from ductline.store import fleet

        ready = fleet.ready_per_queue(self.store)
        workers = workers_per_queue(fleet.live_offers(self.store))
        return {q: (ready.get(q, 0), workers.get(q, 0)) for q in set(ready) | set(workers)}


class RunCounts(CachedReading):
    """The runs per pipeline and status (``metrics_run_counts``)."""

    def __init__(self, store: Any, cache_seconds: float = 5.0) -> None:
        super().__init__(store, cache_seconds)

    def read(self) -> dict[tuple[str, str], int]:
        return {(r["pipeline"], r["status"]): int(r["n"]) for r in self._fetch("metrics_run_counts")}


class EventWaits(CachedReading):
    """The step runs waiting for an event per pipeline (``metrics_event_waits``, over
    the partial index of deferred jobs); a pipeline once seen reads 0."""

    def __init__(self, store: Any, cache_seconds: float = 1.0) -> None:
        super().__init__(store, cache_seconds, zero=0)

    def read(self) -> dict[str, int]:
        return {r["pipeline"]: int(r["n"]) for r in self._fetch("metrics_event_waits")}


class ChildCounts(CachedReading):
    """Waiting parents and unfinished child runs per pipeline (``metrics_child_counts``:
    ``{(pipeline, "awaiting" | "children"): n}``); a key once seen reads 0."""

    def __init__(self, store: Any, cache_seconds: float = 5.0) -> None:
        super().__init__(store, cache_seconds, zero=0)

    def read(self) -> dict[tuple[str, str], int]:
        return {(r["pipeline"], r["kind"]): int(r["n"]) for r in self._fetch("metrics_child_counts")}


# -- the subscriber ---------------------------------------------------------------------------
# The `result` labels of failed attempts (job.completed's seeds' names).
FAILED_LABELS = frozenset({"error", "timed_out", "crashed"})


def failure_cost(attributes: dict[str, Any]) -> str | None:
    """``"paid"`` for an attempt that ended unsuccessfully after its step crossed a
    boundary (the rulebook halts it ``unsafe_to_retry``, whatever ended it),
    ``"free"`` for any other errored, timed-out or crashed attempt, ``None`` for
    the rest (a success, a cancel, a release, one its run's deadline stopped: no
    retry follows it, the run failed). Takes a ``job.completed`` event's
    attributes."""
    if attributes.get("reason") == HaltReason.UNSAFE_TO_RETRY:
        return "paid"
    if attributes.get("reason") == stops.DEADLINE_REASON:
        return None
    return "free" if attributes.get("result") in FAILED_LABELS else None



# The `result` label of pipeline.runtime: the status the run ended in.
_RUN_ENDS = {EventName.PIPELINE_COMPLETED: RunStatus.COMPLETED, EventName.PIPELINE_HALTED: RunStatus.HALTED,
             EventName.PIPELINE_FAILED: RunStatus.FAILED, EventName.PIPELINE_CANCELLED: RunStatus.CANCELLED}


class MetricsSubscriber:
    """Turns engine events into registry updates (subscribe it with
    `ductline.observability.events.subscribe`).

    Args:
        registry: where the values go.
        store: used only to read a run's duration when a run-end event does not
            carry ``runtime_seconds`` (``started_ms``/``finished_ms`` of the run).
    """

    def __init__(self, registry: Registry, store: Any = None) -> None:
        self.registry = registry
        self.store = store

    def __call__(self, name: EventName, a: dict[str, Any]) -> None:
        r = self.registry
        pipeline, step = a.get("pipeline"), a.get("step")
        if name is EventName.PIPELINE_TRIGGERED:
            r.add("ductline.pipeline.triggered", pipeline=pipeline)
        elif name is EventName.JOB_ENQUEUED:
            r.add("ductline.job.enqueued", a.get("count", 1), pipeline=pipeline, step=step)
        elif name is EventName.ATTEMPT_STARTED:
            if a.get("pickup_latency_seconds") is not None:
                r.observe("ductline.job.pickup_latency", a["pickup_latency_seconds"], pipeline=pipeline, step=step)
        elif name is EventName.JOB_COMPLETED:
            r.add("ductline.job.attempts", pipeline=pipeline, step=step, result=a.get("result"))
            r.add("ductline.job.completed", pipeline=pipeline, step=step, result=a.get("result"))
            if a.get("runtime_seconds") is not None:
                r.observe("ductline.job.runtime", a["runtime_seconds"], pipeline=pipeline, step=step,
                          result=a.get("result"))
            cost = failure_cost(a)
            if cost is not None:
                r.add(f"ductline.job.failures.{cost}", pipeline=pipeline, step=step, result=a.get("result"))
        elif name is EventName.TIMEOUT_OVERRUN:
            r.observe("ductline.timeout.overrun", a.get("overrun_seconds") or 0.0, pipeline=pipeline, step=step)
        elif name is EventName.THREAD_UNDEAD:
            r.add("ductline.thread.undead", pipeline=pipeline, step=step)
        elif name is EventName.PROCESS_UNDEAD:
            r.add("ductline.process.undead", pipeline=pipeline, step=step)
        elif name is EventName.LEASE_LOST:
            r.add("ductline.lease.lost", pipeline=pipeline, step=step)
        elif name is EventName.EVENT_RECEIVED:
            r.add("ductline.events.received", pipeline=pipeline)
        elif name is EventName.STEP_MARKED_SUCCEEDED:
            r.add("ductline.steps.marked_succeeded", pipeline=pipeline, step=step)
        elif name is EventName.SCHEDULE_RUNS_STARTED:
            r.add("ductline.schedule.runs", a.get("count", 1), pipeline=pipeline, reason=a.get("reason"))
        elif name in _RUN_ENDS:
            self._run_ended(name, a)

    def _run_ended(self, name: EventName, a: dict[str, Any]) -> None:
        r = self.registry
        pipeline = a.get("pipeline")
        result = _RUN_ENDS[name]
        if name is EventName.PIPELINE_COMPLETED:
            r.add("ductline.pipeline.completed", pipeline=pipeline)
        elif name is EventName.PIPELINE_HALTED:
            r.add("ductline.pipeline.halted", pipeline=pipeline, reason=a.get("reason"))
        elif name is EventName.PIPELINE_FAILED:
            r.add("ductline.pipeline.failed", pipeline=pipeline, reason=a.get("reason") or stops.DEADLINE_REASON)
        else:
            r.add("ductline.pipeline.cancelled", pipeline=pipeline)
        runtime = a.get("runtime_seconds")
        if runtime is None:
            runtime = self._run_runtime(a.get("run_id"))
        if runtime is not None:
            r.observe("ductline.pipeline.runtime", runtime, pipeline=pipeline, result=result)

    def _run_runtime(self, run_id: str | None) -> float | None:
        if self.store is None or run_id is None:
            return None
        try:
            run = self.store.get_run(run_id)
        except StoreError as exc:
            log.warning("cannot read run %s for pipeline.runtime: %s", run_id, exc)
            return None
        if run is None or run.get("finished_ms") is None:
            return None
        start = run.get("started_ms") or run.get("created_ms")
        return None if start is None else max(0.0, (int(run["finished_ms"]) - int(start)) / 1000)

"""OpenTelemetry spans for runs on workers: one span per run (kind SERVER) and
one per attempt (INTERNAL), fed by engine events like every other signal.

Design: trace context derived from the run id, not carried in memory
--------------------------------------------------------------------------
A run's attempts execute in different worker processes, on different hosts, at
different times, and the process that sees a run end is usually not the one that
triggered it. No process can hold the run span open from trigger to end. So the
ids are *derived*, deterministically, and every process computes the same ones:

- trace id  = the run id read as a 128-bit number (run ids are 32 hex digits;
  any other id is hashed with SHA-256);
- run span id = the first 16 hex digits of ``sha256("ductline.run:" + run_id)``;
- attempt span id = the first 16 hex digits of
  ``sha256("ductline.attempt:<job_id>:<attempt>")``.

This *is* the trace context stored with the run: the run id in the database is
enough to restore it anywhere, with no extra column. Consequences:

- An attempt span is started (at ``attempt.started``, in the worker that claimed
  it) with a remote parent ``SpanContext(trace_id, run_span_id)`` built from the
  run id, so it is a child of the run span although that span does not exist yet
  and will be emitted by another process.
- The run span is emitted once, when its end is seen (``pipeline.completed``,
  ``pipeline.halted``, ``pipeline.failed``, ``pipeline.cancelled``), by whichever
  process records that end, with an explicit start time (the run's
  ``started_ms`` from the store, or ``created_ms`` if it never started) and end
  time (``finished_ms``). Its span id is forced to the derived one.
- Retries are linked: attempt *n* > 1 carries a `Link` to attempt *n - 1*'s span
  context, derived from ``job_id`` and ``n - 1``.
- Code running inside an attempt (the killable child) can restore the attempt's
  context with `attempt_context(run_id, job_id, attempt)`, so spans a user's
  step starts become children of its attempt span.

To force span ids the SDK tracer's ``id_generator`` is wrapped once by one that
returns the derived ids while ductline starts its own spans (and delegates
otherwise), so other spans of the same provider are unaffected. With a non-SDK
provider spans get that provider's ids (attempts stay children of the run's
derived span context; the run span itself then has a random id).

Known limits: a halted run that is revived and later ends emits a second run span
with the same ids (one per end seen); a cancel is only traced when the process
that cancels has tracing installed (the workers running its attempts end their
spans with the ``job.completed`` that reports what the cancel recorded,
`ductline.engine.lost`); attempts given back at worker shutdown (released, no
event) are ended by `TracingSubscriber.close`.

Attributes follow the OpenTelemetry CI/CD conventions: ``cicd.pipeline.name``,
``cicd.pipeline.run.id``, ``cicd.pipeline.result`` (``success``, ``failure``,
``error``, ``timeout``, ``cancellation``), ``cicd.pipeline.task.name``,
``cicd.pipeline.task.run.id`` (``<job_id>/<attempt>``),
``cicd.pipeline.task.run.result``, ``error.type``; a run failed by its whole-run
deadline also gets ``workflow.timeout_exceeded = True``, an event
``workflow.timeout`` with ``workflow.timeout_seconds``, and status ERROR.

Without opentelemetry installed this module imports cleanly and every function
and class here does nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ductline.errors import StoreError
from ductline.model.states import AttemptResult, HaltReason, RunStatus
from ductline.observability.events import RESULT_LABELS, EventName

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import (
        Link,
        NonRecordingSpan,
        SpanContext,
        SpanKind,
        Status,
        StatusCode,
        TraceFlags,
    )
except ImportError:  # the otel extra is not installed: everything here is inert
    trace = None  # type: ignore[assignment]

try:
    from opentelemetry.sdk.trace.id_generator import IdGenerator as _IdGeneratorBase
except ImportError:  # no SDK: nothing to wrap
    _IdGeneratorBase = object  # type: ignore[assignment,misc]

log = logging.getLogger("ductline.observability")

# Attempt results as CI/CD task results, by the `result` label of job.completed.
TASK_RESULTS = {RESULT_LABELS[result]: task for result, task in (
    (AttemptResult.SUCCEEDED, "success"), (AttemptResult.ERRORED, "failure"), (AttemptResult.TIMED_OUT, "timeout"),
    (AttemptResult.CRASHED, "error"), (AttemptResult.CANCELLED, "cancellation"))}
# Halt reasons that are the system's fault rather than the step's.
_ERROR_HALTS = frozenset({HaltReason.JOB_CRASHES_EXHAUSTED, HaltReason.JOB_RELEASES_EXHAUSTED,
                          HaltReason.MAX_FANOUT_EXCEEDED})
MAX_OPEN_SPANS = 10_000


# OpenTelemetry CI/CD conventions: a pipeline run's span is named "{action} {pipeline}"
# with cicd.pipeline.action.name the action (ductline's runs are RUN); a task run's
# span (an attempt) carries the task's name.
RUN_ACTION = "RUN"


def run_span_name(pipeline: str) -> str:
    return f"{RUN_ACTION} {pipeline}"


def task_span_name(step: str) -> str:
    return step


def available() -> bool:
    """Whether opentelemetry is installed."""
    return trace is not None


# -- derived ids ----------------------------------------------------------------------------
def _digest(text: str, hex_digits: int) -> int:
    value = int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:hex_digits], 16)
    return value or 1  # zero is the invalid id


def trace_id_for(run_id: str) -> int:
    """The run's trace id: the run id itself when it is 32 hex digits."""
    if len(run_id) == 32:
        try:
            value = int(run_id, 16)
            if value:
                return value
        except ValueError:
            pass
    return _digest("ductline.trace:" + run_id, 32)


def run_span_id(run_id: str) -> int:
    return _digest("ductline.run:" + run_id, 16)


def attempt_span_id(job_id: str, attempt: int) -> int:
    return _digest(f"ductline.attempt:{job_id}:{attempt}", 16)


def run_span_context(run_id: str) -> Any:
    """The run span's `SpanContext` (remote, sampled); ``None`` without opentelemetry."""
    if trace is None:
        return None
    return SpanContext(trace_id_for(run_id), run_span_id(run_id), is_remote=True,
                       trace_flags=TraceFlags(TraceFlags.SAMPLED))


def attempt_span_context(run_id: str, job_id: str, attempt: int) -> Any:
    """An attempt span's `SpanContext` (remote, sampled); ``None`` without opentelemetry."""
    if trace is None:
        return None
    return SpanContext(trace_id_for(run_id), attempt_span_id(job_id, attempt), is_remote=True,
                       trace_flags=TraceFlags(TraceFlags.SAMPLED))


def attempt_entry(run_id: str, job_id: str, attempt: int) -> Callable[[], Any] | None:
    """A function that makes the attempt's span current in the context it is called
    in (for a step run in the parent's own context, e.g. an ``async def`` step of
    `ductline.execute`); ``None`` without opentelemetry."""
    if trace is None:
        return None
    ctx = trace.set_span_in_context(NonRecordingSpan(attempt_span_context(run_id, job_id, attempt)))
    return lambda: otel_context.attach(ctx)


@contextmanager
def attempt_context(run_id: str, job_id: str, attempt: int) -> Iterator[None]:
    """Make the attempt's span the current span while the block runs (for code
    executing the attempt, e.g. the worker's child), so spans started inside are
    its children. Does nothing without opentelemetry."""
    if trace is None:
        yield
        return
    ctx = trace.set_span_in_context(NonRecordingSpan(attempt_span_context(run_id, job_id, attempt)))
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


class _ForcedIds(_IdGeneratorBase):
    """Wraps an SDK id generator: returns the ids forced by the current thread
    (while ductline starts one of its spans), else delegates."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.local = threading.local()

    def generate_span_id(self) -> int:
        forced: int | None = getattr(self.local, "span_id", None)
        if forced is not None:
            return forced
        generated: int = self.inner.generate_span_id()
        return generated

    def generate_trace_id(self) -> int:
        forced: int | None = getattr(self.local, "trace_id", None)
        if forced is not None:
            return forced
        generated: int = self.inner.generate_trace_id()
        return generated

    def is_trace_id_random(self) -> bool:
        if getattr(self.local, "trace_id", None) is not None:
            return False
        check = getattr(self.inner, "is_trace_id_random", None)
        return bool(check()) if check is not None else False

    @contextmanager
    def forced(self, trace_id: int | None, span_id: int) -> Iterator[None]:
        self.local.trace_id, self.local.span_id = trace_id, span_id
        try:
            yield
        finally:
            self.local.trace_id = self.local.span_id = None


def _ms_to_ns(ms: Any) -> int | None:
    return None if ms is None else int(ms) * 1_000_000


class TracingSubscriber:
    """Turns engine events into run and attempt spans (subscribe it with
    `ductline.observability.events.subscribe`).

    Args:
        store: the database, to read a run's start and end times (and an attempt's
            start when its span is opened by another process, e.g. a crash rescue).
        tracer_provider: an OpenTelemetry ``TracerProvider``; ``None`` uses the
            global one at the time each span starts.
    """

    def __init__(self, store: Any = None, tracer_provider: Any = None) -> None:
        self.store = store
        self.provider = tracer_provider
        self._lock = threading.Lock()
        self._open: dict[tuple[str, int], Any] = {}

    @property
    def enabled(self) -> bool:
        return trace is not None

    # -- tracer with derived ids ------------------------------------------------------------
    def _tracer(self) -> tuple[Any, _ForcedIds | None]:
        from ductline.version import __version__

        provider = self.provider if self.provider is not None else trace.get_tracer_provider()
        tracer: Any = provider.get_tracer("ductline", __version__)
        generator = getattr(tracer, "id_generator", None)
        if generator is None:
            return tracer, None
        if not isinstance(generator, _ForcedIds):
            with self._lock:
                generator = tracer.id_generator
                if not isinstance(generator, _ForcedIds):
                    generator = _ForcedIds(generator)
                    tracer.id_generator = generator
        return tracer, generator

    def _start(self, name: str, *, trace_id: int | None, span_id: int, **kwargs: Any) -> Any:
        tracer, ids = self._tracer()
        if ids is None:
            return tracer.start_span(name, **kwargs)
        with ids.forced(trace_id, span_id):
            return tracer.start_span(name, **kwargs)

    # -- events ----------------------------------------------------------------------------
    def __call__(self, name: EventName, a: dict[str, Any]) -> None:
        if trace is None:
            return
        if name is EventName.ATTEMPT_STARTED:
            self._attempt_started(a)
        elif name is EventName.JOB_COMPLETED:
            self._attempt_completed(a)
        elif name is EventName.TIMEOUT_OVERRUN:
            self._attempt_event(a, "ductline.timeout.overrun",
                                {"ductline.overrun_seconds": float(a.get("overrun_seconds") or 0.0)})
        elif name in (EventName.PROCESS_UNDEAD, EventName.THREAD_UNDEAD):
            self._attempt_event(a, f"ductline.{name.value}", {"ductline.pid": a.get("pid") or 0})
        elif name is EventName.LEASE_LOST:
            self._lease_lost(a)
        elif name in (EventName.PIPELINE_COMPLETED, EventName.PIPELINE_HALTED, EventName.PIPELINE_FAILED,
                      EventName.PIPELINE_CANCELLED):
            self._run_ended(name, a)

    def _attempt_attributes(self, a: dict[str, Any]) -> dict[str, Any]:
        return {"cicd.pipeline.name": a.get("pipeline") or "", "cicd.pipeline.run.id": a["run_id"],
                "cicd.pipeline.task.name": a.get("step") or "",
                "cicd.pipeline.task.run.id": f"{a['job_id']}/{a['attempt']}",
                "ductline.job_id": a["job_id"], "ductline.attempt": int(a["attempt"])}

    def _open_attempt(self, a: dict[str, Any], start_ns: int | None) -> Any:
        run_id, job_id, attempt = a["run_id"], a["job_id"], int(a["attempt"])
        parent = trace.set_span_in_context(NonRecordingSpan(run_span_context(run_id)))
        links = []
        if attempt > 1:
            links.append(Link(attempt_span_context(run_id, job_id, attempt - 1),
                              {"ductline.link": "previous_attempt"}))
        return self._start(task_span_name(str(a.get("step"))), trace_id=None,
                           span_id=attempt_span_id(job_id, attempt), context=parent, kind=SpanKind.INTERNAL,
                           attributes=self._attempt_attributes(a), links=links, start_time=start_ns)

    def _attempt_started(self, a: dict[str, Any]) -> None:
        start = _ms_to_ns(a.get("started_ms")) or time.time_ns()
        span = self._open_attempt(a, start)
        if a.get("pickup_latency_seconds") is not None:
            span.set_attribute("ductline.pickup_latency_seconds", float(a["pickup_latency_seconds"]))
        evicted = []
        with self._lock:
            self._open[(str(a["job_id"]), int(a["attempt"]))] = span
            while len(self._open) > MAX_OPEN_SPANS:
                evicted.append(self._open.pop(next(iter(self._open))))
        for old in evicted:
            old.set_attribute("ductline.abandoned", True)
            old.end()

    def _take(self, a: dict[str, Any]) -> Any:
        with self._lock:
            return self._open.pop((str(a.get("job_id")), int(a.get("attempt") or 0)), None)

    def _peek(self, a: dict[str, Any]) -> Any:
        with self._lock:
            return self._open.get((str(a.get("job_id")), int(a.get("attempt") or 0)))

    def _attempt_completed(self, a: dict[str, Any]) -> None:
        span = self._take(a)
        if span is None:  # opened elsewhere (a rescue of a dead worker's attempt)
            span = self._open_attempt(a, self._attempt_start_ns(a))
        label = a.get("result") or ""
        result = TASK_RESULTS.get(label, label)
        span.set_attribute("cicd.pipeline.task.run.result", result)
        if a.get("outcome"):
            span.set_attribute("ductline.outcome", a["outcome"])
        timed_out = label == RESULT_LABELS[AttemptResult.TIMED_OUT]
        error_type = a.get("error_type") or ("TimeoutError" if timed_out else None)
        if error_type:
            span.set_attribute("error.type", error_type)
        if result != "success":
            span.set_status(Status(StatusCode.ERROR, f"attempt {a.get('attempt')}: {label}"))
        span.end()

    def _attempt_start_ns(self, a: dict[str, Any]) -> int | None:
        if self.store is None:
            return None
        try:
            row = self.store.get_attempt(a["job_id"], int(a["attempt"]))
        except StoreError as exc:
            log.warning("cannot read attempt times of run %s: %s", a["run_id"], exc)
            return None
        return None if row is None else _ms_to_ns(row["started_ms"])

    def _attempt_event(self, a: dict[str, Any], name: str, attributes: dict[str, Any]) -> None:
        span = self._peek(a)
        if span is not None:
            span.add_event(name, attributes)

    def _lease_lost(self, a: dict[str, Any]) -> None:
        """The attempt's lease was lost for real (a rescue, an expiry; an attempt a
        run's stop ended comes as ``job.completed`` instead, `ductline.engine.lost`):
        its span ends with what the taker recorded for the attempt (a rescue's
        ``crashed``), read from the store when there is one, so every process that
        saw the attempt tells the same result."""
        span = self._take(a)
        if span is None:
            return
        recorded = self._recorded(a)
        label = recorded.get("result") if recorded else None
        if label is None:
            span.set_attribute("cicd.pipeline.task.run.result", "cancellation")
            span.set_attribute("error.type", "LeaseLost")
            span.set_status(Status(StatusCode.ERROR, "the lease was lost; the attempt was killed"))
        else:
            assert recorded is not None
            result = TASK_RESULTS.get(RESULT_LABELS.get(label, label), label)
            span.set_attribute("cicd.pipeline.task.run.result", result)
            span.set_attribute("error.type", recorded.get("error_type") or "LeaseLost")
            span.set_status(Status(StatusCode.ERROR, recorded.get("error") or "the attempt was stopped"))
        span.end()

    def _recorded(self, a: dict[str, Any]) -> dict[str, Any] | None:
        """The attempt's row, if the store is known and the attempt was closed."""
        if self.store is None:
            return None
        try:
            row = self.store.get_attempt(a["job_id"], int(a["attempt"]))
        except StoreError as exc:
            log.warning("cannot read the attempts of run %s: %s", a["run_id"], exc)
            return None
        return row if row is not None and row.get("result") else None

    # -- runs --------------------------------------------------------------------------------
    def _run_row(self, run_id: str) -> dict[str, Any] | None:
        if self.store is None:
            return None
        try:
            row: dict[str, Any] | None = self.store.get_run(run_id)
        except StoreError as exc:
            log.warning("cannot read run %s for its span: %s", run_id, exc)
            return None
        return row

    def _run_ended(self, name: EventName, a: dict[str, Any]) -> None:
        run_id, pipeline = a["run_id"], a.get("pipeline") or ""
        row = self._run_row(run_id) or {}
        now = time.time_ns()
        end = _ms_to_ns(row.get("finished_ms")) or now
        start = _ms_to_ns(row.get("started_ms")) or _ms_to_ns(row.get("created_ms"))
        if a.get("runtime_seconds") is not None and start is None:
            start = end - int(float(a["runtime_seconds"]) * 1e9)
        start = min(start or end, end)
        attributes: dict[str, Any] = {"cicd.pipeline.name": pipeline, "cicd.pipeline.run.id": run_id,
                                      "cicd.pipeline.action.name": RUN_ACTION}
        error_type = message = None
        timeout_seconds = None
        if name is EventName.PIPELINE_COMPLETED:
            result = "success"
        elif name is EventName.PIPELINE_HALTED:
            reason = a.get("reason") or row.get("halt_reason") or RunStatus.HALTED.value
            result = "error" if reason in _ERROR_HALTS else "failure"
            attributes["ductline.halt_reason"] = reason
            error_type, message = reason, f"run halted: {reason}"
        elif name is EventName.PIPELINE_CANCELLED:
            result = "cancellation"
            message = "run cancelled"
        elif a.get("reason") == HaltReason.PAUSE_EXPIRED:  # a pause for a human timed out: not the run deadline
            result = "failure"
            error_type = HaltReason.PAUSE_EXPIRED.value
            message = _metadata(row.get("metadata")).get("error") or "a pause expired without a resume"
        elif a.get("reason") == HaltReason.EVENT_TIMED_OUT:  # an awaited event did not come: not the run deadline
            result = "failure"
            error_type = HaltReason.EVENT_TIMED_OUT.value
            message = _metadata(row.get("metadata")).get("error") or "an awaited event did not come in time"
        else:
            result = "timeout"
            metadata = _metadata(row.get("metadata"))
            timeout_seconds = a.get("timeout_seconds") or metadata.get("timeout_seconds") \
                or row.get("timeout_seconds")
            error_type = "TimeoutError"
            message = metadata.get("error") or "the run exceeded its deadline"
        attributes["cicd.pipeline.result"] = result
        if error_type:
            attributes["error.type"] = error_type
        if result == "timeout":
            attributes["workflow.timeout_exceeded"] = True
        span = self._start(run_span_name(pipeline), trace_id=trace_id_for(run_id), span_id=run_span_id(run_id),
                           context=otel_context.Context(), kind=SpanKind.SERVER, attributes=attributes,
                           start_time=start)
        if result == "timeout":
            span.add_event("workflow.timeout", {"workflow.timeout_seconds": float(timeout_seconds or 0)},
                           timestamp=end)
        if result != "success":
            span.set_status(Status(StatusCode.ERROR, message))
        span.end(end_time=end)

    def close(self) -> None:
        """End the attempt spans still open (attempts given back at shutdown)."""
        if trace is None:
            return
        with self._lock:
            spans, self._open = list(self._open.values()), {}
        for span in spans:
            span.set_attribute("ductline.abandoned", True)
            span.end()


def _metadata(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}

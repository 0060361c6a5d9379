"""Spans from engine events: derived ids that make attempt spans children of the
run span across processes, CI/CD attributes, retry links, the run deadline, and
a module that stays inert without opentelemetry."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import obs_app
from helpers import wait_for
from opentelemetry.trace import SpanKind, StatusCode

from ductline.observability import tracing
from ductline.observability.events import EventName
from ductline.observability.tracing import (
    TracingSubscriber,
    attempt_span_id,
    run_span_id,
    trace_id_for,
)
from ductline.engine import stop as abort


def job(run_id: str, job_id: str, attempt: int) -> dict[str, object]:
    return {"pipeline": "orders", "step": "charge", "run_id": run_id, "job_id": job_id, "attempt": attempt}


def test_ids_are_derived_from_the_run_id():
    run_id = uuid.uuid4().hex
    assert trace_id_for(run_id) == int(run_id, 16)
    assert run_span_id(run_id) == run_span_id(run_id) != run_span_id(uuid.uuid4().hex)
    assert attempt_span_id("j", 1) != attempt_span_id("j", 2)
    assert 0 < run_span_id(run_id) < 2 ** 64 and 0 < attempt_span_id("j", 1) < 2 ** 64
    assert 0 < trace_id_for("not-hex") < 2 ** 128
    ctx = tracing.attempt_span_context(run_id, "j", 2)
    assert (ctx.trace_id, ctx.span_id, ctx.is_remote) == (int(run_id, 16), attempt_span_id("j", 2), True)


def test_attempt_spans_are_children_of_a_run_span_emitted_by_another_process(otel):
    """Worker A runs attempts 1 and 2, worker B runs attempt 3 and records the
    end of the run: B's run span is the parent of every attempt span."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    other_exporter = InMemorySpanExporter()
    other_provider = TracerProvider()
    other_provider.add_span_processor(SimpleSpanProcessor(other_exporter))
    worker_a = TracingSubscriber(tracer_provider=otel.tracer_provider)
    worker_b = TracingSubscriber(tracer_provider=other_provider)
    run_id, job_id = uuid.uuid4().hex, uuid.uuid4().hex
    for attempt in (1, 2):
        worker_a(EventName.ATTEMPT_STARTED, {**job(run_id, job_id, attempt), "pickup_latency_seconds": 0.01})
        worker_a(EventName.TIMEOUT_OVERRUN, {**job(run_id, job_id, attempt), "overrun_seconds": 0.003})
        worker_a(EventName.JOB_COMPLETED, {**job(run_id, job_id, attempt), "result": "timed_out",
                                           "runtime_seconds": 1.0, "error_type": "TimeoutError", "outcome": "retry"})
    worker_b(EventName.ATTEMPT_STARTED, {**job(run_id, job_id, 3), "pickup_latency_seconds": 0.01})
    worker_b(EventName.JOB_COMPLETED, {**job(run_id, job_id, 3), "result": "success", "runtime_seconds": 0.1,
                                       "error_type": None, "outcome": "completed"})
    worker_b(EventName.PIPELINE_COMPLETED, {"pipeline": "orders", "run_id": run_id})
    spans = otel.finished_spans() + list(other_exporter.get_finished_spans())
    other_provider.shutdown()
    runs = [s for s in spans if s.kind is SpanKind.SERVER]
    attempts = sorted((s for s in spans if s.kind is SpanKind.INTERNAL),
                      key=lambda s: s.attributes["ductline.attempt"])
    assert len(runs) == 1 and len(attempts) == 3
    run = runs[0]
    assert run.name == "RUN orders"
    assert run.parent is None
    assert run.context.trace_id == int(run_id, 16)
    assert run.context.span_id == run_span_id(run_id)
    assert run.attributes["cicd.pipeline.name"] == "orders"
    assert run.attributes["cicd.pipeline.run.id"] == run_id
    assert run.attributes["cicd.pipeline.result"] == "success"
    assert run.status.status_code is StatusCode.UNSET
    for n, span in enumerate(attempts, start=1):
        assert span.name == "charge"
        assert span.context.trace_id == run.context.trace_id
        assert span.parent.span_id == run.context.span_id
        assert span.context.span_id == attempt_span_id(job_id, n)
        assert span.attributes["cicd.pipeline.task.name"] == "charge"
        assert span.attributes["cicd.pipeline.task.run.id"] == f"{job_id}/{n}"
        assert span.attributes["cicd.pipeline.run.id"] == run_id
        if n == 1:
            assert list(span.links) == []
        else:  # retries are linked to the previous attempt
            assert [link.context.span_id for link in span.links] == [attempt_span_id(job_id, n - 1)]
            assert span.links[0].context.trace_id == run.context.trace_id
    assert [s.attributes["cicd.pipeline.task.run.result"] for s in attempts] == ["timeout", "timeout", "success"]
    assert [s.status.status_code for s in attempts] == [StatusCode.ERROR, StatusCode.ERROR, StatusCode.UNSET]
    assert attempts[0].attributes["error.type"] == "TimeoutError"
    assert [e.name for e in attempts[0].events] == ["ductline.timeout.overrun"]
    assert attempts[0].events[0].attributes["ductline.overrun_seconds"] == 0.003


def test_halted_cancelled_lease_lost_and_rescued_attempts(otel):
    sub = TracingSubscriber(tracer_provider=otel.tracer_provider)
    run_id, job_id = uuid.uuid4().hex, uuid.uuid4().hex
    sub(EventName.ATTEMPT_STARTED, job(run_id, job_id, 1))
    sub(EventName.LEASE_LOST, job(run_id, job_id, 1))
    # A rescue: another process records the crash of an attempt it never saw start.
    sub(EventName.JOB_COMPLETED, {**job(run_id, job_id, 2), "result": "crashed", "runtime_seconds": None,
                                  "error_type": "WorkerLost", "outcome": "failed"})
    sub(EventName.PIPELINE_HALTED, {"pipeline": "orders", "run_id": run_id, "reason": "job_crashes_exhausted"})
    other = uuid.uuid4().hex
    sub(EventName.PIPELINE_CANCELLED, {"pipeline": "orders", "run_id": other})
    spans = {(s.kind, s.attributes.get("ductline.attempt"), s.context.trace_id): s for s in otel.finished_spans()}
    lost = spans[(SpanKind.INTERNAL, 1, int(run_id, 16))]
    assert lost.attributes["cicd.pipeline.task.run.result"] == "cancellation"
    assert lost.attributes["error.type"] == "LeaseLost"
    crashed = spans[(SpanKind.INTERNAL, 2, int(run_id, 16))]
    assert crashed.attributes["cicd.pipeline.task.run.result"] == "error"
    assert crashed.attributes["error.type"] == "WorkerLost"
    assert [link.context.span_id for link in crashed.links] == [attempt_span_id(job_id, 1)]
    halted = spans[(SpanKind.SERVER, None, int(run_id, 16))]
    assert halted.attributes["cicd.pipeline.result"] == "error"
    assert halted.attributes["ductline.halt_reason"] == "job_crashes_exhausted"
    assert halted.status.status_code is StatusCode.ERROR
    cancelled = spans[(SpanKind.SERVER, None, int(other, 16))]
    assert cancelled.attributes["cicd.pipeline.result"] == "cancellation"
    assert cancelled.status.status_code is StatusCode.ERROR


def test_close_ends_the_spans_of_attempts_given_back(otel):
    sub = TracingSubscriber(tracer_provider=otel.tracer_provider)
    sub(EventName.ATTEMPT_STARTED, job(uuid.uuid4().hex, "j", 1))
    assert otel.finished_spans() == []
    sub.close()
    [span] = otel.finished_spans()
    assert span.attributes["ductline.abandoned"] is True


def test_attempt_context_makes_user_spans_children_of_the_attempt(otel):
    run_id = uuid.uuid4().hex
    tracer = otel.tracer_provider.get_tracer("user")
    with tracing.attempt_context(run_id, "job-1", 2), tracer.start_as_current_span("user work"):
        pass
    [span] = otel.finished_spans()
    assert span.context.trace_id == int(run_id, 16)
    assert span.parent.span_id == attempt_span_id("job-1", 2)


def test_other_spans_of_the_provider_keep_random_ids(otel):
    sub = TracingSubscriber(tracer_provider=otel.tracer_provider)
    sub(EventName.PIPELINE_COMPLETED, {"pipeline": "orders", "run_id": uuid.uuid4().hex})
    tracer = otel.tracer_provider.get_tracer("ductline", __import__("ductline").__version__)
    with tracer.start_as_current_span("mine"):
        pass
    with tracer.start_as_current_span("mine"):
        pass
    a, b = [s for s in otel.finished_spans() if s.name == "mine"]
    assert a.context.trace_id != b.context.trace_id and a.context.span_id != b.context.span_id


def test_run_failed_by_its_deadline_gets_the_workflow_timeout_attributes(store, install, otel):
    """A real run on both backends: its attempt is claimed, the deadline passes, and
    the expiry (the path any worker takes) emits pipeline.failed."""
    install(otel="traces", tracer_provider=otel.tracer_provider, store=store)
    handle = obs_app.deadline_pipeline.trigger(1, database=store)
    [claimed] = store.claim("test-worker", ["obs_deadline"], 1, 60_000)
    wait_for(lambda: store.due_deadlines(), timeout=10)
    assert abort.expire_due(store, {"obs_deadline": obs_app.deadline_pipeline.definition()}) == 1
    assert handle.status() == "failed"
    [run] = [s for s in otel.finished_spans() if s.kind is SpanKind.SERVER]
    row = store.get_run(handle.id)
    assert run.context.trace_id == int(handle.id, 16)
    assert run.attributes["cicd.pipeline.result"] == "timeout"
    assert run.attributes["workflow.timeout_exceeded"] is True
    assert run.attributes["error.type"] == "TimeoutError"
    assert run.status.status_code is StatusCode.ERROR
    assert "deadline of 1 s" in run.status.description
    [event] = run.events
    assert event.name == "workflow.timeout"
    assert event.attributes["workflow.timeout_seconds"] == 1
    # Start and end come from the store (the database clock), not from this process.
    assert run.start_time == row["started_ms"] * 1_000_000
    assert run.end_time == row["finished_ms"] * 1_000_000
    assert claimed.started_ms == row["started_ms"]


def test_module_is_inert_without_opentelemetry(tmp_path):
    script = tmp_path / "no_otel.py"
    script.write_text(
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"
        "from ductline.observability import tracing, otel_metrics, setup\n"
        "from ductline.observability.events import EventName\n"
        "from ductline.errors import ConfigurationError\n"
        "assert not tracing.available() and not otel_metrics.available()\n"
        "assert tracing.run_span_context('ab' * 16) is None\n"
        "with tracing.attempt_context('ab' * 16, 'j', 1):\n"
        "    pass\n"
        "sub = tracing.TracingSubscriber()\n"
        "assert not sub.enabled\n"
        "sub(EventName.PIPELINE_COMPLETED, {'pipeline': 'p', 'run_id': 'ab' * 16})\n"
        "sub.close()\n"
        "for part in ('traces', 'metrics'):\n"
        "    try:\n"
        "        setup.install(otel=part)\n"
        "    except ConfigurationError as exc:\n"
        "        assert 'otel extra' in str(exc), exc\n"
        "    else:\n"
        "        raise AssertionError('no error')\n"
        "obs = setup.install()\n"
        "obs.close()\n"
        "print('inert')\n")
    out = subprocess.run([sys.executable, "-W", "error", str(script)], check=False, capture_output=True, text=True,
                         timeout=60, env={**os.environ})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "inert"


def test_spans_without_a_store_still_have_sane_times(otel):
    sub = TracingSubscriber(tracer_provider=otel.tracer_provider)
    before = time.time_ns()
    sub(EventName.PIPELINE_COMPLETED, {"pipeline": "orders", "run_id": uuid.uuid4().hex, "runtime_seconds": 2.0})
    [run] = otel.finished_spans()
    assert run.end_time >= before
    assert run.end_time - run.start_time == 2_000_000_000

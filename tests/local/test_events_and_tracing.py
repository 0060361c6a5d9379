"""``on_update`` events and OpenTelemetry spans of the in-process executor."""

from __future__ import annotations

import logging
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import ductline
import local_steps as s
from ductline import Pipeline
from ductline.observability import tracing as derived
from local_helpers import FakeClock


def name() -> str:
    return f"events_{uuid.uuid4().hex[:10]}"


def test_event_sequence_of_a_successful_run(clock: FakeClock) -> None:
    events: list[dict[str, Any]] = []
    pipeline = Pipeline(name()).start(s.add_one).chain(to=s.async_fails_twice, max_retry=3)
    result = ductline.execute(pipeline, 1, on_update=events.append, clock=clock)
    assert result.overall_status == "success"
    summary = [(e["type"], e.get("step"), e.get("attempt"), e.get("status"), e.get("result"))
               for e in events]
    assert summary == [
        ("workflow_start", None, None, None, None),
        ("step_start", "add_one", 1, None, None),
        ("step_end", "add_one", 1, "completed", "succeeded"),
        ("step_start", "async_fails_twice", 1, None, None),
        ("step_end", "async_fails_twice", 1, "pending", "errored"),
        ("step_start", "async_fails_twice", 2, None, None),
        ("step_end", "async_fails_twice", 2, "pending", "errored"),
        ("step_start", "async_fails_twice", 3, None, None),
        ("step_end", "async_fails_twice", 3, "completed", "succeeded"),
        ("workflow_end", None, None, "success", None),
    ]
    assert all(e["run_id"] == result.metadata["run_id"] and e["pipeline"] == pipeline.name for e in events)
    assert events[4]["error_type"] == "RuntimeError"


def test_events_of_a_timed_out_run() -> None:
    events: list[dict[str, Any]] = []
    pipeline = Pipeline(name()).start(s.async_identity).chain(to=s.async_sleep_long).chain(to=s.double)
    ductline.execute(pipeline, 1, timeout=0.5, on_update=events.append)
    summary = [(e["type"], e.get("step"), e.get("status")) for e in events]
    assert summary == [
        ("workflow_start", None, None),
        ("step_start", "async_identity", None),
        ("step_end", "async_identity", "completed"),
        ("step_start", "async_sleep_long", None),
        ("step_end", "async_sleep_long", "failed"),
        ("step_end", "double", "skipped"),
        ("workflow_end", None, "timeout"),
    ]
    assert events[0]["timeout_seconds"] == 0.5
    assert events[-2]["skip_reason"] == "workflow timeout"


def test_a_raising_callback_changes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    calls = []

    def explode(event: dict[str, Any]) -> None:
        calls.append(event["type"])
        raise RuntimeError("callback bug")

    pipeline = Pipeline(name()).start(s.add_one).chain(to=s.async_add_one)
    with caplog.at_level(logging.ERROR, logger="ductline.local"):
        result = ductline.execute(pipeline, 1, on_update=explode)
    assert result.overall_status == "success" and result.output == 3
    assert calls[0] == "workflow_start" and calls[-1] == "workflow_end" and len(calls) == 6
    assert sum("on_update raised" in r.getMessage() for r in caplog.records) == 6


def test_a_raising_callback_does_not_disturb_a_timeout() -> None:
    def explode(event: dict[str, Any]) -> None:
        raise ValueError("nope")

    pipeline = Pipeline(name()).start(s.async_sleep_long).chain(to=s.double)
    result = ductline.execute(pipeline, 1, timeout=0.5, on_update=explode)
    assert result.metadata["timeout_exceeded"] is True
    assert result.step("double").skip_reason == "workflow timeout"


def _spans(timeout: float | None, pipeline: Pipeline, *args: Any) -> tuple[ductline.WorkflowResult, list]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    result = ductline.execute(pipeline, *args, timeout=timeout, tracer_provider=provider)
    provider.shutdown()
    return result, list(exporter.get_finished_spans())


def test_spans_of_a_successful_run() -> None:
    pipeline = Pipeline(name()).start(s.add_one).chain(to=s.async_add_one)
    result, spans = _spans(None, pipeline, 1)
    run = next(sp for sp in spans if sp.name == f"RUN {pipeline.name}")
    attempts = [sp for sp in spans if "cicd.pipeline.task.name" in (sp.attributes or {})]
    assert run.kind is SpanKind.SERVER
    assert run.attributes["cicd.pipeline.name"] == pipeline.name
    assert run.attributes["cicd.pipeline.run.id"] == result.metadata["run_id"]
    assert run.attributes["cicd.pipeline.result"] == "success"
    assert run.status.status_code is not StatusCode.ERROR
    assert [sp.attributes["cicd.pipeline.task.name"] for sp in attempts] == ["add_one", "async_add_one"]
    for sp in attempts:
        assert sp.kind is SpanKind.INTERNAL
        assert sp.parent is not None and sp.parent.span_id == run.context.span_id
        assert sp.context.trace_id == run.context.trace_id
        assert sp.attributes["cicd.pipeline.task.run.result"] == "success"


def test_spans_of_a_timed_out_run() -> None:
    pipeline = Pipeline(name()).start(s.async_identity).chain(to=s.sleep_python)
    # 8 s, not 1: on a loaded machine the step's child must get to start inside the deadline
    result, spans = _spans(8, pipeline, 1)
    assert result.metadata["timeout_exceeded"] is True
    run = next(sp for sp in spans if sp.name.startswith("RUN "))
    assert run.attributes["workflow.timeout_exceeded"] is True
    assert run.attributes["cicd.pipeline.result"] == "timeout"
    assert run.status.status_code is StatusCode.ERROR
    event = next(e for e in run.events if e.name == "workflow.timeout")
    assert event.attributes["workflow.timeout_seconds"] == 8
    stopped = next(sp for sp in spans if sp.name == "sleep_python")
    assert stopped.attributes["cicd.pipeline.task.run.result"] == "timeout"
    assert stopped.attributes["error.type"] == "TimeoutError"
    assert stopped.status.status_code is StatusCode.ERROR


def test_spans_of_a_failed_run(clock: FakeClock) -> None:
    pipeline = Pipeline(name()).start(s.async_fail, max_retry=2)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ductline.execute(pipeline, 1, tracer_provider=provider, clock=clock)
    spans = exporter.get_finished_spans()
    run = next(sp for sp in spans if sp.name.startswith("RUN "))
    # As a worker's run span: the halt reason is the run's error type.
    assert run.attributes["cicd.pipeline.result"] == "failure"
    assert run.attributes["error.type"] == "job_retries_exhausted"
    assert run.attributes["ductline.halt_reason"] == "job_retries_exhausted"
    attempts = [sp for sp in spans if "cicd.pipeline.task.name" in (sp.attributes or {})]
    assert [sp.attributes["ductline.attempt"] for sp in attempts] == [1, 2]
    assert all(sp.attributes["error.type"] == "ValueError" for sp in attempts)


def test_span_ids_are_derived_from_the_run_id_like_a_worker_s() -> None:
    pipeline = Pipeline(name()).start(s.add_one).chain(to=s.add_one, name="again")
    result, spans = _spans(None, pipeline, 1)
    run_id = result.metadata["run_id"]
    run = next(sp for sp in spans if sp.name.startswith("RUN "))
    assert run.context.trace_id == derived.trace_id_for(run_id)
    assert run.context.span_id == derived.run_span_id(run_id)
    assert run.parent is None
    for sp in spans:
        assert sp.context.trace_id == run.context.trace_id


def test_the_attempt_span_is_current_inside_a_step_in_a_child() -> None:
    pipeline = Pipeline(name()).start(s.current_span)
    result, spans = _spans(None, pipeline, "x")
    attempt = next(sp for sp in spans if sp.name == "current_span")
    assert result.output == attempt.context.span_id


def test_a_retry_links_to_the_attempt_before_it(clock: FakeClock) -> None:
    pipeline = Pipeline(name()).start(s.async_fails_twice, max_retry=3)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ductline.execute(pipeline, 1, tracer_provider=provider, clock=clock)
    attempts = [sp for sp in exporter.get_finished_spans() if "cicd.pipeline.task.name" in (sp.attributes or {})]
    assert len(attempts) == 3 and not attempts[0].links
    for before, after in zip(attempts, attempts[1:]):
        assert [link.context.span_id for link in after.links] == [before.context.span_id]


def test_the_attempt_span_is_current_inside_an_async_step() -> None:
    pipeline = Pipeline(name()).start(s.async_current_span)
    result, spans = _spans(None, pipeline, "x")
    attempt = next(sp for sp in spans if sp.name == "async_current_span")
    assert result.output == attempt.context.span_id


def test_the_package_works_without_opentelemetry(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # any import of it fails\n"
        f"sys.path.insert(0, {str(Path(s.__file__).parent)!r})\n"
        "import ductline, local_steps as s\n"
        "p = ductline.Pipeline('no_otel').start(s.add_one).chain(to=s.async_add_one)\n"
        "r = ductline.execute(p, 1)\n"
        "assert r.output == 3, r\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-W", "error", "-c", script], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"

"""One run on a real worker (in this process, in a thread, so the test's subscribers
see the worker's events; its children are real processes) where a step blocked
in C times out twice and then succeeds -- and every signal says so: metrics in
the registry, on the Prometheus endpoint over HTTP, in OpenTelemetry and on
StatsD; the log lines; the run and attempt spans."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path

import obs_app
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client.parser import text_string_to_metric_families

from ductline.config import load_settings
from ductline.logs import JsonFormatter
from ductline.observability.tracing import attempt_span_id, run_span_id
from ductline.runtime.launch import build_worker
from ductline.store import open_store

APP = str(Path(__file__).parent.parent / "apps" / "obs_app.py")
PIPELINE = "obs_timeout_then_ok"
STEP = "stubborn"


def scrape(url: str) -> tuple[str, dict[tuple[str, frozenset[tuple[str, str]]], float]]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return text, samples


def labels(**kw: str) -> frozenset[tuple[str, str]]:
    return frozenset(kw.items())


def test_a_step_that_times_out_twice_then_succeeds(store, db_url, install, otel, log_records, udp):
    settings = load_settings(database_url=db_url, retry_delay=0, lease_seconds=3, poll_interval=0.2,
                             health_check_interval=0.5, shutdown_grace_seconds=5, kill_grace_seconds=1)
    worker_store = open_store(db_url)
    try:
        # What the worker's startup does (install_from_env), with in-memory OpenTelemetry.
        obs = install(metrics_port=0, statsd=udp.address, otel=True, store=worker_store,
                      tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider,
                      gauge_cache_seconds=0)
        handle = obs_app.timeout_then_ok.trigger(7, database=store)
        _, before = scrape(obs.metrics_url)
        assert before[("ductline_jobs_ready", labels(pipeline=PIPELINE))] == 1

        worker = build_worker(worker_store, [APP], 1, settings)
        stop = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                worker.run(stop_when=stop.is_set)
            except BaseException as exc:  # surfaced by the assertion below
                failure.append(exc)

        thread = threading.Thread(target=run, name="obs-worker", daemon=True)
        thread.start()
        try:
            assert handle.wait(40) == "completed"
        finally:
            stop.set()
            thread.join(30)
        assert not thread.is_alive() and not failure, failure
        assert handle.output() == {"x": 7, "attempt": 3}
        [job] = store.run_jobs(handle.id)
        job_id = job["id"]

        # -- the registry --------------------------------------------------------------
        r = obs.registry
        assert r.counter("ductline.job.completed", pipeline=PIPELINE, step=STEP, result="timed_out") == 2
        assert r.counter("ductline.job.completed", pipeline=PIPELINE, step=STEP, result="success") == 1
        assert r.counter("ductline.job.completed") == 3
        assert r.counter("ductline.pipeline.triggered", pipeline=PIPELINE) == 1
        assert r.counter("ductline.pipeline.completed", pipeline=PIPELINE) == 1
        assert r.counter("ductline.pipeline.halted") == 0
        assert r.counter("ductline.job.enqueued", pipeline=PIPELINE, step=STEP) == 1
        assert r.counter("ductline.lease.lost") == r.counter("ductline.process.undead") == 0
        timed_out = r.histogram("ductline.job.runtime", result="timed_out")
        assert timed_out.count == 2 and timed_out.min >= 1.0
        assert r.histogram("ductline.job.runtime", result="success").count == 1
        assert r.histogram("ductline.job.pickup_latency", pipeline=PIPELINE, step=STEP).count == 3
        overrun = r.histogram("ductline.timeout.overrun", pipeline=PIPELINE, step=STEP)
        assert overrun.count == 2 and 0 <= overrun.min and overrun.max < 1
        run_time = r.histogram("ductline.pipeline.runtime", pipeline=PIPELINE, result="completed")
        assert run_time.count == 1 and run_time.sum >= 2.0

        # -- Prometheus, scraped over HTTP from the worker's endpoint ----------------------
        text, samples = scrape(obs.metrics_url)
        step_labels = {"pipeline": PIPELINE, "step": STEP}
        assert samples[("ductline_job_completed_total", labels(**step_labels, result="timed_out"))] == 2
        assert samples[("ductline_job_completed_total", labels(**step_labels, result="success"))] == 1
        assert samples[("ductline_pipeline_triggered_total", labels(pipeline=PIPELINE))] == 1
        assert samples[("ductline_pipeline_completed_total", labels(pipeline=PIPELINE))] == 1
        assert samples[("ductline_job_runtime_seconds_count", labels(**step_labels, result="timed_out"))] == 2
        assert samples[("ductline_job_pickup_latency_seconds_count", labels(**step_labels))] == 3
        assert samples[("ductline_timeout_overrun_seconds_count", labels(**step_labels))] == 2
        assert samples[("ductline_timeout_overrun_seconds_bucket", labels(**step_labels, le="1.0"))] == 2
        assert samples[("ductline_pipeline_runtime_seconds_count", labels(pipeline=PIPELINE, result="completed"))] == 1
        assert samples[("ductline_jobs_ready", labels(pipeline=PIPELINE))] == 0
        assert samples[("ductline_jobs_delayed", labels(pipeline=PIPELINE))] == 0
        assert handle.id not in text and job_id not in text

        # -- OpenTelemetry metrics -----------------------------------------------------------
        points = otel.points()
        completed = {p.attributes["result"]: p.value for p in points["ductline.job.completed"]}
        assert completed == {"timed_out": 2, "success": 1}
        assert [p.value for p in points["ductline.pipeline.triggered"]] == [1]
        assert [p.value for p in points["ductline.pipeline.completed"]] == [1]
        assert sum(p.count for p in points["ductline.job.runtime"]) == 3
        assert sum(p.count for p in points["ductline.job.pickup_latency"]) == 3
        [otel_overrun] = points["ductline.timeout.overrun"]
        assert otel_overrun.count == 2 and otel_overrun.max < 1

        # -- StatsD ----------------------------------------------------------------------------
        lines = udp.drain()
        tags = f"#pipeline:{PIPELINE},step:{STEP}"
        assert lines.count(f"ductline.job.completed:1|c|{tags},result:timed_out") == 2
        assert lines.count(f"ductline.job.completed:1|c|{tags},result:success") == 1
        assert lines.count(f"ductline.pipeline.triggered:1|c|#pipeline:{PIPELINE}") == 1
        assert len([ln for ln in lines if ln.startswith("ductline.timeout.overrun:")]) == 2

        # -- logs ------------------------------------------------------------------------------
        timeouts = log_records.messages("Job timed out")
        assert [(t.run_id, t.job_id, t.step, t.attempt) for t in timeouts] == [
            (handle.id, job_id, STEP, 1), (handle.id, job_id, STEP, 2)]
        assert log_records.messages("Job exhausted retries and timed out") == []
        as_json = json.loads(JsonFormatter().format(timeouts[0]))
        assert {k: as_json[k] for k in ("message", "run_id", "job_id", "step", "attempt")} == {
            "message": "Job timed out", "run_id": handle.id, "job_id": job_id, "step": STEP, "attempt": 1}

        # -- spans -----------------------------------------------------------------------------
        spans = otel.finished_spans()
        [run_span] = [s for s in spans if s.kind is SpanKind.SERVER]
        attempts = sorted((s for s in spans if s.kind is SpanKind.INTERNAL),
                          key=lambda s: s.attributes["ductline.attempt"])
        assert len(spans) == 4 and len(attempts) == 3
        assert run_span.name == f"RUN {PIPELINE}"
        assert run_span.parent is None
        assert run_span.context.trace_id == int(handle.id, 16)
        assert run_span.context.span_id == run_span_id(handle.id)
        assert run_span.attributes["cicd.pipeline.result"] == "success"
        assert run_span.attributes["cicd.pipeline.run.id"] == handle.id
        assert run_span.attributes["cicd.pipeline.name"] == PIPELINE
        run_row = store.get_run(handle.id)
        assert run_span.start_time == run_row["started_ms"] * 1_000_000
        assert run_span.end_time == run_row["finished_ms"] * 1_000_000
        for n, span in enumerate(attempts, start=1):
            assert span.context.trace_id == run_span.context.trace_id
            assert span.parent.span_id == run_span.context.span_id
            assert span.context.span_id == attempt_span_id(job_id, n)
            assert span.attributes["cicd.pipeline.task.name"] == STEP
            assert span.attributes["cicd.pipeline.task.run.id"] == f"{job_id}/{n}"
            assert [link.context.span_id for link in span.links] == ([] if n == 1 else [attempt_span_id(job_id, n - 1)])
        assert [s.attributes["cicd.pipeline.task.run.result"] for s in attempts] == ["timeout", "timeout", "success"]
        assert [s.status.status_code for s in attempts] == [StatusCode.ERROR, StatusCode.ERROR, StatusCode.UNSET]
        assert [[e.name for e in s.events] for s in attempts] == [
            ["ductline.timeout.overrun"], ["ductline.timeout.overrun"], []]
        assert all(s.attributes["error.type"] == "TimeoutError" for s in attempts[:2])
    finally:
        worker_store.close()

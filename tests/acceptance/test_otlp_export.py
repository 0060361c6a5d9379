"""A worker started with ``DUCTLINE_OTEL=1`` and OpenTelemetry's standard
``OTEL_EXPORTER_OTLP_*`` variables exports its spans and metrics over OTLP/HTTP: a
small receiver in the test process (an HTTP server decoding the protobuf requests
with the opentelemetry-proto package) gets them from a real worker's run."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from ductline import Pipeline
from ductline.observability.tracing import run_span_name
from helpers import start_worker, stop_worker, wait_for
from otlp_support import Receiver, serving

APP = Path(__file__).parent / "otlp_app.py"
RUN_SPAN = run_span_name("otlp_greeting")


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    with serving() as found:
        yield found


def test_a_worker_exports_spans_and_metrics_over_otlp(db_url: str, receiver: tuple[Receiver, str]) -> None:
    got, endpoint = receiver
    import otlp_app  # tests/acceptance is on sys.path (rootdir-relative imports)

    worker = start_worker(db_url, app=str(APP), env={
        "DUCTLINE_OTEL": "1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_SERVICE_NAME": "otlp-test-worker",
        "OTEL_BSP_SCHEDULE_DELAY": "100",       # ms: a batch of spans soon after they end
        "OTEL_METRIC_EXPORT_INTERVAL": "300",   # ms
    })
    try:
        pipeline: Pipeline = otlp_app.greeting
        handle = pipeline.trigger("ana", database=db_url)
        assert handle.result(timeout=60) == "hello ana"

        def exported() -> bool:
            with got.lock:
                names = {name for name, _ in got.spans}
                return "ductline.job.completed" in got.metrics and {RUN_SPAN, "greet"} <= names
        wait_for(exported, timeout=20)
    finally:
        assert stop_worker(worker) == 0
    with got.lock:
        runs = [attrs for name, attrs in got.spans if name == RUN_SPAN]
        attempts = [attrs for name, attrs in got.spans if name == "greet"]
        assert runs[0]["cicd.pipeline.run.id"] == handle.id
        assert runs[0]["cicd.pipeline.result"] == "success"
        assert attempts[0]["cicd.pipeline.task.name"] == "greet"
        assert {"ductline.job.completed", "ductline.job.runtime"} <= got.metrics
        assert all(r.get("service.name") == "otlp-test-worker" for r in got.resources), got.resources
        assert got.paths == {"/v1/traces", "/v1/metrics"}

"""A worker started with ``DUCTLINE_OTEL=1`` and OpenTelemetry's standard
``OTEL_EXPORTER_OTLP_*`` variables exports its spans and metrics over OTLP/HTTP: a
small receiver in the test process (an HTTP server decoding the protobuf requests
with the opentelemetry-proto package) gets them from a real worker's run."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ductline import Pipeline
from ductline.observability.tracing import run_span_name
from helpers import start_worker, stop_worker, wait_for

APP = Path(__file__).parent / "otlp_app.py"
RUN_SPAN = run_span_name("otlp_greeting")


class Receiver:
    """What an OTLP/HTTP collector received: spans as (name, attributes), metric names,
    and each request's resource attributes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[tuple[str, dict[str, Any]]] = []
        self.metrics: set[str] = set()
        self.resources: list[dict[str, Any]] = []
        self.paths: set[str] = set()

    def take(self, path: str, body: bytes) -> bytes:
        with self.lock:
            self.paths.add(path)
            if path == "/v1/traces":
                traces = ExportTraceServiceRequest.FromString(body)
                for resource_spans in traces.resource_spans:
                    self.resources.append(_attributes(resource_spans.resource.attributes))
                    for scope in resource_spans.scope_spans:
                        self.spans.extend((s.name, _attributes(s.attributes)) for s in scope.spans)
                return ExportTraceServiceResponse().SerializeToString()
            if path == "/v1/metrics":
                metrics = ExportMetricsServiceRequest.FromString(body)
                for resource_metrics in metrics.resource_metrics:
                    self.resources.append(_attributes(resource_metrics.resource.attributes))
                    for scope in resource_metrics.scope_metrics:
                        self.metrics.update(m.name for m in scope.metrics)
                return ExportMetricsServiceResponse().SerializeToString()
        raise KeyError(path)


def _attributes(pairs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        which = pair.value.WhichOneof("value")
        out[pair.key] = getattr(pair.value, which) if which else None
    return out


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            try:
                answer = got.take(self.path, body)
            except KeyError:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


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

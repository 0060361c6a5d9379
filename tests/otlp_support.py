"""A small OTLP/HTTP collector for tests: an HTTP server in the test process that
decodes the protobuf requests (the opentelemetry-proto package) a real worker's
exporters send, and keeps the spans (name and attributes), the metric names and the
resources it got."""

from __future__ import annotations

import contextlib
import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


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


@contextlib.contextmanager
def serving() -> Iterator[tuple[Receiver, str]]:
    """A receiver listening on 127.0.0.1 (a free port): ``(receiver, endpoint URL)``
    while the block runs; the server stops at its end."""
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

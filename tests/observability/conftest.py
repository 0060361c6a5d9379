"""Fixtures of the observability tests: in-memory OpenTelemetry providers, captured
log records, a UDP listener standing in for StatsD, and installations that are
always closed."""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pytest

from ductline.observability import setup


@dataclass
class Otel:
    tracer_provider: Any
    meter_provider: Any
    spans: Any       # InMemorySpanExporter
    reader: Any      # InMemoryMetricReader

    def finished_spans(self) -> list[Any]:
        return list(self.spans.get_finished_spans())

    def points(self) -> dict[str, list[Any]]:
        """Data points by metric name, from one collection."""
        out: dict[str, list[Any]] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    out.setdefault(metric.name, []).extend(metric.data.data_points)
        return out


@pytest.fixture
def otel() -> Iterator[Otel]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Otel(tracer_provider, meter_provider, exporter, reader)
    tracer_provider.shutdown()
    meter_provider.shutdown()


@pytest.fixture
def install() -> Iterator[Callable[..., setup.Observability]]:
    """``install(**kwargs)``: `setup.install`, closed at teardown whatever happens."""
    made: list[setup.Observability] = []

    def make(*args: Any, **kwargs: Any) -> setup.Observability:
        obs = setup.install(*args, **kwargs)
        made.append(obs)
        return obs

    yield make
    for obs in made:
        obs.close()
    setup.uninstall()


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self, text: str) -> list[logging.LogRecord]:
        return [r for r in self.records if r.getMessage() == text]


@pytest.fixture
def log_records() -> Iterator[Records]:
    """Every record of the ``ductline`` loggers, captured by a handler on the
    ``ductline`` logger itself (so it works whatever the CLI did to propagation)."""
    handler = Records()
    logger = logging.getLogger("ductline")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


class Udp:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.lines: list[str] = []

    def drain(self) -> list[str]:
        while True:
            try:
                data = self.sock.recv(65536)
            except (socket.timeout, BlockingIOError):
                return self.lines
            self.lines.extend(data.decode().splitlines())


@pytest.fixture
def udp() -> Iterator[Udp]:
    listener = Udp()
    yield listener
    listener.sock.close()

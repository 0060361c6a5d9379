"""The Prometheus sink: an HTTP endpoint serving the metrics `Registry`.

Nothing is counted twice: a custom collector reads the registry at scrape time
(counters as ``ductline_job_completed_total``, histograms in seconds as
``ductline_job_runtime_seconds_bucket/_sum/_count``, the queue gauges as
``ductline_jobs_ready`` / ``ductline_jobs_delayed``, read by one aggregate query
per scrape). Labels are ``pipeline``, ``step``, ``result``, ``reason`` -- never
run ids.

The endpoint binds 127.0.0.1 unless told otherwise (``ductline worker
--metrics-port P [--metrics-host H]``, or ``DUCTLINE_METRICS_PORT`` /
``DUCTLINE_METRICS_HOST``). ``/healthz`` and ``/readyz`` answer the probes of
`ductline.observability.probes`; every other path the exposition format.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
from typing import Any, Iterator
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, ProcessCollector, make_wsgi_app
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from ductline.errors import ConfigurationError
from ductline.observability import probes
from ductline.observability.metrics import COUNTER, GAUGE, HISTOGRAM, METRICS, Registry

log = logging.getLogger("ductline.observability")


class RegistryCollector(Collector):
    """Exposes a ductline `Registry` to ``prometheus_client``."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Any]:
        gauges = self.registry.gauges()
        for spec in METRICS:
            labels = list(spec.labels)
            family: CounterMetricFamily | HistogramMetricFamily | GaugeMetricFamily
            if spec.kind == COUNTER:
                counter = CounterMetricFamily(spec.prometheus_name, spec.description, labels=labels)
                for key, value in sorted(self.registry.counters(spec.name).items()):
                    counter.add_metric(list(key), value)
                family = counter
            elif spec.kind == HISTOGRAM:
                histogram = HistogramMetricFamily(spec.prometheus_name, spec.description, labels=labels)
                for key, h in sorted(self.registry.histograms(spec.name).items()):
                    buckets = [(_le(bound), float(n)) for bound, n in h.cumulative()]
                    buckets.append(("+Inf", float(h.count)))
                    histogram.add_metric(list(key), buckets, h.sum)
                family = histogram
            elif spec.kind == GAUGE:
                gauge = GaugeMetricFamily(spec.prometheus_name, spec.description, labels=labels)
                for key, value in sorted(gauges.get(spec.name, {}).items()):
                    gauge.add_metric(list(key), value)
                family = gauge
            else:  # pragma: no cover - METRICS only has the three kinds
                continue
            yield family


def _le(bound: float) -> str:
    return repr(float(bound))


def collector_registry(registry: Registry, *, process_metrics: bool = True) -> CollectorRegistry:
    """A fresh ``CollectorRegistry`` (not the global one) holding ductline's metrics
    and, by default, the standard ``process_*`` metrics of this process."""
    registry_ = CollectorRegistry(auto_describe=False)
    registry_.register(RegistryCollector(registry))
    if process_metrics:
        ProcessCollector(registry=registry_)
    return registry_


class _Server(WSGIServer):
    """One thread serves every scrape, one after the other: scrapes are quick and
    rare, and the queue gauges' database reads then share one connection (SQLite
    connections are per thread) instead of opening one per request."""

    allow_reuse_address = True


class _SilentHandler(WSGIRequestHandler):
    timeout = 10  # a client that stops talking cannot hold the endpoint

    def log_message(self, format: str, *args: Any) -> None:
        pass


class MetricsServer:
    """The HTTP endpoint, served by a daemon thread until `close`.

    Args:
        registry: the metrics to serve.
        port: TCP port (0 picks a free one; read it back from ``port``).
        host: address to bind; 127.0.0.1 by default. Anything but loopback
            exposes the metrics to the network (logged as a warning).
        store: the database ``/readyz`` checks (without one it answers 503).

    Raises:
        ConfigurationError: the address cannot be bound (in use, not local).
    """

    def __init__(self, registry: Registry, port: int, host: str = "127.0.0.1", *,
                 process_metrics: bool = True, store: Any = None) -> None:
        self.registry = registry
        self.collectors = collector_registry(registry, process_metrics=process_metrics)
        app = with_probes(make_wsgi_app(self.collectors), store)

        class Server(_Server):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        try:
            self._server = make_server(host, port, app, Server, handler_class=_SilentHandler)
        except OSError as exc:
            raise ConfigurationError(f"cannot serve metrics on {host}:{port}: {exc}") from exc
        self.host = host
        self.port: int = self._server.server_address[1]
        if not _loopback(host):
            log.warning("metrics endpoint bound to %s: visible to anyone who can reach it", host)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="ductline-metrics", daemon=True)
        self._thread.start()
        log.info("Metrics on %s", self.url)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and wait for the thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def with_probes(metrics: Any, store: Any) -> Any:
    """A WSGI app answering ``/healthz`` and ``/readyz`` (against ``store``) and
    handing every other path to ``metrics``."""

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if path not in ("/healthz", "/readyz"):
            return metrics(environ, start_response)
        probe = probes.liveness() if path == "/healthz" else probes.readiness(store)
        body = json.dumps(probe.body).encode()
        start_response("200 OK" if probe.ok else "503 Service Unavailable",
                       [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                        ("Cache-Control", "no-store")])
        return [body]

    return app


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

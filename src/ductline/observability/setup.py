"""Installing the observability subscribers and sinks in a process.

One call wires everything to the engine's events: the metrics registry (always),
the Prometheus endpoint, StatsD, OpenTelemetry metrics and tracing (each when
asked for). Workers call `install_from_env` at startup; programs embedding
ductline call `install`. A process has one installation: installing again
replaces (and closes) the previous one.

Environment (read by `install_from_env`):

- ``DUCTLINE_METRICS_PORT``: serve Prometheus metrics on this port
  (``ductline worker --metrics-port P``);
- ``DUCTLINE_METRICS_HOST``: the address to bind (default 127.0.0.1);
- ``DUCTLINE_STATSD_ADDRESS``: ``host:port`` of a StatsD server;
- ``DUCTLINE_OTEL``: ``1``/``true`` (or ``traces``, ``metrics``, ``traces,metrics``)
  to record OpenTelemetry spans and/or metrics (needs the ``otel`` extra) with the
  global providers when your code or ``opentelemetry-instrument`` set them up, and
  otherwise with providers that export over OTLP/HTTP as the standard
  ``OTEL_EXPORTER_OTLP_*`` variables say (`ductline.observability.otlp`);
- ``DUCTLINE_METRICS_GAUGE_INTERVAL``: seconds between StatsD gauge sends (10).
"""

from __future__ import annotations

import logging
import math
import os
import threading
from typing import Any, Callable

from ductline.errors import ConfigurationError, StoreError
from ductline.numerals import decimal_number, whole_number
from ductline.observability import events
from ductline.observability.metrics import (ChildCounts, EventWaits, MetricsSubscriber, QueueDepths, QueueServing,
                                             Registry, RunCounts)

log = logging.getLogger("ductline.observability")

_TRUE = {"1", "true", "yes", "on"}


class Observability:
    """What `install` set up; `close` undoes all of it (unsubscribes, stops the
    endpoint and threads, closes sockets)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.metrics_server: Any = None
        self.statsd: Any = None
        self.otel_metrics: Any = None
        self.tracing: Any = None
        self.otlp: Any = None  # the OTLP providers install_from_env built, if any
        self._unsubscribe: list[Callable[[], None]] = []
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    @property
    def metrics_url(self) -> str | None:
        return None if self.metrics_server is None else self.metrics_server.url

    def _subscribe(self, subscriber: Callable[..., None]) -> None:
        self._unsubscribe.append(events.subscribe(subscriber))

    def _start_gauge_ticker(self, interval: float) -> None:
        def tick() -> None:
            while not self._stop.wait(interval):
                try:
                    self.statsd.send_gauges()
                except StoreError as exc:  # pragma: no cover - registry.gauges() catches these
                    log.warning("StatsD gauges: %s", exc)
                except Exception:
                    log.exception("StatsD gauges failed")

        self._ticker = threading.Thread(target=tick, name="ductline-statsd-gauges", daemon=True)
        self._ticker.start()

    def close(self) -> None:
        global _current
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(5)
            self._ticker = None
        if self.metrics_server is not None:
            self.metrics_server.close()
            self.metrics_server = None
        for name in ("statsd", "otel_metrics"):
            sink = getattr(self, name)
            if sink is not None:
                self.registry.remove_sink(sink)
                sink.close()
                setattr(self, name, None)
        if self.tracing is not None:
            self.tracing.close()
            self.tracing = None
        if self.otlp is not None:  # after the sinks: what they recorded last is exported
            self.otlp.close()
            self.otlp = None
        with _lock:
            if _current is self:
                _current = None

    def __enter__(self) -> "Observability":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_lock = threading.Lock()
_current: Observability | None = None


def current() -> Observability | None:
    """The installation of this process, if any."""
    return _current


def _otel_parts(otel: Any) -> set[str]:
    if otel is None or otel is False:
        return set()
    if otel is True:
        return {"traces", "metrics"}
    parts = {p.strip().lower() for p in str(otel).split(",") if p.strip()}
    if parts & _TRUE:
        return {"traces", "metrics"}
    unknown = parts - {"traces", "metrics"}
    if unknown:
        raise ConfigurationError(f"otel: unknown part(s) {sorted(unknown)}; use traces, metrics or true")
    return parts


def install(metrics_port: int | None = None, metrics_host: str = "127.0.0.1", statsd: Any = None,
            otel: Any = None, *, store: Any = None, tracer_provider: Any = None, meter_provider: Any = None,
            gauge_interval: float = 10.0, gauge_cache_seconds: float = 1.0) -> Observability:
    """Subscribe the observability sinks to the engine's events.

    Args:
        metrics_port: serve Prometheus metrics on 127.0.0.1 (or ``metrics_host``)
            at this port; 0 picks a free port (see ``metrics_server.port``).
        metrics_host: the address the endpoint binds.
        statsd: ``"host:port"`` of a StatsD server (or a `StatsdSink`).
        otel: ``True`` for OpenTelemetry spans and metrics, ``"traces"`` or
            ``"metrics"`` for one of them (with the given or global providers).
        store: the database; enables the queue gauges (ready and delayed jobs per
            pipeline) and lets spans and ``pipeline.runtime`` read run times.
        tracer_provider, meter_provider: OpenTelemetry providers (default: global).
        gauge_interval: seconds between StatsD gauge sends.
        gauge_cache_seconds: how long one reading of the queue gauges is reused.

    Raises:
        ConfigurationError: a port that cannot be bound, a bad StatsD address, or
            OpenTelemetry asked for without the ``otel`` extra installed.
    """
    global _current
    parts = _otel_parts(otel)
    with _lock:
        previous = _current
    if previous is not None:
        previous.close()
    gauges = None if store is None else QueueDepths(store, cache_seconds=gauge_cache_seconds)
    runs = None if store is None else RunCounts(store, cache_seconds=gauge_cache_seconds)
    waits = None if store is None else EventWaits(store, cache_seconds=gauge_cache_seconds)
    queues = None if store is None else QueueServing(store, cache_seconds=gauge_cache_seconds)
    children = None if store is None else ChildCounts(store, cache_seconds=gauge_cache_seconds)
    obs = Observability(Registry(gauge_source=gauges, run_source=runs, wait_source=waits, queue_source=queues,
                                 child_source=children))
    try:
        obs._subscribe(MetricsSubscriber(obs.registry, store))
        if metrics_port is not None:
            from ductline.extras import require

            require("prometheus")
            from ductline.observability.prometheus import MetricsServer

            obs.metrics_server = MetricsServer(obs.registry, int(metrics_port), metrics_host or "127.0.0.1",
                                               store=store)
        if statsd:
            from ductline.observability.statsd import sink_from

            obs.statsd = sink_from(statsd, obs.registry)
            obs.registry.add_sink(obs.statsd)
            if gauges is not None:
                obs._start_gauge_ticker(gauge_interval)
        if "metrics" in parts:
            from ductline.observability.otel_metrics import OtelMetricsSink

            try:
                obs.otel_metrics = OtelMetricsSink(obs.registry, meter_provider)
            except ImportError as exc:
                raise ConfigurationError(str(exc)) from exc
            obs.registry.add_sink(obs.otel_metrics)
        if "traces" in parts:
            from ductline.observability import tracing

            if not tracing.available():
                from ductline.extras import install_command

                raise ConfigurationError(f"OpenTelemetry tracing needs the otel extra: {install_command('otel')}")
            obs.tracing = tracing.TracingSubscriber(store, tracer_provider)
            obs._subscribe(obs.tracing)
    except BaseException:
        obs.close()
        raise
    with _lock:
        _current = obs
    return obs


def env_port(name: str) -> int | None:
    """The TCP port in environment variable ``name`` (``None`` when it is unset or empty).

    Raises:
        ConfigurationError: not a port written in ASCII digits, 0 to 65535.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        port = whole_number(raw)  # ASCII digits only: int() would also take "٨٠٨٠" or "80_80"
    except ValueError:
        port = -1
    if not 0 <= port < 65536:
        raise ConfigurationError(f"{name}: {raw!r} is not a TCP port")
    return port


def install_from_env(store: Any = None) -> Observability | None:
    """`install` from ``DUCTLINE_METRICS_PORT``, ``DUCTLINE_METRICS_HOST``,
    ``DUCTLINE_STATSD_ADDRESS`` and ``DUCTLINE_OTEL`` (see the module docstring).
    Does nothing and returns ``None`` when none of them is set.

    Raises:
        ConfigurationError: an invalid value, or a port that cannot be bound.
    """
    port = env_port("DUCTLINE_METRICS_PORT")
    host = os.environ.get("DUCTLINE_METRICS_HOST", "").strip() or "127.0.0.1"
    statsd = os.environ.get("DUCTLINE_STATSD_ADDRESS", "").strip() or None
    otel_raw = os.environ.get("DUCTLINE_OTEL", "").strip().lower()
    otel: Any = None if otel_raw in ("", "0", "false", "no", "off") else otel_raw
    if port is None and statsd is None and otel is None:
        return None
    interval_raw = os.environ.get("DUCTLINE_METRICS_GAUGE_INTERVAL", "").strip()
    try:
        interval = decimal_number(interval_raw) if interval_raw else 10.0
        if not 0 < interval < math.inf:
            raise ValueError
    except ValueError:
        raise ConfigurationError(f"DUCTLINE_METRICS_GAUGE_INTERVAL: {interval_raw!r} is not a positive number") \
            from None
    providers = None
    if otel is not None:
        from ductline.observability.otlp import export_from_env

        providers = export_from_env(_otel_parts(otel))
    try:
        obs = install(port, host, statsd, otel, store=store, gauge_interval=interval,
                      tracer_provider=None if providers is None else providers.tracer_provider,
                      meter_provider=None if providers is None else providers.meter_provider)
    except BaseException:
        if providers is not None:
            providers.close()
        raise
    obs.otlp = providers
    return obs


def uninstall() -> None:
    """Close this process's installation, if any."""
    with _lock:
        obs = _current
    if obs is not None:
        obs.close()

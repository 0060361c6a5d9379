"""OTLP export for a process whose program set up no OpenTelemetry providers.

A worker started with ``DUCTLINE_OTEL`` records spans and metrics with the global
OpenTelemetry providers. When nothing set those up (no ``opentelemetry-instrument``,
no provider configured by the application), they are the API's no-op defaults and
everything recorded would be dropped; `export_from_env` then builds SDK providers
that export over OTLP/HTTP (the ``otel`` extra brings the exporter), configured by
OpenTelemetry's standard environment variables, which the SDK reads itself:

- ``OTEL_EXPORTER_OTLP_ENDPOINT`` (default ``http://localhost:4318``), or
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``;
  ``OTEL_EXPORTER_OTLP_HEADERS``, ``..._TIMEOUT``, ``..._COMPRESSION``;
- ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (the service name defaults
  to ``ductline``);
- ``OTEL_BSP_SCHEDULE_DELAY`` (ms between span batches, 5000) and
  ``OTEL_METRIC_EXPORT_INTERVAL`` (ms between metric exports, 60000);
- ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER``: ``none`` exports nothing of
  that signal (OpenTelemetry's default, ``otlp``, exports).

The providers are this installation's, not set as the global ones (a process can set
those only once, and a later installation must not inherit closed ones); `close`
flushes and shuts them down. A provider left open at exit is shut down by the SDK's
own exit handler, which exports what is pending.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ductline.errors import ConfigurationError
from ductline.extras import install_command

log = logging.getLogger("ductline.observability")

INSTALL_HINT = f"OTLP export needs the otel extra: {install_command('otel')}"
DEFAULT_SERVICE_NAME = "ductline"


class OtlpExport:
    """The SDK providers `export_from_env` built (``None`` for a signal not exported
    by ductline: not asked for, switched off, or set up by the program)."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider

    def close(self) -> None:
        """Export what is pending, then stop the exporters' threads."""
        for provider in (self.tracer_provider, self.meter_provider):
            if provider is not None:
                try:
                    provider.shutdown()
                except Exception:  # a collector that is away must not fail a worker's stop
                    log.exception("shutting down the OTLP export failed")
        self.tracer_provider = self.meter_provider = None


def _switched_off(variable: str) -> bool:
    return os.environ.get(variable, "").strip().lower() == "none"


def _program_set_traces() -> bool:
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _program_set_metrics() -> bool:
    from opentelemetry import metrics

    try:  # the API's stand-in until a provider is set; it has no public name
        from opentelemetry.metrics._internal import _ProxyMeterProvider
    except ImportError:  # pragma: no cover - an API that moved it: trust the name
        return type(metrics.get_meter_provider()).__name__ != "_ProxyMeterProvider"
    return not isinstance(metrics.get_meter_provider(), _ProxyMeterProvider)


def _resource() -> Any:
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    resource = Resource.create()  # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return resource


def export_from_env(parts: set[str]) -> OtlpExport:
    """OTLP/HTTP providers for the ``parts`` (``"traces"``, ``"metrics"``) whose
    global provider the program left unset.

    Raises:
        ConfigurationError: the ``otel`` extra (the SDK and the OTLP exporter) is not
            installed.
    """
    export = OtlpExport()
    want_traces = "traces" in parts and not _switched_off("OTEL_TRACES_EXPORTER")
    want_metrics = "metrics" in parts and not _switched_off("OTEL_METRICS_EXPORTER")
    try:
        if want_traces and not _program_set_traces():
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            tracer_provider = TracerProvider(resource=_resource())
            tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            export.tracer_provider = tracer_provider
        if want_metrics and not _program_set_metrics():
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            reader = PeriodicExportingMetricReader(OTLPMetricExporter())
            export.meter_provider = MeterProvider(metric_readers=[reader], resource=_resource())
    except ImportError as exc:
        export.close()
        raise ConfigurationError(f"{INSTALL_HINT} ({exc})") from exc
    return export

"""The OpenTelemetry metrics sink (the ``otel`` extra: ``pip install -e 'path/to/ductline[otel]'``).

Every counter increment and histogram sample of the `Registry` is recorded on an
OpenTelemetry instrument of the same dotted name (``ductline.job.completed``,
``ductline.job.runtime`` with unit ``s`` and second-sized bucket advice, ...);
the queue gauges are observable gauges whose callback runs the one aggregate
query at collection time. Attributes are the registry's labels only.

This module imports without opentelemetry installed; creating the sink without
it raises `ImportError` with the install hint.
"""

from __future__ import annotations

from typing import Any, Iterable

from ductline.extras import install_command
from ductline.observability.metrics import (
    BUCKETS,
    COUNTER,
    GAUGE,
    HISTOGRAM,
    METRICS,
    MetricSpec,
    Registry,
)

try:
    from opentelemetry import metrics as otel_metrics
    from opentelemetry.metrics import CallbackOptions, Observation
except ImportError:  # the otel extra is not installed
    otel_metrics = None  # type: ignore[assignment]

INSTALL_HINT = f"OpenTelemetry metrics need the otel extra: {install_command('otel')}"


def available() -> bool:
    return otel_metrics is not None


class OtelMetricsSink:
    """Records the registry's metrics on OpenTelemetry instruments.

    Args:
        registry: the source of the observable gauges.
        meter_provider: a ``MeterProvider``; ``None`` uses the global one.

    Raises:
        ImportError: opentelemetry is not installed.
    """

    def __init__(self, registry: Registry, meter_provider: Any = None) -> None:
        if otel_metrics is None:
            raise ImportError(INSTALL_HINT)
        from ductline.version import __version__

        self.registry = registry
        self.closed = False
        provider = meter_provider if meter_provider is not None else otel_metrics.get_meter_provider()
        self.meter = provider.get_meter("ductline", __version__)
        self._instruments: dict[str, Any] = {}
        for spec in METRICS:
            if spec.kind == COUNTER:
                self._instruments[spec.name] = self.meter.create_counter(
                    spec.name, unit=spec.unit or "1", description=spec.description)
            elif spec.kind == HISTOGRAM:
                self._instruments[spec.name] = self._histogram(spec)
            elif spec.kind == GAUGE:
                self._instruments[spec.name] = self.meter.create_observable_gauge(
                    spec.name, callbacks=[self._gauge_callback(spec)], unit="1", description=spec.description)

    def _histogram(self, spec: MetricSpec) -> Any:
        try:
            return self.meter.create_histogram(spec.name, unit=spec.unit, description=spec.description,
                                               explicit_bucket_boundaries_advisory=list(BUCKETS))
        except TypeError:  # opentelemetry-api older than 1.23: no bucket advice
            return self.meter.create_histogram(spec.name, unit=spec.unit, description=spec.description)

    def _gauge_callback(self, spec: MetricSpec) -> Any:
        def callback(options: "CallbackOptions") -> Iterable["Observation"]:
            if self.closed:
                return []
            series = self.registry.gauges().get(spec.name, {})
            return [Observation(value, dict(zip(spec.labels, key))) for key, value in sorted(series.items())]

        return callback

    def add(self, spec: MetricSpec, value: float, labels: dict[str, str]) -> None:
        if not self.closed:
            self._instruments[spec.name].add(value, attributes=labels)

    def observe(self, spec: MetricSpec, value: float, labels: dict[str, str]) -> None:
        if not self.closed:
            self._instruments[spec.name].record(value, attributes=labels)

    def close(self) -> None:
        """Stop recording (OpenTelemetry cannot unregister instruments)."""
        self.closed = True

"""Which providers `DUCTLINE_OTEL` uses: OTLP exporters of its own when the program set
up none, the program's global providers when it did, nothing for a signal whose
``OTEL_*_EXPORTER`` is ``none``. Each scenario runs in a fresh interpreter (a process
sets its global providers once); the cases without providers of the program share
one, installing and closing in turn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

CHECK = textwrap.dedent("""
    import json, os, sys
    from opentelemetry import metrics, trace
    from ductline.observability.setup import install_from_env

    if sys.argv[1] == "program":
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider
        trace.set_tracer_provider(TracerProvider())
        metrics.set_meter_provider(MeterProvider())

    def name(provider):
        return None if provider is None else type(provider).__module__ + "." + type(provider).__name__

    results = []
    for case in json.loads(sys.argv[2]):
        os.environ.update(case)
        obs = install_from_env()
        providers = obs.otlp
        exporters, service = [], None
        if providers.tracer_provider is not None:
            processor = providers.tracer_provider._active_span_processor._span_processors[0]
            exporters.append(type(processor.span_exporter).__name__)
            service = providers.tracer_provider.resource.attributes.get("service.name")
        results.append({"traces": name(providers.tracer_provider), "metrics": name(providers.meter_provider),
                        "exporters": exporters, "service": service})
        obs.close()
        for key in case:
            del os.environ[key]
    print(json.dumps(results))
""")


def _check(scenario: str, *cases: dict[str, str]) -> list[dict[str, Any]]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "DUCTLINE_"))}
    proc = subprocess.run([sys.executable, "-c", CHECK, scenario, json.dumps(cases)],
                          env={**clean, "DUCTLINE_OTEL": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_without_providers_of_the_program_ductline_exports_over_otlp() -> None:
    plain, named, no_traces, no_metrics = _check(
        "no-program", {}, {"OTEL_SERVICE_NAME": "billing-worker"}, {"OTEL_TRACES_EXPORTER": "none"},
        {"OTEL_METRICS_EXPORTER": "none"})
    assert plain["traces"] == "opentelemetry.sdk.trace.TracerProvider"
    assert plain["metrics"] == "opentelemetry.sdk.metrics._internal.MeterProvider"
    assert plain["exporters"] == ["OTLPSpanExporter"]
    assert plain["service"] == "ductline"
    assert named["service"] == "billing-worker"  # the standard variable names the service
    assert no_traces["traces"] is None and no_traces["metrics"] is not None  # a signal switched off
    assert no_metrics["metrics"] is None and no_metrics["traces"] is not None


def test_the_programs_own_providers_are_used_as_they_are() -> None:
    [got] = _check("program", {})
    assert got["traces"] is None and got["metrics"] is None

"""Which providers `DUCTLINE_OTEL` uses: OTLP exporters of its own when the program set
up none, the program's global providers when it did, nothing for a signal whose
``OTEL_*_EXPORTER`` is ``none``. Each case runs in a fresh interpreter (a process sets
its global providers once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

CHECK = textwrap.dedent("""
    import json, sys
    from opentelemetry import metrics, trace
    from ductline.observability.setup import install_from_env

    if "program" in sys.argv:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider
        trace.set_tracer_provider(TracerProvider())
        metrics.set_meter_provider(MeterProvider())
    obs = install_from_env()
    providers = obs.otlp
    name = lambda p: None if p is None else type(p).__module__ + "." + type(p).__name__
    exporters = []
    if providers.tracer_provider is not None:
        processor = providers.tracer_provider._active_span_processor._span_processors[0]
        exporters.append(type(processor.span_exporter).__name__)
        resource = dict(providers.tracer_provider.resource.attributes)
    else:
        resource = {}
    print(json.dumps({"traces": name(providers.tracer_provider), "metrics": name(providers.meter_provider),
                      "exporters": exporters, "service": resource.get("service.name")}))
    obs.close()
""")


def _check(*args: str, **env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "DUCTLINE_"))}
    proc = subprocess.run([sys.executable, "-c", CHECK, *args], env={**clean, "DUCTLINE_OTEL": "1", **env},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_without_providers_of_the_program_ductline_exports_over_otlp() -> None:
    got = _check(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert got["traces"] == "opentelemetry.sdk.trace.TracerProvider"
    assert got["metrics"] == "opentelemetry.sdk.metrics._internal.MeterProvider"
    assert got["exporters"] == ["OTLPSpanExporter"]
    assert got["service"] == "ductline"


def test_the_service_name_comes_from_the_standard_variable() -> None:
    assert _check(OTEL_SERVICE_NAME="billing-worker")["service"] == "billing-worker"


def test_the_programs_own_providers_are_used_as_they_are() -> None:
    got = _check("program")
    assert got["traces"] is None and got["metrics"] is None


def test_a_signal_switched_off_is_not_exported() -> None:
    got = _check(OTEL_TRACES_EXPORTER="none")
    assert got["traces"] is None
    assert got["metrics"] is not None
    assert _check(OTEL_METRICS_EXPORTER="none")["metrics"] is None

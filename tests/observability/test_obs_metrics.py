"""Metrics from engine events: the registry, and each sink (Prometheus over real
HTTP on 127.0.0.1, OpenTelemetry in memory, StatsD over UDP); the queue gauges
from the aggregate query on both backends."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import obs_app
import pytest
from helpers import wait_for
from prometheus_client.parser import text_string_to_metric_families

from ductline.errors import ConfigurationError
from ductline.observability import setup
from ductline.observability.events import EventName, emit
from ductline.observability.metrics import (
    METRICS,
    MetricsSubscriber,
    QueueDepths,
    Registry,
    queue_depths,
)
from ductline.observability.statsd import format_line, parse_address

RUN = "0123456789abcdef0123456789abcdef"
JOB = "fedcba9876543210fedcba9876543210"


def job(attempt: int = 1, **extra: object) -> dict[str, object]:
    return {"pipeline": "orders", "step": "charge", "run_id": RUN, "job_id": JOB, "attempt": attempt, **extra}


def emit_a_run() -> None:
    """The events of a run whose step timed out twice and then succeeded."""
    emit(EventName.PIPELINE_TRIGGERED, pipeline="orders", run_id=RUN)
    emit(EventName.JOB_ENQUEUED, pipeline="orders", step="charge", run_id=RUN, count=1)
    for attempt, result in ((1, "timed_out"), (2, "timed_out"), (3, "success")):
        emit(EventName.ATTEMPT_STARTED, **job(attempt), deadline_ms=None, pickup_latency_seconds=0.02 * attempt)
        if result == "timed_out":
            emit(EventName.TIMEOUT_OVERRUN, **job(attempt), overrun_seconds=0.004)
        emit(EventName.JOB_COMPLETED, **job(attempt), result=result, runtime_seconds=1.0 + attempt / 100,
             error_type="TimeoutError" if result == "timed_out" else None,
             outcome="retry" if result == "timed_out" else "completed")
    emit(EventName.JOB_ENQUEUED, pipeline="orders", step="ship", run_id=RUN, count=3)
    emit(EventName.PIPELINE_HALTED, pipeline="orders", run_id=RUN, reason="job_retries_exhausted")
    emit(EventName.LEASE_LOST, **job(4))
    emit(EventName.PROCESS_UNDEAD, **job(4), pid=123)
    emit(EventName.THREAD_UNDEAD, **job(4), pid=123)
    emit(EventName.PIPELINE_COMPLETED, pipeline="orders", run_id=RUN, runtime_seconds=3.5)
    emit(EventName.PIPELINE_CANCELLED, pipeline="orders", run_id=RUN)
    emit(EventName.PIPELINE_FAILED, pipeline="orders", run_id=RUN)


def test_the_catalogue_has_the_issue_names_and_no_run_id_labels():
    names = {m.name for m in METRICS}
    for short in ("pipeline.triggered", "pipeline.completed", "pipeline.halted", "pipeline.runtime",
                  "job.enqueued", "job.completed", "job.runtime", "job.pickup_latency", "timeout.overrun",
                  "thread.undead", "process.undead", "lease.lost"):
        assert f"ductline.{short}" in names
    for m in METRICS:
        assert set(m.labels) <= {"pipeline", "step", "result", "reason", "status", "queue"}
    assert {m.prometheus_name for m in METRICS if m.unit == "s"} == {
        "ductline_pipeline_runtime_seconds", "ductline_job_runtime_seconds",
        "ductline_job_pickup_latency_seconds", "ductline_timeout_overrun_seconds"}


def test_subscriber_turns_events_into_counts_and_samples(install):
    obs = install()
    emit_a_run()
    r = obs.registry
    assert r.counter("ductline.pipeline.triggered", pipeline="orders") == 1
    assert r.counter("ductline.job.enqueued", step="charge") == 1
    assert r.counter("ductline.job.enqueued") == 4
    assert r.counter("ductline.job.completed", result="timed_out") == 2
    assert r.counter("ductline.job.completed", result="success") == 1
    assert r.counter("ductline.pipeline.halted", reason="job_retries_exhausted") == 1
    assert r.counter("ductline.pipeline.completed") == 1
    assert r.counter("ductline.pipeline.cancelled") == 1
    assert r.counter("ductline.pipeline.failed", reason="timeout_exceeded") == 1
    assert r.counter("ductline.lease.lost") == 1
    assert r.counter("ductline.process.undead") == 1
    assert r.counter("ductline.thread.undead") == 1
    runtime = r.histogram("ductline.job.runtime", result="timed_out")
    assert runtime.count == 2 and runtime.sum == pytest.approx(2.03)
    overrun = r.histogram("ductline.timeout.overrun")
    assert overrun.count == 2 and overrun.max == pytest.approx(0.004)
    assert r.histogram("ductline.job.pickup_latency").count == 3
    # Only a run end that carries its runtime (or a store to read it from) is timed.
    assert r.histogram("ductline.pipeline.runtime", result="completed").sum == pytest.approx(3.5)
    # Labels never carry run or job ids.
    for spec in METRICS:
        for key in list(r.counters(spec.name)) + list(r.histograms(spec.name)):
            assert RUN not in key and JOB not in key


def test_closing_an_installation_unsubscribes_it(install):
    obs = install()
    obs.close()
    emit(EventName.PIPELINE_TRIGGERED, pipeline="orders", run_id=RUN)
    assert obs.registry.counter("ductline.pipeline.triggered") == 0
    assert setup.current() is None


def test_a_second_install_replaces_the_first(install):
    first = install()
    second = install()
    emit(EventName.PIPELINE_TRIGGERED, pipeline="orders", run_id=RUN)
    assert first.registry.counter("ductline.pipeline.triggered") == 0
    assert second.registry.counter("ductline.pipeline.triggered") == 1
    assert setup.current() is second


def scrape(url: str) -> tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return text, samples


def le(labels: tuple[tuple[str, str], ...], bound: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels + (("le", bound),)))


def test_prometheus_endpoint_serves_the_registry_over_http(install):
    obs = install(metrics_port=0)
    assert obs.metrics_server.host == "127.0.0.1"
    assert obs.metrics_url == f"http://127.0.0.1:{obs.metrics_server.port}/metrics"
    emit_a_run()
    text, samples = scrape(obs.metrics_url)
    timed_out = (("pipeline", "orders"), ("result", "timed_out"), ("step", "charge"))
    success = (("pipeline", "orders"), ("result", "success"), ("step", "charge"))
    assert samples[("ductline_job_completed_total", timed_out)] == 2
    assert samples[("ductline_job_completed_total", success)] == 1
    assert samples[("ductline_pipeline_triggered_total", (("pipeline", "orders"),))] == 1
    assert samples[("ductline_pipeline_halted_total",
                    (("pipeline", "orders"), ("reason", "job_retries_exhausted")))] == 1
    assert samples[("ductline_job_runtime_seconds_count", timed_out)] == 2
    assert samples[("ductline_job_runtime_seconds_sum", timed_out)] == pytest.approx(2.03)
    assert samples[("ductline_job_runtime_seconds_bucket", le(timed_out, "1.0"))] == 0
    assert samples[("ductline_job_runtime_seconds_bucket", le(timed_out, "2.5"))] == 2
    assert samples[("ductline_job_runtime_seconds_bucket", le(timed_out, "+Inf"))] == 2
    overrun = (("pipeline", "orders"), ("step", "charge"))
    assert samples[("ductline_timeout_overrun_seconds_count", overrun)] == 2
    assert samples[("ductline_timeout_overrun_seconds_bucket", le(overrun, "0.005"))] == 2
    assert samples[("ductline_lease_lost_total", overrun)] == 1
    assert "# TYPE ductline_job_runtime_seconds histogram" in text
    assert RUN not in text and JOB not in text
    # Nothing counted twice: a second scrape reads the same values.
    assert scrape(obs.metrics_url)[1][("ductline_job_completed_total", timed_out)] == 2


def test_prometheus_endpoint_stops_on_close(install):
    obs = install(metrics_port=0)
    url = obs.metrics_url
    obs.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=2)


def test_a_port_in_use_is_a_clear_error(install):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(ConfigurationError, match="cannot serve metrics on 127.0.0.1"):
            install(metrics_port=taken.getsockname()[1])
    assert setup.current() is None


def test_otel_metrics_sink_records_every_increment_and_sample(install, otel):
    install(otel="metrics", meter_provider=otel.meter_provider)
    emit_a_run()
    points = otel.points()
    completed = {p.attributes["result"]: p.value for p in points["ductline.job.completed"]}
    assert completed == {"timed_out": 2, "success": 1}
    for p in points["ductline.job.completed"]:
        assert dict(p.attributes) == {"pipeline": "orders", "step": "charge", "result": p.attributes["result"]}
    overrun = points["ductline.timeout.overrun"]
    assert sum(p.count for p in overrun) == 2
    assert max(p.max for p in overrun) < 1
    assert 1.0 in overrun[0].explicit_bounds  # second-sized buckets
    assert sum(p.count for p in points["ductline.job.runtime"]) == 3
    assert points["ductline.pipeline.triggered"][0].value == 1
    assert sum(p.value for p in points["ductline.job.enqueued"]) == 4


def test_statsd_sink_sends_tagged_counters_and_timers(install, udp):
    install(statsd=udp.address)
    emit_a_run()
    lines = wait_for(lambda: len(udp.drain()) >= 20 and udp.lines, timeout=5)
    assert lines.count("ductline.job.completed:1|c|#pipeline:orders,step:charge,result:timed_out") == 2
    assert lines.count("ductline.job.completed:1|c|#pipeline:orders,step:charge,result:success") == 1
    assert "ductline.pipeline.triggered:1|c|#pipeline:orders" in lines
    assert "ductline.job.enqueued:3|c|#pipeline:orders,step:ship" in lines
    assert lines.count("ductline.timeout.overrun:4|ms|#pipeline:orders,step:charge") == 2
    assert "ductline.job.runtime:1010|ms|#pipeline:orders,step:charge,result:timed_out" in lines
    assert not any(RUN in line for line in lines)


def test_statsd_line_format_and_addresses():
    assert format_line("a.b", 1, "c", {"pipeline": "x|y,z", "step": ""}) == "a.b:1|c|#pipeline:x_y_z"
    assert format_line("a.b", 0.25, "ms", {}) == "a.b:0.25|ms"
    assert parse_address("statsd.local:9125") == ("statsd.local", 9125)
    assert parse_address(":9125") == ("127.0.0.1", 9125)
    assert parse_address("[::1]:8125") == ("::1", 8125)
    assert parse_address("10.0.0.1") == ("10.0.0.1", 8125)
    for bad in ("host:port", "host:0", "[::1"):
        with pytest.raises(ConfigurationError):
            parse_address(bad)


def test_install_from_env(monkeypatch, udp):
    for name in ("DUCTLINE_METRICS_PORT", "DUCTLINE_METRICS_HOST", "DUCTLINE_STATSD_ADDRESS", "DUCTLINE_OTEL"):
        monkeypatch.delenv(name, raising=False)
    assert setup.install_from_env() is None
    monkeypatch.setenv("DUCTLINE_METRICS_PORT", "0")
    monkeypatch.setenv("DUCTLINE_STATSD_ADDRESS", udp.address)
    obs = setup.install_from_env()
    try:
        assert obs is not None and setup.current() is obs
        assert obs.metrics_server.host == "127.0.0.1"
        assert obs.statsd is not None and obs.tracing is None and obs.otel_metrics is None
        emit(EventName.PIPELINE_TRIGGERED, pipeline="env", run_id=RUN)
        _, samples = scrape(obs.metrics_url)
        assert samples[("ductline_pipeline_triggered_total", (("pipeline", "env"),))] == 1
    finally:
        setup.uninstall()
    monkeypatch.setenv("DUCTLINE_METRICS_PORT", "http")
    with pytest.raises(ConfigurationError, match="DUCTLINE_METRICS_PORT"):
        setup.install_from_env()
    monkeypatch.setenv("DUCTLINE_METRICS_PORT", "0")
    monkeypatch.setenv("DUCTLINE_OTEL", "logs")
    with pytest.raises(ConfigurationError, match="unknown part"):
        setup.install_from_env()
    assert setup.current() is None


def test_a_broken_sink_never_breaks_the_engine(install, log_records):
    obs = install()

    class Broken:
        def add(self, *args):
            raise RuntimeError("sink down")

        observe = add

    obs.registry.add_sink(Broken())
    emit(EventName.PIPELINE_TRIGGERED, pipeline="orders", run_id=RUN)
    assert obs.registry.counter("ductline.pipeline.triggered") == 1
    assert any("metrics sink" in r.getMessage() for r in log_records.records)


# -- the gauges: one aggregate query, both backends ---------------------------------------
def test_queue_gauges_count_ready_and_delayed_jobs_per_pipeline(store, install):
    assert queue_depths(store) == {}
    for _ in range(2):
        obs_app.timeout_then_ok.trigger(1, database=store)
    obs_app.delayed_chain.trigger(1, delay=600, database=store)
    assert queue_depths(store) == {"obs_timeout_then_ok": (2, 0, 0), "obs_delayed": (0, 1, 0)}
    obs = install(metrics_port=0, store=store, gauge_cache_seconds=0)
    _, samples = scrape(obs.metrics_url)
    assert samples[("ductline_jobs_ready", (("pipeline", "obs_timeout_then_ok"),))] == 2
    assert samples[("ductline_jobs_delayed", (("pipeline", "obs_timeout_then_ok"),))] == 0
    assert samples[("ductline_jobs_ready", (("pipeline", "obs_delayed"),))] == 0
    assert samples[("ductline_jobs_delayed", (("pipeline", "obs_delayed"),))] == 1


def test_queue_gauges_remember_drained_pipelines_and_cache_readings(store):
    handle = obs_app.timeout_then_ok.trigger(1, database=store)
    depths = QueueDepths(store, cache_seconds=60)
    assert depths() == {"obs_timeout_then_ok": (1, 0, 0)}
    from ductline.operations.cancel import cancel_run

    cancel_run(store, handle.id)
    assert depths() == {"obs_timeout_then_ok": (1, 0, 0)}  # cached
    depths.cache_seconds = 0
    assert depths() == {"obs_timeout_then_ok": (0, 0, 0)}  # drained, still reported


def test_otel_and_statsd_gauges(store, install, otel, udp):
    obs_app.delayed_chain.trigger(1, delay=600, database=store)
    obs = install(statsd=udp.address, otel="metrics", meter_provider=otel.meter_provider, store=store,
                  gauge_cache_seconds=0)
    points = otel.points()
    assert [(dict(p.attributes), p.value) for p in points["ductline.jobs.delayed"]] == [
        ({"pipeline": "obs_delayed"}, 1)]
    assert [p.value for p in points["ductline.jobs.ready"]] == [0]
    assert [p.value for p in points["ductline.jobs.throttled"]] == [0]
    assert [(dict(p.attributes), p.value) for p in points["ductline.runs"]] == [
        ({"pipeline": "obs_delayed", "status": "pending"}, 1)]
    assert [(dict(p.attributes), p.value) for p in points["ductline.runs.triggered"]] == [
        ({"pipeline": "obs_delayed"}, 1)]
    assert obs.statsd.send_gauges() == 5
    lines = wait_for(lambda: len(udp.drain()) >= 5 and udp.lines, timeout=5)
    assert set(lines) == {"ductline.jobs.ready:0|g|#pipeline:obs_delayed",
                          "ductline.jobs.delayed:1|g|#pipeline:obs_delayed",
                          "ductline.jobs.throttled:0|g|#pipeline:obs_delayed",
                          "ductline.runs:1|g|#pipeline:obs_delayed,status:pending",
                          "ductline.runs.triggered:1|g|#pipeline:obs_delayed"}


def test_pipeline_runtime_is_read_from_the_store_when_the_event_has_none(store):
    registry = Registry()
    subscriber = MetricsSubscriber(registry, store)
    handle = obs_app.timeout_then_ok.trigger(1, database=store)
    from ductline.operations.cancel import cancel_run

    cancel_run(store, handle.id)
    subscriber(EventName.PIPELINE_CANCELLED, {"pipeline": "obs_timeout_then_ok", "run_id": handle.id})
    h = registry.histogram("ductline.pipeline.runtime", result="cancelled")
    assert h.count == 1 and 0 <= h.sum < 60


@pytest.mark.parametrize("name,value", [
    ("DUCTLINE_METRICS_PORT", "\u0668\u0660\u0668\u0660"), ("DUCTLINE_METRICS_PORT", "80_80"),
    ("DUCTLINE_METRICS_PORT", "\uff18\uff10"),
    ("DUCTLINE_METRICS_GAUGE_INTERVAL", "1_0"), ("DUCTLINE_METRICS_GAUGE_INTERVAL", "\u0661\u0660"),
    ("DUCTLINE_METRICS_GAUGE_INTERVAL", "inf"),
])
def test_install_from_env_takes_only_ascii_numbers(monkeypatch, name, value):
    for other in ("DUCTLINE_METRICS_HOST", "DUCTLINE_STATSD_ADDRESS", "DUCTLINE_OTEL",
                  "DUCTLINE_METRICS_GAUGE_INTERVAL"):
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv("DUCTLINE_METRICS_PORT", "0")
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=rf"^{name}: {value!r} is not a"):
        setup.install_from_env()
    assert setup.current() is None


@pytest.mark.parametrize("port", ["\u0668\u0661\u0662\u0665", "81_25"])
def test_a_statsd_port_takes_only_ascii_digits(port):
    with pytest.raises(ConfigurationError, match=rf"StatsD address 'host:{port}': port {port!r} is not a number"):
        parse_address(f"host:{port}")

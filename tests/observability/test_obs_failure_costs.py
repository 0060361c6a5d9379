"""Free and paid failures are counted apart: a real worker (in a thread of this
process; its children are real processes) runs a step that fails once before its
boundary and once after it, on both backends; the registry, the Prometheus endpoint
and OpenTelemetry each count one free and one paid failure."""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

import costs_app
from prometheus_client.parser import text_string_to_metric_families

from ductline.config import load_settings
from ductline.observability.metrics import failure_cost
from ductline.runtime.launch import build_worker
from ductline.store import open_store

APP = str(Path(__file__).parent.parent / "apps" / "costs_app.py")
PIPELINE, STEP = "costs_charge", "charge"


def test_failure_cost_follows_the_halt_reason_and_the_result():
    assert failure_cost({"result": "error", "reason": None}) == "free"
    assert failure_cost({"result": "crashed", "reason": "job_crashes_exhausted"}) == "free"
    assert failure_cost({"result": "error", "reason": "unsafe_to_retry"}) == "paid"
    assert failure_cost({"result": "cancelled", "reason": "unsafe_to_retry"}) == "paid"  # released past it
    assert failure_cost({"result": "success"}) is None and failure_cost({"result": "cancelled"}) is None
    assert failure_cost({"result": "timed_out", "reason": "timeout_exceeded"}) is None  # the run deadline stopped it


def test_a_failure_after_the_boundary_is_paid_and_one_before_it_free(store, db_url, install, otel):
    settings = load_settings(database_url=db_url, retry_delay=0, lease_seconds=3, poll_interval=0.2,
                             health_check_interval=0.5, shutdown_grace_seconds=5, kill_grace_seconds=1)
    worker_store = open_store(db_url)
    try:
        obs = install(metrics_port=0, otel=True, store=worker_store, meter_provider=otel.meter_provider)
        handle = costs_app.charged.trigger({"order": 1}, database=store)
        worker = build_worker(worker_store, [APP], 1, settings)
        stop = threading.Event()
        thread = threading.Thread(target=lambda: worker.run(stop_when=stop.is_set), daemon=True)
        thread.start()
        try:
            assert handle.wait(60) == "halted"
        finally:
            stop.set()
            thread.join(30)
        assert store.get_run(handle.id)["halt_reason"] == "unsafe_to_retry"

        r = obs.registry
        assert r.counter("ductline.job.failures.free", pipeline=PIPELINE, step=STEP, result="error") == 1
        assert r.counter("ductline.job.failures.paid", pipeline=PIPELINE, step=STEP, result="error") == 1

        with urllib.request.urlopen(obs.metrics_url, timeout=5) as response:
            text = response.read().decode()
        samples = {(s.name, s.labels.get("step")): s.value
                   for family in text_string_to_metric_families(text) for s in family.samples}
        assert samples[("ductline_job_failures_free_total", STEP)] == 1
        assert samples[("ductline_job_failures_paid_total", STEP)] == 1

        points = otel.points()
        assert [p.value for p in points["ductline.job.failures.free"]] == [1]
        assert [p.value for p in points["ductline.job.failures.paid"]] == [1]
    finally:
        worker_store.close()

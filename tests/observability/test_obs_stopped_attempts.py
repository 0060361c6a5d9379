"""Attempts a run's stop ended in flight -- killed at the run deadline, killed by a
cancel -- are counted as what was recorded for them (``job.completed`` with
``timed_out`` or ``cancelled``; the deadline's neither a free nor a paid failure, as on
the run page),
never as ``lease.lost``, and their spans end with that result. A real worker (in this
process, in a thread, so the test's subscribers see its events; its children are real
processes), both backends."""

from __future__ import annotations

import threading
from pathlib import Path

import rt_app
from helpers import wait_for

from ductline.config import load_settings
from ductline.runtime.launch import build_worker
from ductline.store import open_store
from ductline.views import run_view

APP = str(Path(__file__).parent.parent / "apps" / "rt_app.py")


def _stuck_running(store, run_id: str) -> bool:
    return any(s["step"] == "stuck" and s["status"] == "running" for s in run_view(store, run_id)["steps"])


def test_deadline_and_cancel_kills_are_counted_as_recorded_not_as_lost_leases(store, db_url, install, otel):
    settings = load_settings(database_url=db_url, retry_delay=0, lease_seconds=3, poll_interval=0.2,
                             health_check_interval=0.5, shutdown_grace_seconds=5, kill_grace_seconds=1)
    worker_store = open_store(db_url)
    try:
        obs = install(otel="traces", store=worker_store, tracer_provider=otel.tracer_provider)
        worker = build_worker(worker_store, [APP], 2, settings)
        stop = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                worker.run(stop_when=stop.is_set)
            except BaseException as exc:  # surfaced by the assertion below
                failure.append(exc)

        thread = threading.Thread(target=run, name="obs-worker", daemon=True)
        thread.start()
        r = obs.registry
        try:
            late = rt_app.deadline_chain.trigger(1, database=store)
            assert late.wait(60) == "failed"
            cancelled = rt_app.cancellable.trigger(1, database=store)
            wait_for(lambda: _stuck_running(store, cancelled.id))
            cancelled.cancel()
            # Both kills reported (their attempts were recorded by the stops before the kills).
            wait_for(lambda: r.counter("ductline.job.completed", step="stuck", result="cancelled") == 1
                     and r.counter("ductline.job.completed", step="stuck", result="timed_out") == 1)
        finally:
            stop.set()
            thread.join(30)
        assert not thread.is_alive() and not failure, failure
    finally:
        worker_store.close()

    assert r.counter("ductline.lease.lost") == 0
    assert r.counter("ductline.job.completed", step="stuck") == 2  # each once
    assert r.counter("ductline.job.attempts", step="stuck", result="timed_out") == 1
    # The deadline's attempt used no retry and none follows: no free (nor paid) failure, as on
    # the run page. A cancel is no failure.
    assert r.counter("ductline.job.failures.free", step="stuck", result="timed_out") == 0
    assert r.counter("ductline.job.failures.paid", step="stuck", result="timed_out") == 0
    assert r.counter("ductline.job.failures.free", step="stuck", result="cancelled") == 0
    assert r.histogram("ductline.job.runtime", step="stuck", result="timed_out").count == 1
    assert r.counter("ductline.pipeline.failed", reason="timeout_exceeded") == 1

    spans = [s for s in otel.finished_spans() if s.attributes.get("cicd.pipeline.task.name") == "stuck"]
    by_run = {s.attributes["cicd.pipeline.run.id"]: s for s in spans}
    assert len(spans) == 2 and set(by_run) == {late.id, cancelled.id}
    assert by_run[late.id].attributes["cicd.pipeline.task.run.result"] == "timeout"
    assert by_run[late.id].attributes["error.type"] == "TimeoutError"
    assert by_run[cancelled.id].attributes["cicd.pipeline.task.run.result"] == "cancellation"
    assert by_run[cancelled.id].attributes["error.type"] == "Cancelled"


def test_execute_counts_an_attempt_killed_at_the_run_deadline_the_same_way(install):
    import ductline

    r = install().registry
    result = ductline.execute(rt_app.deadline_chain, 1)
    assert result.status == "failed"
    assert r.counter("ductline.job.completed", step="stuck", result="timed_out") == 1
    assert r.counter("ductline.job.failures.free", step="stuck", result="timed_out") == 0
    assert r.counter("ductline.lease.lost") == 0

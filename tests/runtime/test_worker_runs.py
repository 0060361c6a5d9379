"""Runs executed by real worker processes with real children, on both backends.

Tests that need a worker with the defaults share one per backend (`shared_worker`):
each looks only at the runs it triggered. Tests that need other settings start
their own, on a database of their own."""

from __future__ import annotations

import json

import rt_app
from helpers import wait_for

from ductline.views import run_view


def settle(handle, timeout=60):
    return handle.wait(timeout)


def test_chain_with_async_step(shared_store, shared_worker):
    handle = rt_app.chain.trigger(4, database=shared_store)
    assert settle(handle) == "completed"
    assert handle.output() == ((4 + 1) * 2) ** 2
    view = run_view(shared_store, handle.id)
    assert [s["step"] for s in view["steps"]] == ["add_one", "double", "async_square"]
    for step in view["steps"]:
        assert step["status"] == "completed"
        assert [a["result"] for a in step["attempts"]] == ["succeeded"]


def test_class_step_and_run_context(shared_store, shared_worker):
    handle = rt_app.context_pipeline.trigger("ada", database=shared_store)
    assert settle(handle) == "completed"
    out = handle.output()
    assert out["greeted"] == "ada"
    assert out["missing"] == "default"
    assert out["prev"] == {"hello": "ada", "run_id": handle.id, "attempt": 1, "step": "Greet"}


def test_errors_share_the_retry_budget_then_succeed(shared_store, shared_worker):
    handle = rt_app.flaky_pipeline.trigger(1, database=shared_store)
    assert settle(handle) == "completed"
    assert handle.output() == {"x": 1, "attempt": 3}
    attempts = run_view(shared_store, handle.id)["steps"][0]["attempts"]
    assert [a["result"] for a in attempts] == ["errored", "errored", "succeeded"]
    assert attempts[0]["error_type"] == "RuntimeError"
    assert attempts[0]["error"] == "flaky failure on attempt 1"


def test_exhausted_retries_halt_the_run_and_call_on_halt_once(store, workers, tmp_path):
    halt_file = tmp_path / "halted.txt"
    workers(env={"RT_HALT_FILE": str(halt_file)})
    handle = rt_app.failing.trigger(1, database=store)
    assert settle(handle) == "halted"
    view = run_view(store, handle.id)
    assert view["halt_reason"] == "job_retries_exhausted"
    first = view["steps"][0]
    assert first["status"] == "failed"
    assert [a["result"] for a in first["attempts"]] == ["errored", "errored"]
    # NUL bytes in an exception message are stored visibly, never lost or refused.
    assert first["attempts"][0]["error"] == "bad \\x00 input"
    assert "never_runs" not in [s["step"] for s in view["steps"]]
    wait_for(halt_file.exists)
    assert "job_retries_exhausted" in halt_file.read_text()


def test_timed_out_child_is_killed_and_the_run_halts_after_max_retry(shared_store, shared_worker):
    handle = rt_app.timeout_pipeline.trigger(30, database=shared_store)
    assert settle(handle, timeout=30) == "halted"
    view = run_view(shared_store, handle.id)
    assert view["halt_reason"] == "job_retries_exhausted"
    attempts = view["steps"][0]["attempts"]
    assert [a["result"] for a in attempts] == ["timed_out", "timed_out"]
    assert attempts[0]["error_type"] == "TimeoutError"
    assert "step timeout of 1 s" in attempts[0]["error"]


def test_a_child_that_crashes_every_time_halts_under_the_crash_budget(shared_store, shared_worker):
    handle = rt_app.crash_pipeline.trigger(1, database=shared_store)
    assert settle(handle, timeout=30) == "halted"
    view = run_view(shared_store, handle.id)
    assert view["halt_reason"] == "job_crashes_exhausted"
    assert [a["result"] for a in view["steps"][0]["attempts"]] == ["crashed", "crashed"]


def test_expand_collapse_keeps_element_order(store, workers):
    workers(concurrency=3)
    handle = rt_app.fan.trigger(25, database=store)
    assert settle(handle) == "completed"
    assert handle.output() == [x * x for x in range(25)]


def test_collapse_fires_once_for_zero_elements(shared_store, shared_worker):
    handle = rt_app.fan.trigger(0, database=shared_store)
    assert settle(handle) == "completed"
    assert handle.output() == []


def test_divide_combine_in_to_order_with_an_extended_branch(shared_store, shared_worker):
    handle = rt_app.divided.trigger(1, database=shared_store)
    assert settle(handle) == "completed"
    assert handle.output() == ["b2!", "a2"]


def test_divert_routes_on_str_of_output(shared_store, shared_worker):
    assert settle(h := rt_app.diverted.trigger(50, database=shared_store)) == "completed"
    assert h.output() == "took big"
    assert settle(h := rt_app.diverted.trigger(1, database=shared_store)) == "completed"
    assert h.output() == "took small"


def test_output_that_does_not_round_trip_is_an_error_not_a_string(shared_store, shared_worker):
    handle = rt_app.bad_output.trigger(1, database=shared_store)
    assert settle(handle) == "halted"
    view = run_view(shared_store, handle.id)
    assert view["halt_reason"] == "non_retryable_error"  # the same output would fail again: not retried
    [attempt] = view["steps"][0]["attempts"]
    assert attempt["error_type"] == "ductline.PayloadNotSerializable"
    assert "output of step 'returns_set'" in attempt["error"]


def test_failure_after_cross_boundary_halts_unsafe_to_retry(shared_store, shared_worker):
    handle = rt_app.unsafe.trigger(1, database=shared_store)
    assert settle(handle) == "halted"
    view = run_view(shared_store, handle.id)
    assert view["halt_reason"] == "unsafe_to_retry"
    step = view["steps"][0]
    assert step["boundary"] == "charged the card"
    assert len(step["attempts"]) == 1


def test_retry_revives_a_halted_run_with_a_fresh_budget(store, workers, tmp_path):
    workers(env={"RT_HALT_FILE": str(tmp_path / "h")})
    handle = rt_app.failing.trigger(1, database=store)
    assert settle(handle) == "halted"
    assert store.revive_run(handle.id)
    assert settle(handle) == "halted"
    attempts = run_view(store, handle.id)["steps"][0]["attempts"]
    assert [a["attempt"] for a in attempts] == [1, 2, 3, 4]
    assert not store.revive_run("0" * 32)


def test_show_json_shape(shared_store, shared_worker):
    handle = rt_app.chain.trigger(1, database=shared_store)
    settle(handle)
    view = json.loads(json.dumps(run_view(shared_store, handle.id)))
    assert {"run_id", "pipeline", "status", "halt_reason", "metadata", "steps"} <= set(view)
    step = view["steps"][0]
    assert {"step", "index", "status", "not_before", "attempts"} <= set(step)
    attempt = step["attempts"][0]
    assert {"attempt", "result", "started_at", "finished_at", "error_type", "error"} <= set(attempt)
    assert attempt["started_at"].endswith("Z") and len(attempt["started_at"]) == len("2026-01-01T00:00:00.000Z")

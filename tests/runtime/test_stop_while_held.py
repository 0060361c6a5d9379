"""A run stopped while a worker holds one of its delayed jobs for its not-before time
(claimed before it, `ductline.runtime.horizon`, `ductline.runtime.ahead`): the job
has not begun, so the stop treats it as waiting (`ductline.model.stops.begun_by`) --
its step is never called and is recorded ``skipped`` with the stop's reason and no
attempt, and its worker reports neither a completed attempt nor a lost lease. Real
workers and children, both backends; the horizon is widened from 50 ms to seconds
here, so that the job is found held at the stop however slow the machine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import inprocess_worker_fixture, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apps"))
import early_app  # noqa: E402

from ductline.observability.events import EventName, subscribe  # noqa: E402
from ductline.runtime import ahead, horizon  # noqa: E402
from ductline.views import run_view  # noqa: E402

APP = str(Path(__file__).resolve().parents[1] / "apps" / "early_app.py")

inprocess_worker = inprocess_worker_fixture(APP, concurrency=1)


@pytest.fixture
def marks(tmp_path, monkeypatch):
    path = tmp_path / "marks.txt"
    monkeypatch.setenv("EARLY_MARKS", str(path))
    return lambda: path.read_text(encoding="utf-8").split() if path.exists() else []


@pytest.fixture
def events():
    seen: list[tuple[EventName, dict]] = []
    unsubscribe = subscribe(lambda name, attributes: seen.append((name, attributes)))
    yield seen
    unsubscribe()


def step(store, handle, name: str) -> dict:
    """The step run ``name`` as `ductline show` shows it (``{}`` before it exists)."""
    found = [s for s in run_view(store, handle.id)["steps"] if s["step"] == name]
    return found[0] if found else {}


def wait_until_held(store, handle) -> None:
    """Until the run's one job is claimed and held, 200 ms or more before its time."""

    def held() -> bool:
        [job] = store.run_jobs(handle.id)
        return job["status"] == "running" and store.now_ms() < job["not_before_ms"] - 200

    wait_for(held, timeout=30)


def assert_skipped_unstarted(store, handle, reason: str, events, marks, arg: str) -> None:
    """The held step ``called_at`` was skipped with ``reason``, no attempt, never called,
    and no event was emitted for it."""
    called = step(store, handle, "called_at")
    assert (called["status"], called["skip_reason"], called["attempts"]) == ("skipped", reason, []), called
    [job] = [j for j in store.run_jobs(handle.id) if j["step"] == "called_at"]
    assert job["attempts"] == 0
    assert arg not in marks()
    about = [name for name, attributes in events if attributes.get("step") == "called_at"]
    assert EventName.LEASE_LOST not in about and EventName.JOB_COMPLETED not in about, about


def test_a_deadline_inside_the_hold_skips_the_held_step(store, inprocess_worker, marks, events, monkeypatch):
    # The horizon is widened from 50 ms to 4 s, so that the step is found held at the
    # deadline however slow the machine: claimed 1 s after the first step completed,
    # held until 5 s after; the deadline falls 2 s into that hold.
    monkeypatch.setattr(horizon, "HORIZON_SECONDS", 4.0)
    inprocess_worker()
    handle = early_app.deadline_in_hold.trigger("held-deadline", database=store)
    wait_for(lambda: step(store, handle, "called_at").get("status") == "running", timeout=30)
    assert handle.wait(60) == "failed"
    assert run_view(store, handle.id)["metadata"]["timeout_exceeded"] is True
    assert step(store, handle, "handed_on")["status"] == "completed"
    # Past the step's time too: it is not started late either.
    [job] = [j for j in store.run_jobs(handle.id) if j["step"] == "called_at"]
    wait_for(lambda: store.now_ms() > job["not_before_ms"] + 500, timeout=30)
    assert_skipped_unstarted(store, handle, "workflow timeout", events, marks, "held-deadline")


def test_a_cancel_inside_the_hold_skips_the_held_step(store, inprocess_worker, marks, events, monkeypatch):
    monkeypatch.setattr(horizon, "HORIZON_SECONDS", 2.0)
    inprocess_worker()
    handle = early_app.early.trigger("held-cancel", database=store, delay=3)
    wait_until_held(store, handle)
    [attempt] = store.run_attempts(handle.id)
    [job] = store.run_jobs(handle.id)
    # Held, its open attempt shows its start no earlier than the step's time.
    assert attempt["result"] is None and attempt["started_ms"] == job["not_before_ms"]
    handle.cancel()
    assert handle.wait(30) == "cancelled"
    wait_for(lambda: store.now_ms() > job["not_before_ms"] + 500, timeout=30)
    assert_skipped_unstarted(store, handle, "cancelled", events, marks, "held-cancel")


def test_a_cancel_still_committing_at_the_held_jobs_time_keeps_it_from_starting(
        store, db_url, inprocess_worker, marks, events, monkeypatch):
    """The stop took its instant before the job's time but commits after it: a worker
    notified of cancels (PostgreSQL) still confirms the held job's lease before starting
    it, and that renewal waits for the stop's commit and finds the lease gone."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer: a worker's renewal cannot run while the stop is open")
    from ductline.engine import stop

    monkeypatch.setattr(horizon, "HORIZON_SECONDS", 2.0)
    # A lease confirmed within this long needs no renewal to start (0.5 s by default):
    # held for 2 s, the job would otherwise be confirmed for being stale alone.
    monkeypatch.setattr(ahead, "FRESH_SECONDS", 10.0)
    inprocess_worker()
    handle = early_app.plain.trigger("held-committing", database=store, delay=3)
    wait_until_held(store, handle)
    [job] = store.run_jobs(handle.id)
    with store.transaction() as tx:
        stop.cancel(tx, early_app.plain.definition(), handle.id)
        # Held open past the job's time, as a slow stop's transaction would be.
        wait_for(lambda: store.now_ms() > job["not_before_ms"] + 300, timeout=30)
    assert handle.wait(30) == "cancelled"
    wait_for(lambda: store.now_ms() > job["not_before_ms"] + 800, timeout=30)
    assert_skipped_unstarted(store, handle, "cancelled", events, marks, "held-committing")


def test_a_deadline_stop_that_runs_late_skips_a_held_job_due_after_the_deadline(store, db_url):
    """A job due after its run's deadline is never started by a worker, so a deadline
    stop judges at the deadline, not at its own (late) now: the held job is skipped
    with no attempt, not recorded as a timed-out attempt in flight."""
    from ductline.engine import stop

    handle = early_app.short_deadline.trigger("late-stop", database=store, delay=2)
    [job] = store.run_jobs(handle.id)
    wait_for(lambda: store.now_ms() > job["not_before_ms"] - 1500, timeout=30)
    with store.transaction() as tx:  # a worker claims it before its time, as it would hold it
        [claimed] = tx.claim("late-stop-worker", [early_app.short_deadline.name], 1, 60_000, horizon_ms=1800)
    deadline_ms = store.get_run(handle.id)["deadline_ms"]
    assert deadline_ms < claimed.not_before_ms
    # The stop runs only after the job's time (a slow maintenance thread, a busy database).
    wait_for(lambda: store.now_ms() > claimed.not_before_ms + 100, timeout=30)
    with store.transaction() as tx:
        assert stop.expire(tx, early_app.short_deadline.definition(), handle.id)
    assert handle.status() == "failed"
    called = step(store, handle, "called_at")
    assert (called["status"], called["skip_reason"], called["attempts"]) == ("skipped", "workflow timeout", []), called
    assert store.run_attempts(handle.id) == []

"""Delayed jobs claimed shortly before their time (`ductline.runtime.horizon`,
`HORIZON_SECONDS`) and held in the worker's queue ahead until it comes
(`ductline.runtime.ahead`). A held job keeps the contract of a queued one: its step
is never called before its not-before time, its clocks start when it starts, a
cancel drops it, a stopping worker gives it back, a killed worker's held job runs
elsewhere once its lease expires; and a job due beyond the horizon is left to any
worker. Real workers and children, both backends; the horizon is widened to seconds
here, so that a held job is found held however slow the machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import helpers
import pytest
from helpers import inprocess_worker_fixture, start_worker, stop_worker, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apps"))
import early_app  # noqa: E402

from ductline.model.outcomes import RELEASED_TYPE  # noqa: E402
from ductline.runtime import ahead as ahead_queue, heartbeat, horizon  # noqa: E402
from ductline.runtime.ahead import Ahead  # noqa: E402
from ductline.store.records import ClaimedJob  # noqa: E402

APP = str(Path(__file__).resolve().parents[1] / "apps" / "early_app.py")
HORIZON = 2.0  # seconds: the job is claimed this long before its time
DELAY = 3      # seconds: each run's first step is due this long after its trigger

inprocess_worker = inprocess_worker_fixture(APP, concurrency=1)


@pytest.fixture
def marks(tmp_path, monkeypatch):
    path = tmp_path / "marks.txt"
    monkeypatch.setenv("EARLY_MARKS", str(path))
    monkeypatch.setattr(horizon, "HORIZON_SECONDS", HORIZON)
    return lambda: path.read_text(encoding="utf-8").split() if path.exists() else []


def first_job(store, handle):
    return store.run_jobs(handle.id)[0]


def held(store, handle):
    """Wait until the run's first job is claimed, before its time; returns its
    not-before time (ms) and the attempt as the claim wrote it."""
    wait_for(lambda: first_job(store, handle)["status"] == "running", timeout=30)
    [attempt] = store.run_attempts(handle.id)
    not_before_ms = first_job(store, handle)["not_before_ms"]
    assert store.now_ms() < not_before_ms  # claimed before its time
    # Held, its attempt shows no start before the step's time (it starts then at the earliest).
    assert attempt["started_ms"] == not_before_ms
    return not_before_ms, attempt


def test_a_job_claimed_before_its_time_starts_at_it_with_its_clocks(store, inprocess_worker, marks):
    inprocess_worker()
    handle = early_app.early.trigger("a", database=store, delay=DELAY)
    not_before_ms, _ = held(store, handle)
    assert handle.wait(60) == "completed"
    assert handle.output() * 1000 >= not_before_ms  # called at its time, not before
    [attempt] = store.run_attempts(handle.id)
    # Its attempt began when its step did; its timeout (30 s) and its run's deadline
    # (60 s, the first step's start is the run's) count from there, not from the claim.
    assert attempt["started_ms"] >= not_before_ms
    assert attempt["deadline_ms"] == attempt["started_ms"] + 30_000
    run = store.get_run(handle.id)
    assert run is not None and run["deadline_ms"] >= not_before_ms + 60_000
    assert marks() == ["a"]


def test_a_held_job_of_a_cancelled_run_never_starts(store, inprocess_worker, marks):
    inprocess_worker()
    handle = early_app.early.trigger("cancelled", database=store, delay=DELAY)
    not_before_ms, _ = held(store, handle)
    handle.cancel()
    assert handle.wait(30) == "cancelled"
    # Past its time: the worker renewed its lease first (held that long, it is not
    # started unconfirmed), found it lost and dropped it.
    wait_for(lambda: store.now_ms() > not_before_ms + 1000, timeout=30)
    assert "cancelled" not in marks()


def test_a_stopping_worker_gives_its_held_jobs_back(store, inprocess_worker, marks):
    worker = inprocess_worker()
    handle = early_app.early.trigger("back", database=store, delay=DELAY)
    not_before_ms, _ = held(store, handle)
    worker.request_stop()
    wait_for(lambda: first_job(store, handle)["status"] == "pending", timeout=30)
    attempts = store.run_attempts(handle.id)
    assert [(a["result"], a["error_type"]) for a in attempts] == [("cancelled", RELEASED_TYPE)]
    # Given back before its time, it never began: it ended at its start, not before it.
    assert attempts[0]["started_ms"] == attempts[0]["finished_ms"] < not_before_ms
    assert "back" not in marks()
    # Given back before its time, it is still due at its time, not at once: the next
    # worker must not start it early.
    assert first_job(store, handle)["not_before_ms"] == not_before_ms


def test_a_held_job_of_a_run_cancelled_just_before_its_time_never_starts(store, inprocess_worker, marks,
                                                                         monkeypatch):
    # The real horizon (50 ms) is far shorter than the time a queued job starts
    # unconfirmed (ahead.FRESH_SECONDS) and than the reads of lost leases on a
    # database that cannot notify (a poll): a cancel inside it meets neither. The
    # widened horizon keeps those ratios here.
    monkeypatch.setattr(ahead_queue, "FRESH_SECONDS", 60.0)
    monkeypatch.setattr(heartbeat.Heartbeat, "_lost_since_renewal", lambda self: False)
    inprocess_worker(lease_seconds=600)  # renewed every 200 s: not before the job's time
    handle = early_app.early.trigger("late-cancel", database=store, delay=DELAY)
    not_before_ms, _ = held(store, handle)
    handle.cancel()
    assert handle.wait(30) == "cancelled"
    wait_for(lambda: store.now_ms() > not_before_ms + 1000, timeout=30)
    assert "late-cancel" not in marks()


def test_a_job_due_beyond_the_horizon_is_left_to_any_worker(store, inprocess_worker, marks):
    inprocess_worker()
    later = early_app.early.trigger("later", database=store, delay=120)
    soon = early_app.early.trigger("soon", database=store, delay=DELAY)
    held(store, soon)
    assert first_job(store, later)["status"] == "pending" and store.run_attempts(later.id) == []
    # Another worker takes it, before its time too when it comes within its horizon.
    with store.transaction() as tx:
        taken = tx.claim("another-worker", ["early_called"], 10, 30_000, horizon_ms=300_000)
    assert [j.run_id for j in taken] == [later.id]
    assert soon.wait(60) == "completed"


def test_a_worker_claims_before_their_time_no_more_jobs_than_it_can_start_then(store, inprocess_worker, marks):
    # A fresh worker has seen no attempt, so it queues nothing ahead of its free slot
    # (`Ahead.room`); jobs it held beyond that would wait for the slot after their
    # time while an idle worker could run them.
    inprocess_worker()
    handles = [early_app.early.trigger(f"burst-{i}", database=store, delay=DELAY) for i in range(3)]
    not_before_ms = min(first_job(store, h)["not_before_ms"] for h in handles)
    wait_for(lambda: any(first_job(store, h)["status"] == "running" for h in handles), timeout=30)
    wait_for(lambda: store.now_ms() >= not_before_ms - 200, timeout=30)
    assert sum(first_job(store, h)["status"] == "running" for h in handles) == 1
    for h in handles:
        assert h.wait(60) == "completed"


def start_wide_worker(db_url: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`helpers.start_worker` with the horizon widened in the worker parent (which
    never imports the app: user code runs in its children only)."""
    code = (f"from ductline.runtime import horizon; horizon.HORIZON_SECONDS = {HORIZON}; "
            "import runpy, sys; sys.argv[0] = 'ductline'; runpy.run_module('ductline', run_name='__main__')")
    proc = subprocess.Popen([sys.executable, "-c", code, "worker", "--app", APP, "--database", db_url,
                             "--concurrency", "1"], env={**os.environ, **helpers.FAST_ENV, **env})
    helpers.STARTED.append(proc)
    return proc


def test_a_killed_worker_s_held_job_runs_elsewhere_once_its_lease_expires(store, db_url, tmp_path):
    path = tmp_path / "marks.txt"
    worker = start_wide_worker(db_url, {"EARLY_MARKS": str(path)})
    try:
        wait_for(lambda: store.list_workers(), timeout=30)  # up, so that it claims before the time
        handle = early_app.early.trigger("orphan", database=store, delay=DELAY)
        held(store, handle)
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    finally:
        stop_worker(worker, signal.SIGKILL)
    second = start_worker(db_url, concurrency=1, app=APP, env={"EARLY_MARKS": str(path)})
    try:
        assert handle.wait(60) == "completed"
    finally:
        stop_worker(second)
    assert path.read_text(encoding="utf-8").split() == ["orphan"]  # once, on the second worker
    job = first_job(store, handle)
    assert job["attempts"] == 2 and job["crashes"] == 1, job  # the held attempt counts as crashed


def _job(name: str, not_before_ms: int = 0) -> ClaimedJob:
    return ClaimedJob(job_id=name, run_id=name, pipeline="p", step="s", scope="", input="[]", attempt=1,
                      lease_token=name, timeout_seconds=None, boundary=None, not_before_ms=not_before_ms,
                      started_ms=0, deadline_ms=None, run_deadline_ms=None)


def test_held_jobs_enter_the_queue_at_their_times_and_are_renewed_and_given_back():
    def passed(db_ms: int) -> float:  # the database clock surely reached db_ms (seconds)
        return db_ms / 1000 + 0.001

    ahead = Ahead()
    ahead.add_early([_job("late", 11_200), _job("soon", 11_000)], confirmed=10.9)
    assert len(ahead) == 0 and ahead.early() == 2 and ahead.next_start(passed) == 11.001
    ahead.promote(11.0, passed)
    assert ahead.take(11.0) is None  # not before its time has surely passed
    ahead.promote(11.001, passed)
    started = ahead.take(11.001)
    assert started is not None and started.job_id == "soon" and ahead.take(11.001) is None
    assert sorted(ahead.tokens()) == ["late"]  # held, its lease is renewed
    assert [j.job_id for j in ahead.renewed(set(), at=11.1)] == ["late"]  # lost: dropped
    assert ahead.early() == 0 and ahead.next_start(passed) is None
    ahead.add_early([_job("back", 20_000)], confirmed=19.9)
    assert ahead.due_at() is not None
    assert [j.job_id for j in ahead.drain()] == ["back"] and ahead.early() == 0


def test_held_jobs_whose_time_came_start_only_once_their_leases_are_confirmed():
    """`Ahead.promote` names the held jobs it queued, unconfirmed; `Ahead.confirmed`
    lets those whose lease is still held start and drops the others, leaving the
    rest of the queue as it was."""
    def passed(db_ms: int) -> float:
        return db_ms / 1000

    ahead = Ahead()
    ahead.add([_job("queued")], confirmed=10.95)
    ahead.add_early([_job("kept", 11_000), _job("lost", 11_000), _job("later", 12_000)], confirmed=10.9)
    promoted = ahead.promote(11.0, passed, confirm=True)
    assert sorted(j.job_id for j in promoted) == ["kept", "lost"] and ahead.early() == 1
    assert ahead.take(11.0) is not None  # the queued job's lease was confirmed lately
    assert ahead.take(11.0) is None  # the promoted ones wait for their confirmation
    lost = ahead.confirmed({"kept", "lost"}, {"kept"}, at=11.002)
    assert [j.job_id for j in lost] == ["lost"]
    started = ahead.take(11.003)
    assert started is not None and started.job_id == "kept" and len(ahead) == 0
    assert ahead.promote(11.5, passed, confirm=True) == []


def test_the_next_delayed_job_is_claimed_before_its_time_even_when_due_just_past_the_last_window():
    lead = 0.05
    # Nothing looked within the horizon: claim 50 ms before its time, or now if that is past.
    assert horizon.early_claim_time(20.0, now=10.0, looked_until=None, horizon=lead) == 19.95
    assert horizon.early_claim_time(10.0, now=9.99, looked_until=None, horizon=lead) == 9.99
    # A claim sent at 9.93 looked up to 9.98 and ran dry at 9.99 (it took 60 ms): the
    # job due at 10.0 was beyond its window, so it is claimed at once -- not at its
    # time, which made it late by a whole claim.
    assert horizon.early_claim_time(10.0, now=9.99, looked_until=9.98, horizon=lead) == 9.99
    # Inside the window it looked at, the claim left it on purpose: at its time.
    assert horizon.early_claim_time(10.0, now=9.99, looked_until=10.01, horizon=lead) is None
    assert horizon.early_claim_time(10.0, now=9.0, looked_until=None, horizon=0.0) is None


def test_jobs_claimed_before_their_time_have_the_database_clock_read_again(store, inprocess_worker, marks,
                                                                           monkeypatch):
    """A held job waits past its time by the clock's error bound, and a claim's
    measurement is as loose as half its transaction: the clock is read on its own
    right after such a claim (here whatever the bound, so the read is seen)."""
    monkeypatch.setattr(horizon, "CLOCK_PROBE_ABOVE_MS", -1.0)
    worker = inprocess_worker()
    reads = []
    original = worker.store.now_ms

    def now_ms() -> int:
        reads.append(1)
        return original()

    monkeypatch.setattr(worker.store, "now_ms", now_ms)
    handle = early_app.early.trigger("probed", database=store, delay=DELAY)
    held(store, handle)
    wait_for(lambda: reads, timeout=30)
    assert handle.wait(60) == "completed"


def test_short_attempts_let_a_worker_hold_the_jobs_its_slots_start_within_the_horizon():
    # Jobs due one after another (a burst of delayed runs) and attempts of 2 ms: 2 slots
    # start 50 of them within a 50 ms horizon, however little the claim wanted.
    ahead = Ahead()
    assert ahead.started_within(2, 0.05) == 0  # no attempt seen yet
    ahead.observe(0.002)
    assert ahead.started_within(2, 0.05) == 50
    assert horizon.early_room(2, held=10, usable_slots=2, in_time=50) == 40
    assert horizon.early_room(2, held=0, usable_slots=2, in_time=500) == horizon.EARLY_PER_SLOT * 2
    # Long attempts: only what the claim wanted (the free slots), less what is held.
    ahead.observe(5.0)
    assert ahead.started_within(2, 0.05) == 0
    assert horizon.early_room(2, held=1, usable_slots=2, in_time=0) == 1

"""Step timeouts that really kill (DESIGN.md "Step timeouts"), with real children
and real signals, on both backends.

The tests that need a worker with the defaults share one per backend
(`shared_worker`), and look only at the runs they trigger; those that need other
settings, or kill their worker, start their own."""

from __future__ import annotations

import os
import time
from pathlib import Path

import kill_app
import pytest
from helpers import process_running, shared_worker_fixture, start_worker, stop_worker, stop_workers, wait_for

from ductline.views import run_view

KILL_APP = str(Path(__file__).parent.parent / "apps" / "kill_app.py")

shared_worker = shared_worker_fixture(KILL_APP)


@pytest.fixture
def kill_worker(db_url, store):
    started = []

    def start(**env):
        proc = start_worker(db_url, app=KILL_APP, env=env)
        started.append(proc)
        return proc

    yield start
    stop_workers(started)


def timed_out_then_halted(store, handle, timeout=30):
    assert handle.wait(timeout) == "halted"
    view = run_view(store, handle.id)
    assert view["halt_reason"] == "job_retries_exhausted"
    first = view["steps"][0]
    [attempt] = first["attempts"]
    assert attempt["result"] == "timed_out"
    assert "step timeout of 1 s" in attempt["error"]
    return view, attempt


def duration_ms(store, handle):
    [attempt] = [a for a in store.run_attempts(handle.id)]
    return attempt["finished_ms"] - attempt["started_ms"], attempt


@pytest.mark.parametrize("pipeline", ["c_block", "spinning"])
def test_a_stuck_child_is_killed_at_its_deadline(shared_store, shared_worker, pipeline):
    handle = getattr(kill_app, pipeline).trigger(1, database=shared_store)
    timed_out_then_halted(shared_store, handle)
    elapsed, attempt = duration_ms(shared_store, handle)
    assert elapsed >= 1000  # never early
    assert elapsed < 1000 + 2000  # SIGTERM works: no grace, no 5 s poll (generous: busy CI machines)


def test_a_child_blocked_in_a_syscall_is_killed(shared_store, shared_worker, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    handle = kill_app.syscall_block.trigger(str(fifo), database=shared_store)
    timed_out_then_halted(shared_store, handle)


def test_a_child_ignoring_sigterm_gets_sigkill_after_the_grace(store, kill_worker):
    kill_worker(DUCTLINE_KILL_GRACE_SECONDS="1")
    handle = kill_app.sigterm_ignored.trigger(1, database=store)
    assert handle.wait(90) == "halted"
    elapsed, attempt = duration_ms(store, handle)
    assert attempt["result"] == "timed_out"
    assert elapsed >= 4000  # 3 s timeout + 1 s grace: SIGTERM alone did not stop it


def test_a_sigkilled_worker_leaves_no_process_of_its_attempt_in_the_child_s_group(store, kill_worker, tmp_path):
    """The child dies with its worker (PR_SET_PDEATHSIG); its guardian then kills the
    child's process group, so nothing the attempt started there overlaps the job's
    next attempt elsewhere."""
    pidfile = tmp_path / "pids"
    worker = kill_worker()
    kill_app.grandchildren.trigger(str(pidfile), database=store)
    wait_for(pidfile.exists)
    pids = [int(p) for p in pidfile.read_text().split()]
    worker.kill()
    worker.wait()
    in_group, own_session = pids[:2], pids[2:]
    try:
        wait_for(lambda: not any(process_running(p) for p in in_group), timeout=30)
    finally:  # out of reach once the worker is gone (docs/concepts/delivery.md): ended here
        for pid in own_session:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


def test_no_grandchild_survives(shared_store, shared_worker, tmp_path):
    pidfile = tmp_path / "pids"
    handle = kill_app.grandchildren.trigger(str(pidfile), database=shared_store)
    assert handle.wait(90) == "halted"
    [attempt] = run_view(shared_store, handle.id)["steps"][0]["attempts"]
    assert attempt["result"] == "timed_out"
    pids = [int(p) for p in pidfile.read_text().split()]
    wait_for(lambda: not any(process_running(p) for p in pids), timeout=10)


def test_a_killed_child_holding_a_transaction_leaves_no_lock(shared_store, shared_worker, shared_backend_url):
    handle = kill_app.transaction_held.trigger(shared_backend_url, database=shared_store)
    timed_out_then_halted(shared_store, handle)
    # the engine writes again: a new run completes end to end
    follow = kill_app.follow_up.trigger(1, database=shared_store)
    assert follow.wait(90) == "completed"


def test_a_step_longer_than_the_lease_keeps_it(store, kill_worker):
    kill_worker(DUCTLINE_LEASE_SECONDS="2", DUCTLINE_HEALTH_CHECK_INTERVAL="0.3")
    kill_worker(DUCTLINE_LEASE_SECONDS="2", DUCTLINE_HEALTH_CHECK_INTERVAL="0.3")  # a rescuer
    handle = kill_app.outlives_lease.trigger(1, database=store)
    assert handle.wait(90) == "completed"
    [step] = run_view(store, handle.id)["steps"]
    assert [a["result"] for a in step["attempts"]] == ["succeeded"]


def test_retries_are_spaced_by_retry_delay_on_the_database_clock(shared_store, shared_worker):
    handle = kill_app.retry_spacing.trigger(1, database=shared_store)
    assert handle.wait(90) == "halted"
    attempts = sorted(shared_store.run_attempts(handle.id), key=lambda a: a["attempt"])
    assert [a["result"] for a in attempts] == ["errored"] * 3
    for before, after in zip(attempts, attempts[1:]):
        assert after["started_ms"] - before["finished_ms"] >= 1000


def test_the_worker_wall_clock_does_not_matter(store, db_url, tmp_path):
    """A worker whose wall clock is 10 minutes off, and whose monotonic clock
    starts an hour ahead, times out exactly like a correct one: deadlines come from
    the database clock and are converted with a measured offset."""
    shim = tmp_path / "sitecustomize.py"
    shim.write_text(
        "import time\n"
        "_t, _m = time.time, time.monotonic\n"
        "time.time = lambda: _t() - 600\n"
        "time.monotonic = lambda: _m() + 3600\n"
    )
    proc = start_worker(db_url, app=KILL_APP, env={"PYTHONPATH": f"{tmp_path}{os.pathsep}"
                                                   + os.environ.get("PYTHONPATH", "")})
    try:
        handle = kill_app.c_block.trigger(1, database=store)
        timed_out_then_halted(store, handle)
        elapsed, _ = duration_ms(store, handle)
        assert 1000 <= elapsed < 3000
    finally:
        stop_worker(proc)

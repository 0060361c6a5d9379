"""Thread isolation, undead threads and processes, scaled timeouts."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import kill_app
import pytest
from helpers import inprocess_worker_fixture, wait_for

from ductline.dsl.timeouts import ScaledTimeout
from ductline.observability.events import EventName, subscribe
from ductline.views import run_view

KILL_APP = str(Path(__file__).parent.parent / "apps" / "kill_app.py")


# A real worker loop (real children) running in a thread of the test process.
inprocess_worker = inprocess_worker_fixture(KILL_APP, concurrency=2)


@pytest.fixture
def events():
    seen = []
    unsubscribe = subscribe(lambda name, attrs: seen.append((name, attrs)))
    yield seen
    unsubscribe()


def test_thread_isolation_runs_in_the_worker_process(store, inprocess_worker):
    inprocess_worker()
    handle = kill_app.threaded.trigger(3, database=store)
    assert handle.wait(90) == "completed"
    assert handle.output() == {"in_worker_process": True, "x": 3}


def test_a_thread_that_unwinds_is_timed_out_and_its_slot_reused(store, inprocess_worker):
    # The thread unwinds within bytecodes of the raised timeout, but a loaded machine
    # may take longer than the default 1 s window: give it 60 s, so what is tested is
    # that an unwound thread frees its slot, not how fast this machine is.
    worker = inprocess_worker(concurrency=1, undead_after_seconds=60)
    handle = kill_app.thread_unwinds.trigger(1, database=store)
    assert handle.wait(90) == "halted"
    [attempt] = run_view(store, handle.id)["steps"][0]["attempts"]
    assert attempt["result"] == "timed_out"
    assert worker.undead_count() == 0
    assert kill_app.threaded.trigger(1, database=store).wait(90) == "completed"


@pytest.fixture
def untraced():
    """Coverage's line tracing paused for the test. An undead thread sits in C with
    the timeout exception pending; a traced interpreter then runs its other threads
    (the worker loop, the enforcer) so slowly that leases expire, so a test that makes
    undead threads cannot run traced. Resumed once those threads have ended."""
    from coverage import Coverage

    measuring = Coverage.current()
    if measuring is None:
        yield
        return
    measuring.stop()
    try:
        yield
    finally:
        for thread in threading.enumerate():  # the undead steps end by themselves
            if thread.name.startswith("ductline-step-"):
                thread.join(60)
        measuring.start()


def test_an_undead_thread_is_abandoned_counted_and_fenced(untraced, store, inprocess_worker, events):
    worker = inprocess_worker(concurrency=2)
    handle = kill_app.thread_undead.trigger(1, database=store)
    assert handle.wait(90) == "halted"
    view = run_view(store, handle.id)
    assert [a["result"] for a in view["steps"][0]["attempts"]] == ["timed_out", "timed_out"]
    undead = [a for name, a in events if name is EventName.THREAD_UNDEAD]
    assert len(undead) == 2
    assert worker.undead_count() == 2
    # the other slots are gone; with max_undead=2 the worker still serves... nothing: no slot left
    assert worker.status() == "running"


def test_more_undead_slots_than_the_cap_stop_claiming(untraced, store, inprocess_worker):
    worker = inprocess_worker(concurrency=3, max_undead=0)
    handle = kill_app.thread_undead.trigger(1, database=store)
    wait_for(lambda: worker.undead_count() == 1, timeout=20)
    assert worker.status() == "unhealthy"
    other = kill_app.threaded.trigger(1, database=store)
    with pytest.raises(TimeoutError):
        other.wait(1.5)
    assert handle.status() in ("running", "pending")


class StandInChild:
    """A child that survives SIGKILL (a process in kernel D state)."""

    eof = False
    ready = True

    def __init__(self, real):
        self.real, self.pid, self.conn, self.reader = real, real.pid, real.conn, real.reader
        self.horizon, self.used = real.horizon, real.used
        self.sentinel = os.eventfd(0) if hasattr(os, "eventfd") else os.pipe()[0]
        self.signals = []

    def send(self, message):
        self.real.send(message)

    def signal_group(self, sig):
        self.signals.append(sig)  # nothing happens: the process cannot be killed

    def reap(self):
        return None

    def stop(self):
        self.real.stop()


def test_a_process_that_survives_sigkill_is_abandoned(store, inprocess_worker, events):
    worker = inprocess_worker(concurrency=1, kill_grace_seconds=0.2)
    stand_in = StandInChild(worker.slots[0].child)
    worker.slots[0].child = stand_in
    handle = kill_app.c_block.trigger(1, database=store)
    wait_for(lambda: worker.undead_count() == 1, timeout=20)
    assert [s.name for s in map(__import__("signal").Signals, stand_in.signals)] == ["SIGTERM", "SIGKILL"]
    assert any(name is EventName.PROCESS_UNDEAD for name, _ in events)
    wait_for(lambda: run_view(store, handle.id)["steps"][0]["attempts"][0]["result"] == "timed_out")
    os.killpg(stand_in.pid, 9)  # clean up the real child behind the stand-in
    stand_in.real.join(timeout=5)
    os.close(stand_in.sentinel)


def test_scaled_timeout_gives_a_big_input_more_time(store, inprocess_worker):
    inprocess_worker()
    big = kill_app.scaled.trigger(6, database=store)     # 6 s: the 3 s step fits
    small = kill_app.scaled.trigger(1, database=store)   # floor 2 s: killed
    assert big.wait(90) == "completed"
    assert small.wait(90) == "halted"
    attempt = run_view(store, small.id)["steps"][0]["attempts"][0]
    assert attempt["result"] == "timed_out" and "step timeout of 2 s" in attempt["error"]
    big_attempt = store.run_attempts(big.id)[0]
    assert big_attempt["deadline_ms"] == big_attempt["started_ms"] + 6000


def test_scaled_timeout_validation():
    with pytest.raises(ValueError):
        ScaledTimeout(floor=10, cap=5, size=kill_app.payload_size)
    with pytest.raises(TypeError):
        ScaledTimeout(floor=1.5, cap=5, size=kill_app.payload_size)
    with pytest.raises(ValueError):
        ScaledTimeout(floor=1, cap=5, size=kill_app.payload_size, seconds_per_unit=0)
    scaled = ScaledTimeout(floor=1800, cap=14400, size=kill_app.payload_size, unit=1_000_000)
    assert scaled.seconds_for((5_000_000_000,)) == 5000
    # Sizes past any float (an int of 400 digits) or infinite get the cap, not an OverflowError.
    assert scaled.seconds_for((10**400,)) == scaled.seconds_for((float("inf"),)) == 14400
    for wrong in (float("nan"), -1):
        with pytest.raises(TypeError):
            scaled.seconds_for((wrong,))
    with pytest.raises(TypeError):
        kill_app.Pipeline("scaled_bad").start(kill_app.fine, timeout=kill_app.payload_size)


def test_a_slow_maintenance_scan_does_not_delay_ready_jobs(store, inprocess_worker, monkeypatch):
    from ductline.runtime import maintenance

    real = maintenance.rescue_expired
    scanning, release = threading.Event(), threading.Event()

    def held_rescue(*args, **kwargs):
        if not release.is_set():
            scanning.set()
            release.wait(120)  # e.g. a slow query on a degraded database, held until the run ended
        return real(*args, **kwargs)

    monkeypatch.setattr(maintenance, "rescue_expired", held_rescue)
    inprocess_worker(health_check_interval=0.2)
    assert scanning.wait(90)
    try:
        handle = kill_app.threaded.trigger(1, database=store)
        # completed while the scan is still held: the run did not wait behind it
        assert handle.wait(90) == "completed"
    finally:
        release.set()

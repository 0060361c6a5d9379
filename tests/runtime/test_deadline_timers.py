"""A worker's maintenance thread looks at a run deadline once the database clock has
surely reached it, not when its estimate of that clock says so: looked at early, the
run is not due yet and the next look comes `DEADLINE_RECHECK_SECONDS` late -- past the
time of a delayed job a worker may be holding, which then counts as in flight. Real
database, both backends."""

from __future__ import annotations

import rt_app
from helpers import wait_for

from ductline.clock import DatabaseClock
from ductline.runtime.maintenance import Maintainer
from ductline.views import run_view

WORKER = "deadline-timer-worker"


def test_the_maintenance_thread_looks_at_a_deadline_only_once_the_database_clock_reached_it(store, monkeypatch):
    handle = rt_app.queued_deadline.trigger(1, database=store)  # a 2 s run deadline
    store.register_worker(WORKER, "test-host", 1, 1)
    store.claim(WORKER, ["rt_queued_deadline"], 1, 600_000)  # starts the run: its deadline is set
    deadline_ms = store.get_run(handle.id)["deadline_ms"]
    # A measurement with a wide error bound (a 400 ms round trip, read at its end): the
    # estimate runs up to 200 ms ahead of the database clock, and says so in its bound.
    # The database clock is read before ``received``, as in a real round trip: read
    # after it, a slow read would put the estimate further ahead than its bound says.
    clock = DatabaseClock()
    db_ms = store.now_ms()
    received = clock.now()
    clock.measure(db_ms, received - 0.4, received)
    looks: list[int] = []  # the database clock at each look at due deadlines
    due_deadlines = store.due_deadlines

    def recorded(*args, **kwargs):
        looks.append(store.now_ms())
        return due_deadlines(*args, **kwargs)

    monkeypatch.setattr(store, "due_deadlines", recorded)
    maintainer = Maintainer(store, {"rt_queued_deadline": rt_app.queued_deadline.definition()}, 60.0, clock=clock)
    maintainer.start()
    try:
        wait_for(lambda: run_view(store, handle.id)["status"] == "failed", timeout=30)
    finally:
        maintainer.stop()
    # The first look is the thread's start; the next one is at the deadline, not before.
    assert len(looks) >= 2 and looks[0] < deadline_ms <= looks[1], (looks, deadline_ms)

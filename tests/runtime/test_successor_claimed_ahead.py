"""An attempt about to be killed at its deadline has the job that follows it on its
slot claimed before the kill (`ductline.runtime.successors`): when the kill frees the
slot, that job starts on a warm child with no claim in between, and the killed
attempt's failure is recorded at once, not after a claim of its own. A real worker
(in a thread of this process) with real children, on both backends."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import rt_app

from ductline.config import load_settings
from ductline.observability import events
from ductline.observability.events import EventName
from ductline.runtime import successors
from ductline.runtime.launch import build_worker
from ductline.store import open_store
from helpers import APP, wait_for


def test_the_job_after_an_attempt_killed_at_its_deadline_is_claimed_before_the_kill(store, db_url, monkeypatch):
    # A wider lead than the default, so a busy machine cannot make the loop miss it;
    # still well under the queue's freshness, so the queued job starts without a renewal.
    monkeypatch.setattr(successors, "ENDING_LEAD_SECONDS", 0.3)
    stuck = rt_app.timeout_pipeline.trigger(120, database=store)   # killed at its 1 s deadline
    after = rt_app.busy.trigger(0, database=store)                  # ready behind it
    seen: list[tuple[str, dict[str, Any]]] = []
    unsubscribe = events.subscribe(lambda name, fields: seen.append((str(name), dict(fields))))
    worker_store = open_store(db_url)
    settings = load_settings(database_url=db_url, poll_interval=0.2, kill_grace_seconds=1,
                             shutdown_grace_seconds=0.5)  # the stuck step's retry may have begun
    worker = build_worker(worker_store, [APP], 1, settings)

    def finished() -> bool:
        timed_out = any(n == EventName.JOB_COMPLETED and f.get("run_id") == stuck.id for n, f in seen)
        ran = any(n == EventName.JOB_COMPLETED and f.get("run_id") == after.id for n, f in seen)
        return timed_out and ran

    thread = threading.Thread(target=lambda: worker.run(stop_when=finished), daemon=True)
    thread.start()
    try:
        thread.join(60)
        assert not thread.is_alive()
    finally:
        worker.request_stop()
        thread.join(30)
        unsubscribe()
        worker_store.close()

    names = [(n, f) for n, f in seen if n in (EventName.CLAIM, EventName.TIMEOUT_OVERRUN, EventName.ATTEMPT_STARTED,
                                                EventName.JOB_COMPLETED)]
    killed = next(i for i, (n, f) in enumerate(names) if n == EventName.TIMEOUT_OVERRUN and f["run_id"] == stuck.id)
    started = next(i for i, (n, f) in enumerate(names) if n == EventName.ATTEMPT_STARTED and f["run_id"] == after.id)
    recorded = next(i for i, (n, f) in enumerate(names)
                    if n == EventName.JOB_COMPLETED and f["run_id"] == stuck.id and f["result"] == "timed_out")
    # The successor was claimed before the kill and started after it ...
    claims = [i for i, (n, f) in enumerate(names) if n == EventName.CLAIM and f["claimed"] > 0]
    assert any(i < killed for i in claims[1:]), names  # the first claim took the stuck job
    assert killed < started
    # ... with no claim between the kill and its start, nor before the failure was recorded.
    assert not [i for i, (n, _) in enumerate(names) if n == EventName.CLAIM and killed < i < max(started, recorded)]


def test_attempts_ending_one_after_the_other_each_get_their_own_successor(store, db_url, monkeypatch):
    # Two attempts near their deadlines at once, the second's claimed a little later:
    # the job claimed ahead for the first is held for it, so the second gets one of
    # its own, and neither kill waits for a claim.
    monkeypatch.setattr(successors, "ENDING_LEAD_SECONDS", 0.45)  # more than the gap between the claims below
    seen: list[tuple[str, dict[str, Any]]] = []
    unsubscribe = events.subscribe(lambda name, fields: seen.append((str(name), dict(fields))))
    worker_store = open_store(db_url)
    settings = load_settings(database_url=db_url, poll_interval=0.2, kill_grace_seconds=1,
                             shutdown_grace_seconds=0.5)
    worker = build_worker(worker_store, [APP], 2, settings)
    naps: list[str] = []

    def started(run_id: str) -> bool:
        return any(n == EventName.ATTEMPT_STARTED and f.get("run_id") == run_id for n, f in list(seen))

    def finished() -> bool:
        return len(naps) == 2 and all(any(n == EventName.JOB_COMPLETED and f.get("run_id") == r
                                          for n, f in list(seen)) for r in naps)

    thread = threading.Thread(target=lambda: worker.run(stop_when=finished), daemon=True)
    thread.start()
    try:
        first = rt_app.timeout_pipeline.trigger(120, database=store)    # killed at its 1 s deadline
        wait_for(lambda: started(first.id))
        # Claimed by the next claim, ahead of the runs behind both (ready before the first nears its deadline).
        second = rt_app.timeout_pipeline.trigger(120, database=store, priority=5)
        # Runs with a deadline: never sent ahead to a busy child, they wait in the queue for a slot.
        naps += [rt_app.queued_deadline.trigger(1, database=store).id for _ in range(2)]
        wait_for(lambda: started(second.id))
        thread.join(60)
        assert not thread.is_alive()
    finally:
        worker.request_stop()
        thread.join(30)
        unsubscribe()
        worker_store.close()

    names = [(n, f) for n, f in seen if n in (EventName.CLAIM, EventName.TIMEOUT_OVERRUN, EventName.ATTEMPT_STARTED)]
    for stuck in (first, second):
        killed = next(i for i, (n, f) in enumerate(names) if n == EventName.TIMEOUT_OVERRUN and f["run_id"] == stuck.id)
        after = next(i for i, (n, _) in enumerate(names) if n == EventName.ATTEMPT_STARTED and i > killed)
        assert not [i for i, (n, f) in enumerate(names) if n == EventName.CLAIM and f["claimed"] and killed < i < after], names


def test_a_job_claimed_ahead_of_a_kill_does_not_start_if_its_run_was_cancelled_just_before(store, db_url,
                                                                                         monkeypatch):
    # The cancel's notification comes with the death of the killed attempt (the same
    # wake-up of the loop): the queued job it cancelled is dropped, never started,
    # though its lease was confirmed lately. SQLite tells no worker of a cancel: its
    # workers find it by reading the leases (tests/runtime/test_cancel_races.py).
    if store.dialect.name == "sqlite":
        pytest.skip("SQLite sends no cancel notification")
    monkeypatch.setattr(successors, "ENDING_LEAD_SECONDS", 0.3)
    seen: list[tuple[str, dict[str, Any]]] = []
    unsubscribe = events.subscribe(lambda name, fields: seen.append((str(name), dict(fields))))
    worker_store = open_store(db_url)
    settings = load_settings(database_url=db_url, poll_interval=0.2, kill_grace_seconds=1,
                             shutdown_grace_seconds=0.5)
    worker = build_worker(worker_store, [APP], 1, settings)
    stuck = rt_app.timeout_pipeline.trigger(120, database=store)   # killed at its 1 s deadline
    behind = rt_app.busy.trigger(0, database=store)                 # claimed ahead of that kill
    handle = worker.events.handle
    cancelled = threading.Event()

    def cancel_as_the_killed_child_is_seen(ready: Any) -> None:
        slot = worker.slots[0]
        if not cancelled.is_set() and slot.runner is not None and ready == slot.runner.sentinel \
                and len(worker.ahead):
            behind.cancel()
            cancelled.set()
            wait_for(worker.wakeup.cancel_pending, timeout=10)   # its notification arrived
        handle(ready)

    monkeypatch.setattr(worker.events, "handle", cancel_as_the_killed_child_is_seen)

    def finished() -> bool:
        return cancelled.is_set() and any(n == EventName.JOB_COMPLETED and f.get("run_id") == stuck.id
                                          and f.get("result") == "timed_out" for n, f in list(seen))

    thread = threading.Thread(target=lambda: worker.run(stop_when=finished), daemon=True)
    thread.start()
    try:
        thread.join(60)
        assert not thread.is_alive()
    finally:
        worker.request_stop()
        thread.join(30)
        unsubscribe()
        worker_store.close()

    assert cancelled.is_set()
    assert not [f for n, f in seen if n == EventName.ATTEMPT_STARTED and f.get("run_id") == behind.id]
    assert store.get_run(behind.id)["status"] == "cancelled"

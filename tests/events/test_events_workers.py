"""Events with real worker processes on both backends: a run waits for an event
without a slot or a lease, a send releases it with its data (handle and CLI), an
event sent before the wait is kept and consumed once, a key makes a send
idempotent, a finished run refuses a send and nothing is written, a wait times
out, and workers (or a sender) SIGKILLed around a send lose nothing and run
nothing twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import events_app
import pytest
from helpers import (drive, ductline_in_process, freeze_outside_a_write, shared_worker_fixture, start_worker,
                     stop_worker, wait_for)

from ductline.errors import InvalidStateError, RunNotFound
from ductline.handle import RunHandle

APP = str(Path(__file__).parents[1] / "apps" / "events_app.py")
# Tests that need a worker of the app and look only at their own runs share one per
# backend; those that kill or freeze workers start their own.
shared_worker = shared_worker_fixture(APP)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """A command run by the command line's entry point in this process."""
    return ductline_in_process(*args)


def cli_process(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real command line, in a process of its own (one a fault checkpoint can kill)."""
    return subprocess.run([sys.executable, "-m", "ductline", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def jobs_by_step(store, run_id):
    return {j["step"]: j for j in store.run_jobs(run_id)}


def deferred(store, run_id, step="ship"):
    return jobs_by_step(store, run_id).get(step, {}).get("status") == "deferred"


def test_a_run_waits_for_its_event_without_a_slot_and_a_send_runs_the_step_with_its_data(
        shared_store, shared_worker):
    handle = events_app.orders.trigger(7, database=shared_store)
    wait_for(lambda: deferred(shared_store, handle.id), 30)
    time.sleep(0.3)  # a worker that would wrongly claim the deferred job has had its chance
    ship = jobs_by_step(shared_store, handle.id)["ship"]
    assert (ship["status"], ship["attempts"], ship["wait_event"]) == ("deferred", 0, "paid")
    assert shared_store.lease_state(ship["id"]) == {"status": "deferred", "lease_token": None}
    assert handle.status() == "running"  # a wait for an event is not a pause
    sent = handle.send("paid", {"amount": 12})
    assert (sent.duplicate, sent.step) == (False, "ship")
    assert handle.wait(90) == "completed"
    assert handle.output() == {"shipped": {"amount": 12}}
    (event,) = shared_store.run_events(handle.id)
    assert (event["name"], event["job_id"], json.loads(event["data"])) == ("paid", ship["id"], {"amount": 12})
    assert event["consumed_ms"] is not None


def test_an_event_sent_before_the_wait_is_kept_and_consumed_once(shared_store, shared_backend_url, shared_worker):
    handle = events_app.slow_orders.trigger(3, database=shared_store)
    first = handle.send("paid", "first")     # before the run reaches its wait: kept
    second = handle.send("paid", "second")   # kept too; a wait consumes one event
    assert (first.step, second.step) == (None, None)
    assert handle.wait(90) == "completed"
    assert handle.output() == {"shipped": "first"}
    events = shared_store.run_events(handle.id)
    assert [(e["name"], json.loads(e["data"]), e["job_id"] is not None) for e in events] == [
        ("paid", "first", True), ("paid", "second", False)]
    ship = jobs_by_step(shared_store, handle.id)["ship"]
    assert (ship["attempts"], events[0]["job_id"]) == (1, ship["id"])
    shown = cli("show", handle.id, "--database", shared_backend_url).stdout
    assert "events never used: 'paid'" in shown and "for a wait to come" not in shown  # the run is over


def test_a_key_makes_a_send_idempotent(shared_store, shared_worker):
    handle = events_app.orders.trigger(1, database=shared_store)
    wait_for(lambda: deferred(shared_store, handle.id), 30)
    first = handle.send("paid", 1, key="payment-77")
    again = handle.send("paid", 2, key="payment-77")
    assert (first.duplicate, first.step) == (False, "ship")
    assert (again.duplicate, again.event_id, again.step) == (True, first.event_id, None)
    assert handle.wait(90) == "completed"
    assert handle.output() == {"shipped": 1}
    assert len(shared_store.run_events(handle.id)) == 1


def test_sending_to_a_finished_run_or_no_run_is_refused_and_writes_nothing(shared_store, shared_worker):
    handle = events_app.orders.trigger(1, database=shared_store)
    wait_for(lambda: deferred(shared_store, handle.id), 30)
    handle.cancel()
    ship = jobs_by_step(shared_store, handle.id)["ship"]
    assert (ship["status"], ship["skip_reason"]) == ("skipped", "cancelled")
    with pytest.raises(InvalidStateError, match="is cancelled; an event can be sent only to an unfinished run"):
        handle.send("paid", 1)
    assert shared_store.run_events(handle.id) == []
    with pytest.raises(RunNotFound):
        RunHandle("0" * 32, shared_store).send("paid")


def test_bad_sends_are_refused_before_anything_is_written(store, workers):
    handle = events_app.orders.trigger(1, database=store)
    with pytest.raises(ValueError, match="1 to 200 characters"):
        handle.send("")
    with pytest.raises(TypeError, match="must be a str"):
        handle.send(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="control characters"):
        handle.send("paid", key="a\nb")
    # stored, a lone surrogate became its escape and aliased the key "\\udfff"
    with pytest.raises(ValueError, match="lone surrogates"):
        handle.send("paid", key="\udfff")
    with pytest.raises(ValueError, match="lone surrogates"):
        handle.send("paid\ud800")
    with pytest.raises(TypeError):
        handle.send("paid", object())
    assert store.run_events(handle.id) == []


def test_the_cli_sends_an_event_and_says_what_it_did(shared_store, shared_backend_url, shared_worker):
    handle = events_app.orders.trigger(5, database=shared_store)
    wait_for(lambda: deferred(shared_store, handle.id), 30)
    shown = cli("show", handle.id, "--database", shared_backend_url)
    assert f"step ship waits for event 'paid': ductline send {handle.id} paid [--data JSON]" in shown.stdout
    done = cli("send", handle.id, "paid", "--data", '{"by": "card"}', "--key", "k1", "--database", shared_backend_url)
    assert (done.returncode, done.stdout.strip()) == (0, f"run {handle.id}: event 'paid' sent; step ship runs now")
    again = cli("send", handle.id[:8], "paid", "--data", "1", "--key", "k1", "--database", shared_backend_url)
    assert (again.returncode, again.stdout.strip()) == (
        0, f"run {handle.id}: event 'paid' with key 'k1' was sent already; nothing changed")
    assert handle.wait(90) == "completed"
    assert handle.output() == {"shipped": {"by": "card"}}
    bad = cli("send", handle.id, "paid", "--data", "{nope", "--database", shared_backend_url)
    assert bad.returncode != 0 and "--data is not valid JSON" in bad.stderr
    late = cli("send", handle.id, "paid", "--database", shared_backend_url)
    assert late.returncode != 0 and "InvalidStateError" in late.stderr and "is completed" in late.stderr
    view = json.loads(cli("show", handle.id, "--json", "--database", shared_backend_url).stdout)
    assert [(e["name"], e["key"], e["data"], e["consumed_by"]) for e in view["events"]] == [
        ("paid", "k1", {"by": "card"}, "ship")]


def test_a_wait_that_times_out_fails_the_run_and_ends_the_other_branch(shared_store, shared_worker):
    handle = events_app.expiring.trigger(4, database=shared_store)
    assert handle.wait(90) == "failed"
    reason = "event 'paid' awaited before step 'ship' did not come within 1 s"
    run = shared_store.get_run(handle.id)
    assert run["halt_reason"] == "event_timed_out"
    assert json.loads(run["metadata"]) == {"event_timed_out": True, "waiting_step": "ship", "event": "paid",
                                          "event_timeout_seconds": 1, "error": reason}
    jobs = jobs_by_step(shared_store, handle.id)
    assert {s: (j["status"], j["skip_reason"]) for s, j in jobs.items()} == {
        "prepare": ("completed", None),
        "ship": ("failed", reason),               # never ran: no attempt
        "slow_side": ("cancelled", f"cancelled because the {reason}"),
        "collect": ("skipped", "event timed out"),
    }
    with pytest.raises(InvalidStateError):
        handle.send("paid", 1)
    assert shared_store.run_events(handle.id) == []


def test_a_worker_sigkilled_between_the_send_and_the_consuming_step_loses_nothing_and_runs_it_once(
        store, db_url, tmp_path):
    log = tmp_path / "ship.log"
    env = {"EVENTS_APP_LOG": str(log)}
    first = start_worker(db_url, app=APP, env=env)
    handle = events_app.orders.trigger(9, database=store)
    wait_for(lambda: deferred(store, handle.id), 30)
    freeze_outside_a_write(first, db_url)  # it cannot claim the released step before it dies
    try:
        assert handle.send("paid", {"amount": 3}).step == "ship"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    # The next worker dies right after claiming the released step (its first claim).
    second = start_worker(db_url, app=APP, env={**env, "DUCTLINE_FAULT": "after_claim"})
    assert second.wait(60) == -signal.SIGKILL
    ship = jobs_by_step(store, handle.id)["ship"]
    assert (ship["status"], ship["attempts"]) == ("running", 1)
    assert not log.exists()  # claimed, never started
    third = start_worker(db_url, app=APP, env=env)
    try:
        assert handle.wait(90) == "completed"
    finally:
        stop_worker(third)
    assert handle.output() == {"shipped": {"amount": 3}}
    assert log.read_text().splitlines() == ["ship {'amount': 3}"]  # ran once, with the event's data
    (event,) = store.run_events(handle.id)
    assert event["job_id"] == ship["id"]


def test_a_sender_killed_inside_its_transaction_writes_nothing_and_a_resend_delivers_once(
        shared_store, shared_backend_url, shared_worker):
    handle = events_app.orders.trigger(2, database=shared_store)
    wait_for(lambda: deferred(shared_store, handle.id), 30)
    killed = cli_process("send", handle.id, "paid", "--data", "5", "--key", "p1", "--database", shared_backend_url,
                         env={"DUCTLINE_FAULT": "during_send"})
    assert killed.returncode == -signal.SIGKILL
    assert shared_store.run_events(handle.id) == []
    assert jobs_by_step(shared_store, handle.id)["ship"]["status"] == "deferred"
    for _ in range(2):
        done = cli("send", handle.id, "paid", "--data", "5", "--key", "p1", "--database", shared_backend_url)
        assert done.returncode == 0, done.stderr
    assert handle.wait(90) == "completed"
    assert handle.output() == {"shipped": 5}
    assert len(shared_store.run_events(handle.id)) == 1


def test_the_waiting_gauge_and_the_received_counter(store):
    from ductline.observability.events import subscribe
    from ductline.observability.metrics import EventWaits, MetricsSubscriber, Registry

    registry = Registry(wait_source=EventWaits(store, cache_seconds=0))
    unsubscribe = subscribe(MetricsSubscriber(registry))
    try:
        handle = events_app.orders.trigger(1, database=store)
        assert registry.gauges()["ductline.events.waiting"] == {}
        assert drive(store, events_app.orders) == ["prepare"]  # ship waits now
        assert registry.gauges()["ductline.events.waiting"] == {("events_orders",): 1.0}
        handle.send("paid", 1, key="k")
        handle.send("paid", 1, key="k")  # a repeat: not counted
        handle.send("paid", 2)           # kept
        assert registry.counter("ductline.events.received", pipeline="events_orders") == 2
        assert registry.gauges()["ductline.events.waiting"] == {("events_orders",): 0.0}
    finally:
        unsubscribe()


def test_an_event_sent_to_a_halted_run_releases_its_step_held_until_the_retry(store):
    handle = events_app.orders.trigger(4, database=store)
    assert drive(store, events_app.orders) == ["prepare"]
    with store.transaction() as tx:  # another branch gave up: the run halts, the wait goes on
        assert tx.halt_run(handle.id, "job_retries_exhausted", {"halted_step": "elsewhere"})
    sent = handle.send("paid", "late")
    assert sent.step == "ship"
    assert jobs_by_step(store, handle.id)["ship"]["status"] == "held"
    assert drive(store, events_app.orders) == []  # nothing starts in a halted run
    assert store.revive_run(handle.id)
    assert drive(store, events_app.orders) == ["ship", "finish"]
    assert handle.output() == {"shipped": "late"}


def test_racing_sends_store_one_event_per_key_and_release_the_step_once(store):
    import threading

    def race(run_id, sends):
        barrier = threading.Barrier(len(sends))
        results = [None] * len(sends)

        def one(i, data, key):
            barrier.wait()
            results[i] = RunHandle(run_id, store).send("paid", data, key=key)

        threads = [threading.Thread(target=one, args=(i, *s)) for i, s in enumerate(sends)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return results

    same = events_app.orders.trigger(1, database=store)
    assert drive(store, events_app.orders) == ["prepare"]
    results = race(same.id, [(i, "one-key") for i in range(6)])
    first = [r for r in results if not r.duplicate]
    assert len(first) == 1 and first[0].step == "ship"
    assert {r.event_id for r in results} == {first[0].event_id}
    assert len(store.run_events(same.id)) == 1

    distinct = events_app.orders.trigger(2, database=store)
    assert sorted(drive(store, events_app.orders)) == ["finish", "prepare", "ship"]  # the first run ends
    results = race(distinct.id, [(i, f"key-{i}") for i in range(6)])
    assert sorted(r.step or "" for r in results) == ["", "", "", "", "", "ship"]
    events = store.run_events(distinct.id)
    consumed = [e for e in events if e["job_id"] is not None]
    assert len(events) == 6 and len(consumed) == 1
    assert drive(store, events_app.orders) == ["ship", "finish"]
    assert distinct.output() == {"shipped": json.loads(consumed[0]["data"])}
    assert same.output() == {"shipped": json.loads(store.run_events(same.id)[0]["data"])}


def test_prune_deletes_a_runs_events_with_it(store):
    from ductline.operations.prune import prune

    handle = events_app.orders.trigger(3, database=store)
    handle.send("paid", 1)
    handle.send("paid", 2)  # kept, never consumed
    assert drive(store, events_app.orders) == ["prepare", "ship", "finish"]
    assert handle.status() == "completed" and len(store.run_events(handle.id)) == 2
    finished = store.get_run(handle.id)["finished_ms"]
    wait_for(lambda: store.now_ms() > finished)
    assert prune(store, 0).runs == 1
    assert store.run_events(handle.id) == []

"""Schedules fired by real worker processes on both backends: exactly one run per
tick with several workers racing, catch-up after downtime, an idle worker on time,
ready jobs first, and definitions written at start."""

from __future__ import annotations

import json
import signal
import time
from datetime import datetime, timezone
from pathlib import Path

from helpers import start_worker, stop_worker, wait_for

from ductline.dsl.schedule import Schedule, latest_tick_ms, next_tick_ms, tick_key
from ductline.store import schedules as rows

APP = str(Path(__file__).parents[1] / "apps" / "sched_app.py")


def stop_all(procs):
    """Stop worker processes side by side (SIGTERM to all, then wait for each)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        stop_worker(proc)


def runs_of(store, pipeline):
    """Every run of a pipeline (oldest first) with its key, args and metadata."""
    out = [store.get_run(r["id"]) for r in store.list_runs(pipeline=pipeline, limit=10_000)]
    return sorted(out, key=lambda r: r["created_ms"])


def schedule_row(store, name):
    return {r["name"]: r for r in rows.list_all(store)}.get(name)


def tick_of(key: str) -> int:
    stamp = key[-len("2030-01-01T00:00:00Z"):]
    return int(datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp() * 1000)


def test_three_idle_workers_racing_start_exactly_one_run_per_tick_on_time(db_url, store):
    # Polling every 10 s: only the wake-up timer at the next fire can make ticks on time.
    env = {"SCHED_SET": "every_second", "DUCTLINE_POLL_INTERVAL": "10"}
    procs = [start_worker(db_url, concurrency=1, env=env, app=APP) for _ in range(3)]
    try:
        wait_for(lambda: len(runs_of(store, "sched_ticking")) >= 4, timeout=30)
    finally:
        stop_all(procs)
    runs = runs_of(store, "sched_ticking")
    keys = [r["idempotency_key"] for r in runs]
    assert len(keys) == len(set(keys)), f"a tick fired twice: {keys}"
    ticks = sorted(tick_of(k) for k in keys)
    assert ticks == list(range(ticks[0], ticks[-1] + 1000, 1000)), f"a tick was skipped: {keys}"
    assert sorted(keys) == [tick_key("every_second", t) for t in ticks]
    assert all(json.loads(r["args"]) == ["s"] for r in runs)
    # Ticks due before any worker had a child ready collapse into the first run (catch-up).
    assert all(json.loads(r["metadata"])["skipped_ticks"] == 0 for r in runs[1:])
    assert all(r["created_ms"] >= tick_of(r["idempotency_key"]) for r in runs), "never before its tick"
    # On time, by the database clock (the first run may come from a start-up claim).
    lateness = [r["created_ms"] - tick_of(r["idempotency_key"]) for r in runs[1:]]
    print("lateness (ms):", lateness)
    assert all(late < 500 for late in lateness), lateness
    row = schedule_row(store, "every_second")
    last = max(runs, key=lambda r: tick_of(r["idempotency_key"]))
    assert row["last_fire_ms"] == tick_of(last["idempotency_key"]) and row["last_run_id"] == last["id"]
    assert row["next_fire_ms"] == row["last_fire_ms"] + 1000


def test_after_downtime_one_run_fires_for_the_latest_missed_tick_and_definitions_are_written(db_url, store):
    cron = "0 0 * * *"
    rows.sync(store, [Schedule("daily", "sched_daily", cron, '[1,{"a":"b"}]'),
                      Schedule("hourly", "sched_ticking", "0 0 1 1 *", "[]"),  # its cron changed in code since
                      Schedule("gone", "sched_daily", "0 0 * * *", "[]"),  # removed from code since
                      Schedule("elsewhere", "not_served", "0 0 * * *", "[]")],
              ["sched_daily", "sched_ticking", "not_served"], next_tick_ms)
    before = {r["name"]: dict(r) for r in rows.list_all(store)}
    now = store.now_ms()
    today = latest_tick_ms(cron, now)
    ten_days_ago = today - 10 * 86_400_000
    with store.transaction() as tx:  # workers were down for ten days
        assert rows.advance(tx, "daily", cron, schedule_row(store, "daily")["next_fire_ms"], ten_days_ago)
    proc = start_worker(db_url, concurrency=1, app=APP,
                        env={"SCHED_SET": "daily,hourly", "SCHED_CRON": "0 * * * *"})
    try:
        wait_for(lambda: runs_of(store, "sched_daily") and runs_of(store, "sched_daily")[0]["status"] == "completed",
                 timeout=30)
        time.sleep(0.5)  # a burst would show by now
    finally:
        stop_worker(proc)
    runs = runs_of(store, "sched_daily")
    assert len(runs) == 1
    run = runs[0]
    assert run["idempotency_key"] == tick_key("daily", today)
    assert json.loads(run["args"]) == [1, {"a": "b"}]
    assert json.loads(run["output"]) == [1, {"a": "b"}]
    assert json.loads(run["metadata"]) == {"schedule": "daily", "tick": tick_key("daily", today)[-20:],
                                           "skipped_ticks": 10}
    row = schedule_row(store, "daily")
    assert row["next_fire_ms"] == next_tick_ms(cron, now) > store.now_ms()
    assert (row["last_fire_ms"], row["last_run_id"]) == (today, run["id"])

    # The starting worker wrote its definitions: a changed cron moves the next fire ...
    hourly = schedule_row(store, "hourly")
    assert (hourly["cron"], hourly["args"]) == ("0 * * * *", '["h"]')
    assert hourly["next_fire_ms"] == next_tick_ms("0 * * * *", now) != before["hourly"]["next_fire_ms"]
    # ... one its code no longer declares is kept but never fired; other pipelines are left alone.
    assert schedule_row(store, "gone")["defined"] == 0
    assert schedule_row(store, "gone")["next_fire_ms"] == before["gone"]["next_fire_ms"]
    assert schedule_row(store, "elsewhere") == before["elsewhere"]


def test_a_worker_serves_its_ready_jobs_before_it_fires_a_due_schedule(db_url, store):
    import sched_app_backlog  # noqa: F401  (defines sched_working in this process, no schedule)

    backlog = [sched_app_backlog.working.trigger(i, database=store) for i in range(8)]
    rows.sync(store, [Schedule("every_second", "sched_ticking", "* * * * * *", '["s"]')], ["sched_ticking"],
              next_tick_ms)
    # The tick is due before the worker starts (not a race against its start-up time).
    synced = schedule_row(store, "every_second")["next_fire_ms"]
    first_tick = latest_tick_ms("* * * * * *", store.now_ms())
    with store.transaction() as tx:
        assert rows.advance(tx, "every_second", "* * * * * *", synced, first_tick)
    proc = start_worker(db_url, concurrency=1, app=APP, env={"SCHED_SET": "every_second"})
    try:
        wait_for(lambda: all(h.status() == "completed" for h in backlog) and runs_of(store, "sched_ticking"),
                 timeout=30)
    finally:
        stop_worker(proc)
    last_backlog_claim = max(a["started_ms"] for h in backlog for a in store.run_attempts(h.id))
    first_scheduled = runs_of(store, "sched_ticking")[0]
    first_backlog_claim = min(a["started_ms"] for h in backlog for a in store.run_attempts(h.id))
    assert first_tick <= first_backlog_claim, "the tick fell due before the ready jobs were served"
    assert first_scheduled["created_ms"] >= last_backlog_claim, "the schedule waited for the ready jobs"
    assert json.loads(first_scheduled["metadata"])["skipped_ticks"] >= 0

"""Backfill and catch-up on both backends: each tick of a range gets one run, also
when backfills are repeated or race in several processes, or a backfill is killed
half-way; a worker back from downtime runs the latest ``catch_up`` missed ticks, in
one transaction with the tick's compare-and-set (a worker killed inside it leaves
nothing), and never a tick a backfill already ran."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import backfill_app
import pytest
from helpers import ductline_in_process, start_worker, stop_worker, wait_for

from ductline import schedule
from ductline.dsl.schedule import Schedule, latest_tick_ms, next_tick_ms, tick_iso, tick_key
from ductline.errors import ScheduleNotFound
from ductline.handle import RunHandle
from ductline.operations.backfill import MAX_BACKFILL_TICKS, backfill
from ductline.store import schedules as rows

APPS = Path(__file__).parents[1] / "apps"
SCHED_APP = str(APPS / "sched_app.py")
BACKFILL_APP = str(APPS / "backfill_app.py")
HOUR = 3_600_000
DAY = 24 * HOUR
BASE = 1_577_836_800_000  # 2020-01-01T00:00:00Z: a backfill covers past ticks


def hourly(store, name="bf_hourly"):
    rows.sync(store, [Schedule(name, "bf_pipeline", "0 * * * *", '["x"]')], [], next_tick_ms)


def runs_of(store, pipeline):
    found = [store.get_run(r["id"]) for r in store.list_runs(pipeline=pipeline, limit=10_000)]
    return sorted(found, key=lambda r: r["idempotency_key"] or "")


def test_a_backfill_starts_each_tick_once_and_a_repeat_starts_nothing(store):
    hourly(store)
    report = backfill(store, "bf_hourly", BASE - 30 * 60_000, BASE + 4 * HOUR)
    ticks = [BASE + i * HOUR for i in range(5)]
    assert [t for t, _ in report.started] == [tick_iso(t) for t in ticks] and report.existing == []
    runs = runs_of(store, "bf_pipeline")
    assert [r["idempotency_key"] for r in runs] == [tick_key("bf_hourly", t) for t in ticks]
    assert all(json.loads(r["args"]) == ["x"] for r in runs)
    assert json.loads(runs[0]["metadata"]) == {"schedule": "bf_hourly", "tick": tick_iso(BASE), "backfill": True}

    again = backfill(store, "bf_hourly", BASE, BASE + 4 * HOUR)
    assert again.started == [] and again.existing == report.started
    for r in runs:  # ended runs release their keys; their ticks stay taken
        RunHandle(r["id"], store).cancel()
    wider = backfill(store, "bf_hourly", BASE - HOUR, BASE + 5 * HOUR)
    assert [t for t, _ in wider.started] == [tick_iso(BASE - HOUR), tick_iso(BASE + 5 * HOUR)]
    assert len(wider.existing) == 5
    assert len(runs_of(store, "bf_pipeline")) == 7


def test_bad_ranges_are_refused_before_anything_is_written(store):
    hourly(store)
    with pytest.raises(ValueError, match=f"more than {MAX_BACKFILL_TICKS} ticks"):
        backfill(store, "bf_hourly", BASE, BASE + (MAX_BACKFILL_TICKS + 1) * HOUR)
    with pytest.raises(ValueError, match="after"):
        backfill(store, "bf_hourly", BASE + HOUR, BASE)
    with pytest.raises(ScheduleNotFound, match="written when a worker serving its pipeline starts"):
        backfill(store, "no_such_schedule", BASE, BASE + HOUR)
    # ticks after now fire on schedule: a backfill run would take them for good
    future = store.now_ms() + DAY
    with pytest.raises(ValueError, match="is in the future"):
        backfill(store, "bf_hourly", BASE, future)
    with pytest.raises(ValueError, match="is in the future"):  # the last year a date can hold
        backfill(store, "bf_hourly", 253_402_297_199_000 - HOUR, 253_402_297_199_000)
    assert store.list_runs() == []
    assert rows.tick_runs(store, "bf_hourly", 0, 2 ** 62) == {}
    assert len(backfill(store, "bf_hourly", BASE, BASE + (MAX_BACKFILL_TICKS - 1) * HOUR).started) == \
        MAX_BACKFILL_TICKS


def cli_backfill(db_url, *extra, env=None):
    return subprocess.Popen(
        [sys.executable, "-m", "ductline", "schedules", "backfill", "bf_hourly", "--from", "2020-01-01T00:00:00Z",
         "--to", "2020-01-01T11:00:00+00:00", "--app", BACKFILL_APP, "--database", db_url, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_racing_backfills_in_several_processes_start_each_tick_once(db_url, store):
    hourly(store)
    procs = [cli_backfill(db_url, "--json") for _ in range(4)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outputs]
    reports = [json.loads(o[0]) for o in outputs]
    started = [s["tick"] for r in reports for s in r["started"]]
    assert sorted(started) == [tick_iso(BASE + i * HOUR) for i in range(12)]  # each tick by one of them
    assert all(len(r["started"]) + len(r["existing"]) == 12 for r in reports)
    runs = runs_of(store, "bf_pipeline")
    assert len(runs) == 12 and len({r["idempotency_key"] for r in runs}) == 12


def test_a_backfill_killed_inside_a_tick_leaves_nothing_and_the_next_one_finishes(db_url, store):
    import os

    hourly(store)
    killed = cli_backfill(db_url, env={**os.environ, "DUCTLINE_FAULT": "during_backfill"})
    killed.communicate(timeout=120)
    assert killed.returncode == -signal.SIGKILL
    assert store.list_runs() == [] and rows.tick_runs(store, "bf_hourly", 0, 2 ** 62) == {}
    done = cli_backfill(db_url)
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert "12 run(s) started, 0 tick(s) had one" in out
    assert len(runs_of(store, "bf_pipeline")) == 12


def test_cli_errors(db_url, store):
    hourly(store)
    bad = ductline_in_process("schedules", "backfill", "bf_hourly", "--from", "2020-01-01T00:00:00",
                              "--to", "2020-01-02T00:00:00Z", "--app", BACKFILL_APP, "--database", db_url)
    assert bad.returncode == 2 and "UTC offset" in bad.stderr
    missing = ductline_in_process("schedules", "backfill", "nope", "--from", "2020-01-01T00:00:00Z",
                                  "--to", "2020-01-02T00:00:00Z", "--app", BACKFILL_APP, "--database", db_url)
    assert missing.returncode != 0 and "no schedule named 'nope'" in missing.stderr
    assert store.list_runs() == []


@pytest.mark.parametrize("catch_up, error", [(0, ValueError), (101, ValueError), ("3", TypeError),
                                             (True, TypeError)])
def test_catch_up_is_bounded(catch_up, error):
    with pytest.raises(error, match="catch_up"):
        schedule(backfill_app.backfilled, cron="0 * * * *", name=f"bad_catch_up_{catch_up!r}", catch_up=catch_up)


def _down_for_ten_days(store):
    """The catching schedule (daily, catch_up=3) as if its workers were down ten days."""
    cron = "0 0 * * *"
    rows.sync(store, [Schedule("catching", "sched_catching", cron, '["c"]')], ["sched_catching"], next_tick_ms)
    today = latest_tick_ms(cron, store.now_ms())
    with store.transaction() as tx:
        assert rows.advance(tx, "catching", cron, rows.get(store, "catching")["next_fire_ms"], today - 10 * DAY)
    return today


def _catching_runs(store):
    return runs_of(store, "sched_catching")


def test_after_downtime_a_worker_runs_the_latest_catch_up_ticks_once(db_url, store):
    today = _down_for_ten_days(store)
    proc = start_worker(db_url, concurrency=1, app=SCHED_APP, env={"SCHED_SET": "catching"})
    try:
        wait_for(lambda: len(_catching_runs(store)) == 3
                 and all(r["status"] == "completed" for r in _catching_runs(store)), timeout=60)
    finally:
        stop_worker(proc)
    runs = _catching_runs(store)
    ticks = [today - 2 * DAY, today - DAY, today]
    assert [r["idempotency_key"] for r in runs] == [tick_key("catching", t) for t in ticks]
    assert [json.loads(r["metadata"]) for r in runs] == [
        {"schedule": "catching", "tick": tick_iso(t), "skipped_ticks": 8} for t in ticks]
    row = {r["name"]: r for r in rows.list_all(store)}["catching"]
    assert row["last_fire_ms"] == today and row["next_fire_ms"] == today + DAY


def test_catch_up_skips_a_tick_a_backfill_ran_and_a_worker_killed_inside_it_leaves_nothing(db_url, store):
    from ductline import Pipeline

    today = _down_for_ten_days(store)
    # The backfill needs the pipeline defined in this process (sched_app must not be
    # imported here: it declares schedules), so sched_catching is defined here.
    from ductline.dsl.pipeline import registered

    try:
        registered("sched_catching")
    except LookupError:
        Pipeline("sched_catching").start(backfill_app.tick)
    pre = backfill(store, "catching", today - DAY, today - DAY)
    assert len(pre.started) == 1
    killed = start_worker(db_url, concurrency=1, app=SCHED_APP,
                          env={"SCHED_SET": "catching", "DUCTLINE_FAULT": "during_catch_up"})
    assert killed.wait(timeout=60) == -signal.SIGKILL
    assert len(_catching_runs(store)) == 1  # the killed transaction left nothing
    proc = start_worker(db_url, concurrency=1, app=SCHED_APP, env={"SCHED_SET": "catching"})
    try:
        wait_for(lambda: len(_catching_runs(store)) == 3
                 and all(r["status"] == "completed" for r in _catching_runs(store)), timeout=60)
    finally:
        stop_worker(proc)
    runs = _catching_runs(store)
    assert [r["idempotency_key"] for r in runs] == [tick_key("catching", t)
                                                    for t in (today - 2 * DAY, today - DAY, today)]
    assert json.loads(runs[1]["metadata"])["backfill"] is True

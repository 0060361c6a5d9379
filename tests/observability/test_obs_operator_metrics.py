"""The metrics an operator watches for their own actions: step runs marked succeeded
(by ``ductline mark-succeeded`` or execute's ``mark_succeeded``) and runs started for
schedule ticks by reason (the latest tick, a catch-up tick, a backfill)."""

from __future__ import annotations

import backfill_app
import rt_app

import ductline
from ductline.dsl.schedule import Schedule, next_tick_ms
from ductline.observability.events import EventName, emit
from ductline.operations.backfill import backfill
from ductline.store import schedules as rows


def test_the_subscriber_counts_marks_and_schedule_runs_by_reason(install):
    r = install().registry
    emit(EventName.STEP_MARKED_SUCCEEDED, pipeline="shop", step="charge", run_id="r1")
    emit(EventName.SCHEDULE_RUNS_STARTED, pipeline="nightly", schedule="n", reason="backfill", count=3)
    emit(EventName.SCHEDULE_RUNS_STARTED, pipeline="nightly", schedule="n", reason="catch_up", count=1)
    assert r.counter("ductline.steps.marked_succeeded", pipeline="shop", step="charge") == 1
    assert r.counter("ductline.schedule.runs", reason="backfill") == 3
    assert r.counter("ductline.schedule.runs", pipeline="nightly") == 4


def test_execute_and_a_backfill_emit_them(install, store):
    r = install().registry
    ductline.execute(rt_app.halts_before_deadline, 1, mark_succeeded={"fails_at_once": 1}, retry_delay=0)
    assert r.counter("ductline.steps.marked_succeeded", pipeline="rt_halt_deadline", step="fails_at_once") == 1
    assert backfill_app.backfilled is not None
    rows.sync(store, [Schedule("obs_hourly", "bf_pipeline", "0 * * * *", "[]")], [], next_tick_ms)
    backfill(store, "obs_hourly", 1_577_836_800_000, 1_577_836_800_000 + 2 * 3_600_000)  # 2020: past ticks
    assert r.counter("ductline.schedule.runs", pipeline="bf_pipeline", reason="backfill") == 3

"""The schedule rows on both backends: what a starting worker's definitions do to
them (new, unchanged, changed cron, removed from code, back again, disabled by the
operator) and the compare-and-set that owns a tick."""

from __future__ import annotations

import pytest

from ductline.dsl.schedule import Schedule, next_tick_ms
from ductline.store import schedules as rows

DAILY = Schedule("daily", "p1", "0 0 * * *", "[1]")
HOURLY = Schedule("hourly", "p1", "0 * * * *", "[]")
ELSEWHERE = Schedule("elsewhere", "p2", "0 0 * * *", "[]")


def by_name(store):
    return {r["name"]: r for r in rows.list_all(store)}


def test_a_new_schedule_starts_at_the_first_tick_after_now(store):
    before = store.now_ms()
    assert rows.sync(store, [DAILY, HOURLY], ["p1"], next_tick_ms) == 0
    after = store.now_ms()
    got = by_name(store)
    assert set(got) == {"daily", "hourly"}
    assert next_tick_ms("0 0 * * *", before) <= got["daily"]["next_fire_ms"] <= next_tick_ms("0 0 * * *", after)
    assert got["hourly"]["next_fire_ms"] > after
    assert (got["daily"]["pipeline"], got["daily"]["cron"], got["daily"]["args"]) == ("p1", "0 0 * * *", "[1]")
    assert got["daily"]["enabled"] == 1 and got["daily"]["defined"] == 1
    assert got["daily"]["last_fire_ms"] is None and got["daily"]["last_run_id"] is None


def test_an_unchanged_cron_keeps_next_fire_and_a_changed_cron_recomputes_it(store):
    rows.sync(store, [DAILY], ["p1"], next_tick_ms)
    with store.transaction() as tx:  # as if ticks had been missed while workers were down
        assert rows.advance(tx, "daily", "0 0 * * *", by_name(store)["daily"]["next_fire_ms"], 1_000)
    rows.sync(store, [Schedule("daily", "p1", "0 0 * * *", "[2]")], ["p1"], next_tick_ms)
    assert by_name(store)["daily"]["next_fire_ms"] == 1_000, "same cron: the missed tick is still owed"
    assert by_name(store)["daily"]["args"] == "[2]"
    now = store.now_ms()
    rows.sync(store, [Schedule("daily", "p1", "*/5 * * * *", "[2]")], ["p1"], next_tick_ms)
    row = by_name(store)["daily"]
    assert row["cron"] == "*/5 * * * *"
    assert now < row["next_fire_ms"] <= next_tick_ms("*/5 * * * *", store.now_ms())


def test_a_schedule_removed_from_code_is_kept_undefined_and_comes_back_from_now(store):
    rows.sync(store, [DAILY, HOURLY, ELSEWHERE], ["p1", "p2"], next_tick_ms)
    with store.transaction() as tx:
        rows.advance(tx, "hourly", "0 * * * *", by_name(store)["hourly"]["next_fire_ms"], 1_000)
    # a worker serving only p1 whose code no longer declares "hourly"
    assert rows.sync(store, [DAILY], ["p1"], next_tick_ms) == 1
    got = by_name(store)
    assert got["hourly"]["defined"] == 0 and got["hourly"]["enabled"] == 1
    assert got["elsewhere"]["defined"] == 1, "a pipeline the worker does not serve is left alone"
    assert rows.upcoming(store, ["p1"]) and {r.name for r in rows.upcoming(store, ["p1", "p2"])} == {
        "daily", "elsewhere"}
    # declared again: defined, and it starts from the first tick after now, not from 1970
    rows.sync(store, [DAILY, HOURLY], ["p1"], next_tick_ms)
    row = by_name(store)["hourly"]
    assert row["defined"] == 1 and row["next_fire_ms"] > store.now_ms() - 1000


def test_the_operators_switch_survives_worker_starts_and_enable_skips_missed_ticks(store):
    rows.sync(store, [DAILY], ["p1"], next_tick_ms)
    assert rows.set_enabled(store, "daily", False, next_tick_ms) is True
    assert rows.set_enabled(store, "daily", False, next_tick_ms) is False
    assert rows.set_enabled(store, "nope", True, next_tick_ms) is None
    rows.sync(store, [DAILY], ["p1"], next_tick_ms)
    assert by_name(store)["daily"]["enabled"] == 0, "a worker start never re-enables"
    assert rows.upcoming(store, ["p1"]) == []
    with store.transaction() as tx:
        assert not rows.advance(tx, "daily", "0 0 * * *", by_name(store)["daily"]["next_fire_ms"], 1_000), \
            "a disabled schedule is never advanced (fired)"
    store_now = store.now_ms()
    assert rows.set_enabled(store, "daily", True, next_tick_ms) is True
    row = by_name(store)["daily"]
    assert row["enabled"] == 1 and row["next_fire_ms"] > store_now


@pytest.mark.parametrize("field", ["expected_ms", "cron"])
def test_the_compare_and_set_changes_nothing_for_a_stale_writer(store, field):
    rows.sync(store, [DAILY], ["p1"], next_tick_ms)
    current = by_name(store)["daily"]["next_fire_ms"]
    stale = {"expected_ms": current - 1, "cron": "0 0 * * *"} if field == "expected_ms" else \
        {"expected_ms": current, "cron": "0 1 * * *"}
    with store.transaction() as tx:
        assert not rows.advance(tx, "daily", stale["cron"], stale["expected_ms"], current + 5,
                                last_fire_ms=current)
    with store.transaction() as tx:
        assert rows.advance(tx, "daily", "0 0 * * *", current, current + 5, last_fire_ms=current)
        assert not rows.advance(tx, "daily", "0 0 * * *", current, current + 10, last_fire_ms=current)
    row = by_name(store)["daily"]
    assert (row["next_fire_ms"], row["last_fire_ms"]) == (current + 5, current)

"""Priorities: higher first, then runs under way before new runs, then oldest; a step's
priority adds to its run's; every eighth claim of a worker is oldest-first, which bounds
starvation (both backends)."""

from __future__ import annotations

import json
from pathlib import Path

import limit_app
import pytest
from helpers import ductline_in_process
from test_limits import sql

from ductline import Pipeline
from ductline.model.claim_order import FIRST_STEP, UNDER_WAY
from ductline.store.claims import FIFO_EVERY

APP = str(Path(limit_app.__file__))


def claim_order(store, count):
    order = []
    for _ in range(count):
        jobs = store.claim("w", ["ranked"], 1, 60_000)
        assert len(jobs) == 1
        order.append(jobs[0].run_id)
    return order


def test_claims_take_higher_priority_first_then_oldest(store):
    low = [limit_app.ranked.trigger(i, priority=0, database=store).id for i in range(3)]
    high = [limit_app.ranked.trigger(i, priority=5, database=store).id for i in range(3)]
    default = limit_app.ranked.trigger(9, database=store).id  # the pipeline's priority, 1
    assert claim_order(store, 7) == high + [default] + low
    assert store.claim("w", ["ranked"], 1, 60_000) == []


def test_negative_priorities_come_last(store):
    late = limit_app.ranked.trigger(1, priority=-100, database=store).id
    first = limit_app.ranked.trigger(2, priority=100, database=store).id
    assert claim_order(store, 2) == [first, late]


def test_a_batch_claim_spans_priority_levels_in_order(store):
    ids = {p: limit_app.ranked.trigger(p, priority=p, database=store).id for p in (3, -2, 7, 0)}
    assert {j.run_id for j in store.claim("w", ["ranked"], 2, 60_000)} == {ids[7], ids[3]}
    assert {j.run_id for j in store.claim("w", ["ranked"], 5, 60_000)} == {ids[0], ids[-2]}


def test_every_eighth_claim_takes_the_oldest_whatever_its_priority(store):
    starving = limit_app.ranked.trigger(0, priority=-5, database=store).id
    for i in range(2 * FIFO_EVERY):
        limit_app.ranked.trigger(i, priority=5, database=store)
    claimed = []
    for n in range(1, FIFO_EVERY + 1):  # the worker's schedule: claim n is oldest-first when n % 8 == 0
        claimed.append(store.claim("w", ["ranked"], 1, 60_000, fifo=n % FIFO_EVERY == 0)[0].run_id)
    assert claimed.index(starving) == FIFO_EVERY - 1  # passed over by at most seven claims


def test_a_steps_priority_is_added_to_its_runs(store, db_url, workers):
    handle = limit_app.stepped.trigger(1, priority=2, database=store)
    workers(concurrency=1, app=APP)
    assert handle.wait(60) == "completed"
    rows = dict(sql(db_url, "SELECT step, priority FROM ductline_jobs WHERE run_id = %s", (handle.id,)))
    assert rows == {"first": 12, "second": -1}
    assert sql(db_url, "SELECT priority FROM ductline_runs WHERE id = %s", (handle.id,)) == [(2,)]


def test_a_worker_starts_the_higher_priority_run_first(store, db_url, workers):
    low = [limit_app.ranked.trigger(i, priority=0, database=store) for i in range(3)]
    high = limit_app.ranked.trigger(9, priority=50, database=store)
    workers(concurrency=1, app=APP)
    for handle in low + [high]:
        assert handle.wait(60) == "completed"
    starts = dict(sql(db_url, "SELECT run_id, started_ms FROM ductline_attempts"))
    assert min(starts, key=starts.get) == high.id


def test_first_steps_are_marked_by_the_trigger_and_later_steps_by_completions(store, db_url, workers):
    handles = [limit_app.relay.trigger(0, database=store)]
    handles += limit_app.relay.trigger_many([1, 2], database=store)
    workers(concurrency=1, app=APP)
    for handle in handles:
        assert handle.wait(60) == "completed"
    rows = sql(db_url, "SELECT step, phase, count(*) FROM ductline_jobs GROUP BY step, phase ORDER BY step")
    assert rows == [("first", FIRST_STEP, 3), ("note", UNDER_WAY, 3), ("second", UNDER_WAY, 3)]


def in_flight_peak(db_url, run_ids):
    """The most runs started (first attempt) and not yet finished (last attempt) at once."""
    rows = sql(db_url, "SELECT run_id, min(started_ms), max(finished_ms) FROM ductline_attempts GROUP BY run_id")
    events = sorted([(start, 1) for run_id, start, _ in rows if run_id in run_ids]
                    + [(end, -1) for run_id, _, end in rows if run_id in run_ids])
    peak = level = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


def test_a_burst_of_new_runs_waits_behind_the_runs_under_way(store, db_url, workers):
    # 96 three-step runs at once, one slot: the next step of a started run is claimed
    # before the first steps of the others, so not every run is in flight at once.
    # Jobs claimed ahead start their runs at the claim: up to MAX_DEPTH first steps
    # may wait in the queue, and oldest-first every eighth claim starts a few more.
    # Taking the oldest job first instead, all first steps are claimed before any
    # second step.
    from ductline.runtime.ahead import MAX_DEPTH

    runs = 3 * MAX_DEPTH
    handles = limit_app.relay.trigger_many(list(range(runs)), database=store)
    workers(concurrency=1, app=APP)
    for handle in handles:
        assert handle.wait(120) == "completed"
    peak = in_flight_peak(db_url, {h.id for h in handles})
    assert peak <= 2 * MAX_DEPTH, f"{peak} of {runs} runs were in flight at once"


@pytest.mark.parametrize(("value", "error", "message"), [
    (101, ValueError, "priority must be from -100 to 100, got 101"),
    (-101, ValueError, "priority must be from -100 to 100, got -101"),
    (1.0, TypeError, "priority must be an int, not float (1.0)"),
    (True, TypeError, "priority must be an int, not bool (True)"),
])
def test_priorities_are_validated_everywhere(store, value, error, message):
    with pytest.raises(error) as info:
        Pipeline("bad_priority", priority=value)
    assert str(info.value) == message
    with pytest.raises(error) as info:
        Pipeline("bad_step_priority").start(limit_app.note, priority=value)
    assert str(info.value) == message
    with pytest.raises(error) as info:
        limit_app.ranked.trigger(1, priority=value, database=store)
    assert str(info.value) == message
    assert store.list_runs() == []  # nothing was written


def test_cli_trigger_takes_a_priority_and_refuses_one_out_of_range(db_url, store):
    def trigger(*extra):
        return ductline_in_process("trigger", f"{APP}:ranked", "--args", "[1]", "--database", db_url, "--json", *extra)

    done = trigger("--priority", "42")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    assert sql(db_url, "SELECT priority FROM ductline_runs WHERE id = %s", (run_id,)) == [(42,)]
    refused = trigger("--priority", "101")
    assert refused.returncode == 2
    assert "101 is not in the range -100<=x<=100" in refused.stderr

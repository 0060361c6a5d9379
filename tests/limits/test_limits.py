"""Concurrency and rate limits, enforced across several worker processes through the
database (both backends)."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import limit_app
import psycopg
import pytest
from helpers import ductline_in_process, wait_for

from ductline.dsl.options import build_options
from ductline.model.limits import limit_key

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
from contract_support import NotingDialect  # noqa: E402

APP = str(__import__("pathlib").Path(limit_app.__file__))


def sql(db_url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read the database directly (what a second host would see)."""
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        try:
            return conn.execute(query.replace("%s", "?"), params).fetchall()
        finally:
            conn.close()
    with psycopg.connect(db_url) as conn:
        return conn.execute(query, params).fetchall()


def most_at_once(spans: list[tuple[int, int]]) -> int:
    """The most spans open at one instant (an end at t comes before a start at t)."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda e: (e[0], e[1]))
    open_, best = 0, 0
    for _, step in events:
        open_ += step
        best = max(best, open_)
    return best


def attempt_spans(db_url: str, step: str) -> list[tuple[int, int, Any]]:
    return [(int(a), int(b), key) for a, b, key in sql(
        db_url, "SELECT a.started_ms, a.finished_ms, j.limit_key FROM ductline_attempts a "
                "JOIN ductline_jobs j ON j.id = a.job_id WHERE j.step = %s ORDER BY a.started_ms", (step,))]


def settle_all(handles, timeout=90):
    for handle in handles:
        assert handle.wait(timeout) == "completed"


def test_a_step_runs_at_most_concurrency_attempts_across_workers(store, db_url, workers):
    handles = [limit_app.capped.trigger(i, database=store) for i in range(10)]
    for _ in range(3):
        workers(concurrency=3, app=APP)
    settle_all(handles)
    spans = attempt_spans(db_url, "hold")
    assert len(spans) == 10
    assert most_at_once([(a, b) for a, b, _ in spans]) == 2  # reached, never passed
    assert sql(db_url, "SELECT count(*) FROM ductline_jobs WHERE throttled = 1") == [(0,)]


def test_a_key_from_the_input_limits_each_customer_on_its_own(store, db_url, workers):
    orders = [{"customer": c, "n": n} for n in range(3) for c in ("ada", "bob", "cy")]
    handles = [limit_app.per_customer.trigger(o, database=store) for o in orders]
    for _ in range(2):
        workers(concurrency=4, app=APP)
    settle_all(handles)
    spans = attempt_spans(db_url, "hold_order")
    assert len(spans) == 9
    assert {key for _, _, key in spans} == {'per_customer:hold_order:"ada"', 'per_customer:hold_order:"bob"',
                                            'per_customer:hold_order:"cy"'}
    for customer in ("ada", "bob", "cy"):
        mine = [(a, b) for a, b, key in spans if key.endswith(f'"{customer}"')]
        assert most_at_once(mine) == 1
    assert most_at_once([(a, b) for a, b, _ in spans]) >= 2  # customers run side by side


def test_rate_limited_starts_are_spaced_across_workers(store, db_url, workers):
    handles = [limit_app.rated.trigger(i, database=store) for i in range(8)]
    for _ in range(2):
        workers(concurrency=3, app=APP)
    settle_all(handles)
    starts = [a for a, _, _ in attempt_spans(db_url, "quick")]
    assert len(starts) == 8
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert min(gaps) >= 250, gaps  # 4 per second: never closer than 250 ms
    assert starts[-1] - starts[0] >= 7 * 250


def test_a_throttled_job_waits_in_one_row_and_starts_when_a_slot_frees(store, db_url, workers):
    handles = [limit_app.capped.trigger(i, database=store) for i in range(5)]
    workers(concurrency=5, app=APP)
    # Two run; the others were throttled out of the ready index, not polled.
    wait_for(lambda: sql(db_url, "SELECT count(*) FROM ductline_jobs WHERE throttled = 1")[0][0] >= 1, 20)
    assert sql(db_url, "SELECT count(*) FROM ductline_jobs WHERE status = 'running'")[0][0] <= 2
    settle_all(handles)
    assert sql(db_url, "SELECT count(*) FROM ductline_jobs WHERE throttled = 1") == [(0,)]


def test_maintenance_frees_throttled_jobs_of_a_key_with_nothing_running(store, db_url):
    handle = limit_app.capped.trigger(1, database=store)
    sql_update = "UPDATE ductline_jobs SET throttled = 1 WHERE run_id = %s"
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        conn.execute(sql_update.replace("%s", "?"), (handle.id,))
        conn.commit()
        conn.close()
    else:
        with psycopg.connect(db_url) as conn:
            conn.execute(sql_update, (handle.id,))
    assert store.claim("w", ["capped"], 5, 3000) == []  # throttled: not claimable
    assert store.unthrottle_idle_keys() == 1
    assert [j.job_id for j in store.claim("w", ["capped"], 5, 3000,
                                           limits={("capped", "hold"): _limit(2)})] != []


def _limit(n):
    from ductline.store.records import StepLimit

    return StepLimit(n, None)


def test_the_limit_key_names_pipeline_step_and_value():
    opts = build_options(concurrency=1, concurrency_key="customer")
    assert limit_key("p", "s", opts, '[{"customer": "ada"}]') == 'p:s:"ada"'
    assert limit_key("p", "s", opts, '[{"customer": 7}]') == "p:s:7"
    assert limit_key("p", "s", opts, '[{"other": 1}]') == "p:s:null"
    assert limit_key("p", "s", opts, '[3]') == "p:s:null"
    assert limit_key("p", "s", build_options(rate=2), "[1]") == "p:s"
    assert limit_key("p", "s", build_options(), "[1]") is None


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"concurrency": 0}, ValueError, "concurrency must be from 1 to 1,000,000, got 0"),
    ({"concurrency": 1.5}, TypeError, "concurrency must be an int, not float (1.5)"),
    ({"concurrency": True}, TypeError, "concurrency must be an int, not bool (True)"),
    ({"rate": 0}, ValueError, "rate must be from 1.65344e-06 (one a week) to 10000 attempts per second, got 0"),
    ({"rate": 1e-17}, ValueError,
     "rate must be from 1.65344e-06 (one a week) to 10000 attempts per second, got 1e-17"),
    ({"rate": 10_001}, ValueError,
     "rate must be from 1.65344e-06 (one a week) to 10000 attempts per second, got 10001"),
    ({"rate": "5/s"}, TypeError, "rate must be a number of attempts per second, not str ('5/s')"),
    ({"concurrency_key": "customer"}, ValueError, "concurrency_key needs concurrency= or rate= to limit"),
    ({"concurrency": 1, "concurrency_key": ""}, TypeError,
     "concurrency_key must be the name of a field of the step's input, got ''"),
])
def test_limit_options_are_validated_at_definition_time(kwargs, error, message):
    from ductline import Pipeline

    with pytest.raises(error) as info:
        Pipeline("bad_limits").start(limit_app.quick, **kwargs)
    assert str(info.value) == message


def test_show_marks_a_throttled_step_and_gives_priorities(store, db_url):
    handles = [limit_app.capped.trigger(i, priority=7, database=store) for i in range(3)]
    limits = {("capped", "hold"): _limit(2)}
    assert len(store.claim("w", ["capped"], 5, 60_000, limits=limits)) == 2
    from ductline.views import run_view

    view = run_view(store, handles[2].id)
    assert view["priority"] == 7
    assert [(s["status"], s["throttled"], s["priority"], s["limit_key"]) for s in view["steps"]] == [
        ("pending", True, 7, "capped:hold")]
    shown = ductline_in_process("show", handles[2].id, "--database", db_url, env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    assert "pending (throttled)" in shown.stdout


def test_a_slot_held_by_a_killed_worker_is_freed_and_the_throttled_job_runs(store, db_url, workers):
    import signal

    first = limit_app.single.trigger(1, database=store)
    second = limit_app.single.trigger(2, database=store)
    doomed = workers(concurrency=2, app=APP)
    wait_for(lambda: sql(db_url, "SELECT count(*) FROM ductline_jobs WHERE throttled = 1")[0][0] == 1, 20)
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(90)
    workers(concurrency=2, app=APP)  # rescues the lease once it expires (3 s), frees the slot
    assert first.wait(60) == "completed" and second.wait(60) == "completed"
    results = sorted(r for (r,) in sql(db_url, "SELECT result FROM ductline_attempts"))
    assert results == ["crashed", "succeeded", "succeeded"]
    spans = attempt_spans(db_url, "slow")
    assert most_at_once([(a, b) for a, b, _ in spans]) == 1


def test_the_throttled_gauge_counts_jobs_waiting_for_a_slot(store):
    from ductline.observability.metrics import queue_depths

    for i in range(3):
        limit_app.capped.trigger(i, database=store)
    store.claim("w", ["capped"], 5, 60_000, limits={("capped", "hold"): _limit(2)})
    assert queue_depths(store) == {"capped": (0, 0, 1)}


def test_a_cancelled_attempt_keeps_its_slot_until_its_child_is_gone(store, db_url, workers, tmp_path):
    from ductline.operations.cancel import cancel_run

    pids = tmp_path / "pids"
    pids.mkdir()
    first = limit_app.exclusive.trigger("a", database=store)
    second = limit_app.exclusive.trigger("b", database=store)
    workers(concurrency=2, app=APP, env={"LIMIT_PIDS": str(pids)})
    wait_for(lambda: (pids / "a").exists() or (pids / "b").exists(), 30)
    running, waiting = (first, second) if (pids / "a").exists() else (second, first)
    holder = int(wait_for(lambda: (pids / ("a" if running is first else "b")).read_text(), 5))
    cancel_run(store, running.id)
    # The other run starts only once the cancelled attempt's child is gone (on SQLite
    # its worker learns of the cancel only at its next heartbeat).
    other = pids / ("b" if running is first else "a")
    wait_for(other.exists, 30)
    import os

    try:
        os.kill(holder, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the next attempt of the key started while the cancelled one still ran"
    assert waiting.wait(90) == "completed"


def test_start_slots_of_cancelled_jobs_are_given_out_again(store):
    import time

    from ductline.operations.cancel import cancel_run
    from ductline.store.records import StepLimit

    limits = {("rated", "quick"): StepLimit(None, 4)}
    queued = [limit_app.rated.trigger(i, database=store) for i in range(12)]
    assert len(store.claim("w", ["rated"], 20, 60_000, limits=limits)) == 1  # the others got slots ahead
    for handle in queued:
        cancel_run(store, handle.id)
    fresh = limit_app.rated.trigger(99, database=store)
    time.sleep(0.3)  # one interval (250 ms) after the last start
    assert [j.run_id for j in store.claim("w", ["rated"], 5, 60_000, limits=limits)] == [fresh.id]


def test_a_raised_limit_is_used_as_soon_as_a_slot_is_handed_on(store):
    from ductline.store.records import StepLimit

    handles = [limit_app.capped.trigger(i, database=store) for i in range(4)]
    [held] = store.claim("w", ["capped"], 5, 60_000, limits={("capped", "hold"): StepLimit(1, None)})
    # A deploy raises the limit to 3; the running attempt ends and hands its slot on.
    with store.transaction() as tx:
        assert tx.complete_jobs([(held.job_id, held.lease_token, "1")]) == {held.job_id}
        tx.unthrottle([held.limit_key])
    claimed = store.claim("w", ["capped"], 5, 60_000, limits={("capped", "hold"): StepLimit(3, None)})
    assert len(claimed) == 3 and {c.run_id for c in claimed} <= {h.id for h in handles}


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_a_worker_serving_limited_steps_claims_other_jobs_in_one_statement(store, db_url):
    """PostgreSQL's one-statement claim serves a worker that also serves limited steps,
    as long as the next ready jobs are not limited; when one is, the limits decide."""
    from ductline.store import Store, open_store
    from ductline.store.records import StepLimit

    noting = NotingDialect(open_store(db_url).dialect)
    claims = Store(noting)
    limits = {("capped", "hold"): StepLimit(1, None)}
    free = [limit_app.ranked.trigger(i, database=store) for i in range(3)]
    got = claims.claim("w", ["ranked", "capped"], 5, 60_000, limits=limits)
    assert sorted(c.run_id for c in got) == sorted(h.id for h in free)
    assert noting.names == ["claim_start_jobs"]
    noting.names.clear()
    capped = [limit_app.capped.trigger(i, database=store) for i in range(3)]
    got = claims.claim("w", ["ranked", "capped"], 5, 60_000, limits=limits)
    assert [c.run_id for c in got] == [capped[0].id]  # the limit holds: one at a time
    assert noting.names[0] == "claim_start_jobs" and "claim_candidates" in noting.names
    claims.close()

"""Step delays (DESIGN.md, "Step delays"; issue 4), on SQLite and on PostgreSQL.

Every lower bound is asserted exactly, from the database clock: an attempt never
starts before its job's not-before time, and that time is never earlier than the
previous step's completion plus the delay. Upper bounds are generous; precision
belongs to bench/delays.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import delay_app
import psycopg
import pytest
from helpers import ductline_in_process, stop_worker, wait_for

import ductline
from ductline.engine import record
from ductline.engine.advance import Completed, advance
from ductline.store import queries
from ductline.views import iso, run_view

DELAY_APP = str(Path(__file__).resolve().parents[1] / "apps" / "delay_app.py")
SLACK_MS = 60_000  # only "not absurdly late": lateness is measured by bench/delays.py, not here


# ======================================================================================
# helpers
# ======================================================================================
def sql(db_url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """A read (or write) on a separate connection of the test's database."""
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url[len("sqlite:///"):], timeout=30)
        try:
            rows = list(conn.execute(query.replace("%s", "?"), params).fetchall())
            conn.commit()
            return rows
        finally:
            conn.close()
    with psycopg.connect(db_url, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return list(cur.fetchall()) if cur.description else []


def steps(store, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """Jobs of a run by step name (several per step inside an expand), each with its
    attempts (``store.run_jobs`` + ``store.run_attempts``)."""
    attempts: dict[str, list[dict[str, Any]]] = {}
    for a in store.run_attempts(run_id):
        attempts.setdefault(a["job_id"], []).append(a)
    out: dict[str, list[dict[str, Any]]] = {}
    for job in store.run_jobs(run_id):
        out.setdefault(job["step"], []).append({**job, "attempts": attempts.get(job["id"], [])})
    return out


def only(store, run_id: str, step: str) -> dict[str, Any]:
    [job] = steps(store, run_id)[step]
    return job


def succeeded(job: dict[str, Any]) -> dict[str, Any]:
    """The one succeeded attempt of a job (and there is exactly one)."""
    ok = [a for a in job["attempts"] if a["result"] == "succeeded"]
    assert len(ok) == 1, (job["step"], job["attempts"])
    return ok[0]


def assert_never_early(store, run_id: str) -> None:
    """No job of the run started before its not-before time. (A retry or a revive
    moves the not-before time, so only a job's latest attempt is compared with it.
    An open attempt is not compared: a job claimed before its time holds its claim's
    time as its start until its worker records the real one, at its end.)"""
    for jobs in steps(store, run_id).values():
        for job in jobs:
            if job["attempts"]:
                last = max(job["attempts"], key=lambda a: a["attempt"])
                if last["result"] is not None:
                    assert last["started_ms"] >= job["not_before_ms"], (job["step"], last, job["not_before_ms"])


def assert_waited(start_ms: int, after_ms: int, delay_s: int, what: str) -> None:
    """``start_ms`` is at least ``delay_s`` after ``after_ms`` (exact), and not absurdly late."""
    lower = after_ms + delay_s * 1000
    assert start_ms >= lower, f"{what} started {lower - start_ms} ms early"
    assert start_ms - lower < SLACK_MS, f"{what} started {start_ms - lower} ms late"


def proc_status(pid: int, field: str) -> str:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
    raise KeyError(field)


def child_pids(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        if int(stat[stat.rfind(")") + 2:].split()[1]) == pid:
            found.add(int(entry))
    return found


def proc_state(pid: int) -> str:
    """The scheduler state of a process's main thread: "R" runnable, "S" sleeping, ..."""
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process (not its children)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def require(condition: object, message: str = "precondition failed") -> None:
    """A precondition of an xfail test: raises RuntimeError (not AssertionError), so a
    broken setup is reported as a failure instead of being taken for the known bug."""
    if not condition:
        raise RuntimeError(message)


def require_wait(condition, timeout: float = 30.0, interval: float = 0.05) -> object:
    try:
        return wait_for(condition, timeout=timeout, interval=interval)
    except AssertionError as exc:
        raise RuntimeError(str(exc)) from None


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The command run by the command line's entry point in this process: what it
    prints and exits with."""
    return ductline_in_process(*args)


def db_ms_to_datetime(ms: int, offset_hours: float = 0) -> datetime:
    """A database-clock time as an aware datetime (whole milliseconds)."""
    tz = timezone(timedelta(hours=offset_hours))
    return datetime(1970, 1, 1, tzinfo=UTC).astimezone(tz) + timedelta(milliseconds=ms)


# ======================================================================================
# 1. delay= on every transition: exact lower bounds
# ======================================================================================
def test_delay_on_chain_divide_expand_fan_ins_and_with_a_timeout(store, workers):
    workers(concurrency=5, app=DELAY_APP)
    h_chain = delay_app.chain.trigger(1, database=store)
    h_divide = delay_app.divided.trigger(7, database=store)
    h_expand = delay_app.expanded.trigger(3, database=store)
    h_timeout = delay_app.delay_and_timeout.trigger("t", database=store)
    for h in (h_chain, h_divide, h_expand, h_timeout):
        assert h.wait(60) == "completed", run_view(store, h.id)
    assert h_chain.output() == (1 + 1) * 10 - 1
    assert h_divide.output() == ["fast7", "slow7"]
    assert h_expand.output() == [0, 1, 4]

    # chain: first -(2 s)-> second -(1 s)-> third
    first, second, third = (succeeded(only(store, h_chain.id, s)) for s in ("first", "second", "third"))
    assert_waited(second["started_ms"], first["finished_ms"], 2, "second")
    assert_waited(third["started_ms"], second["finished_ms"], 1, "third")

    # divide: every branch head gets the delay; combine counts from the LAST branch
    split = succeeded(only(store, h_divide.id, "split"))
    branches = [succeeded(only(store, h_divide.id, s)) for s in ("fast_branch", "slow_branch")]
    for name, branch in zip(("fast_branch", "slow_branch"), branches):
        assert_waited(branch["started_ms"], split["finished_ms"], 1, name)
    last_branch = max(b["finished_ms"] for b in branches)
    assert last_branch - min(b["finished_ms"] for b in branches) >= 300  # the slow one really was last
    assert_waited(succeeded(only(store, h_divide.id, "join"))["started_ms"], last_branch, 2, "join")

    # expand: every element gets the delay; collapse counts from the LAST element
    make = succeeded(only(store, h_expand.id, "make_items"))
    elements = [succeeded(job) for job in steps(store, h_expand.id)["sleepy_item"]]
    assert len(elements) == 3
    for element in elements:
        assert_waited(element["started_ms"], make["finished_ms"], 1, "element")
    last_element = max(e["finished_ms"] for e in elements)
    assert last_element - min(e["finished_ms"] for e in elements) >= 300
    assert_waited(succeeded(only(store, h_expand.id, "gather"))["started_ms"], last_element, 2, "gather")

    # delay=2 + timeout=2 on a step that sleeps 1.5 s: it succeeds on its first attempt,
    # and its deadline counts from the moment it started executing, not from the trigger
    assert h_timeout.output() == "t"
    [attempt] = only(store, h_timeout.id, "slow_but_in_time")["attempts"]
    assert attempt["result"] == "succeeded"
    assert attempt["deadline_ms"] - attempt["started_ms"] == 2000
    assert attempt["finished_ms"] - attempt["started_ms"] >= 1500
    assert_waited(attempt["started_ms"], store.get_run(h_timeout.id)["created_ms"], 2, "delayed start")

    for h in (h_chain, h_divide, h_expand, h_timeout):
        assert_never_early(store, h.id)


# ======================================================================================
# 2. start delays: the definition's, trigger(delay=), trigger(delay_until=)
# ======================================================================================
def test_trigger_delay_and_delay_until_override_the_start_delay(store, workers):
    until_ms = store.now_ms() + 2500
    until = db_ms_to_datetime(until_ms, offset_hours=5.5)  # any offset: an instant is an instant
    default = delay_app.start_delayed.trigger("default", database=store)     # definition: delay=3
    shorter = delay_app.start_delayed.trigger("shorter", delay=1, database=store)
    at = delay_app.start_delayed.trigger("at", delay_until=until, database=store)
    now = delay_app.start_delayed.trigger("now", delay=timedelta(0), database=store)

    expected = {default.id: 3000, shorter.id: 1000, now.id: 0}
    for h in (default, shorter, at, now):
        run = store.get_run(h.id)
        job = only(store, h.id, "started")
        assert run["status"] == "pending" and h.status() == "pending"
        assert job["status"] == "pending" and job["attempts"] == []
        if h is at:
            assert job["not_before_ms"] == until_ms == run["not_before_ms"]
        else:
            wait_ms = job["not_before_ms"] - run["created_ms"]
            assert expected[h.id] <= wait_ms < expected[h.id] + 1000, (h, wait_ms)
        view = run_view(store, h.id)
        assert view["status"] == "pending"
        assert view["steps"][0]["not_before"] == iso(job["not_before_ms"])
    assert run_view(store, at.id)["steps"][0]["not_before"] == \
        until.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    workers(concurrency=4, app=DELAY_APP)
    for h in (shorter, at, now):
        assert h.wait(90) == "completed"
    for h in (default, shorter, at, now):
        assert_never_early(store, h.id)
    assert succeeded(only(store, at.id, "started"))["started_ms"] >= until_ms
    # the definition's 3 s was overridden: "shorter" could start 2 s before "default"
    # (when it did depends on how soon the worker was up, so only its time is compared)
    assert only(store, shorter.id, "started")["not_before_ms"] + 1500 < only(store, default.id, "started")["not_before_ms"]
    assert default.wait(90) == "completed"
    assert_never_early(store, default.id)


def future(seconds: float = 60) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    pytest.param(lambda: {"delay": 5, "delay_until": future()}, ValueError, "not both", id="both"),
    pytest.param(lambda: {"delay_until": datetime.now(UTC) - timedelta(seconds=1)}, ValueError,
                 "in the past", id="past"),
    pytest.param(lambda: {"delay_until": datetime.now() + timedelta(minutes=5)}, ValueError, "naive",
                 id="naive"),
    pytest.param(lambda: {"delay": -1}, ValueError, "negative", id="negative"),
    pytest.param(lambda: {"delay": timedelta(seconds=-5)}, ValueError, "negative", id="negative-timedelta"),
    pytest.param(lambda: {"delay": 1.5}, TypeError, "float", id="float"),
    pytest.param(lambda: {"delay": 2.0}, TypeError, "float", id="integral-float"),
    pytest.param(lambda: {"delay": timedelta(seconds=1.5)}, TypeError, "whole seconds", id="fractional-td"),
    pytest.param(lambda: {"delay": "5s"}, TypeError, "str", id="str"),
    pytest.param(lambda: {"delay_until": "2099-01-01T00:00:00+00:00"}, TypeError, "aware datetime",
                 id="until-str"),
])
def test_invalid_start_delays_raise_and_write_nothing(store, db_url, kwargs, error, message):
    with pytest.raises(error, match=message):
        delay_app.start_delayed.trigger("x", database=store, **kwargs())
    assert store.list_runs() == []
    assert sql(db_url, "SELECT count(*) FROM ductline_jobs") == [(0,)]


# ======================================================================================
# 3. the not-before time counts from the commit, not from the transaction's start
# ======================================================================================
def claim_first_step(store, pipeline) -> tuple[str, record.Attempt]:
    handle = pipeline.trigger(5, database=store)
    jobs = store.claim("test-claimer", [pipeline.name], 1, 60_000)
    require(len(jobs) == 1 and jobs[0].run_id == handle.id, f"claimed {jobs}")
    job = jobs[0]
    return handle.id, record.Attempt(job.job_id, job.run_id, job.step, job.scope, job.attempt,
                                     job.lease_token)


def test_not_before_is_not_counted_from_the_transaction_start(store):
    """A transaction that records the completion stays open 1.5 s before it creates
    the next job: the delay (2 s on ``second``) counts from the end of it."""
    run_id, attempt = claim_first_step(store, delay_app.chain)
    definition = delay_app.chain.definition()
    with store.transaction() as tx:
        opened_ms = tx.now_ms()
        time.sleep(1.5)
        before_create_ms = tx.now_ms()  # the last thing before the job is created and committed
        assert record.success(tx, definition, attempt, "6", 0).outcome == "completed"
    committed_ms = store.now_ms()
    job = only(store, run_id, "second")
    assert job["status"] == "pending"
    assert before_create_ms - opened_ms >= 1500
    assert job["not_before_ms"] >= before_create_ms + 2000
    assert job["not_before_ms"] >= opened_ms + 1500 + 2000
    assert job["not_before_ms"] <= committed_ms + 2000
    assert store.claim("test-claimer", [delay_app.chain.name], 10, 60_000) == []


def test_not_before_counts_from_the_commit_even_after_a_slow_tail(store):
    """Same as above, but the transaction stays open 0.5 s *after* advance() decided the
    job (as in a worker's batched recording transaction, which collects the jobs of the
    whole batch and inserts them with its last statement). DESIGN.md: the step runs no
    earlier than the moment the previous step committed its completion plus the delay."""
    run_id, attempt = claim_first_step(store, delay_app.chain)
    definition = delay_app.chain.definition()
    with store.transaction() as tx:
        require(tx.complete_job(attempt.job_id, attempt.lease_token, "6"))
        sink = []
        advance(tx, definition, Completed(run_id, attempt.step, attempt.scope, "6"), 0, sink)
        time.sleep(0.5)
        before_commit_ms = tx.now_ms()
        tx.insert_jobs(sink)
    job = only(store, run_id, "second")
    assert job["not_before_ms"] >= before_commit_ms + 2000, \
        f"not-before is {before_commit_ms + 2000 - job['not_before_ms']} ms before commit + delay"


# ======================================================================================
# 4. a waiting step is one row: no thread, no child, no lease, never claimed early
# ======================================================================================
def test_a_waiting_step_is_one_row(store, workers, db_url):
    worker = workers(concurrency=2, app=DELAY_APP)
    assert delay_app.ready.trigger(0, database=store).wait(90) == "completed"  # worker up and warm
    threads_before = int(proc_status(worker.pid, "Threads"))
    children_before = child_pids(worker.pid)
    from helpers import FAST_ENV

    spares = int(FAST_ENV["DUCTLINE_SPARE_CHILDREN"])
    assert len(children_before) == 2 + min(2, spares)  # two slots and their warm spares

    handles = [delay_app.waiting.trigger(i, database=store) for i in range(50)]
    assert store.claim("test-claimer", [delay_app.waiting.name], 100, 60_000) == []
    # a ready run triggered after them is done: the worker has seen the 50 waiting jobs
    assert delay_app.ready.trigger(1, database=store).wait(90) == "completed"

    # No thread and no process per waiting step. A short-lived thread of the worker's
    # own (one that ends by itself) may be caught running on a busy machine: wait for
    # the count to come back, which 50 threads sleeping for an hour never would.
    wait_for(lambda: int(proc_status(worker.pid, "Threads")) == threads_before, 10)
    assert child_pids(worker.pid) == children_before
    rows = sql(db_url, "SELECT status, lease_token, lease_expires_ms, worker_id, attempts, not_before_ms - "
                       "created_ms FROM ductline_jobs WHERE pipeline = %s", (delay_app.waiting.name,))
    assert len(rows) == 50
    for status, token, expires, worker_id, attempts, wait_ms in rows:
        assert (status, token, expires, worker_id, attempts) == ("pending", None, None, None, 0)
        assert wait_ms >= 3600 * 1000 - 1
    assert sql(db_url, "SELECT count(*) FROM ductline_attempts a JOIN ductline_jobs j ON j.id = a.job_id "
                       "WHERE j.pipeline = %s", (delay_app.waiting.name,)) == [(0,)]
    assert all(h.status() == "pending" for h in handles)
    assert store.claim("test-claimer", [delay_app.waiting.name], 100, 60_000) == []


def test_a_delayed_job_waits_exactly_its_delay_from_its_creation(store, db_url):
    """A job's not-before and created times are one clock read: the wait recorded is
    the delay to the millisecond, never a millisecond short (two reads per row came
    out 1-2 ms apart when the clock ticked between them, more often under load)."""
    delay_app.waiting.trigger_many(range(2000), database=store)
    delay_app.waiting.trigger(0, database=store)
    waits = sql(db_url, "SELECT DISTINCT not_before_ms - created_ms FROM ductline_jobs WHERE pipeline = %s",
                (delay_app.waiting.name,))
    assert waits == [(3600 * 1000,)]
    # a delayed run: the same rule for its row
    delay_app.ready.trigger_many(range(2000), delay=60, database=store)
    delay_app.ready.trigger(0, delay=60, database=store)
    waits = sql(db_url, "SELECT DISTINCT not_before_ms - created_ms FROM ductline_runs WHERE pipeline = %s",
                (delay_app.ready.name,))
    assert waits == [(60 * 1000,)]


def test_worker_does_not_spin_after_a_timer_wakeup_fills_its_slots(store, workers):
    """concurrency=1: the timer wakes the worker for a start delayed by 1 s, the claim
    fills the only slot, and the step runs 2 s. The parent process should sleep
    meanwhile (heartbeats only), not spin. Measured by sampling the worker's state in
    /proc every 10 ms: a spinning loop is runnable ("R") nearly all the time whatever
    the machine's load, a sleeping one almost never (CPU seconds depend on the load)."""
    worker = workers(concurrency=1, app=DELAY_APP)
    # The worker must be up and polling before the delayed job is created, so that the
    # claim comes from the not-before timer (a worker that starts after the job is due
    # takes it with its first claim and never sets the timer).
    require(delay_app.ready.trigger(0, database=store).wait(90) == "completed")
    handle = delay_app.busy_after_timer.trigger(2, database=store)
    require_wait(lambda: store.run_attempts(handle.id), timeout=30, interval=0.01)
    cpu_start = cpu_seconds(worker.pid)
    states: list[str] = []

    def sample_until_done() -> bool:
        states.append(proc_state(worker.pid))
        return handle.status() == "completed"

    require_wait(sample_until_done, timeout=30, interval=0.01)
    runnable = states.count("R") / len(states)
    busy_cpu = cpu_seconds(worker.pid) - cpu_start
    assert runnable < 0.3, (f"the worker parent was runnable in {runnable:.0%} of {len(states)} samples "
                            f"(and used {busy_cpu:.2f} s of CPU) while its only slot ran a 2 s step")


# ======================================================================================
# 5. restart safety: stop every worker while 20 delayed steps wait
# ======================================================================================
def test_delayed_steps_survive_a_restart_of_every_worker(store, workers, db_url):
    first_generation = [workers(concurrency=2, app=DELAY_APP) for _ in range(2)]
    # registered = signal handlers installed: SIGTERM below is a clean stop, not a kill
    wait_for(lambda: sum(w["status"] == "running" for w in store.list_workers()) == 2)
    handles = [delay_app.restart.trigger(i, database=store) for i in range(20)]

    def waiting_jobs() -> list[dict[str, Any]] | None:
        jobs = []
        for h in handles:
            by_step = steps(store, h.id)
            if "after_pause" not in by_step:
                return None
            jobs.append(by_step["after_pause"][0])
        return jobs

    created = "SELECT count(*) FROM ductline_jobs WHERE step = 'after_pause'"
    wait_for(lambda: sql(db_url, created) == [(20,)], timeout=30)
    for proc in first_generation:
        assert stop_worker(proc, signal.SIGTERM) == 0
    jobs = waiting_jobs()
    assert jobs is not None
    assert all(j["status"] == "pending" and j["attempts"] == [] for j in jobs)

    # wait past every not-before time with no worker running
    latest = max(j["not_before_ms"] for j in jobs)
    time.sleep(max(0.0, (latest - store.now_ms()) / 1000) + 0.3)
    assert store.now_ms() > latest
    assert all(j["status"] == "pending" and j["attempts"] == [] for j in waiting_jobs())

    for _ in range(2):
        workers(concurrency=2, app=DELAY_APP)
    for h in handles:
        assert h.wait(60) == "completed"
    for i, h in enumerate(handles):
        assert h.output() == i
        quick = succeeded(only(store, h.id, "quick"))
        job = only(store, h.id, "after_pause")
        assert len(job["attempts"]) == 1
        attempt = succeeded(job)
        assert attempt["started_ms"] >= job["not_before_ms"]
        assert_waited(attempt["started_ms"], quick["finished_ms"], delay_app.RESTART_DELAY, "after_pause")
        assert_never_early(store, h.id)


# ======================================================================================
# 6. PostgreSQL: the claim reads an index, not the waiting rows
# ======================================================================================
def claim_select_sql(now_literal: int | None = None) -> str:
    """The pick (SELECT) of ``claim_start_jobs`` exactly as in store/postgres/queries.sql,
    with literal parameters (and, if given, a literal for the database clock)."""
    text = queries.parse(queries.read("postgres", "queries.sql"))["claim_start_jobs"]
    found = re.search(r"WITH picked AS \(\s*(SELECT .*?LIMIT :limit)\s*\),\s*gate AS", text, re.DOTALL)
    assert found, text
    select = found.group(1)
    assert "status = 'pending'" in select and "not_before_ms <=" in select
    assert "ORDER BY j.not_before_ms" in select and "SKIP LOCKED" in select
    select = select.replace(":pipelines::jsonb", "'[\"delay_waiting\"]'::jsonb").replace(":limit", "4")
    select = select.replace(":queues::jsonb", "'[\"default\"]'::jsonb").replace(":definitions::jsonb", "NULL::jsonb")
    select = select.replace(":horizon_ms", "0")  # a claim of ready jobs (not ahead of their time)
    if now_literal is not None:
        select = select.replace("ductline_now_ms()", str(now_literal))
    assert ":" not in select.replace("::", ""), select
    return select


def fill_waiting_jobs(db_url: str, n: int) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("INSERT INTO ductline_runs (id, pipeline, status, args, not_before_ms, created_ms) "
                     "VALUES ('bulk', 'delay_waiting', 'pending', '[0]', ductline_now_ms() + 3600000, "
                     "ductline_now_ms())")
        conn.execute(
            "INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, status, input, not_before_ms, "
            "max_retry, max_crash, retry_delay_seconds, created_ms) "
            "SELECT 'job' || g, 'bulk', 'delay_waiting', 'far_future', g::text, 'pending', '[0]', "
            "ductline_now_ms() + 3600000 + g, 3, 10, 0, ductline_now_ms() FROM generate_series(1, %s) g",
            (n,))
        conn.execute("ANALYZE ductline_jobs")


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    nodes = [plan]
    for child in plan.get("Plans", []):
        nodes += plan_nodes(child)
    return nodes


def explain(db_url: str, query: str, analyze: bool = False) -> list[dict[str, Any]]:
    with psycopg.connect(db_url) as conn:  # a transaction, rolled back: FOR UPDATE locks nothing for long
        options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
        [[result]] = conn.execute(f"EXPLAIN ({options}) {query}").fetchall()
        conn.rollback()
    return plan_nodes(result[0]["Plan"])


def jobs_scans(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n for n in nodes if n.get("Relation Name") == "ductline_jobs"]


@pytest.mark.parametrize("backend", ["postgres"])
def test_postgres_claim_plan_uses_the_ready_index(db_url):
    fill_waiting_jobs(db_url, 20_000)
    now_ms = sql(db_url, "SELECT ductline_now_ms()")[0][0]
    nodes = explain(db_url, claim_select_sql(now_literal=now_ms))
    text = json.dumps(nodes)
    assert "ductline_jobs_ready" in text
    scans = jobs_scans(nodes)
    # The queues and priority levels (ductline_ready_queues) and each level's jobs: all from the ready index.
    assert {n.get("Index Name") for n in scans} == {"ductline_jobs_ready"}, text
    [level_scan] = [n for n in scans if "not_before_ms" in n.get("Index Cond", "")]
    assert "priority" in level_scan["Index Cond"], level_scan


@pytest.mark.parametrize("backend", ["postgres"])
def test_postgres_claim_as_written_reads_only_ready_rows(db_url):
    fill_waiting_jobs(db_url, 20_000)
    nodes = explain(db_url, claim_select_sql(), analyze=True)
    scans = jobs_scans(nodes)
    require({n.get("Index Name") for n in scans} == {"ductline_jobs_ready"}, json.dumps(scans))
    read = sum(n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0) for n in scans)
    assert read < 100, f"the claim read {read} rows of {len(scans)} scans: waiting rows were scanned"


def fill_ready_first_steps(db_url: str, n: int) -> str:
    """``n`` runs not yet started, each with its first step ready (phase 1), and one
    run under way whose next step became ready after all of them; returns its id."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("INSERT INTO ductline_runs (id, pipeline, status, args, not_before_ms, created_ms) "
                     "SELECT 'run' || g, 'delay_waiting', 'pending', '[0]', 0, 0 FROM generate_series(0, %s) g",
                     (n,))
        conn.execute(
            "INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, status, input, not_before_ms, "
            "max_retry, max_crash, retry_delay_seconds, created_ms, phase) "
            "SELECT 'first' || g, 'run' || g, 'delay_waiting', 'first', '', 'pending', '[0]', "
            "ductline_now_ms() - 600000 + g, 3, 10, 0, ductline_now_ms(), 1 FROM generate_series(1, %s) g",
            (n,))
        conn.execute("UPDATE ductline_runs SET status = 'running' WHERE id = 'run0'")
        conn.execute(
            "INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, status, input, not_before_ms, "
            "max_retry, max_crash, retry_delay_seconds, created_ms, phase) "
            "VALUES ('next', 'run0', 'delay_waiting', 'second', '', 'pending', '[0]', ductline_now_ms(), "
            "3, 10, 0, ductline_now_ms(), 0)")
        conn.execute("ANALYZE ductline_jobs")
        conn.execute("ANALYZE ductline_runs")
    return "next"


@pytest.mark.parametrize("backend", ["postgres"])
def test_postgres_claim_takes_a_started_run_first_reading_only_queue_heads(db_url):
    # 100,000 first steps ready before it: the next step of the run under way is taken
    # first, from the ready index, reading a handful of rows.
    next_id = fill_ready_first_steps(db_url, 100_000)
    nodes = explain(db_url, claim_select_sql(), analyze=True)
    scans = jobs_scans(nodes)
    assert {n.get("Index Name") for n in scans} == {"ductline_jobs_ready"}, json.dumps(scans)
    read = sum(n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0) for n in scans)
    assert read < 100, f"the claim read {read} rows of {len(scans)} scans"
    with psycopg.connect(db_url) as conn:
        picked = [row[0] for row in conn.execute(claim_select_sql()).fetchall()]
        conn.rollback()
    assert picked[0] == next_id and len(picked) == 4, picked
    assert picked[1:] == ["first1", "first2", "first3"]


@pytest.mark.parametrize("backend", ["postgres"])
def test_postgres_next_not_before_is_an_index_lookup(db_url):
    fill_waiting_jobs(db_url, 20_000)
    text = queries.parse(queries.read("postgres", "queries.sql"))["next_not_before"]
    query = text.replace(":pipelines::jsonb", "'[\"delay_waiting\"]'::jsonb")
    query = query.replace(":queues::jsonb", "'[\"default\"]'::jsonb").replace(":definitions::jsonb", "NULL::jsonb")
    nodes = explain(db_url, query, analyze=True)
    scans = jobs_scans(nodes)
    require(scans, json.dumps(nodes))
    assert not [n for n in scans if n["Node Type"] == "Seq Scan"], json.dumps(scans)
    read = sum(n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0) for n in scans)
    assert read < 100, f"the timer query read {read} pending rows"


# ======================================================================================
# 7. the CLI: --delay, --delay-until, malformed durations
# ======================================================================================
def test_cli_trigger_with_delay_and_delay_until(store, db_url):
    target = f"{DELAY_APP}:ready"
    delayed = cli("trigger", target, "--args", "[1]", "--delay", "2s", "--database", db_url, "--json")
    assert delayed.returncode == 0, delayed.stderr
    run_id = json.loads(delayed.stdout)["run_id"]
    run = store.get_run(run_id)
    job = only(store, run_id, "ready_now")
    assert run["status"] == "pending"
    assert 2000 <= job["not_before_ms"] - run["created_ms"] < 3000

    until_ms = store.now_ms() + 60_000
    until_text = db_ms_to_datetime(until_ms, offset_hours=-3).isoformat(timespec="milliseconds")
    assert until_text.endswith("-03:00")
    at = cli("trigger", target, "--args", "[2]", "--delay-until", until_text, "--database", db_url, "--json")
    assert at.returncode == 0, at.stderr
    at_id = json.loads(at.stdout)["run_id"]
    assert only(store, at_id, "ready_now")["not_before_ms"] == until_ms
    shown = cli("show", at_id, "--json", "--database", db_url)
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["status"] == "pending"
    assert view["steps"][0]["not_before"] == iso(until_ms)

    before = sql(db_url, "SELECT count(*) FROM ductline_runs")
    cases = (("--delay", "1.5m", "1.5m"), ("--delay", "-5", "-5"),
             ("--delay-until", "2099-01-01T09:00:00", "naive"), ("--delay-until", "tomorrow", "ISO 8601"))
    for flag, value, fragment in cases:
        refused = cli("trigger", target, flag, value, "--database", db_url, "--json")
        stdout, stderr = refused.stdout, refused.stderr
        assert refused.returncode == 2, (flag, value, stdout, stderr)
        assert fragment in stderr and "error" in stderr, stderr
        assert "Traceback" not in stderr
        assert stdout == ""
    assert sql(db_url, "SELECT count(*) FROM ductline_runs") == before == [(2,)]
    assert sql(db_url, "SELECT count(*) FROM ductline_jobs") == [(2,)]


# ======================================================================================
# 8. reviving a halted run must not cut a waiting step's delay short
# ======================================================================================
def test_revive_keeps_the_delay_of_a_waiting_step(store, workers):
    """A run halts while one of its steps waits out a delay; the operator retries the
    run at once: the waiting step still starts no earlier than its not-before time.
    (Found by this test; revive_jobs used to reset every held job to "now". Fixed in
    036265e: revive keeps remaining delays.)"""
    workers(concurrency=2, app=DELAY_APP)
    handle = delay_app.revive.trigger(1, database=store)
    assert handle.wait(90) == "halted"
    # on_time may finish after the halt (a loaded machine); its dependent is then created held
    require_wait(lambda: "later" in steps(store, handle.id))
    job = only(store, handle.id, "later")
    assert job["status"] == "held" and job["attempts"] == []
    # it still waits (delay=2 after on_time) when the operator retries the run
    assert store.now_ms() < job["not_before_ms"], "the halt came too late to test anything"
    assert store.revive_run(handle.id)
    assert handle.wait(90) == "completed"
    assert handle.output() == ["recovered", "later"]
    on_time = succeeded(only(store, handle.id, "on_time"))
    later = only(store, handle.id, "later")
    assert later["not_before_ms"] == job["not_before_ms"]
    assert_waited(succeeded(later)["started_ms"], on_time["finished_ms"], 2, "later")
    assert_never_early(store, handle.id)


# ======================================================================================
# 9. a delay too large to store is bad input: a clear error, nothing written, no worker hurt
# ======================================================================================
HUGE_DELAY = 10**16  # seconds; * 1000 + now does not fit a BIGINT / SQLite INTEGER


def test_a_delay_too_large_to_store_is_refused_at_definition_time():
    try:
        delay_app_huge = ductline.Pipeline("delay_huge").start(delay_app.first)
        delay_app_huge.chain(to=delay_app.second, delay=HUGE_DELAY)
        outcome = "accepted"
    except ValueError:
        outcome = "ValueError"
    assert outcome == "ValueError", f"delay={HUGE_DELAY} s was {outcome} at definition time"


def test_a_start_delay_too_large_to_store_is_a_clear_error(store, db_url):
    try:
        delay_app.ready.trigger(1, delay=HUGE_DELAY, database=store)
        outcome = "accepted"
    except (ValueError, TypeError):
        outcome = "clear"
    except Exception as exc:  # noqa: BLE001 - which error is the point of the test
        outcome = f"{type(exc).__name__}: {exc}"
    cli_result = cli("trigger", f"{DELAY_APP}:ready", "--args", "[1]", "--delay", "99999999999999d",
                     "--database", db_url, "--json")
    require(store.list_runs() == [], "something was written")
    assert outcome == "clear", f"trigger(delay={HUGE_DELAY}) raised {outcome}"
    assert cli_result.returncode == 2 and "Traceback" not in cli_result.stderr \
        and "delay" in cli_result.stderr, (cli_result.returncode, cli_result.stderr[-300:])

"""The indexes a trigger does not write (migration 0017): a new run has no deadline
yet and its first job is no element of an expand, so neither enters
``ductline_runs_deadline`` nor ``ductline_jobs_elements``; the statements that need
them still read them, on both backends."""

from __future__ import annotations

import json
import sqlite3
import uuid
from typing import Any

import psycopg
import pytest

from ductline import Pipeline
from ductline.store import Store, queries

UNFINISHED = ("pending", "running", "paused", "halted")


def split(n):
    return list(range(n))


def each(x):
    return x


def total(xs):
    return sum(xs)


def _fill(store: Store, runs: int = 3000, elements: int = 2000) -> None:
    """Unfinished runs, one in a hundred with a deadline; a run with many plain jobs
    and an expand's elements."""
    run_rows = [(f"run{i}", "filled", UNFINISHED[i % 4], "[]", i, i, 10_000_000 + i if i % 100 == 0 else None)
                for i in range(runs)]
    job_rows = [(f"job{i}", "run0", "filled", "each" if i < elements else "plain", str(i) if i < elements else f"p{i}",
                 "" if i < elements else None, i if i < elements else None, "completed", "[]", i, 0, 0, 0, i)
                for i in range(2 * elements)]
    with store.transaction() as tx:
        s: Any = tx.s
        raw = s._conn
        insert_runs = ("INSERT INTO ductline_runs (id, pipeline, status, args, not_before_ms, created_ms, deadline_ms) "
                       "VALUES (%s, %s, %s, %s, %s, %s, %s)")
        insert_jobs = ("INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, parent_scope, elem_index, status, "
                       "input, not_before_ms, max_retry, max_crash, retry_delay_seconds, created_ms) "
                       "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")
        if store.dialect.name == "sqlite":
            raw.executemany(insert_runs.replace("%s", "?"), run_rows)
            raw.executemany(insert_jobs.replace("%s", "?"), job_rows)
        else:
            with raw.cursor() as cur:
                cur.executemany(insert_runs, run_rows)
                cur.executemany(insert_jobs, job_rows)
        s._conn.execute("ANALYZE")


def _plan(store: Store, name: str, params: dict[str, Any]) -> str:
    """The plan of named statement ``name`` with ``params``, as text."""
    sql = queries.load(store.dialect.name)[name]
    if store.dialect.name == "sqlite":
        conn = sqlite3.connect(store.url[len("sqlite:///"):])
        try:
            return " | ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
        finally:
            conn.close()
    with psycopg.connect(store.url) as conn:
        [[result]] = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchall()
        conn.rollback()
    return json.dumps(result)


def test_deadline_queries_read_the_deadline_index(store: Store) -> None:
    _fill(store)
    assert "ductline_runs_deadline" in _plan(store, "due_deadlines", {"limit": 100})
    wakeups = {"pipelines": json.dumps(["filled"]), "queues": json.dumps(["default"]), "definitions": None}
    assert "ductline_runs_deadline" in _plan(store, "next_wakeups", wakeups)


def test_gathering_an_expand_reads_the_elements_index(store: Store) -> None:
    _fill(store)
    plan = _plan(store, "gather_elements", {"run_id": "run0", "step": "each", "parent_scope": ""})
    assert "ductline_jobs_elements" in plan, plan


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_trigger_writes_no_entry_in_either_index(store: Store) -> None:
    pipeline = Pipeline(f"noindex_{uuid.uuid4().hex[:8]}", timeout=60).start(split).expand(to=each).collapse(into=total)
    for i in range(20):
        pipeline.trigger(i, database=store)
    # An empty B-tree is its metapage alone; its first entry adds a page.
    with psycopg.connect(store.url, autocommit=True) as conn:
        pages = dict(conn.execute("SELECT relname, pg_relation_size(oid) / current_setting('block_size')::int "
                                  "FROM pg_class WHERE relname IN ('ductline_runs_deadline', "
                                  "'ductline_jobs_elements', 'ductline_runs_pkey')").fetchall())
    assert pages == {"ductline_runs_deadline": 1, "ductline_jobs_elements": 1, "ductline_runs_pkey": 2}

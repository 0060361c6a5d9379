"""Index entries written per job (migration 0018): an attempt's end changes no indexed
column, so on PostgreSQL it is a heap-only update; the elements index holds completed
elements only, so an element's insert and claim write nothing there. The statements
that read these tables still find their rows through an index, on both backends."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import psycopg
import pytest

from ductline.store import Store, queries


def _insert(conn: Any, dialect: str, sql: str, rows: list[tuple[Any, ...]]) -> None:
    if dialect == "sqlite":
        conn.executemany(sql.replace("%s", "?"), rows)
    else:
        with conn.cursor() as cur:
            cur.executemany(sql, rows)


_RUN = "INSERT INTO ductline_runs (id, pipeline, status, args, not_before_ms, created_ms) VALUES (%s, %s, %s, %s, %s, %s)"
_JOB = ("INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, parent_scope, elem_index, status, input, "
        "not_before_ms, max_retry, max_crash, retry_delay_seconds, created_ms) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")
_ATTEMPT = ("INSERT INTO ductline_attempts (job_id, attempt, run_id, lease_token, result, started_ms, finished_ms) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)")


def _fill(store: Store, jobs: int = 3000) -> None:
    """One run with many finished jobs (one attempt each) and one running job whose
    attempt is open."""
    with store.transaction() as tx:
        conn: Any = tx.s._conn  # type: ignore[attr-defined]
        name = store.dialect.name
        _insert(conn, name, _RUN, [("run0", "filled", "running", "[]", 0, 0)])
        _insert(conn, name, _JOB, [(f"job{i}", "run0", "filled", "plain", f"p{i}", None, None,
                                    "running" if i == 0 else "completed", "[]", i, 0, 0, 0, i)
                                   for i in range(jobs)])
        _insert(conn, name, _ATTEMPT, [(f"job{i}", 1, "run0", f"token{i}", None if i == 0 else "succeeded", i,
                                        None if i == 0 else i + 1) for i in range(jobs)])
        conn.execute("ANALYZE")


def _plan(store: Store, name: str, params: dict[str, Any]) -> str:
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


def test_an_open_attempt_is_found_by_the_primary_key(store: Store) -> None:
    _fill(store)
    plan = _plan(store, "close_attempt", {"result": "failed", "error_type": None, "error": None, "traceback": None,
                                          "started_ms": None, "deadline_ms": None, "finished_ms": None, "job_id": "job0",
                                          "attempt": 1, "lease_token": "token0"})
    key = "ductline_attempts_pkey" if store.dialect.name == "postgres" else "sqlite_autoindex_ductline_attempts_1"
    assert key in plan, plan
    assert "ductline_attempts_open" not in plan


@pytest.mark.parametrize("backend", ["postgres"])
def test_ending_an_attempt_adds_no_index_entries(store: Store) -> None:
    """A heap-only update: PostgreSQL counts it in n_tup_hot_upd (this transaction's
    own counts, pg_stat_xact_user_tables)."""
    with psycopg.connect(store.url) as conn:
        conn.execute(_RUN, ("run1", "filled", "running", "[]", 0, 0))
        conn.execute(_JOB, ("job1", "run1", "filled", "plain", "", None, None, "running", "[]", 0, 0, 0, 0, 0))
        conn.execute(_ATTEMPT, ("job1", 1, "run1", "token1", None, 0, None))
        sql = queries.load("postgres")["close_attempt"]
        params = {"result": "succeeded", "error_type": None, "error": None, "traceback": None, "started_ms": 5,
                  "deadline_ms": 1005, "finished_ms": None, "job_id": "job1", "attempt": 1, "lease_token": "token1"}
        assert conn.execute(sql, params).rowcount == 1
        [(updated, hot)] = conn.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables "
                                        "WHERE relname = 'ductline_attempts'").fetchall()
        assert (updated, hot) == (1, 1)
        conn.rollback()


@pytest.mark.parametrize("backend", ["postgres"])
def test_only_completed_elements_enter_the_elements_index(store: Store) -> None:
    def pages() -> int:  # an empty B-tree is its metapage alone; its first entry adds a page
        [[n]] = conn.execute("SELECT pg_relation_size('ductline_jobs_elements') / "
                             "current_setting('block_size')::int").fetchall()
        return int(n)

    with psycopg.connect(store.url, autocommit=True) as conn:
        conn.execute(_RUN, ("run2", "filled", "running", "[]", 0, 0))
        for i in range(50):
            conn.execute(_JOB, (f"el{i}", "run2", "filled", "each", str(i), "", i, "pending", "[]", i, 0, 0, 0, i))
        assert pages() == 1
        conn.execute("UPDATE ductline_jobs SET status = 'running' WHERE run_id = 'run2'")
        assert pages() == 1
        conn.execute("UPDATE ductline_jobs SET status = 'completed' WHERE run_id = 'run2'")
        assert pages() == 2
        rows = conn.execute(queries.load("postgres")["gather_elements"],
                            {"run_id": "run2", "step": "each", "parent_scope": ""}).fetchall()
        assert [r[0] for r in rows] == list(range(50))

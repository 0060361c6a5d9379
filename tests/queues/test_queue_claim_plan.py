"""The claim stays an index scan per served queue with 100,000 ready jobs in another
queue, on both backends: PostgreSQL's plan (EXPLAIN ANALYZE) reads only the ready
index and a handful of rows; SQLite's plan searches the ready index by queue, and the
claim costs about as many virtual-machine steps as on an empty database."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ductline.store import queries

BULK = 100_000


def fill(db_url: str, n: int) -> None:
    """``n`` ready jobs in queue "bulk" (one run) and one ready job in "default"."""
    rows = [
        "INSERT INTO ductline_runs (id, pipeline, status, args, not_before_ms, created_ms) "
        "VALUES ('bulk', 'qp', 'running', '[0]', 0, 0), ('mine', 'qp', 'running', '[0]', 0, 0)",
    ]
    if db_url.startswith("sqlite"):
        series = "(WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {n}) SELECT n FROM g)"
        bulk = ("INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, status, input, not_before_ms, "
                "max_retry, max_crash, retry_delay_seconds, created_ms, queue) "
                f"SELECT 'job' || n, 'bulk', 'qp', 'heavy', n, 'pending', '[0]', n, 3, 10, 0, 0, 'bulk' "
                f"FROM {series.format(n=n)}")
    else:
        bulk = ("INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, status, input, not_before_ms, "
                "max_retry, max_crash, retry_delay_seconds, created_ms, queue) "
                f"SELECT 'job' || g, 'bulk', 'qp', 'heavy', g::text, 'pending', '[0]', g, 3, 10, 0, 0, 'bulk' "
                f"FROM generate_series(1, {n}) g")
    rows.append(bulk)
    rows.append("INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, status, input, not_before_ms, "
                "max_retry, max_crash, retry_delay_seconds, created_ms, queue) "
                "VALUES ('wanted', 'mine', 'qp', 'light', '', 'pending', '[0]', 500000, 3, 10, 0, 0, 'default')")
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        with conn:
            for statement in rows:
                conn.execute(statement)
        conn.execute("ANALYZE")
        conn.close()
        return
    with psycopg.connect(db_url, autocommit=True) as conn:
        for statement in rows:
            conn.execute(statement)
        conn.execute("ANALYZE ductline_jobs")
        conn.execute("ANALYZE ductline_runs")


# -- PostgreSQL ------------------------------------------------------------------------------


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    nodes = [plan]
    for child in plan.get("Plans", []):
        nodes += plan_nodes(child)
    return nodes


def pick_sql(definitions: str) -> str:
    """The pick of claim_start_jobs as written, with literal parameters."""
    text = queries.parse(queries.read("postgres", "queries.sql"))["claim_start_jobs"]
    found = re.search(r"WITH picked AS \(\s*(SELECT .*?LIMIT :limit)\s*\),\s*gate AS", text, re.DOTALL)
    assert found, text
    select = (found.group(1).replace(":pipelines::jsonb", "'[\"qp\"]'::jsonb").replace(":limit", "4")
              .replace(":queues::jsonb", "'[\"default\"]'::jsonb").replace(":definitions::jsonb", definitions)
              .replace(":horizon_ms", "0"))
    assert ":" not in select.replace("::", ""), select
    return select


@pytest.mark.parametrize("backend", ["postgres"])
@pytest.mark.parametrize("definitions", ["NULL::jsonb", "'[\"\"]'::jsonb"])
def test_postgres_claim_reads_only_the_served_queue(db_url: str, definitions: str) -> None:
    fill(db_url, BULK)
    with psycopg.connect(db_url) as conn:  # rolled back: the pick's locks go at once
        [[result]] = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {pick_sql(definitions)}").fetchall()
        picked = [row[0] for row in conn.execute(pick_sql(definitions)).fetchall()]
        conn.rollback()
    nodes = plan_nodes(result[0]["Plan"])
    scans = [n for n in nodes if n.get("Relation Name") == "ductline_jobs"]
    text = json.dumps(scans)
    assert {n.get("Index Name") for n in scans} == {"ductline_jobs_ready"}, text
    [range_scan] = [n for n in scans if "not_before_ms" in n.get("Index Cond", "")]
    assert "queue" in range_scan["Index Cond"], range_scan
    read = sum(n.get("Actual Rows", 0) * n.get("Actual Loops", 1) + n.get("Rows Removed by Filter", 0)
               for n in scans)
    assert read < 100, f"the claim read {read} job rows: the other queue's were scanned ({text})"
    assert picked == ["wanted"]


# -- SQLite ----------------------------------------------------------------------------------


def vm_steps(conn: sqlite3.Connection, sql: str, params: dict[str, Any]) -> tuple[int, list[Any]]:
    """How many thousands of virtual-machine instructions ``sql`` ran, and its rows."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    conn.set_progress_handler(count, 1000)
    try:
        rows = conn.execute(sql, params).fetchall()
    finally:
        conn.set_progress_handler(None, 1000)
    return steps[0], rows


@pytest.mark.parametrize("backend", ["sqlite"])
def test_sqlite_claim_reads_only_the_served_queue(db_url: str) -> None:
    fill(db_url, BULK)
    loaded = queries.load("sqlite")
    conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    try:
        served = {"queues": json.dumps(["default"]), "horizon_ms": 0}
        plan = " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + loaded["ready_queues"], served))
        # Every read of the jobs is through the ready index (the first queue name is
        # the index's first entry: a scan that stops at one row).
        assert "ductline_jobs_ready" in plan and not re.search(r"SCAN (ductline_jobs|j)\b(?! USING INDEX)", plan), plan
        steps, ranges = vm_steps(conn, loaded["ready_queues"], served)
        assert ranges == [("default", 0, 0)]
        params = {"pipelines": json.dumps(["qp"]), "definitions": None, "lease_ms": 60_000, "worker_id": "w",
                  "limit": 4, "queue": "default", "priority": 0, "phase": 0}
        plan = " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + loaded["claim_jobs"], params))
        assert re.search(r"ductline_jobs USING INDEX ductline_jobs_ready \(queue=\? AND priority=\? AND "
                         r"phase=\? AND not_before_ms<\?\)", plan), plan
        claim_steps, claimed = vm_steps(conn, loaded["claim_jobs"], params)
        conn.rollback()
        assert [row[0] for row in claimed] == ["wanted"]
        # A scan of the other queue's 100,000 rows would take millions of instructions.
        assert steps + claim_steps < 200, f"{steps + claim_steps} thousand instructions"
    finally:
        conn.close()

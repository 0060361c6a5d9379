"""The dashboard's read-only queries on both backends: aggregates, keyset pagination
(correct with ties on created_ms, fast with 100,000 runs), and their plans."""

from __future__ import annotations

import sqlite3
import uuid

import pytest
import rt_app
import web_support
from helpers import wait_for

from ductline.store import Store, queries
from ductline.web.reader import COUNT_CAP, BadQuery, DashboardReader

STATEMENTS = [f"web_runs_{d}{f}" for d in ("older", "newer") for f in ("", "_status", "_pipeline", "_pipeline_status")]


def test_both_dialects_define_the_same_web_statements() -> None:
    names = {d: set(queries.parse(queries.read(d, "web_queries.sql"))) for d in ("sqlite", "postgres")}
    assert names["sqlite"] == names["postgres"]
    assert set(STATEMENTS) <= names["sqlite"]
    for dialect in ("sqlite", "postgres"):
        for name, sql in queries.parse(queries.read(dialect, "web_queries.sql")).items():
            text = sql.lstrip().upper()
            assert text.startswith(("SELECT", "WITH")), f"{dialect} {name} is not a read"
            assert not any(verb in text for verb in ("INSERT ", "UPDATE ", "DELETE ")), f"{dialect} {name} writes"


def make_runs(store: Store, count: int) -> None:
    """``count`` runs of two pipelines; several share a created_ms; every third is started."""
    for i in range(count):
        pipeline = rt_app.chain if i % 2 else rt_app.failing
        pipeline.trigger(i, database=store)
        if i % 3 == 0:
            web_support.claim(store, pipeline)


def expected(store: Store, status: str | None = None, pipeline: str | None = None) -> list[str]:
    rows = store.list_runs(status=status, pipeline=pipeline, limit=10_000)
    return [r["id"] for r in sorted(rows, key=lambda r: (r["created_ms"], r["id"]), reverse=True)]


@pytest.mark.parametrize("status,pipeline", [(None, None), ("pending", None), (None, "rt_chain"),
                                             ("running", "rt_failing")])
def test_keyset_pages_cover_every_run_once_in_both_directions(store: Store, status, pipeline) -> None:
    make_runs(store, 23)
    reader = DashboardReader(store)
    want = expected(store, status, pipeline)
    assert len(want) >= 3
    pages, cursor = [], None
    while True:
        page = reader.runs_page(status=status, pipeline=pipeline, after=cursor, limit=2)
        pages.append([r["id"] for r in page.runs])
        if page.older is None:
            break
        cursor = page.older
    assert [run for p in pages for run in p] == want
    assert all(len(p) == 2 for p in pages[:-1])
    back = []  # and back from the last page to the first, via the "newer" cursors
    page = reader.runs_page(status=status, pipeline=pipeline, after=cursor, limit=2) if cursor else None
    while page is not None and page.newer is not None:
        page = reader.runs_page(status=status, pipeline=pipeline, before=page.newer, limit=2)
        back.append([r["id"] for r in page.runs])
    if back:
        assert back[-1] == want[:2]  # back at the newest runs
        assert all(run in want for p in back for run in p)


def test_counts_by_status_pipeline_and_job_readiness(store: Store) -> None:
    web_support.seed(store)
    reader = DashboardReader(store)
    assert reader.run_counts() == {"pending": 1, "running": 1, "paused": 0, "completed": 1, "halted": 1,
                                   "failed": 0, "cancelled": 0}
    by_pipeline = reader.pipeline_counts()
    assert by_pipeline["rt_chain"]["completed"] == 1 and by_pipeline["rt_chain"]["pending"] == 1
    assert by_pipeline["rt_failing"]["halted"] == 1
    jobs = reader.job_counts()
    assert (jobs["ready"], jobs["delayed"], jobs["running"]) == (2, 1, 1)
    assert abs(jobs["now_ms"] - store.now_ms()) < 5_000
    (worker,) = reader.workers(lease_seconds=30)
    assert worker["health"] == "healthy"
    # Lost once its heartbeat is older than the lease (1 ms here): more than 1 ms, by
    # the database's clock, which a busy machine may take a while to show.
    wait_for(lambda: reader.workers(lease_seconds=0.001)[0]["health"] == "lost")


def test_bad_cursor_and_filters_are_refused(store: Store) -> None:
    reader = DashboardReader(store)
    for kwargs in ({"after": "x"}, {"before": "1.bad id"}, {"status": "weird"}, {"limit": 0}, {"limit": 500},
                   {"after": "1.a", "before": "1.a"}, {"pipeline": "p" * 201}):
        with pytest.raises(BadQuery):
            reader.runs_page(**kwargs)


def test_sqlite_listing_statements_read_an_index(tmp_path) -> None:
    store = web_support_store(tmp_path)
    sql = queries.load("sqlite")
    conn = sqlite3.connect(tmp_path / "plan.db")
    params = {"created_ms": 1, "id": "x", "status": "pending", "pipeline": "p", "limit": 51}
    for name in STATEMENTS:
        plan = " | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql[name], params))
        assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, (name, plan)
    conn.close()
    store.close()


def web_support_store(tmp_path) -> Store:
    from ductline.store import open_store

    store = open_store(f"sqlite:///{tmp_path}/plan.db")
    store.migrate()
    return store


def test_deep_pages_stay_fast_with_100000_runs(tmp_path) -> None:
    store = web_support_store(tmp_path)
    base = 1_700_000_000_000
    rows = [(uuid.uuid4().hex, f"pipe_{i % 7}", "halted" if i % 37 == 0 else "completed", "[]", base + i * 3 // 2,
             base) for i in range(100_000)]  # every other pair of runs shares a created_ms
    conn = sqlite3.connect(tmp_path / "plan.db")
    conn.executemany("INSERT INTO ductline_runs (id, pipeline, status, args, created_ms, not_before_ms) "
                     "VALUES (?, ?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()
    reader = DashboardReader(store)
    middle = f"{rows[50_000][4]}.{rows[50_000][0]}"
    # Work is counted in SQLite virtual-machine steps (thousands of them per tick), not
    # timed: the same on a quiet and on a loaded machine. A scan of 100,000 rows takes
    # thousands of ticks; an index range of 51 rows a few.
    ticks = [0]
    conn = getattr(store.dialect, "_connection")()
    conn.set_progress_handler(lambda: ticks.__setitem__(0, ticks[0] + 1) or 0, 1000)
    for kwargs in ({}, {"after": middle}, {"before": middle}, {"status": "halted", "after": middle},
                   {"pipeline": "pipe_3", "after": middle}, {"pipeline": "pipe_3", "status": "completed"}):
        ticks[0] = 0
        page = reader.runs_page(limit=50, **kwargs)
        assert len(page.runs) == 50, kwargs
        assert ticks[0] < 20, (kwargs, ticks[0])  # an index range of 51 rows, never a scan
    ticks[0] = 0
    counts = reader.run_counts()
    assert ticks[0] < 2_000  # capped counts over an index
    conn.set_progress_handler(None, 0)
    # Exact up to the cap, "more than the cap" beyond it: the cost does not grow with history.
    assert counts["completed"] == counts["halted"] == COUNT_CAP + 1
    assert sum(counts.values()) == 2 * (COUNT_CAP + 1)
    by_pipeline = reader.pipeline_counts()
    assert sorted(by_pipeline) == reader.pipeline_names() == [f"pipe_{i}" for i in range(7)]
    assert by_pipeline["pipe_0"]["completed"] == COUNT_CAP + 1 and by_pipeline["pipe_0"]["halted"] == 387
    store.close()

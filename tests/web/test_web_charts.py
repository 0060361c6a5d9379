"""The charts, read from the database on both backends: runs finished, failed and halted,
failed attempts free and paid, ready and delayed jobs, start lateness and attempt
duration per minute, from rows whose times are known to the millisecond; and the
statements that read them use indexes only (their cost follows the window's
activity, never the history's size)."""

from __future__ import annotations

import re

import pytest
from web_support import Raw

from ductline.store import Store
from ductline.web import charts, create_app
from ductline.web.charts import MINUTE_MS

S = 1000


def rows(raw: Raw, m: int, prefix: str = "") -> None:
    """Three runs around minute ``m`` (ms):

    - ``done`` (pipeline ``alpha``): its job waits delayed 20 s, ready 10 s, runs 1.5 s
      and completes at m+31.5 s;
    - ``paid`` (``beta``): its first attempt errors at m+6 s (free), its retry waits
      delayed until m+66 s and ready until m+70 s, crosses its boundary and errors at
      m+75 s (paid); the run halts then;
    - ``later`` (``alpha``): one job created at m-120 s, delayed for an hour.

    Ids get ``prefix``, so several sets can be written into one database.
    """
    p = prefix
    run = ("INSERT INTO ductline_runs (id, pipeline, status, args, halt_reason, not_before_ms, created_ms, "
           "started_ms, finished_ms) VALUES (?, ?, ?, '[]', ?, ?, ?, ?, ?)")
    job = ("INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, status, input, not_before_ms, attempts, "
           "max_retry, max_crash, retry_delay_seconds, boundary, created_ms, finished_ms) "
           "VALUES (?, ?, ?, 'work', '', ?, '[]', ?, ?, 3, 10, 1, ?, ?, ?)")
    attempt = ("INSERT INTO ductline_attempts (job_id, attempt, run_id, lease_token, result, started_ms, finished_ms) "
               "VALUES (?, ?, ?, 'token', ?, ?, ?)")
    raw.run([
        (run, (p + "done", "alpha", "completed", None, m, m, m + 30 * S, m + 31_500)),
        (job, (p + "done-j", p + "done", "alpha", "completed", m + 20 * S, 1, None, m, m + 31_500)),
        (attempt, (p + "done-j", 1, p + "done", "succeeded", m + 30 * S, m + 31_500)),
        (run, (p + "paid", "beta", "halted", "unsafe_to_retry", m, m, m + 5 * S, m + 75 * S)),
        (job, (p + "paid-j", p + "paid", "beta", "failed", m + 66 * S, 2, "charged", m, m + 75 * S)),
        (attempt, (p + "paid-j", 1, p + "paid", "errored", m + 5 * S, m + 6 * S)),
        (attempt, (p + "paid-j", 2, p + "paid", "errored", m + 70 * S, m + 75 * S)),
        (run, (p + "later", "alpha", "pending", None, m - 120 * S, m - 120 * S, None, None)),
        (job, (p + "later-j", p + "later", "alpha", "pending", m + 3600 * S, 0, None, m - 120 * S, None)),
    ])


@pytest.fixture
def minute(backend: str, db_url: str, store: Store) -> int:
    """A minute about twenty minutes ago, with the rows of `rows` around it: in the
    hour's window, and before the last ten minutes the day's window leaves out."""
    now = store.now_ms()
    m = now - now % (10 * MINUTE_MS) - 20 * MINUTE_MS
    rows(Raw(backend, db_url), m)
    return m


def by_start(window: charts.Window) -> dict[int, charts.Point]:
    return {p.start: p for p in window.points}


def test_each_minute_counts_what_happened_in_it(store: Store, minute: int):
    from ductline.web.reader import DashboardReader

    cache = charts.ChartCache(DashboardReader(store).chart_rows, store.now_ms)
    alpha = by_start(cache.window("hour", "alpha"))
    first = alpha[minute]
    assert (first.runs_finished, first.runs_failed) == (1, 0)
    # done: delayed 20 s and ready 10 s; later: delayed the whole minute
    assert first.ready == pytest.approx(10 / 60) and first.delayed == pytest.approx((20 + 60) / 60)
    assert first.lateness[50] == pytest.approx(10_000, rel=0.05)
    assert first.duration[50] == pytest.approx(1_500, rel=0.05)
    assert alpha[minute - 2 * MINUTE_MS].delayed == pytest.approx(1.0)  # later, from its creation

    beta = by_start(cache.window("hour", "beta"))
    assert (beta[minute].failed_free, beta[minute].failed_paid) == (1, 0)
    assert (beta[minute + MINUTE_MS].failed_free, beta[minute + MINUTE_MS].failed_paid) == (0, 1)
    # the halted run is not failed: it has a count of its own
    assert (beta[minute + MINUTE_MS].runs_finished, beta[minute + MINUTE_MS].runs_failed,
            beta[minute + MINUTE_MS].runs_halted) == (1, 0, 1)
    # first wait ready 5 s; the retry's wait delayed 6 s..60 s, then (next minute) 60..66 s delayed, 66..70 s ready
    assert beta[minute].ready == pytest.approx(5 / 60) and beta[minute].delayed == pytest.approx(54 / 60)
    assert beta[minute + MINUTE_MS].delayed == pytest.approx(6 / 60)
    assert beta[minute + MINUTE_MS].ready == pytest.approx(4 / 60)
    assert beta[minute + MINUTE_MS].lateness[50] == pytest.approx(4_000, rel=0.05)

    every = cache.window("hour")
    assert every.totals == {"finished": 2, "failed": 0, "halted": 1, "failed_free": 1, "failed_paid": 1}
    assert every.pipelines == ["alpha", "beta"]
    day = cache.window("day")
    assert day.totals == every.totals and len(day.points) == 144


def test_the_api_and_the_pages_show_the_series(store: Store, minute: int):
    from starlette.testclient import TestClient

    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        answer = client.get("/api/charts?window=hour&pipeline=beta").json()
        assert answer["totals"] == {"finished": 1, "failed": 0, "halted": 1, "failed_free": 1, "failed_paid": 1}
        points = {p["at"]: p for p in answer["points"]}
        assert len(points) == 60
        page = client.get("/charts?window=day").text
        assert page.count('<svg class="chart"') == 5
        for series in ("finished", "failed", "halted", "free", "paid", "ready", "delayed", "p50", "p95", "p99"):
            assert f'data-series="{series}"' in page
        assert client.get("/api/overview").json()["last_hour"] == {"finished": 2, "failed": 0, "halted": 1,
                                                                   "failed_free": 1, "failed_paid": 1}
        overview = client.get("/").text
        assert re.search(r'id="failed-free">1</strong>', overview) and re.search(r'id="failed-paid"[^>]*>1<', overview)
        assert client.get("/charts?window=week").status_code == 400
        assert client.get("/api/charts?window=week").status_code == 400


def test_failed_and_halted_runs_are_counted_apart(backend: str, db_url: str, store: Store, minute: int):
    """A failed run (its deadline passed) counts as failed, a halted one as halted, in
    the series, the totals, the overview's last hour (API and page) and the charts'
    API; both count among the runs finished."""
    from starlette.testclient import TestClient

    Raw(backend, db_url).run([(
        "INSERT INTO ductline_runs (id, pipeline, status, args, halt_reason, not_before_ms, created_ms, "
        "started_ms, finished_ms) VALUES ('late', 'beta', 'failed', '[]', NULL, ?, ?, ?, ?)",
        (minute, minute, minute + 2 * S, minute + 80 * S))])
    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        last_hour = client.get("/api/overview").json()["last_hour"]
        assert (last_hour["finished"], last_hour["failed"], last_hour["halted"]) == (3, 1, 1)
        overview = client.get("/").text
        assert re.search(r'id="runs-failed">1</strong> failed, <strong id="runs-halted">1</strong> halted', overview)
        assert "failed or halted" not in overview
        answer = client.get("/api/charts?window=hour&pipeline=beta").json()
        point = next(p for p in answer["points"] if p["runs_finished"])
        assert (point["runs_finished"], point["runs_failed"], point["runs_halted"]) == (2 / 1, 1 / 1, 1 / 1)
        assert (answer["totals"]["failed"], answer["totals"]["halted"]) == (1, 1)
        page = client.get("/charts?window=hour").text
        assert "1</strong> failed, <strong>1</strong> halted" in page


def explain(store: Store, backend: str, name: str, params: dict[str, object]) -> str:
    from ductline.store.queries import load

    sql = load(backend)[name]
    if backend == "sqlite":
        with store.dialect.reader() as session:
            conn = session._conn  # type: ignore[attr-defined]
            return "\n".join(str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
    with store.dialect.reader() as session:
        conn = session._conn  # type: ignore[attr-defined]
        conn.execute("SET enable_seqscan = off")  # any scan left has no index to use instead
        try:
            return "\n".join(next(iter(r.values())) for r in conn.execute("EXPLAIN " + sql, params))
        finally:
            conn.execute("RESET enable_seqscan")


@pytest.mark.parametrize("name", ["chart_runs_finished", "chart_activity"])
def test_the_statements_read_the_tables_through_indexes_only(store: Store, backend: str, name: str):
    now = store.now_ms()
    plan = explain(store, backend, name, {"since": now - 86_400_000, "until": now, "bucket_ms": MINUTE_MS})
    if backend == "sqlite":
        # Only the materialized list of runs is scanned; every table is searched by an index.
        scans = [line for line in plan.splitlines() if line.startswith("SCAN ") and line != "SCAN t"]
        assert not scans, plan
    else:
        assert "Seq Scan" not in plan, plan


def test_minutes_once_summarised_are_not_read_again(store: Store, minute: int):
    """After the day was read, the hour and the day again read only the minutes since
    (the hour's shorter horizon once made the day's oldest minutes be forgotten)."""
    from ductline.web.reader import DashboardReader

    reader = DashboardReader(store)
    spans: list[int] = []

    def fetch(since: int, until: int) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
        spans.append(until - since)
        return reader.chart_rows(since, until)

    cache = charts.ChartCache(fetch, store.now_ms)
    first = cache.window("day").totals
    cache.window("hour")
    assert cache.window("day").totals == first
    # The hour read at most its minutes past the day's end (the day ends on ten minutes);
    # the day again at most its last minute, if that is not over by SETTLE_MS yet.
    assert spans[0] == 1440 * MINUTE_MS and len(spans) <= 3, spans
    assert all(span <= 11 * MINUTE_MS for span in spans[1:]), spans


def test_the_served_dashboard_reads_the_day_ahead(store: Store, minute: int):
    """``ductline dashboard`` (warm_charts) reads the last day once it serves, so the
    first visit to the day's charts finds it summarised."""
    from helpers import wait_for
    from starlette.testclient import TestClient

    app = create_app(store, token=None, warm_charts=True)
    with TestClient(app, base_url="http://localhost") as client:
        wait_for(lambda: app.state.dashboard.charts.minutes_held >= 1400, timeout=30)
        assert client.get("/api/charts?window=day").json()["totals"]["failed_paid"] == 1


def test_a_long_read_does_not_hold_up_a_short_one_and_is_not_repeated(store: Store, minute: int):
    """While the day is being read (after a start), the overview's hour is read on its
    own, and a second request for the day waits for the first read instead of repeating it."""
    import threading

    from helpers import wait_for

    from ductline.web.reader import DashboardReader

    reader = DashboardReader(store)
    gate, reading = threading.Event(), threading.Event()
    spans: list[int] = []

    def fetch(since: int, until: int) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
        spans.append(until - since)
        if until - since > 2 * 3600 * 1000:  # the day's read: held until the test opens the gate
            reading.set()
            assert gate.wait(60)
        return reader.chart_rows(since, until)

    cache = charts.ChartCache(fetch, store.now_ms)
    days: list[charts.Window] = []
    first = threading.Thread(target=lambda: days.append(cache.window("day")))
    first.start()
    assert reading.wait(30)
    assert cache.window("hour").totals["failed_paid"] == 1  # while the day is still being read
    second = threading.Thread(target=lambda: days.append(cache.window("day")))
    second.start()
    wait_for(lambda: second.is_alive(), timeout=5)
    gate.set()
    first.join(30)
    second.join(30)
    assert [d.totals["failed_paid"] for d in days] == [1, 1]
    assert sum(1 for span in spans if span > 2 * 3600 * 1000) == 1, spans


def test_the_hour_is_not_held_up_by_the_day_when_both_end_on_the_same_minute() -> None:
    """At a ten-minute boundary the day's read covers the hour's minutes; the hour's
    request reads them itself rather than wait behind the day's read."""
    import threading

    boundary = 1_800_000_000_000 - 1_800_000_000_000 % (10 * 60_000) + 30_000  # 30 s into a ten-minute mark
    gate, reading = threading.Event(), threading.Event()

    def fetch(since: int, until: int) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
        if until - since > 2 * 3600 * 1000:
            reading.set()
            assert gate.wait(60)
        return [], []

    cache = charts.ChartCache(fetch, lambda: boundary)
    day = threading.Thread(target=lambda: cache.window("day"))
    day.start()
    try:
        assert reading.wait(30)
        hour = threading.Thread(target=lambda: cache.window("hour"))
        hour.start()
        hour.join(30)
        assert not hour.is_alive(), "the hour's request waited for the day's read"
    finally:
        gate.set()
        day.join(30)


def test_a_whole_count_is_shown_as_a_whole_number() -> None:
    from ductline.web.svgchart import rate

    assert [rate(v) for v in (0, 4.0, 12.0, 3.5, 0.25, 12.4)] == ["0", "4", "12", "3.5", "0.25", "12"]


def test_an_attempt_the_run_deadline_stopped_is_no_free_failure(backend: str, db_url: str, store: Store,
                                                                 minute: int):
    """The charts and the overview's last hour count failures by the rule the run page
    uses (`ductline.model.stops.stopped_by_deadline`): an attempt the run's deadline
    stopped in flight is neither free nor paid. They counted it free."""
    from starlette.testclient import TestClient

    raw = Raw(backend, db_url)
    raw.run([
        ("INSERT INTO ductline_runs (id, pipeline, status, args, halt_reason, not_before_ms, created_ms, "
         "started_ms, finished_ms) VALUES ('late', 'gamma', 'failed', '[]', NULL, ?, ?, ?, ?)",
         (minute, minute, minute + 2 * S, minute + 9 * S)),
        ("INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, status, input, not_before_ms, attempts, "
         "max_retry, max_crash, retry_delay_seconds, boundary, created_ms, finished_ms) "
         "VALUES ('late-j', 'late', 'gamma', 'work', '', 'failed', '[]', ?, 1, 3, 10, 1, NULL, ?, ?)",
         (minute, minute, minute + 9 * S)),
        ("INSERT INTO ductline_attempts (job_id, attempt, run_id, lease_token, result, error_type, error, "
         "started_ms, finished_ms) VALUES ('late-j', 1, 'late', 'token', 'timed_out', 'TimeoutError', "
         "'stopped at the run deadline: the run exceeded its deadline of 9 s', ?, ?)",
         (minute + 2 * S, minute + 9 * S)),
    ])
    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        totals = client.get("/api/charts?window=hour&pipeline=gamma").json()["totals"]
        assert (totals["failed"], totals["failed_free"], totals["failed_paid"]) == (1, 0, 0)
        last_hour = client.get("/api/overview").json()["last_hour"]
        assert (last_hour["failed_free"], last_hour["failed_paid"]) == (1, 1)  # the paid run's, as before

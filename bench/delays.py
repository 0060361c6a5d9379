#!/usr/bin/env python
"""Step-delay benchmarks of ductline (issue 4, "Performance").

    python bench/delays.py [--repeats 3] [--quick] [--backends postgresql,sqlite]
                           [--parts lateness,same_second,drain,scale] [--scale-pg 1000000]
                           [--scale-sqlite 100000] [--pickups 20] [--concurrency 4]

Every measurement uses a fresh database (PostgreSQL: DROP DATABASE ... WITH (FORCE)
+ CREATE DATABASE + migrate; SQLite: a new file) and ONE real worker process,
``python -m ductline worker --app bench/delay_bench_app.py --database URL --concurrency C``,
started with default settings (every DUCTLINE_* variable removed from its
environment). The step (``stamp``) returns the wall-clock time at which its body
ran; the database is on the same host, so that is the database clock. Two start
times are reported: "claim" = ductline_attempts.started_ms (written by the claim
statement) and "body" = the step's own timestamp (when the step really began).

(a) lateness: with the worker running and warm, 200 single-step runs are triggered
    with ``delay_until`` spaced 50 ms apart (10 s in all, the first 3 s ahead);
    lateness = start - job not_before_ms (claim and body). p50 / p99 / max.
(b) same second: 1,000 runs triggered with the same ``delay_until`` (a whole second
    T, far enough ahead to trigger them all first); figure = last attempt started_ms
    - T (also: first start - T). Target: 1,000 / drain rate + 50 ms, where the drain
    rate is (c0).
(c0) drain reference (as bench/core.py): 1,000 ready no-op runs triggered, then the
    worker started; rate = N / (last run finished_ms - first attempt started_ms).
(c) scale: N delayed jobs waiting an hour (bulk SQL insert: INSERT ... SELECT
    generate_series on PostgreSQL, executemany on SQLite; one run row holds them
    all, scope varies), then the worker is started and warmed; pickup latency =
    start (body; claim also shown) - job created_ms of a newly triggered ready run, measured
    --pickups times one after another (each waits for the previous to finish, with
    a random 100-300 ms pause). The same on an empty table; ratio of medians (target
    <= 2x). Peak RSS = VmHWM of the worker parent process (/proc) when the
    measurement ends. Diagnostics: the time of the claim and timer (next_not_before)
    statements as the worker sends them, run directly (median of 10).

Values are medians over --repeats (per-repeat values in brackets).
"""

from __future__ import annotations

import argparse
import json
import re
import math
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
APP = HERE / "delay_bench_app.py"
sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402

import core  # noqa: E402
import delay_bench_app  # noqa: E402  (bench_delay_stamp: one step that returns its start time)
from ductline.store import Store, open_store, queries  # noqa: E402

DEFAULT_PG = os.environ.get("DUCTLINE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
PG_DB = "ductline_bench_delays" + os.environ.get("DUCTLINE_BENCH_DB_SUFFIX", "")
PIPELINE = delay_bench_app.bench_stamp.name
STEP = "stamp"
TRIGGER = delay_bench_app.bench_stamp.trigger
HOUR_MS = 3_600_000


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ======================================================================================
# backends
# ======================================================================================
class Pg:
    name = "postgresql"

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.base = admin_url.rpartition("/")[0]

    def fresh(self) -> str:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{PG_DB}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{PG_DB}"')
        url = f"{self.base}/{PG_DB}"
        return core.migrated(url)

    def query(self, url: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(url, autocommit=True) as conn:
            cur = conn.execute(sql, params)
            return list(cur.fetchall()) if cur.description else []

    def bulk_waiting(self, url: str, n: int) -> float:
        """n pending jobs of the bench pipeline due in an hour; returns seconds taken."""
        t0 = time.perf_counter()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO ductline_runs (id, pipeline, status, args, not_before_ms, created_ms) "
                         "VALUES ('bulk', %s, 'pending', '[0]', ductline_now_ms() + %s, ductline_now_ms())",
                         (PIPELINE, HOUR_MS))
            if n:
                conn.execute(
                    "INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, status, input, not_before_ms,"
                    " max_retry, max_crash, retry_delay_seconds, created_ms) "
                    "SELECT 'bulk' || g, 'bulk', %s, %s, g::text, 'pending', '[0]',"
                    " ductline_now_ms() + %s + g %% 60000, 3, 10, 10, ductline_now_ms()"
                    " FROM generate_series(1, %s) AS g", (PIPELINE, STEP, HOUR_MS, n))
            conn.execute("VACUUM ANALYZE ductline_jobs")
        return time.perf_counter() - t0

    def statement_times(self, url: str) -> dict[str, float]:
        """The claim's SELECT and next_not_before as the worker sends them (median ms of 10)."""
        q = queries.parse(queries.read("postgres", "queries.sql"))
        claim = q["claim_jobs"]
        # The CTE that picks the rows (every priority level, SKIP LOCKED), without the UPDATE.
        found = re.search(r"WITH picked AS \(\s*(SELECT .*?LIMIT :limit)\s*\)\s*UPDATE", claim, re.DOTALL)
        assert found, claim
        select = found.group(1)
        pipelines = json.dumps([PIPELINE])
        stmts = {
            "claim SELECT (LIMIT 4)": select.replace(":pipelines", "%(p)s").replace(":limit", "4"),
            "next_not_before": q["next_not_before"].replace(":pipelines", "%(p)s"),
        }
        out = {}
        with psycopg.connect(url) as conn:
            for name, sql in stmts.items():
                times = []
                for _ in range(10):
                    t0 = time.perf_counter()
                    conn.execute(sql, {"p": pipelines}).fetchall()
                    times.append((time.perf_counter() - t0) * 1000)
                    conn.rollback()
                out[name] = statistics.median(times)
        return out


class Sqlite:
    name = "sqlite"

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="ductline_bench_delays_")
        self.n = 0

    def fresh(self) -> str:
        self.n += 1
        url = f"sqlite:///{self.dir}/delays_{self.n}.db"
        return core.migrated(url)

    @staticmethod
    def path(url: str) -> str:
        return url[len("sqlite:///"):]

    def query(self, url: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(self.path(url), timeout=30)
        try:
            rows = list(conn.execute(sql.replace("%s", "?"), params or ()).fetchall())
            conn.commit()
            return rows
        finally:
            conn.close()

    def bulk_waiting(self, url: str, n: int) -> float:
        t0 = time.perf_counter()
        conn = sqlite3.connect(self.path(url), timeout=30, isolation_level=None)
        try:
            now = conn.execute(f"SELECT {queries.SQLITE_NOW_MS}").fetchone()[0]
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO ductline_runs (id, pipeline, status, args, not_before_ms, created_ms) "
                         "VALUES ('bulk', ?, 'pending', '[0]', ?, ?)", (PIPELINE, now + HOUR_MS, now))
            conn.executemany(
                "INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, status, input, not_before_ms,"
                " max_retry, max_crash, retry_delay_seconds, created_ms) "
                "VALUES (?, 'bulk', ?, ?, ?, 'pending', '[0]', ?, 3, 10, 10, ?)",
                ((f"bulk{g}", PIPELINE, STEP, str(g), now + HOUR_MS + g % 60000, now) for g in range(1, n + 1)))
            conn.execute("COMMIT")
            conn.execute("ANALYZE")
        finally:
            conn.close()
        return time.perf_counter() - t0

    def statement_times(self, url: str) -> dict[str, float]:
        q = queries.load("sqlite")
        claim = q["claim_jobs"]
        select = claim[claim.index("SELECT id"):claim.index("LIMIT :limit") + len("LIMIT :limit")]
        stmts = {"claim SELECT (LIMIT 4)": select, "next_not_before": q["next_not_before"]}
        params = {"pipelines": json.dumps([PIPELINE]), "limit": 4, "priority": 0}  # the one level here
        out = {}
        conn = sqlite3.connect(self.path(url), timeout=30)
        try:
            for name, sql in stmts.items():
                times = []
                for _ in range(10):
                    t0 = time.perf_counter()
                    conn.execute(sql, params).fetchall()
                    times.append((time.perf_counter() - t0) * 1000)
                out[name] = statistics.median(times)
        finally:
            conn.close()
        return out


# ======================================================================================
# the worker process
# ======================================================================================
def proc_status(pid: int, field: str) -> str | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def kib(value: str | None) -> int:
    return int(value.split()[0]) if value else -1


def child_pids(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2:].split()[1]) == pid:
                found.append(int(entry))
    return found


class Worker:
    """One ``python -m ductline worker`` process; always stopped on exit (SIGTERM by
    PID, then SIGKILL of it and its children by PID if it does not stop)."""

    def __init__(self, url: str, concurrency: int, log_dir: str, label: str) -> None:
        self.url, self.concurrency = url, concurrency
        self.log_path = os.path.join(log_dir, f"worker_{label}.log")
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "Worker":
        env = {k: v for k, v in os.environ.items() if not k.startswith("DUCTLINE_")}
        env["DUCTLINE_SHUTDOWN_GRACE_SECONDS"] = "10"
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ductline", "worker", "--app", str(APP), "--database", self.url,
             "--concurrency", str(self.concurrency)],
            env=env, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=self.log_dir)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"worker exited with {self.proc.returncode}; see {self.log_path}")

    def peak_rss_kib(self) -> int:
        return kib(proc_status(self.pid, "VmHWM"))

    def __exit__(self, *exc: Any) -> None:
        proc = self.proc
        try:
            if proc is not None and proc.poll() is None:
                children = child_pids(proc.pid)
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    log(f"worker {proc.pid} did not stop in 60 s: SIGKILL")
                    children = sorted(set(children + child_pids(proc.pid)))
                    proc.kill()
                    proc.wait()
                    for pid in children:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
        finally:
            self._log.close()


# ======================================================================================
# helpers
# ======================================================================================
def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))] if s else float("nan")


def wait_until(check: Callable[[], bool], timeout: float, what: str, worker: Worker | None = None,
               interval: float = 0.05) -> None:
    end = time.monotonic() + timeout
    while not check():
        if worker is not None:
            worker.alive()
        if time.monotonic() > end:
            raise TimeoutError(f"{what} not reached within {timeout} s")
        time.sleep(interval)


def aware(ms: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=ms)


def completed(backend: Any, url: str) -> int:
    return int(backend.query(url, "SELECT count(*) FROM ductline_runs WHERE status = 'completed' "
                                  "AND id <> 'bulk'")[0][0])


def check_no_bad_runs(backend: Any, url: str) -> None:
    bad = backend.query(url, "SELECT status, count(*) FROM ductline_runs WHERE status IN "
                             "('halted', 'failed', 'cancelled') GROUP BY status")
    if bad:
        raise RuntimeError(f"runs ended badly: {bad}")


def warm_up(backend: Any, url: str, store: Store, worker: Worker, n: int = 8) -> None:
    """Runs until the worker and every child slot have served a step."""
    before = completed(backend, url)
    for i in range(n):
        TRIGGER(-1, database=store)
    wait_until(lambda: completed(backend, url) >= before + n, 120, "warm-up", worker)


def start_rows(backend: Any, url: str, exclude_before_ms: int) -> list[tuple[int, int, int, int]]:
    """``(claim started_ms, body start ms, not_before_ms, attempt finished_ms)`` of every
    first attempt of a job created at or after ``exclude_before_ms``."""
    rows = backend.query(url, "SELECT a.started_ms, r.output, j.not_before_ms, a.finished_ms "
                              "FROM ductline_attempts a JOIN ductline_jobs j ON j.id = a.job_id "
                              "JOIN ductline_runs r ON r.id = j.run_id "
                              "WHERE j.created_ms >= %s AND a.attempt = 1", (exclude_before_ms,))
    return [(int(r[0]), int(json.loads(r[1])), int(r[2]), int(r[3])) for r in rows]


# ======================================================================================
# (a) lateness over 200 steps spread over 10 s
# ======================================================================================
def bench_lateness(backend: Any, n: int, spacing_ms: int, concurrency: int, log_dir: str,
                   label: str) -> dict[str, float]:
    url = backend.fresh()
    store = open_store(url)
    try:
        with Worker(url, concurrency, log_dir, label) as worker:
            warm_up(backend, url, store, worker)
            mark = store.now_ms()
            first = mark + 3000
            for i in range(n):
                TRIGGER(i, delay_until=aware(first + i * spacing_ms), database=store)
            triggered = store.now_ms()
            if triggered >= first:
                log(f"WARNING: triggering took until {triggered - first} ms after the first not-before")
            wait_until(lambda: completed(backend, url) >= n + 8, 60 + n * spacing_ms / 1000,
                       f"{n} delayed runs", worker)
        check_no_bad_runs(backend, url)
        rows = start_rows(backend, url, mark)
    finally:
        store.close()
    assert len(rows) == n, (len(rows), n)
    claim = [c - nb for c, _, nb, _ in rows]
    body = [b - nb for _, b, nb, _ in rows]
    return {"p50": pct(claim, 50), "p99": pct(claim, 99), "max": max(claim), "min": min(claim),
            "body_p50": pct(body, 50), "body_p99": pct(body, 99), "body_max": max(body),
            "body_min": min(body), "trigger_ms": triggered - mark}


# ======================================================================================
# (b) 1,000 steps due at the same second
# ======================================================================================
def bench_same_second(backend: Any, n: int, concurrency: int, log_dir: str, label: str,
                      margin_s: float) -> dict[str, float]:
    url = backend.fresh()
    store = open_store(url)
    try:
        with Worker(url, concurrency, log_dir, label) as worker:
            warm_up(backend, url, store, worker)
            mark = store.now_ms()
            due = (mark // 1000 + 1 + math.ceil(margin_s)) * 1000  # a whole second
            when = aware(due)
            for i in range(n):
                TRIGGER(i, delay_until=when, database=store)
            triggered = store.now_ms()
            if triggered >= due:
                raise RuntimeError(f"triggering {n} runs did not finish before the due second; "
                                   "raise --margin")
            wait_until(lambda: completed(backend, url) >= n + 8, 120 + margin_s, f"{n} runs", worker)
        check_no_bad_runs(backend, url)
        rows = start_rows(backend, url, mark)
    finally:
        store.close()
    assert len(rows) == n and all(nb == due for _, _, nb, _ in rows), len(rows)
    starts = sorted(c for c, _, _, _ in rows)
    bodies = sorted(b for _, b, _, _ in rows)
    return {"last": starts[-1] - due, "first": starts[0] - due, "p50": pct([s - due for s in starts], 50),
            "body_last": bodies[-1] - due, "body_first": bodies[0] - due,
            "early": sum(1 for s in starts + bodies if s < due), "trigger_s": (triggered - mark) / 1000,
            "done": max(f for _, _, _, f in rows) - due}


# ======================================================================================
# (c0) drain reference, as bench/core.py measures it
# ======================================================================================
def bench_drain(backend: Any, n: int, concurrency: int, log_dir: str, label: str) -> float:
    url = backend.fresh()
    store = open_store(url)
    try:
        for i in range(n):
            TRIGGER(i, database=store)
    finally:
        store.close()
    with Worker(url, concurrency, log_dir, label) as worker:
        wait_until(lambda: completed(backend, url) >= n, 300, f"drain of {n}", worker, interval=0.1)
    check_no_bad_runs(backend, url)
    first = backend.query(url, "SELECT min(started_ms) FROM ductline_attempts")[0][0]
    last = backend.query(url, "SELECT max(finished_ms) FROM ductline_runs")[0][0]
    return n / ((int(last) - int(first)) / 1000)


# ======================================================================================
# (c) scale: pickup latency and worker RSS with N jobs waiting an hour
# ======================================================================================
def bench_scale(backend: Any, waiting: int, pickups: int, concurrency: int, log_dir: str,
                label: str) -> dict[str, Any]:
    url = backend.fresh()
    insert_s = backend.bulk_waiting(url, waiting)
    stmt = backend.statement_times(url)
    store = open_store(url)
    try:
        with Worker(url, concurrency, log_dir, label) as worker:
            warm_up(backend, url, store, worker)
            rss_warm = worker.peak_rss_kib()
            pick, pick_claim = [], []
            for i in range(pickups):
                time.sleep(random.uniform(0.1, 0.3))
                handle = TRIGGER(i, database=store)
                end = time.monotonic() + 60
                while handle.status() != "completed":
                    worker.alive()
                    if time.monotonic() > end:
                        raise TimeoutError(f"pickup run {handle.id} did not complete in 60 s")
                    time.sleep(0.005)
                [job] = store.run_jobs(handle.id)
                [attempt] = store.run_attempts(handle.id)
                pick_claim.append(int(attempt["started_ms"]) - int(job["created_ms"]))
                pick.append(int(handle.output()) - int(job["created_ms"]))
            peak = worker.peak_rss_kib()
            rss_now = kib(proc_status(worker.pid, "VmRSS"))
            threads = proc_status(worker.pid, "Threads")
        still = backend.query(url, "SELECT count(*) FROM ductline_jobs WHERE run_id = 'bulk' "
                                   "AND status = 'pending' AND lease_token IS NULL")[0][0]
    finally:
        store.close()
    if int(still) != waiting:
        raise RuntimeError(f"{waiting - int(still)} waiting jobs were touched")
    return {"p50": median(pick), "max": max(pick), "min": min(pick), "all": pick, "peak_kib": peak,
            "claim_p50": median(pick_claim), "claim_max": max(pick_claim),
            "rss_warm_kib": rss_warm, "rss_kib": rss_now, "threads": threads, "insert_s": insert_s,
            "stmt": stmt}


# ======================================================================================
# main
# ======================================================================================
def fmt(values: list[float], spec: str = ".0f") -> str:
    return "[" + ", ".join(format(v, spec) for v in values) + "]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1 repeat, smaller scale (100k PG / 20k SQLite)")
    ap.add_argument("--backends", default="postgresql,sqlite")
    ap.add_argument("--parts", default="lateness,same_second,drain,scale")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--spacing-ms", type=int, default=50)
    ap.add_argument("--same-second", type=int, default=1000)
    ap.add_argument("--margin", type=float, default=12.0, help="seconds ahead for the same-second runs")
    ap.add_argument("--scale-pg", type=int, default=1_000_000)
    ap.add_argument("--scale-sqlite", type=int, default=100_000)
    ap.add_argument("--pickups", type=int, default=20, help="pickups per case (SQLite: twice as many)")
    ap.add_argument("--pg-url", default=DEFAULT_PG)
    args = ap.parse_args()
    if args.quick:
        args.repeats, args.scale_pg, args.scale_sqlite = 1, 100_000, 20_000
    parts = set(args.parts.split(","))
    log_dir = tempfile.mkdtemp(prefix="ductline_bench_delays_logs_")
    log(f"worker logs in {log_dir}")
    backends = []
    for name in args.backends.split(","):
        backends.append(Pg(args.pg_url) if name == "postgresql" else Sqlite())

    sections: list[tuple[str, list[tuple[str, str, str]]]] = []
    for backend in backends:
        rows: list[tuple[str, str, str]] = []
        b = backend.name
        drain_rate = None
        if "lateness" in parts:
            res = []
            for r in range(args.repeats):
                log(f"{b}: lateness, repeat {r + 1}/{args.repeats}")
                res.append(bench_lateness(backend, args.steps, args.spacing_ms, args.concurrency, log_dir,
                                          f"{b}_lateness_{r}"))
            target = 25 if b == "postgresql" else 50
            title = f"(a) lateness, {args.steps} steps over {args.steps * args.spacing_ms / 1000:g} s"
            for prefix, what in (("", "claim"), ("body_", "body")):
                for key in ("p50", "p99", "max"):
                    vals = [x[prefix + key] for x in res]
                    note = f" (target <= {target} ms)" if key == "p99" else ""
                    rows.append((f"{title}, {what}: {key}{note}", f"{median(vals):7.0f} ms", fmt(vals)))
                vals = [x[prefix + "min"] for x in res]
                rows.append((f"    {what}: min lateness (negative = early)", f"{median(vals):7.0f} ms",
                             fmt(vals)))
        if "drain" in parts:
            vals = []
            for r in range(args.repeats):
                log(f"{b}: drain reference, repeat {r + 1}/{args.repeats}")
                vals.append(bench_drain(backend, args.same_second, args.concurrency, log_dir, f"{b}_drain_{r}"))
            drain_rate = median(vals)
            rows.append((f"(b0) drain of {args.same_second} ready no-op runs (core benchmark method)",
                         f"{drain_rate:7.0f} /s", fmt(vals)))
        if "same_second" in parts:
            res = []
            for r in range(args.repeats):
                log(f"{b}: {args.same_second} due at the same second, repeat {r + 1}/{args.repeats}")
                res.append(bench_same_second(backend, args.same_second, args.concurrency, log_dir,
                                             f"{b}_same_{r}", args.margin))
            vals = [x["last"] for x in res]
            note = ""
            if drain_rate:
                note = f" (target <= {args.same_second / drain_rate * 1000 + 50:.0f} ms = N / drain + 50)"
            rows.append((f"(b) {args.same_second} steps due at one second: last claim - due{note}",
                         f"{median(vals):7.0f} ms", fmt(vals)))
            for key, label in (("body_last", "last body start - due"), ("first", "first claim - due"),
                               ("body_first", "first body start - due"), ("p50", "median claim - due"),
                               ("done", "last finish - due")):
                vals = [x[key] for x in res]
                rows.append((f"    {label}", f"{median(vals):7.0f} ms", fmt(vals)))
            rows.append(("    started early (count)", f"{sum(x['early'] for x in res):7d}", ""))
        if "scale" in parts:
            big = args.scale_pg if b == "postgresql" else args.scale_sqlite
            results = {}
            for n in (0, big):
                log(f"{b}: scale, {n} waiting jobs")
                count = args.pickups * (2 if b == "sqlite" else 1)  # SQLite: poll-phase noise
                results[n] = bench_scale(backend, n, count, args.concurrency, log_dir, f"{b}_scale_{n}")
            empty, full = results[0], results[big]
            for n, res in ((0, empty), (big, full)):
                rows.append((f"(c) pickup latency (body), {n:,} jobs waiting an hour: median of {len(res['all'])}",
                             f"{res['p50']:7.0f} ms", f"min {res['min']}, max {res['max']}"))
                rows.append((f"    pickup latency (claim), {n:,} waiting", f"{res['claim_p50']:7.0f} ms",
                             f"max {res['claim_max']}"))
            ratio = full["p50"] / empty["p50"] if empty["p50"] > 0 else float("inf")
            rows.append((f"(c) RATIO pickup (body) {big:,} waiting / empty (target <= 2x)", f"{ratio:7.1f}x", ""))
            for n, res in ((0, empty), (big, full)):
                rows.append((f"(c) worker peak RSS (VmHWM), {n:,} waiting",
                             f"{res['peak_kib'] / 1024:7.1f} MiB",
                             f"after warm-up {res['rss_warm_kib'] / 1024:.1f} MiB, threads {res['threads']}"))
            for n, res in ((0, empty), (big, full)):
                for name, ms in res["stmt"].items():
                    rows.append((f"    {name}, {n:,} waiting (direct, median of 10)", f"{ms:7.3f} ms", ""))
            rows.append((f"    bulk insert of {big:,} waiting jobs (+ ANALYZE)", f"{full['insert_s']:7.1f} s", ""))
        sections.append((b, rows))

    print()
    print(f"ductline step-delay benchmark -- one worker process, --concurrency {args.concurrency}, "
          f"{os.cpu_count()} CPUs, default settings; medians of {args.repeats} repeat(s) [per-repeat values]")
    for b, rows in sections:
        if not rows:
            continue
        width = max(len(r[0]) for r in rows)
        print("-" * (width + 40))
        print(f"backend: {b}")
        for name, value, per in rows:
            print(f"{name:<{width}}  {value:>11}  {per}")
    print("-" * 40)
    return 0


if __name__ == "__main__":
    sys.exit(main())

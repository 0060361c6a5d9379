#!/usr/bin/env python
"""The dashboard over a history of a million runs: how long each page takes.

    python bench/dashboard_history.py [--runs 1000000] [--days 30] [--backends sqlite,postgres]
                                      [--repeats 5] [--keep DIR] [--reuse] [--name NAME]
                                      [--admin-url postgresql://postgres@127.0.0.1:5432/test]

Loads ``--runs`` runs spread evenly over the last ``--days`` days into a fresh
database per backend (SQLite in a temporary folder, PostgreSQL as a database of its
own), as a busy deployment would have them: five pipelines of three chained steps
(the third delayed 5 s), each step run with its attempts; one run in 20 retries its
first step once, one in 100 halts (its second step fails three times, or, one in
300, fails after crossing its boundary), one in 200 fails at its deadline and one
in 300 is cancelled. Now, 200 runs are in flight: running, ready and delayed jobs.

Then, per backend, a ``ductline dashboard`` over it, and the wall time of GET
requests (the HTML or JSON fully read), ``--repeats`` times each, median and max,
beside the CPU time the request cost: the dashboard process's, plus its PostgreSQL
backends' (the machine may be busy with other work; CPU time does not wait for it):
the overview, the runs page, a run's page, and the charts (hour and day, all
pipelines and one). Chart figures come in two kinds: *cold*, the first request of a
freshly started dashboard -- which reads the last day in the background from its
start, so a cold request for the day waits for that read, and one for the hour reads
its hour beside it (its CPU time counts the day's read too: it is the process's) --
and *warm*, the next ones (only the minutes not yet summarised are read).

``--keep DIR`` keeps the SQLite file there and the PostgreSQL database
(``--name``, default ``ductline_dashboard_bench``) for another round with ``--reuse``.
The same rate per day with a tenth of the history (``--runs 100000 --days 3``) shows
what the pages' cost follows: the window's activity, not the history's size.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import psycopg

from ductline.store import open_store

PIPELINES = ("orders", "emails", "reports", "billing", "sync")
STEPS = ("fetch", "transform", "deliver")
RUN_COLUMNS = ("id", "pipeline", "status", "args", "output", "halt_reason", "metadata", "not_before_ms",
               "created_ms", "started_ms", "finished_ms")
JOB_COLUMNS = ("id", "run_id", "pipeline", "step", "scope", "status", "input", "output", "not_before_ms",
               "attempts", "failures", "max_retry", "max_crash", "retry_delay_seconds", "boundary", "created_ms",
               "finished_ms", "phase")
ATTEMPT_COLUMNS = ("job_id", "attempt", "run_id", "lease_token", "worker_id", "result", "started_ms",
                   "finished_ms", "error_type", "error")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def history(runs: int, days: float, now_ms: int, seed: int = 7) -> Iterator[tuple[list[tuple[Any, ...]], ...]]:
    """Batches of ``(runs, jobs, attempts)`` rows: ``runs`` runs spread over ``days``
    days before ``now_ms``, the last 200 still in flight."""
    rng = random.Random(seed)
    span = int(days * 86_400_000)
    batch: tuple[list[tuple[Any, ...]], ...] = ([], [], [])
    for g in range(runs):
        run_id = f"h{g:031d}"
        created = now_ms - span + g * span // runs
        in_flight = g >= runs - 200
        if in_flight:
            created = now_ms - (runs - g) * 300  # one every 0.3 s over the last minute
        pipeline = PIPELINES[g % len(PIPELINES)]
        fate = "completed"
        if g % 100 == 50:
            fate = "paid" if g % 300 == 50 else "halted"
        elif g % 200 == 7:
            fate = "failed"
        elif g % 300 == 11:
            fate = "cancelled"
        t = created
        jobs_rows, attempt_rows = [], []
        status, halt, finished = "completed", None, None
        started = None
        for index, step in enumerate(STEPS):
            job_id = f"j{g:030d}{index}"
            not_before = t + (5_000 if index == 2 else 0)
            tries: list[tuple[str, int, int, str | None]] = []  # result, started, finished, error type
            at = not_before
            boundary = None
            if in_flight and index == (g % 3):
                # the in-flight runs stop here: running, ready or delayed
                mode = g % 3
                nb = not_before + (60_000 if mode == 2 else 0)
                if mode == 0:
                    tries.append(("running", at + rng.randint(2, 40), 0, None))
                jobs_rows.append((job_id, run_id, pipeline, step, "", "running" if mode == 0 else "pending",
                                  "[1]", None, nb, len(tries), 0, 3, 10, 1, None, t, None, 0 if index else 1))
                for n, (result, s, f, et) in enumerate(tries, 1):
                    attempt_rows.append((job_id, n, run_id, f"l{g}", "bench-worker", None, s, None, None, None))
                status = "running" if index or mode == 0 else "pending"
                started = started or (at if mode == 0 or index else None)
                break
            failures_wanted = 1 if (index == 0 and g % 20 == 0) else 0
            if fate in ("halted", "paid") and index == 1:
                failures_wanted = 3 if fate == "halted" else 1
            for n in range(failures_wanted + 1):
                begin = at + rng.randint(2, 40)
                end = begin + int(rng.lognormvariate(5.5, 1.0))
                last = n == failures_wanted
                if fate in ("halted", "paid") and index == 1 and last and fate == "halted":
                    tries.append(("errored", begin, end, "ValueError"))
                    break
                if fate == "paid" and index == 1 and last:
                    boundary = "charged the card"
                    tries.append(("errored", begin, end, "RuntimeError"))
                    break
                if fate == "failed" and index == 1:
                    tries.append(("timed_out", begin, end, "TimeoutError"))
                    break
                if fate == "cancelled" and index == 1:
                    tries.append(("cancelled", begin, end, "Cancelled"))
                    break
                tries.append(("succeeded" if last else "errored", begin, end, None if last else "ConnectionError"))
                at = end + 1_000
            started = started or tries[0][1]
            outcome = tries[-1][0]
            job_status = {"succeeded": "completed", "errored": "failed", "timed_out": "failed",
                          "cancelled": "cancelled"}[outcome]
            job_end = tries[-1][2]
            jobs_rows.append((job_id, run_id, pipeline, step, "", job_status, "[1]",
                              "[2]" if job_status == "completed" else None, not_before, len(tries),
                              sum(1 for r in tries if r[0] != "succeeded"), 3, 10, 1, boundary, t, job_end,
                              0 if index else 1))
            for n, (result, s, f, et) in enumerate(tries, 1):
                attempt_rows.append((job_id, n, run_id, f"l{g}.{index}.{n}", "bench-worker", result, s, f, et,
                                     None if et is None else f"{et}: bench"))
            t = job_end
            if job_status != "completed":
                status = {"failed": "halted" if fate in ("halted", "paid") else "failed",
                          "cancelled": "cancelled"}[job_status]
                halt = {"halted": "job_retries_exhausted", "paid": "unsafe_to_retry"}.get(fate)
                finished = job_end
                break
        else:
            if not in_flight:
                finished = t
        run = (run_id, pipeline, status, "[1]", "[2]" if status == "completed" else None, halt,
               '{"timeout_exceeded": true}' if fate == "failed" else "{}", created, created, started, finished)
        batch[0].append(run)
        batch[1].extend(jobs_rows)
        batch[2].extend(attempt_rows)
        if len(batch[0]) >= 20_000:
            yield batch
            batch = ([], [], [])
    if batch[0]:
        yield batch


def _insert_sql(table: str, columns: tuple[str, ...], mark: str) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join([mark] * len(columns))})"


def load_sqlite(path: str, runs: int, days: float) -> None:
    store = open_store(f"sqlite:///{path}")
    store.migrate()
    now_ms = store.now_ms()
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=OFF")
        for rows, jobs, attempts in history(runs, days, now_ms):
            conn.executemany(_insert_sql("ductline_runs", RUN_COLUMNS, "?"), rows)
            conn.executemany(_insert_sql("ductline_jobs", JOB_COLUMNS, "?"), jobs)
            conn.executemany(_insert_sql("ductline_attempts", ATTEMPT_COLUMNS, "?"), attempts)
            conn.commit()
        conn.execute("ANALYZE")


def _copy(conn: psycopg.Connection[Any], table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    with conn.cursor().copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def load_postgres(admin_url: str, name: str, runs: int, days: float) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{admin_url.rpartition('/')[0]}/{name}"
    store = open_store(url)
    store.migrate()
    now_ms = store.now_ms()
    store.close()
    with psycopg.connect(url) as conn:
        for rows, jobs, attempts in history(runs, days, now_ms):
            _copy(conn, "ductline_runs", RUN_COLUMNS, rows)
            _copy(conn, "ductline_jobs", JOB_COLUMNS, jobs)
            _copy(conn, "ductline_attempts", ATTEMPT_COLUMNS, attempts)
            conn.commit()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (Linux ``/proc``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Dashboard:
    """A ``ductline dashboard`` subprocess over ``url``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "ductline", "--log-level", "WARNING", "dashboard",
                                      "--port", str(self.port), "--database", url],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=5).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("the dashboard did not start")
                time.sleep(0.1)

    def _backends(self) -> list[int]:
        """PIDs of the PostgreSQL backends serving the dashboard (none for SQLite)."""
        if not self.url.startswith("postgresql"):
            return []
        with psycopg.connect(self.url, autocommit=True) as conn:
            return [int(r[0]) for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'ductline-dashboard'")]

    def cpu(self) -> float:
        return _cpu_seconds(self.proc.pid) + sum(_cpu_seconds(pid) for pid in self._backends())

    def get(self, path: str) -> tuple[float, float]:
        """Seconds of wall time and of CPU time (the dashboard and its database
        backends) to fetch ``path`` completely (a status other than 200 raises)."""
        cpu = self.cpu()
        began = time.perf_counter()
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=300) as response:
            response.read()
        wall = time.perf_counter() - began
        return wall, self.cpu() - cpu

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


def measure(url: str, runs: int, repeats: int) -> dict[str, list[tuple[float, float]]]:
    run_path = f"/runs/h{runs - 1000:031d}"  # a run near the end of the history
    warm_pages = {"overview": "/", "runs page": "/runs", "run page": run_path,
                  "charts, hour (warm)": "/charts", "charts, day (warm)": "/charts?window=day",
                  "charts, day, one pipeline (warm)": "/charts?window=day&pipeline=orders",
                  "API charts, day (warm)": "/api/charts?window=day"}
    cold_pages = {"charts, hour (cold)": "/charts", "charts, day (cold)": "/charts?window=day"}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in (*cold_pages, *warm_pages)}
    for _ in range(repeats):
        for name, path in cold_pages.items():  # a fresh dashboard per cold request
            dashboard = Dashboard(url)
            try:
                times[name].append(dashboard.get(path))
            finally:
                dashboard.stop()
    dashboard = Dashboard(url)
    try:
        dashboard.get("/charts?window=day")  # warms the summaries of the day
        for _ in range(repeats):
            for name, path in warm_pages.items():
                times[name].append(dashboard.get(path))
    finally:
        dashboard.stop()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--keep", help="a folder to keep the SQLite file in (and keep the PostgreSQL database)")
    parser.add_argument("--reuse", action="store_true", help="measure the databases kept by --keep")
    parser.add_argument("--name", default="ductline_dashboard_bench",
                        help="the PostgreSQL database and SQLite file name")
    parser.add_argument("--admin-url", default=os.environ.get("DUCTLINE_TEST_PG_URL",
                                                              "postgresql://postgres@127.0.0.1:5432/test"))
    args = parser.parse_args()
    folder = args.keep or tempfile.mkdtemp(prefix="dashboard-bench-")
    results: dict[str, dict[str, list[tuple[float, float]]]] = {}
    try:
        for backend in args.backends.split(","):
            if backend == "sqlite":
                path = str(Path(folder) / f"{args.name}.db")
                if not args.reuse:
                    if os.path.exists(path):
                        os.remove(path)
                    began = time.monotonic()
                    load_sqlite(path, args.runs, args.days)
                    log(f"sqlite: loaded {args.runs} runs in {time.monotonic() - began:.0f} s "
                        f"({os.path.getsize(path) / 2 ** 30:.1f} GiB)")
                url = f"sqlite:///{path}"
            else:
                url = f"{args.admin_url.rpartition('/')[0]}/{args.name}"
                if not args.reuse:
                    began = time.monotonic()
                    url = load_postgres(args.admin_url, args.name, args.runs, args.days)
                    log(f"postgres: loaded {args.runs} runs in {time.monotonic() - began:.0f} s")
            results[backend] = measure(url, args.runs, args.repeats)
            log(f"{backend}: measured")
    finally:
        if not args.keep:
            if "postgres" in args.backends:
                with psycopg.connect(args.admin_url, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{args.name}" WITH (FORCE)')
            path = Path(folder) / f"{args.name}.db"
            for suffix in ("", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)

    out = io.StringIO()
    backends = list(results)
    print(f"\n{args.runs:,} runs over {args.days:g} days; a GET in ms: wall time median (max) and CPU time "
          f"median, of {args.repeats}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", file=out)
    print(f"{'page':<36}" + "".join(f"{b + ' wall (max) / cpu':>30}" for b in backends), file=out)
    for name in next(iter(results.values())):
        cells = []
        for b in backends:
            wall = [w * 1000 for w, _ in results[b][name]]
            cpu = [c * 1000 for _, c in results[b][name]]
            cells.append(f"{statistics.median(wall):>8.0f} ({max(wall):>6.0f}) / {statistics.median(cpu):>5.0f}")
        print(f"{name:<36}" + "".join(f"{c:>30}" for c in cells), file=out)
    print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())

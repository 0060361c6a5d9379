#!/usr/bin/env python
"""Where a delayed step's lateness goes (diagnostic companion of figures.py's ``burst``).

    python bench/trace_delays.py [--sqlite] [--runs 200] [--repeats 1]

Runs one worker in this process (`build_worker`, real children, 2 slots) on a fresh
database, triggers ``--runs`` single-step runs within one second, each due 3 s after
its own trigger (as figures.py's burst does), and reports, per run:

* lateness: the step called (its own ``time.time()``) minus its ``delay_until``;
* split at the parent's start of the attempt (`Claimer.start`): due → started in the
  parent, started → called in the child;
* whether the job was claimed before its time (held in the queue ahead,
  `Ahead.add_early`) or at or after it, and the lateness of each group;
* the database clock's error bound the held jobs waited for (`DatabaseClock.passed`);
* the confirmation of the held jobs' leases at their time (`Store.confirm_leases`):
  how long each call took, and its wait for a pooled connection;
* for the first few jobs claimed late, the claims around their time: when each began
  (relative to the job's time), how long it took, its horizon and what it took.

The database is on this host, so a step's ``time.time()`` is the database clock.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_app  # noqa: E402
from core import DEFAULT_PG, PgBackend  # noqa: E402
from ductline import clock as clock_module  # noqa: E402
from ductline.config import load_settings  # noqa: E402
from ductline.runtime import ahead as ahead_module, claimer as claimer_module  # noqa: E402
from ductline.runtime.launch import build_worker  # noqa: E402
from ductline.store import open_store, store as store_module, tx as tx_module  # noqa: E402
from psycopg_pool import ConnectionPool  # noqa: E402

DELAY_SECONDS = 3.0


class Trace:
    """What the hooks saw: the parent's starts, the jobs held early, the claims and the
    clock bounds (wall-clock seconds, like the steps' marks)."""

    def __init__(self) -> None:
        self.starts: dict[str, float] = {}
        self.early: set[str] = set()
        self.claims: list[tuple[float, float, int, list[str]]] = []
        self.bounds: list[float] = []
        self.confirms: list[float] = []  # ms per Store.confirm_leases call
        self.checkouts: list[float] = []  # ms waited for a pooled connection by those calls
        self._confirming = threading.local()

    def install(self) -> Any:
        """Hook the worker's functions; returns what puts the originals back."""
        start, add_early = claimer_module.Claimer.start, ahead_module.Ahead.add_early
        claim, passed = tx_module.Tx.claim, clock_module.DatabaseClock.passed
        confirm, getconn = store_module.Store.confirm_leases, ConnectionPool.getconn

        def traced_start(claimer: Any, slot: Any, job: Any, **how: Any) -> bool:
            self.starts[job.job_id] = time.time()
            return start(claimer, slot, job, **how)

        def traced_add_early(ahead: Any, jobs: list[Any], confirmed: float) -> None:
            self.early.update(job.job_id for job in jobs)
            add_early(ahead, jobs, confirmed)

        def traced_claim(tx: Any, *args: Any, **kwargs: Any) -> Any:
            began = time.time()
            jobs = claim(tx, *args, **kwargs)
            self.claims.append((began, time.time(), kwargs.get("horizon_ms", 0), [j.job_id for j in jobs]))
            return jobs

        def traced_passed(clock: Any, db_ms: float) -> float:
            at = passed(clock, db_ms)
            self.bounds.append((at - clock.to_monotonic(db_ms)) * 1000)
            return at

        def traced_confirm(store: Any, leases: Any) -> Any:
            self._confirming.on, began = True, time.perf_counter()
            try:
                return confirm(store, leases)
            finally:
                self._confirming.on = False
                self.confirms.append((time.perf_counter() - began) * 1000)

        def traced_getconn(pool: Any, timeout: float | None = None) -> Any:
            began = time.perf_counter()
            try:
                return getconn(pool, timeout)
            finally:
                if getattr(self._confirming, "on", False):
                    self.checkouts.append((time.perf_counter() - began) * 1000)

        store_module.Store.confirm_leases = traced_confirm  # type: ignore[method-assign]
        ConnectionPool.getconn = traced_getconn  # type: ignore[method-assign]
        claimer_module.Claimer.start = traced_start  # type: ignore[method-assign]
        ahead_module.Ahead.add_early = traced_add_early  # type: ignore[method-assign]
        tx_module.Tx.claim = traced_claim  # type: ignore[method-assign]
        clock_module.DatabaseClock.passed = traced_passed  # type: ignore[method-assign]

        def restore() -> None:
            claimer_module.Claimer.start = start  # type: ignore[method-assign]
            ahead_module.Ahead.add_early = add_early  # type: ignore[method-assign]
            tx_module.Tx.claim = claim  # type: ignore[method-assign]
            clock_module.DatabaseClock.passed = passed  # type: ignore[method-assign]
            store_module.Store.confirm_leases = confirm  # type: ignore[method-assign]
            ConnectionPool.getconn = getconn  # type: ignore[method-assign]
        return restore


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))] if ordered else float("nan")


def one_round(url: str, runs: int) -> None:
    store = open_store(url)
    store.migrate()
    client = open_store(url)
    trace = Trace()
    restore = trace.install()
    stop = threading.Event()
    worker = build_worker(store, [str(HERE / "bench_app.py")], 2, load_settings(database_url=url))
    thread = threading.Thread(target=worker.run, kwargs={"stop_when": stop.is_set})
    thread.start()
    try:
        warm = bench_app.bench_called.trigger(-1, database=client)
        assert warm.wait(timeout=60) == "completed"
        handles, due = [], []
        t0 = time.perf_counter()
        for i in range(runs):
            pause = t0 + i / runs - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            at = time.time() + DELAY_SECONDS
            handles.append(bench_app.bench_called.trigger(
                i, database=client, delay_until=datetime.fromtimestamp(at, timezone.utc)))
            due.append(int(at * 1000) / 1000)  # stored in whole milliseconds
        for handle in handles:
            assert handle.wait(timeout=60) == "completed"
    finally:
        stop.set()
        thread.join()
        restore()
    rows = []
    for handle, due_at in zip(handles, due):
        job_id = store.run_jobs(handle.id)[0]["id"]
        called = float(handle.output())
        rows.append((job_id, due_at, called, trace.starts.get(job_id)))
    store.close()
    client.close()

    late = [(called - due_at) * 1000 for _, due_at, called, _ in rows]
    parent = [(start - due_at) * 1000 for _, due_at, _, start in rows if start is not None]
    child = [(called - start) * 1000 for _, _, called, start in rows if start is not None]
    held = [(called - due_at) * 1000 for job_id, due_at, called, _ in rows if job_id in trace.early]
    after = [(called - due_at) * 1000 for job_id, due_at, called, _ in rows if job_id not in trace.early]

    def line(name: str, values: list[float]) -> str:
        return f"{name}: p50 {pct(values, 50):.2f} ms, p99 {pct(values, 99):.2f} ms (n={len(values)})"

    print(line("lateness (called - due)", late))
    print("  " + line("due -> started in the parent", parent))
    print("  " + line("started -> called in the child", child))
    print("  " + line("claimed before its time", held))
    print("  " + line("claimed at or after its time", after))
    print("  " + line("clock error bound waited for", trace.bounds))
    print("  " + line("lease confirmation at the time, per call", trace.confirms))
    print("  " + line("  of which waiting for a pooled connection", trace.checkouts))
    for job_id, due_at, called, _ in [r for r in rows if r[0] not in trace.early][:5]:
        near = [(round((began - due_at) * 1000, 1), round((ended - began) * 1000, 1), horizon, len(taken))
                for began, ended, horizon, taken in trace.claims if -0.1 < began - due_at < 0.05]
        mine = [round((began - due_at) * 1000, 1) for began, _, _, taken in trace.claims if job_id in taken]
        print(f"  late by {(called - due_at) * 1000:.1f} ms, claimed at {mine} ms; claims near its time "
              f"(began ms, took ms, horizon ms, jobs): {near}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sqlite", action="store_true", help="a SQLite file instead of PostgreSQL")
    ap.add_argument("--pg-url", default=DEFAULT_PG)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    for _ in range(args.repeats):
        if args.sqlite:
            with tempfile.TemporaryDirectory() as folder:
                one_round(f"sqlite:///{folder}/trace.db", args.runs)
        else:
            one_round(PgBackend(args.pg_url).fresh(), args.runs)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

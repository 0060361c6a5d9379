#!/usr/bin/env python
"""What a job writes on PostgreSQL: WAL records and bytes, and heap-only updates, per
job of the claim and completion statements, on one connection with no worker.

    python bench/job_writes.py [--jobs 2000] [--batch 32] [--cpu] [--pg-url URL]

Two cases, each on a fresh database:

* ``elements``: ``--jobs`` pending elements of one expand, claimed ``--batch`` at a
  time; each batch is completed in the transaction of the next claim, as a worker's
  recording does (`Tx.complete_and_close`, then `Tx.claim`).
* ``runs``: ``--jobs`` one-step runs (``trigger_many``); the claim also starts each
  run, and the completion also completes it (`Tx.complete_runs`).

Every statement runs under ``auto_explain`` (loaded into the connection, plans sent
back as notices), which reports the WAL each wrote: the figures count this
benchmark's statements only, whatever else the server is doing. The claim's attempt
insert and the completion's attempt update are statements of their own inside the
claim and the completion (data-modifying CTEs that the outer query does not read),
so they are counted apart and added.

``--cpu``: the same statements without ``auto_explain``; prints instead the CPU time
its PostgreSQL backends spent per job (read from ``/proc``: a local server), which
depends less on the machine's load than the wall time does.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402

import bench_app  # noqa: E402
import core  # noqa: E402
from ductline.store import open_store  # noqa: E402

EXPLAINED = ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_analyze = on",
           "SET auto_explain.log_timing = off", "SET auto_explain.log_wal = on",
           "SET auto_explain.log_level = notice", "SET client_min_messages = notice")
STATEMENTS = {"claim": ("WITH picked AS", "Insert on ductline_attempts"),
              "completion": ("WITH locked AS", "Update on ductline_attempts"),
              "run completion": ("WITH done AS", None)}
_WAL = re.compile(r"WAL: records=(\d+)(?: fpi=\d+)? bytes=(\d+)")


def _wal(plan: list[str], inner: str | None) -> tuple[int, int]:
    """The statement's WAL (its top plan node), plus that of ``inner``'s node if given."""
    found = [_WAL.search(line) for line in plan]
    walled = [m for m in found if m]
    records, size = (int(walled[0].group(1)), int(walled[0].group(2))) if walled else (0, 0)
    if inner:
        for i, line in enumerate(plan):
            if inner in line:
                for below in plan[i + 1:i + 8]:
                    m = _WAL.search(below)
                    if m:
                        records, size = records + int(m.group(1)), size + int(m.group(2))
                        break
                    if "->" in below:
                        break
    return records, size


def _setup_elements(url: str, store: Any, n: int) -> str:
    """An expand's run, started, with ``n`` pending elements; returns the pipeline."""
    handle = bench_app.bench_expand.trigger(n, database=store)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE ductline_runs SET status = 'running', started_ms = 1 WHERE id = %s", (handle.id,))
        conn.execute("UPDATE ductline_jobs SET status = 'completed', output = '[]' WHERE run_id = %s", (handle.id,))
        conn.execute("""
            INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, parent_scope, elem_index, status, input,
                                       not_before_ms, max_retry, max_crash, retry_delay_seconds, created_ms,
                                       definition)
            SELECT md5(%(run)s || g::text), %(run)s, 'bench_expand', 'expand_element', g::text, '', g, 'pending',
                   '[' || g || ']', 0, 0, 0, 0, 0, (SELECT definition FROM ductline_runs WHERE id = %(run)s)
            FROM generate_series(0, %(n)s - 1) AS g""", {"run": handle.id, "n": n})
    return "bench_expand"


def _backends(url: str) -> list[int]:
    """The PIDs of the server processes serving ``url``'s database, but this one."""
    with psycopg.connect(url, autocommit=True) as conn:
        return [int(r[0]) for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                                                "AND pid <> pg_backend_pid()").fetchall()]


def measure(pg: core.PgBackend, case: str, n: int, batch: int, cpu: bool = False) -> dict[str, Any]:
    url = pg.fresh()
    store = open_store(url)
    try:
        if case == "elements":
            pipeline = _setup_elements(url, store, n)
        else:
            bench_app.bench_noop.trigger_many(list(range(n)), database=store)
            pipeline = "bench_noop"
        plans: list[list[str]] = []
        hooked: set[int] = set()
        done, claimed = 0, []
        with store.transaction():
            pass  # the pool's connection is open: its backend is counted from here
        pids = _backends(url)
        cpu_before = sum(core._cpu_seconds(pid) for pid in pids)
        while True:
            with store.transaction() as tx:
                conn = tx.s._conn  # type: ignore[attr-defined]
                if not cpu and id(conn) not in hooked:
                    hooked.add(id(conn))
                    conn.add_notice_handler(lambda d: plans.append(str(d.message_primary).splitlines()))
                for statement in () if cpu else EXPLAINED:
                    conn.execute(statement)
                if claimed:
                    held = tx.complete_and_close([(j.job_id, j.attempt, j.lease_token, "1", None, None)
                                                  for j in claimed],
                                                 lock_runs=sorted({j.run_id for j in claimed}))
                    done += len(held)
                    if case == "runs":
                        tx.complete_runs([(j.run_id, "1") for j in claimed])
                claimed = tx.claim("bench-writer", [pipeline], batch, 60_000)
                if not cpu:
                    conn.execute("SET auto_explain.log_min_duration = -1")
            if not claimed:
                break
        backend_cpu = sum(core._cpu_seconds(pid) for pid in pids) - cpu_before
        assert set(_backends(url)) <= set(pids), "a connection opened during the loop: its CPU is not counted"
    finally:
        store.close()
    # The closed connections report their counts as they exit: wait for all of them (each
    # job was updated twice, each attempt once).
    expected = {"ductline_jobs": 2 * done, "ductline_attempts": done}
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(100):
            hot = {name: (int(upd), int(hot)) for name, upd, hot in conn.execute(
                "SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                "WHERE relname IN ('ductline_jobs', 'ductline_attempts')").fetchall()}
            if all(hot.get(name, (0, 0))[0] >= count for name, count in expected.items()):
                break
            time.sleep(0.1)
            conn.execute("SELECT pg_stat_clear_snapshot()")
    out: dict[str, Any] = {"jobs": done, "cpu_us": backend_cpu * 1e6 / done}
    for name, (marker, inner) in STATEMENTS.items():
        records = size = 0
        for plan in plans:
            if any(marker in line for line in plan[:3]):
                r, b = _wal(plan, inner)
                records, size = records + r, size + b
        if records:
            out[name] = (records / done, size / done)
    out["hot"] = hot
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--cpu", action="store_true", help="CPU of the backends per job, without auto_explain")
    ap.add_argument("--pg-url", default=core.DEFAULT_PG)
    args = ap.parse_args()
    pg = core.PgBackend(args.pg_url)
    for case in ("elements", "runs"):
        got = measure(pg, case, args.jobs, args.batch, args.cpu)
        print(f"{case}: {got['jobs']} jobs claimed and completed, {args.batch} per statement")
        if args.cpu:
            print(f"  PostgreSQL backends' CPU per job: {got['cpu_us']:.0f} us "
                  f"(load average {open('/proc/loadavg').read().split()[0]})")
            continue
        total_r = total_b = 0.0
        for name in STATEMENTS:
            if name in got:
                r, b = got[name]
                total_r, total_b = total_r + r, total_b + b
                print(f"  {name:15s} {r:6.2f} WAL records  {b:6.0f} bytes per job")
        print(f"  {'total':15s} {total_r:6.2f} WAL records  {total_b:6.0f} bytes per job")
        for table, (updated, hot) in sorted(got["hot"].items()):
            print(f"  {table}: {hot} of {updated} updates heap-only")
    return 0


if __name__ == "__main__":
    sys.exit(main())

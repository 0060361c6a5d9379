#!/usr/bin/env python
"""Where a ``trigger()``'s time goes (diagnostic companion of figures.py's ``trigger``).

    python bench/profile_trigger.py [--calls 2000] [--top 25]      # cProfile + server side
    python bench/profile_trigger.py --instructions                 # needs valgrind

On a fresh PostgreSQL database (``ductline_bench``, 20,000 ended runs and their jobs
written first, so the indexes have some depth), against a bare ``INSERT`` of one JSON
row on the same server:

* the client: the top functions of ``--calls`` triggers under cProfile; with
  ``--instructions``, the instructions per call of this process under callgrind (the
  difference of two run lengths, so start-up cancels), a count that is the same on a
  quiet and a loaded machine;
* the server, per call: CPU of the backend serving it (``/proc/PID/schedstat``, the
  lower quartile of blocks of 200 calls, the least disturbed by other processes) and
  WAL bytes written (a full-page image after any checkpoint of the server counts in it:
  compare figures of the same sitting).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402

import bench_app  # noqa: E402
import core  # noqa: E402
from ductline.store import open_store  # noqa: E402

BLOCK = 200
BARE = "INSERT INTO bench_rows (payload) VALUES (%s)"


def fill(url: str, runs: int = 20_000) -> None:
    """Ended runs with a job each, then VACUUM ANALYZE and a checkpoint."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"""INSERT INTO ductline_runs (id, pipeline, status, args, not_before_ms, created_ms, finished_ms,
                                                   definition)
            SELECT md5(g::text), 'p' || (g % 5), (ARRAY['completed', 'failed', 'cancelled'])[1 + g % 3], '[1]', g,
                   1700000000000 + g, 1700000000010 + g, 'def' || (g % 7)
            FROM generate_series(1, {runs}) AS g""")
        conn.execute(f"""INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, status, input, not_before_ms,
                                                   max_retry, max_crash, retry_delay_seconds, created_ms)
            SELECT md5('j' || g::text), md5(g::text), 'p' || (g % 5), 's', '', 'completed', '[1]', g, 0, 0, 0, g
            FROM generate_series(1, {runs}) AS g""")
        conn.execute("CREATE TABLE bench_rows (id bigserial PRIMARY KEY, payload jsonb)")
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")


def backend_cpu(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/schedstat") as fh:
                total += int(fh.read().split()[0])
        except OSError:
            pass
    return total / 1e9


def server_side(url: str, calls: int) -> dict[str, dict[str, float]]:
    """Per call of each: CPU of its backend (lower quartile of blocks) and WAL bytes."""
    store = open_store(url)
    bare = psycopg.connect(url, autocommit=True)
    out: dict[str, dict[str, float]] = {}
    try:
        for i in range(50):  # both warm: connections up, statements prepared
            bench_app.bench_noop.trigger(i, database=store)
            bare.execute(BARE, (json.dumps([i]),))
        with psycopg.connect(url, autocommit=True) as watch:
            ours = [r[0] for r in watch.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'ductline'")]
            for name, pids, call in (("trigger", ours, lambda i: bench_app.bench_noop.trigger(i, database=store)),
                                     ("bare", [bare.info.backend_pid], lambda i: bare.execute(BARE, (json.dumps([i]),)))):
                lsn = watch.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
                blocks = []
                for _ in range(max(1, calls // BLOCK)):
                    s0 = backend_cpu(pids)
                    for i in range(BLOCK):
                        call(i)
                    blocks.append((backend_cpu(pids) - s0) / BLOCK * 1e6)
                wal = watch.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", (lsn,)).fetchone()[0]
                blocks.sort()
                out[name] = {"server_us": blocks[len(blocks) // 4], "wal_bytes": float(wal) / (len(blocks) * BLOCK)}
    finally:
        bare.close()
        store.close()
    return out


def run_calls(url: str, mode: str, calls: int) -> None:
    """The child of ``--instructions``: ``calls`` triggers (or bare inserts), nothing else."""
    if mode == "trigger":
        store = open_store(url)
        for i in range(calls):
            bench_app.bench_noop.trigger(i, database=store)
        store.close()
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            for i in range(calls):
                conn.execute(BARE, (json.dumps([i]),))


def instructions(url: str, mode: str, short: int = 200, long: int = 1200) -> float:
    """Instructions per call of this process (callgrind), as the difference of two runs."""
    counts = []
    with tempfile.TemporaryDirectory(prefix="ductline_callgrind_") as folder:
        for n in (short, long):
            done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/out.{n}",
                                   sys.executable, __file__, "--child", mode, "--calls", str(n), "--url", url],
                                  capture_output=True, text=True, check=True)
            counts.append(int(re.search(r"Collected : (\d+)", done.stderr).group(1)))  # type: ignore[union-attr]
    return (counts[1] - counts[0]) / (long - short)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--instructions", action="store_true", help="count the client's instructions (valgrind)")
    ap.add_argument("--pg-url", default=core.DEFAULT_PG)
    ap.add_argument("--child", choices=["trigger", "bare"], help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run_calls(args.url, args.child, args.calls)
        return 0
    url = core.PgBackend(args.pg_url).fresh()
    fill(url)
    if args.instructions:
        for mode in ("trigger", "bare"):
            print(f"client instructions per call, {mode}: {instructions(url, mode):,.0f}")
    else:
        store = open_store(url)
        for i in range(50):
            bench_app.bench_noop.trigger(i, database=store)
        profile = cProfile.Profile()
        t0, c0 = time.perf_counter(), time.process_time()
        profile.enable()
        for i in range(args.calls):
            bench_app.bench_noop.trigger(i, database=store)
        profile.disable()
        print(f"{args.calls} trigger() under cProfile: {(time.perf_counter() - t0) / args.calls * 1e6:.0f} us per call, "
              f"{(time.process_time() - c0) / args.calls * 1e6:.0f} us of CPU (the profiler's own included)")
        pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
        store.close()
    for name, figures in server_side(url, args.calls).items():
        print(f"server, per {name}: backend CPU {figures['server_us']:.0f} us, WAL {figures['wal_bytes']:.0f} bytes")
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

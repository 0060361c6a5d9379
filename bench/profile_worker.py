#!/usr/bin/env python
"""Profile the worker parent in-process with cProfile (diagnostic companion of core.py).

    python bench/profile_worker.py --scenario drain --n 3000
    python bench/profile_worker.py --scenario expand --n 10000

Builds the worker exactly like ``ductline worker`` does (`build_worker`), on a fresh
PostgreSQL database (``ductline_bench``), runs it with ``Worker.run(stop_when=...)``
under cProfile until the work is done, and prints: the top functions, the number of
store statements / transactions per job, and PostgreSQL's commit count per job.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402

import bench_app  # noqa: E402
from core import DEFAULT_PG, PgBackend  # noqa: E402
from ductline.config import load_settings  # noqa: E402
from ductline.runtime.launch import build_worker  # noqa: E402
from ductline.store import open_store  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", choices=["drain", "expand"], default="drain")
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--pg-url", default=DEFAULT_PG)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--out", default=None, help="also dump the raw profile here (pstats format)")
    args = ap.parse_args()

    backend = PgBackend(args.pg_url)
    url = backend.fresh()
    store = open_store(url)
    if args.scenario == "drain":
        for i in range(args.n):
            bench_app.bench_noop.trigger(i, database=store)
        jobs = args.n
        pipeline = "bench_noop"
        expected = args.n
    else:
        bench_app.bench_expand.trigger(args.n, database=store)
        jobs = args.n + 2
        pipeline = "bench_expand"
        expected = 1

    poll = psycopg.connect(url, autocommit=True)

    def commits() -> int:
        return int(poll.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
                   .fetchone()[0])

    def done() -> bool:
        n = poll.execute("SELECT count(*) FROM ductline_runs WHERE pipeline = %s AND status = 'completed'",
                         (pipeline,)).fetchone()[0]
        return int(n) >= expected

    worker = build_worker(store, [str(HERE / "bench_app.py")], args.concurrency,
                          load_settings(database_url=url, shutdown_grace_seconds=10))
    c0 = commits()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    try:
        worker.run(stop_when=done)
    finally:
        prof.disable()
        wall = time.perf_counter() - t0
    c1 = commits()
    store.close()
    poll.close()

    stats = pstats.Stats(prof)
    if args.out:
        stats.dump_stats(args.out)
    print(f"scenario {args.scenario} n={args.n}: {jobs} jobs, worker.run {wall:.2f} s "
          f"(incl. child start-up), {jobs / wall:.0f} jobs/s under cProfile")
    print(f"PostgreSQL commits in the database during the run: {c1 - c0} ({(c1 - c0) / jobs:.2f} per job; "
          f"includes the poller's autocommit reads)")
    # Calls per job of the store's statement entry points.
    counts: dict[str, int] = {}
    for (file, _, func), (cc, nc, tt, ct, callers) in stats.stats.items():  # type: ignore[attr-defined]
        if "ductline/store/postgres" in file and func in ("fetch", "execute", "execute_many", "transaction",
                                                          "reader"):
            counts[func] = counts.get(func, 0) + nc
    print("store calls per job: " + ", ".join(f"{k} {v / jobs:.2f}" for k, v in sorted(counts.items())))
    verbs = []
    for (file, _, func), (cc, nc, tt, ct, callers) in stats.stats.items():  # type: ignore[attr-defined]
        if file.endswith("ductline/store/store.py"):
            verbs.append((ct, func, nc))
    verbs.sort(reverse=True)
    print("store.py verbs (cumulative s, calls per job):")
    for ct, func, nc in verbs[:15]:
        print(f"  {ct:7.2f} s  {nc / jobs:6.2f}/job  {func}")
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(args.top)
        print(f"\n===== top {args.top} by {key} =====")
        print("\n".join(line for line in s.getvalue().splitlines() if line.strip())[:12000])
    return 0


if __name__ == "__main__":
    sys.exit(main())

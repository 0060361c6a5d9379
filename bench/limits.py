#!/usr/bin/env python
"""Cost and accuracy of priorities, concurrency limits and rate limits.

    python bench/limits.py [--repeats 3] [--sqlite] [--runs 3000] [--concurrency 8]

Each repeat uses fresh databases and ONE real worker process (bench/core.py's
WorkerProcess) per measurement, measured side by side:

1. drain, no limit: N single-step no-op runs (``bench_noop``), all triggered first.
2. drain, limit that never binds: the same with ``concurrency=1000`` on the step, so
   every claim takes the limited path (candidates, key lock, count, claim by id).
   Reported as a ratio to 1.
3. drain, one per key: N runs spread over K keys with ``concurrency=1,
   concurrency_key="k"``: at most K attempts can run, the rest are throttled. The
   worker has ``--concurrency`` slots, K >= slots, so the ideal is the unlimited rate.
   Also checks that no key ever ran two attempts at once (attempt rows).
4. rate: 200 runs of a step with ``rate=50``: achieved starts per second and the
   smallest and median gap between starts (database clock).

Rates are N / (last run finished - first attempt started), database clock; values are
medians over --repeats, per-repeat values in brackets.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_app  # noqa: E402
from core import DEFAULT_PG, PgBackend, SqliteBackend, WorkerProcess, log, median, wait_until  # noqa: E402

from ductline.store import open_store  # noqa: E402


def drain(backend: Any, pipeline: Any, args: list[Any], concurrency: int, log_dir: str,
          label: str) -> tuple[float, str]:
    """Trigger every run, start one worker, wait; returns (runs/s on the db clock, url)."""
    url = backend.fresh()
    store = open_store(url)
    try:
        for a in args:
            pipeline.trigger(a, database=store)
    finally:
        store.close()
    n = len(args)
    with backend.poller(url) as q, WorkerProcess(url, concurrency, log_dir, label) as worker:
        wait_until(lambda: q("SELECT count(*) FROM ductline_runs WHERE status = 'completed'")[0][0] >= n,
                   600, f"{n} completed runs", worker, interval=0.1)
    first, last = backend.query(url, "SELECT min(a.started_ms), max(r.finished_ms) FROM ductline_attempts a, "
                                     "ductline_runs r")[0]
    rate = n / ((int(last) - int(first)) / 1000)
    log(f"{label}: {rate:.0f} runs/s")
    return rate, url


def most_per_key(backend: Any, url: str) -> int:
    """The most attempts of one key that were ever open at once."""
    rows = backend.query(url, "SELECT j.limit_key, a.started_ms, a.finished_ms FROM ductline_attempts a "
                              "JOIN ductline_jobs j ON j.id = a.job_id")
    by_key: dict[str, list[tuple[int, int]]] = {}
    for key, start, end in rows:
        by_key.setdefault(key, []).append((int(start), 1))
        by_key.setdefault(key, []).append((int(end), -1))
    worst = 0
    for events in by_key.values():
        level = 0
        for _, step in sorted(events):
            level += step
            worst = max(worst, level)
    return worst


def rate_run(backend: Any, log_dir: str, label: str, concurrency: int) -> dict[str, float]:
    _, url = drain(backend, bench_app.bench_rated, list(range(200)), concurrency, log_dir, label)
    starts = sorted(int(r[0]) for r in backend.query(url, "SELECT started_ms FROM ductline_attempts"))
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    achieved = (len(starts) - 1) / ((starts[-1] - starts[0]) / 1000)
    return {"achieved": achieved, "min_gap": min(gaps), "median_gap": statistics.median(gaps)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sqlite", action="store_true")
    ap.add_argument("--pg-url", default=DEFAULT_PG)
    ap.add_argument("--runs", type=int, default=3000)
    ap.add_argument("--keys", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    backend: Any = SqliteBackend() if args.sqlite else PgBackend(args.pg_url)
    log_dir = tempfile.mkdtemp(prefix="ductline_bench_limits_")
    n, c = args.runs, args.concurrency
    results: dict[str, list[float]] = {k: [] for k in ("plain", "capped", "keyed", "keyed_max", "achieved",
                                                         "min_gap", "median_gap")}
    for r in range(1, args.repeats + 1):
        results["plain"].append(drain(backend, bench_app.bench_noop, list(range(n)), c, log_dir, f"plain_{r}")[0])
        results["capped"].append(drain(backend, bench_app.bench_capped, list(range(n)), c, log_dir,
                                       f"capped_{r}")[0])
        keyed, url = drain(backend, bench_app.bench_keyed, [{"k": i % args.keys} for i in range(n)], c,
                           log_dir, f"keyed_{r}")
        results["keyed"].append(keyed)
        results["keyed_max"].append(most_per_key(backend, url))
        for k, v in rate_run(backend, log_dir, f"rated_{r}", c).items():
            results[k].append(v)

    def show(key: str, fmt: str = ".0f") -> str:
        return f"{median(results[key]):{fmt}} [" + ", ".join(f"{v:{fmt}}" for v in results[key]) + "]"

    plain = median(results["plain"])
    print(f"\nlimits benchmark on {backend.name}, {n} runs, worker concurrency {c}, "
          f"medians of {args.repeats} (per-repeat in brackets)")
    print(f"  drain, no limit              {show('plain')} runs/s")
    print(f"  drain, limit never binding   {show('capped')} runs/s  = {median(results['capped']) / plain:.2f}x")
    print(f"  drain, 1 per key, {args.keys} keys    {show('keyed')} runs/s  = {median(results['keyed']) / plain:.2f}x"
          f"; most attempts of one key at once: {int(max(results['keyed_max']))}")
    print(f"  rate=50/s, 200 runs          achieved {show('achieved', '.1f')} starts/s; gap min "
          f"{show('min_gap')} ms, median {show('median_gap')} ms")
    return 0


if __name__ == "__main__":
    t0 = time.time()
    code = main()
    log(f"done in {time.time() - t0:.0f} s")
    sys.exit(code)

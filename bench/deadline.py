"""Whole-run deadline benchmark: how soon after a run's deadline are its children gone
and the run recorded ``failed``?

100 runs (``--runs``), each with two branches stuck in C when its 1 s deadline passes,
run by one real worker process (``--concurrency 4``: two runs at a time). From the
database clock: deadline -> both in-flight attempts recorded ended (the first after its
child was reaped; the second by the same transaction that fails the run, its child
killed at the same instant by the same worker -- bench/timeouts.py measures the kill
itself), and deadline -> run recorded failed. p50/p99/max, PostgreSQL and SQLite.

    python bench/deadline.py [--runs 100] [--backends postgresql,sqlite]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import deadline_app  # noqa: E402

from ductline.store import open_store  # noqa: E402

PG_ADMIN = os.environ.get("DUCTLINE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def fresh_url(backend: str, tmp: str) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp}/deadline.db"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS "ductline_bench_deadline" WITH (FORCE)')
        conn.execute('CREATE DATABASE "ductline_bench_deadline"')
    return PG_ADMIN.rpartition("/")[0] + "/ductline_bench_deadline"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def measure(backend: str, runs: int, concurrency: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        url = fresh_url(backend, tmp)
        store = open_store(url)
        store.migrate()
        worker = subprocess.Popen([sys.executable, "-m", "ductline", "--log-level", "WARNING", "worker",
                                   "--app", str(HERE / "deadline_app.py"), "--database", url,
                                   "--concurrency", str(concurrency)],
                                  env={**os.environ, "PYTHONPATH": str(HERE.parent / "src")})
        try:
            time.sleep(2)
            handles = []
            for _ in range(runs // 2):
                wave = [deadline_app.pipeline.trigger(0, database=store) for _ in range(2)]
                for h in wave:
                    assert h.wait(60) == "failed", h.id
                handles += wave
            gone, failed = [], []
            for h in handles:
                run = store.get_run(h.id)
                attempts = [a for a in store.run_attempts(h.id) if a["job_id"]]
                stuck = [a["finished_ms"] for a in attempts if a["error_type"] == "TimeoutError"]
                gone.append(max(stuck) - run["deadline_ms"])
                failed.append(run["finished_ms"] - run["deadline_ms"])
            return {"deadline -> both in-flight attempts recorded ended": gone,
                    "deadline -> run recorded failed": failed}
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
            store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--backends", default="postgresql,sqlite")
    args = parser.parse_args()
    print(f"ductline run-deadline benchmark -- {args.runs} runs, 2 stuck branches each, 1 s deadline, "
          f"one worker --concurrency {args.concurrency}, {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}")
    print(f"{'backend':<11}{'metric (ms, database clock)':<64}{'p50':>7}{'p99':>7}{'max':>7}")
    for backend in args.backends.split(","):
        for name, values in measure(backend, args.runs, args.concurrency).items():
            print(f"{backend:<11}{name:<64}{statistics.median(values):>7.0f}{pct(values, 0.99):>7.0f}"
                  f"{max(values):>7.0f}")


if __name__ == "__main__":
    main()

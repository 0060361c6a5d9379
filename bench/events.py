#!/usr/bin/env python
"""Event benchmarks of ductline (issue 37, "Events").

    python bench/events.py [--backends sqlite,postgresql] [--latency 50] [--waiting 1000] [--concurrency 4]

Every measurement uses a fresh database (PostgreSQL: DROP DATABASE ... WITH (FORCE)
+ CREATE DATABASE + migrate; SQLite: a new file) and ONE real worker process,
``python -m ductline worker --app bench/events_app.py --database URL``, started with
default settings (every DUCTLINE_* variable removed from its environment). The
pipeline is ``begin -> [wait for "go"] stamp``; ``stamp`` returns the wall-clock time
its body ran.

(a) latency: --latency runs one after another, each brought to its wait first; then
    ``RunHandle.send("go")``: the send's own duration (one transaction) and the time
    from the send's return to the released step's body. p50 / p95 / max.
(b) waiting: --waiting runs brought to their waits (each is one deferred job row, no
    slot: the worker's slots stay free); rows per waiting run; the worker's idle CPU
    meanwhile (parent process, /proc, over 5 s); then every run is sent its event
    back to back: sends per second, and the drain: first send to last step finished.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
APP = HERE / "events_app.py"
sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402

import events_app  # noqa: E402
from ductline.store import Store, open_store  # noqa: E402

DEFAULT_PG = os.environ.get("DUCTLINE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
PG_DB = "ductline_bench_events" + os.environ.get("DUCTLINE_BENCH_DB_SUFFIX", "")
PIPELINE = events_app.waiting


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def fresh(backend: str, tmp: str) -> str:
    if backend == "sqlite":
        url = f"sqlite:///{tmp}/events-{time.monotonic_ns()}.db"
    else:
        base, _, _ = DEFAULT_PG.rpartition("/")
        with psycopg.connect(DEFAULT_PG, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{PG_DB}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{PG_DB}"')
        url = f"{base}/{PG_DB}"
    store = open_store(url)
    store.migrate()
    store.close()
    return url


def worker(url: str, concurrency: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCTLINE_")}
    return subprocess.Popen([sys.executable, "-m", "ductline", "worker", "--app", str(APP), "--database", url,
                             "--concurrency", str(concurrency)], env=env, stderr=subprocess.DEVNULL)


def deferred_count(store: Store) -> int:
    with store.dialect.reader() as s:
        return sum(int(r["n"]) for r in s.fetch("metrics_event_waits", {}))


def wait_until(condition: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError(what)
        time.sleep(0.005)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def latency(store: Store, n: int) -> dict[str, Any]:
    sends, hops = [], []
    for _ in range(n):
        handle = PIPELINE.trigger(None, database=store)
        wait_until(lambda: any(j["status"] == "deferred" for j in store.run_jobs(handle.id)), 60, "wait")
        began = time.time()
        handle.send("go")
        ended = time.time()
        assert handle.wait(60) == "completed"
        sends.append((ended - began) * 1000)
        hops.append(handle.output() - ended * 1000)
    return {"send_ms": _summary(sends), "send_to_step_ms": _summary(hops)}


def waiting(store: Store, proc: subprocess.Popen[bytes], n: int) -> dict[str, Any]:
    handles = [PIPELINE.trigger(None, database=store) for _ in range(n)]
    wait_until(lambda: deferred_count(store) == n, 600, f"{n} waits")
    # a waiting run's job rows: its finished first step and its one deferred job
    rows_per_run = {"jobs": len(store.run_jobs(handles[0].id)), "deferred_jobs": 1}
    idle_before = cpu_seconds(proc.pid)
    time.sleep(5)
    idle_cpu = (cpu_seconds(proc.pid) - idle_before) / 5
    began = time.time()
    for h in handles:
        h.send("go")
    sent = time.time()
    wait_until(lambda: deferred_count(store) == 0, 600, "released")
    wait_until(lambda: all(store.get_run(h.id)["status"] == "completed" for h in handles), 600, "drain")
    last = max(int(store.get_run(h.id)["finished_ms"]) for h in handles)
    return {"waiting_runs": n, "rows_per_waiting_run": rows_per_run, "worker_idle_cpu_share": round(idle_cpu, 4),
            "sends_per_second": round(n / (sent - began), 1), "drain_seconds": round(last / 1000 - began, 3)}


def _summary(values: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 2), "p95": round(pct(values, 95), 2),
            "max": round(max(values), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--latency", type=int, default=50)
    parser.add_argument("--waiting", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            url = fresh(backend, tmp)
            store = open_store(url)
            proc = worker(url, args.concurrency)
            try:
                log(f"{backend}: latency over {args.latency} sends")
                results[backend] = latency(store, args.latency)
                log(f"{backend}: {args.waiting} waiting runs")
                results[backend].update(waiting(store, proc, args.waiting))
            finally:
                proc.terminate()
                proc.wait(60)
                store.close()
            print(backend, results[backend], flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Every figure of the performance page in one command, each beside the bare loop it
is judged against, measured in the same run.

    python bench/figures.py [--repeats 3] [--quick] [--only trigger,hop,drain,...]
                            [--pg-url URL] [--out FILE.json]

Parts (``--only``; all by default), PostgreSQL unless said otherwise, medians of
``--repeats`` with the per-repeat values in brackets:

* ``trigger``: one ``trigger()`` per run against a bare ``INSERT`` of one JSON row
  per statement (autocommit, psycopg, the same server and settings), interleaved in
  blocks of 100 so both see the same minute; the ratio is trigger / bare.
* ``hop``: the hop (a step returned -> the next step called, marks taken inside the
  steps) of one chain alone on an idle worker, then among 300 chains triggered at
  once; PostgreSQL and SQLite.
* ``drain``: 3,000 and 5,000 single-step no-op runs drained by one worker at default
  settings, against the bare one-row-per-transaction ``SKIP LOCKED`` loop run right
  after; CPU per run of the worker parent, its children and PostgreSQL.
* ``threads``: the drain of 3,000 runs of a step with ``isolation="thread"`` against
  the bare ten-rows-per-transaction loop.
* ``burst``: 200 runs each due 3 s after its own trigger (lateness = step called -
  due); 200 runs due at one instant (the last start against 200 / drain rate + 10 ms,
  the drain rate measured in the same repeat).
* ``expand``: expand + collapse of 1,000 and of 10,000 elements; the ratio.
* ``kill``: steps blocked in C past a 1 s limit, one slot, ready work behind each
  (``bench/timeouts.py``): deadline -> timed-out attempt recorded, deadline -> the
  slot's next attempt started.

The machine may be busy with other work: compare the ratios, which are measured side
by side, more than the absolute figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402

import bench_app  # noqa: E402
import core  # noqa: E402
from ductline.store import open_store  # noqa: E402

PARTS = ("trigger", "hop", "drain", "threads", "burst", "expand", "kill")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


# ======================================================================================
# trigger() against a bare INSERT
# ======================================================================================
def _backend_cpu(conn: Any, where: str) -> float:
    """CPU seconds used so far by the PostgreSQL backends ``where`` selects
    (pg_stat_activity; the server runs on this host)."""
    total = 0.0
    for (pid,) in conn.execute(f"SELECT pid FROM pg_stat_activity WHERE {where}").fetchall():
        total += core._cpu_seconds(int(pid))
    return total


def bench_trigger(pg: core.PgBackend, n: int, block: int = 100) -> dict[str, float]:
    """Rates, and CPU per call of this process and of the server backend serving it
    (less sensitive to a busy machine than the rates)."""
    url = pg.fresh()
    raw = pg.fresh_raw()
    store = open_store(url)
    bare_s = trig_s = 0.0
    cpu = {"bare_client": 0.0, "trigger_client": 0.0, "bare_server": 0.0, "trigger_server": 0.0}
    try:
        with psycopg.connect(raw, autocommit=True) as conn, psycopg.connect(raw, autocommit=True) as watch:
            conn.execute("CREATE TABLE bench_rows (id bigserial PRIMARY KEY, payload jsonb)")
            for i in range(10):  # both warm: connections up, statements prepared
                conn.execute("INSERT INTO bench_rows (payload) VALUES (%s)", (json.dumps([i]),))
                bench_app.bench_noop.trigger(i, database=store)
            bare_pid = f"pid = {conn.info.backend_pid}"
            ours = (f"datname = '{url.rpartition('/')[2]}' AND application_name = 'ductline'")
            for start in range(0, n, block):
                c0, s0 = time.process_time(), _backend_cpu(watch, bare_pid)
                t0 = time.perf_counter()
                for i in range(start, start + block):
                    conn.execute("INSERT INTO bench_rows (payload) VALUES (%s)", (json.dumps([i]),))
                t1 = time.perf_counter()
                c1, s1 = time.process_time(), _backend_cpu(watch, bare_pid)
                s1b = _backend_cpu(watch, ours)
                c1b = time.process_time()
                t1b = time.perf_counter()
                for i in range(start, start + block):
                    bench_app.bench_noop.trigger(i, database=store)
                t2 = time.perf_counter()
                c2, s2 = time.process_time(), _backend_cpu(watch, ours)
                bare_s += t1 - t0
                trig_s += t2 - t1b
                cpu["bare_client"] += c1 - c0
                cpu["bare_server"] += s1 - s0
                cpu["trigger_client"] += c2 - c1b
                cpu["trigger_server"] += s2 - s1b
    finally:
        store.close()
    res = {"bare": n / bare_s, "trigger": n / trig_s, **{k: v / n * 1e6 for k, v in cpu.items()}}
    res["ratio"] = res["trigger"] / res["bare"]
    core.log(f"trigger: {res['trigger']:.0f}/s against a bare INSERT {res['bare']:.0f}/s: {res['ratio']:.2f}x; "
             f"CPU per call (us) client {res['trigger_client']:.0f} / {res['bare_client']:.0f}, "
             f"server {res['trigger_server']:.0f} / {res['bare_server']:.0f}")
    return res


# ======================================================================================
# The bare ten-rows-per-transaction loop, and a drain of any one-step pipeline
# ======================================================================================
def bare_loop_10(pg: core.PgBackend, n: int) -> float:
    url = pg.fresh_raw()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bench_jobs (id bigserial PRIMARY KEY, status text, "
                     "not_before timestamptz, payload text)")
        conn.execute("INSERT INTO bench_jobs (status, not_before, payload) "
                     "SELECT 'pending', now() - interval '1 second', '[' || g || ']' "
                     "FROM generate_series(1, %s) AS g", (n,))
        conn.execute("VACUUM ANALYZE bench_jobs")
    done = 0
    with psycopg.connect(url) as conn:
        t0 = time.perf_counter()
        while True:
            ids = [r[0] for r in conn.execute(
                "SELECT id FROM bench_jobs WHERE status = 'pending' AND not_before <= now() "
                "ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED").fetchall()]
            if not ids:
                conn.commit()
                break
            conn.execute("UPDATE bench_jobs SET status = 'done' WHERE id = ANY(%s)", (ids,))
            conn.commit()
            done += len(ids)
        elapsed = time.perf_counter() - t0
    assert done == n, (done, n)
    return n / elapsed


def drain_pipeline(backend: Any, pipeline: Any, n: int, log_dir: str, label: str) -> float:
    """Runs of ``pipeline`` triggered first, then one worker at default settings drains
    them; runs/s on the database clock (first attempt started -> last run finished)."""
    url = backend.fresh()
    store = open_store(url)
    try:
        for start in range(0, n, 1000):
            pipeline.trigger_many(list(range(start, min(n, start + 1000))), database=store)
    finally:
        store.close()
    with backend.poller(url) as q, core.WorkerProcess(url, 0, log_dir, label) as worker:
        core.wait_until(lambda: core.count_runs(q, pipeline.name).get("completed", 0) >= n,
                        max(600.0, n / 5), f"{n} completed runs", worker, interval=0.1)
    (first, last), = backend.query(url, "SELECT (SELECT min(started_ms) FROM ductline_attempts), "
                                        "(SELECT max(finished_ms) FROM ductline_runs)")
    rate = n / ((int(last) - int(first)) / 1000)
    core.log(f"drain {label}: {rate:.0f} runs/s")
    return rate


# ======================================================================================
# 200 runs due at one instant
# ======================================================================================
def bench_instant(backend: Any, n: int, ahead: float, log_dir: str, label: str) -> dict[str, float]:
    """``n`` runs triggered together (one ``trigger_many``), all due ``ahead`` seconds
    later; when the last one's step was called, after the instant."""
    url = backend.fresh()
    store = open_store(url)
    try:
        with core.WorkerProcess(url, 0, log_dir, label) as worker:
            core.warm_up(backend, url, store, worker, 0)
            at = time.time() + ahead
            handles = bench_app.bench_called.trigger_many(
                list(range(n)), database=store, delay_until=datetime.fromtimestamp(at, timezone.utc))
            due = int(at * 1000) / 1000
            end = time.monotonic() + 120
            for h in handles:
                worker.check_alive()
                if h.wait(timeout=max(1.0, end - time.monotonic())) != "completed":
                    raise RuntimeError(f"run {h.id} did not complete")
            late = sorted((h.output() - due) * 1000 for h in handles)
    finally:
        store.close()
    res = {"first": late[0], "p50": core.pct(late, 50), "last": late[-1]}
    core.log(f"instant {label}: {n} due at once: first called {res['first']:.1f} ms after, "
             f"p50 {res['p50']:.1f} ms, last {res['last']:.1f} ms")
    return res


# ======================================================================================
# The kill (bench/timeouts.py in a process of its own)
# ======================================================================================
def bench_kill(url: str, attempts: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ductline_bench_kill_") as folder:
        out = os.path.join(folder, "kill.json")
        subprocess.run([sys.executable, str(HERE / "timeouts.py"), "--attempts", str(attempts), "--ignoring", "0",
                        "--noops", "1", "--concurrency", "1", "--database", url, "--out", out],
                       check=True, stdout=subprocess.DEVNULL)
        with open(out) as fh:
            table = json.load(fh)["table"]
    group = "SIGTERM-obeying (C + syscall)"
    want = {"deadline -> timed_out recorded (job.completed)": "recorded",
            "DB clock: killed attempt finished_ms - deadline_ms": "recorded_db",
            "deadline -> next attempt started on slot (attempt.started)": "next",
            "DB clock: next started_ms - killed deadline_ms": "next_db",
            "deadline -> child reaped (timeout.overrun)": "reaped"}
    res = {want[r["metric"]]: r["p50"] for r in table if r["metric"] in want and r["group"] == group}
    core.log("kill: " + ", ".join(f"{k} p50 {v:.1f} ms" for k, v in res.items()))
    return res


# ======================================================================================
# Main
# ======================================================================================
def fmt(values: list[float], spec: str) -> str:
    return "[" + ", ".join(format(v, spec) for v in values) + "]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a first look, not figures to quote)")
    ap.add_argument("--only", default=",".join(PARTS), help=f"subset of {','.join(PARTS)}")
    ap.add_argument("--pg-url", default=core.DEFAULT_PG,
                    help="admin URL; the benchmark's databases are (re)created next to it")
    ap.add_argument("--out", help="write every per-repeat figure here (JSON)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    unknown = only - set(PARTS)
    if unknown:
        ap.error(f"unknown parts: {', '.join(sorted(unknown))}")
    q = args.quick
    drains = [1000] if q else [3000, 5000]
    pg = core.PgBackend(args.pg_url)
    sq = core.SqliteBackend()
    log_dir = tempfile.mkdtemp(prefix="ductline_bench_logs_")
    got: dict[str, list[Any]] = {}

    def keep(key: str, value: Any) -> None:
        got.setdefault(key, []).append(value)

    steps: list[tuple[str, Callable[[int], None]]] = [
        ("trigger", lambda r: keep("trigger", bench_trigger(pg, 500 if q else 2000))),
        ("hop", lambda r: [keep(f"hop_{b.name}", core.bench_hop(b, 20 if q else 40, 100 if q else 300, 0, log_dir,
                                                                f"hop_{b.name}{r}", timeout=600.0))
                           for b in (pg, sq)]),
        ("drain", lambda r: [(keep(f"drain{n}", core.bench_drain(pg, n, 0, log_dir, f"drain{n}_{r}", timeout=900.0)),
                              keep(f"bare{n}", pg.bare_loop(n))) for n in drains]),
        ("threads", lambda r: (keep("threads", drain_pipeline(pg, bench_app.bench_noop_thread, drains[0], log_dir,
                                                               f"threads{r}")),
                               keep("bare10", bare_loop_10(pg, drains[0])))),
        ("burst", lambda r: (keep("burst", core.bench_burst(pg, 200, 3.0, 0, log_dir, f"burst{r}", timeout=120.0)),
                             keep("instant", bench_instant(pg, 200, 3.0, log_dir, f"instant{r}")),
                             keep("instant_rate", drain_pipeline(pg, bench_app.bench_noop, 1000, log_dir,
                                                                 f"rate{r}")))),
        ("expand", lambda r: [keep(f"expand{n}", core.bench_expand(pg, n, 0, log_dir, f"expand{n}_{r}",
                                                                   timeout=1800.0))
                              for n in ((100, 1000) if q else (1000, 10000))]),
        ("kill", lambda r: keep("kill", bench_kill(args.pg_url, 10 if q else 40))),
    ]
    for r in range(args.repeats):
        for name, step in steps:
            if name in only:
                core.log(f"repeat {r + 1}: {name}")
                step(r)

    rows: list[tuple[str, str, str]] = []

    def row(title: str, values: list[float], spec: str, unit: str) -> None:
        rows.append((title, f"{format(median(values), spec)} {unit}", fmt(values, spec)))

    if "trigger" in got:
        t = got["trigger"]
        row("trigger(), one call per run", [x["trigger"] for x in t], ".0f", "runs/s")
        row("bare INSERT of one JSON row, autocommit", [x["bare"] for x in t], ".0f", "rows/s")
        row("RATIO trigger / bare INSERT (target >= 0.8)", [x["ratio"] for x in t], ".2f", "x")
        for who in ("client", "server"):
            row(f"  CPU per trigger(), {who} (this process / its PostgreSQL backend)",
                [x[f"trigger_{who}"] for x in t], ".0f", "us")
            row(f"  CPU per bare INSERT, {who}", [x[f"bare_{who}"] for x in t], ".0f", "us")
    for b in ("postgresql", "sqlite"):
        h = got.get(f"hop_{b}")
        if h:
            row(f"{b}: hop, one chain alone on an idle worker, p50 (target <= 1.0 ms)",
                [x["alone_p50"] for x in h], ".2f", "ms")
            row(f"{b}: hop, one chain alone, p95", [x["alone_p95"] for x in h], ".2f", "ms")
            row(f"{b}: hop among 300 chains triggered at once, p50", [x["burst_p50"] for x in h], ".1f", "ms")
            row(f"{b}: hop among 300 chains triggered at once, p95", [x["burst_p95"] for x in h], ".1f", "ms")
    for n in drains:
        d, bare = got.get(f"drain{n}"), got.get(f"bare{n}")
        if d and bare:
            row(f"drain of {n:,} no-op runs, default slots", [x["db"] for x in d], ".0f", "runs/s")
            row("  bare SKIP LOCKED loop, 1 row per transaction, right after", bare, ".0f", "rows/s")
            row(f"RATIO drain {n:,} / bare loop (target >= 2)", [x["db"] / y for x, y in zip(d, bare)], ".2f", "x")
            cpus = [x["cpu"] for x in d if x["cpu"]]
            for key in ("worker parent", "worker children", "postgres: backends of this db (worker)", "_cores"):
                vals = [c[k] for c in cpus for k in c if k.startswith(key)]
                if vals and key == "_cores":
                    row("  CPUs busy during the drain (whole machine)", vals, ".2f", "CPUs")
                elif vals:
                    row(f"  CPU per run: {key}", vals, ".3f", "ms")
    if got.get("threads") and got.get("bare10"):
        row(f"drain of {drains[0]:,} runs, isolation='thread'", got["threads"], ".0f", "runs/s")
        row("  bare SKIP LOCKED loop, 10 rows per transaction", got["bare10"], ".0f", "rows/s")
        row("RATIO thread drain / bare 10-row loop", [x / y for x, y in zip(got["threads"], got["bare10"])],
            ".2f", "x")
    if got.get("burst"):
        row("200 runs each due 3 s after its trigger: lateness p50", [x["p50"] for x in got["burst"]], ".1f", "ms")
        row("  lateness p99 (target <= 5 ms)", [x["p99"] for x in got["burst"]], ".1f", "ms")
    if got.get("instant") and got.get("instant_rate"):
        row("200 runs due at one instant: the last called after it", [x["last"] for x in got["instant"]],
            ".1f", "ms")
        row("  bound: 200 / drain rate (same repeat) + 10 ms",
            [200 / rate * 1000 + 10 for rate in got["instant_rate"]], ".1f", "ms")
    sizes = (100, 1000) if q else (1000, 10000)
    if got.get(f"expand{sizes[0]}") and got.get(f"expand{sizes[1]}"):
        small, big = ([x["wall"] for x in got[f"expand{n}"]] for n in sizes)
        row(f"expand + collapse of {sizes[0]:,}", small, ".2f", "s")
        row(f"expand + collapse of {sizes[1]:,}", big, ".2f", "s")
        row(f"RATIO expand {sizes[1]:,} / {sizes[0]:,} (target <= 5)", [b / s for s, b in zip(small, big)],
            ".2f", "x")
    if got.get("kill"):
        k = got["kill"]
        for key, title in (("recorded", "kill: deadline -> timed-out attempt recorded, p50 (target <= 10 ms)"),
                           ("recorded_db", "  the same on the database clock (finished_ms - deadline_ms)"),
                           ("next", "kill: deadline -> the slot's next attempt started, p50 (target <= 15 ms)"),
                           ("reaped", "  deadline -> child reaped")):
            vals = [x[key] for x in k if key in x]
            if vals:
                row(title, vals, ".1f", "ms")

    width = max((len(r[0]) for r in rows), default=40)
    vwidth = max((len(r[1]) for r in rows), default=10)
    load = os.getloadavg()
    print()
    print(f"ductline figures -- {os.cpu_count()} CPUs, load average {load[0]:.1f} at the end; medians of "
          f"{args.repeats} repeat(s) [per repeat]" + (" -- QUICK sizes" if q else ""))
    print("-" * (width + vwidth + 30))
    for title, value, per in rows:
        print(f"{title:<{width}}  {value:>{vwidth}}  {per}")
    print("-" * (width + vwidth + 30))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(got, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())

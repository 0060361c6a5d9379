#!/usr/bin/env python
"""Core throughput/latency benchmarks of ductline.

    python bench/core.py [--repeats 3] [--quick] [--sqlite] [--concurrency 8]

By default the worker runs with its own default slots (one per CPU), as a user's would.

Measures, in one run, against PostgreSQL (default) or a SQLite file (--sqlite):

1. Drain rate: N single-step no-op runs are triggered first (public trigger API,
   in a loop; not timed as part of the drain), then ONE real worker process is
   started (``python -m ductline worker --app bench/bench_app.py --database URL
   --concurrency C``) and we wait until every run is completed. Rates:
     * db     N / (last run finished_ms - first attempt started_ms), database clock
              (primary; excludes interpreter start-up of the worker itself)
     * wall   N / (worker Popen -> the poll that sees all N completed)
     * steady 80 % of N / (time between the 10 % and the 90 % completion), db clock
   Baseline: a bare single-connection loop over a ``bench_jobs`` table, one row per
   transaction (SELECT ... FOR UPDATE SKIP LOCKED, UPDATE, COMMIT) on PostgreSQL;
   BEGIN IMMEDIATE / SELECT / UPDATE / COMMIT with sqlite3 on SQLite.
2. Hop latency of a 3-step chain a->b->c: runs triggered one every --spacing ms
   while a worker runs; hop = next attempt started_ms - previous attempt
   finished_ms (ductline_attempts, database clock).
3. expand over 1,000 and 10,000 elements: wall time from trigger() to
   handle.wait() returning, with a worker already running and warm.

Every measurement uses a freshly created database (PostgreSQL: DROP DATABASE ...
WITH (FORCE) + CREATE DATABASE + migrate; SQLite: a new file). Values reported are
medians over --repeats; per-repeat values are shown in brackets.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

HERE = Path(__file__).resolve().parent
APP = HERE / "bench_app.py"
sys.path.insert(0, str(HERE))



def _src_digest(root: Path) -> str:
    """A short content hash of the ductline sources (``*.py``, ``*.sql``) under ``root``."""
    import hashlib

    h = hashlib.sha1()
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".sql") and "__pycache__" not in path.parts:
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


if "--snapshot" in sys.argv[1:]:
    # Benchmark a frozen copy of src/ (the tree may be edited while we run): copy it,
    # put it first on PYTHONPATH (before the editable install's .pth entry, also for
    # the worker and its children, which inherit the environment), and start again.
    import shutil as _shutil
    import tempfile as _tempfile

    _snap = Path(_tempfile.mkdtemp(prefix="ductline_src_snapshot_"))
    _shutil.copytree(HERE.parent / "src" / "ductline", _snap / "ductline",
                     ignore=_shutil.ignore_patterns("__pycache__"))
    _env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(_snap), os.environ.get("PYTHONPATH")])),
                DUCTLINE_BENCH_SNAPSHOT=str(_snap))
    _argv = [a for a in sys.argv[1:] if a != "--snapshot"]
    os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *_argv], _env)

import psycopg  # noqa: E402

import bench_app  # noqa: E402  (registers bench_noop, bench_chain3, bench_expand)
from ductline.store import open_store  # noqa: E402

DEFAULT_PG = os.environ.get("DUCTLINE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
# Several people may benchmark against one server: a suffix keeps their databases apart.
DB_SUFFIX = os.environ.get("DUCTLINE_BENCH_DB_SUFFIX", "")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ======================================================================================
# Backends: fresh databases and cheap read queries
# ======================================================================================
def migrated(url: str) -> str:
    """``url``, its database migrated to the current schema."""
    store = open_store(url)
    try:
        store.migrate()
    finally:
        store.close()
    return url


class PgBackend:
    name = "postgresql"

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        base, _, _ = admin_url.rpartition("/")
        self._base = base

    def _recreate(self, db: str) -> str:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{db}"')
        return f"{self._base}/{db}"

    def fresh(self, name: str = "ductline_bench") -> str:
        """A new, empty, migrated ductline database named ``name`` (plus the suffix);
        returns its URL."""
        return migrated(self._recreate(name + DB_SUFFIX))

    def fresh_raw(self) -> str:
        return self._recreate("ductline_bench_raw" + DB_SUFFIX)

    def query(self, url: str, sql: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(url, autocommit=True) as conn:
            return list(conn.execute(sql).fetchall())

    @contextmanager
    def poller(self, url: str) -> Iterator[Callable[[str], list[tuple[Any, ...]]]]:
        conn = psycopg.connect(url, autocommit=True)
        try:
            yield lambda sql: list(conn.execute(sql).fetchall())
        finally:
            conn.close()

    @staticmethod
    def server_pids(q: Callable[[str], list[tuple[Any, ...]]]) -> dict[int, str]:
        """PostgreSQL server processes (needs a local server), grouped: backends of this
        database (the worker's connections; the poller's own counts as other), others."""
        pids: dict[int, str] = {}
        for pid, here, mine, kind in q("SELECT pid, datname = current_database(), pid = pg_backend_pid(), "
                                       "backend_type FROM pg_stat_activity"):
            if mine:
                group = "postgres: bench poller backend"
            elif here:
                group = "postgres: backends of this db (worker)"
            elif kind == "client backend":
                group = "postgres: backends of OTHER dbs"
            else:
                group = f"postgres: {kind}"
            pids[int(pid)] = group
        if pids:  # the postmaster: the parent of any backend
            try:
                with open(f"/proc/{next(iter(pids))}/stat") as fh:
                    stat = fh.read()
                pids[int(stat[stat.rfind(")") + 2:].split()[1])] = "postgres: postmaster"
            except OSError:
                pass
        return pids

    def bare_loop(self, n: int, *, partial_index: bool = False) -> float:
        """Bare SKIP LOCKED loop; returns rows/s (one row per transaction)."""
        url = self.fresh_raw()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE bench_jobs (id bigserial PRIMARY KEY, status text, "
                         "not_before timestamptz, payload text)")
            if partial_index:
                conn.execute("CREATE INDEX bench_jobs_pending ON bench_jobs (id) WHERE status = 'pending'")
            conn.execute("INSERT INTO bench_jobs (status, not_before, payload) "
                         "SELECT 'pending', now() - interval '1 second', '[' || g || ']' "
                         "FROM generate_series(1, %s) AS g", (n,))
            conn.execute("VACUUM ANALYZE bench_jobs")
        done = 0
        with psycopg.connect(url) as conn:  # non-autocommit: one transaction per row
            t0 = time.perf_counter()
            while True:
                row = conn.execute(
                    "SELECT id FROM bench_jobs WHERE status = 'pending' AND not_before <= now() "
                    "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED").fetchone()
                if row is None:
                    conn.commit()
                    break
                conn.execute("UPDATE bench_jobs SET status = 'done' WHERE id = %s", (row[0],))
                conn.commit()
                done += 1
            elapsed = time.perf_counter() - t0
        assert done == n, (done, n)
        return n / elapsed


class SqliteBackend:
    name = "sqlite"

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="ductline_bench_sqlite_")
        _SQLITE_DIRS.append(self.dir)
        self._n = 0

    def _fresh_path(self, stem: str) -> str:
        self._n += 1
        path = os.path.join(self.dir, f"{stem}_{self._n}.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        return path

    def fresh(self) -> str:
        path = self._fresh_path("ductline")
        return migrated(f"sqlite:///{path}")  # path is absolute -> sqlite:////abs/path.db

    @staticmethod
    def _path(url: str) -> str:
        return url[len("sqlite:///"):]

    def query(self, url: str, sql: str) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(self._path(url), timeout=30)
        try:
            return list(conn.execute(sql).fetchall())
        finally:
            conn.close()

    @contextmanager
    def poller(self, url: str) -> Iterator[Callable[[str], list[tuple[Any, ...]]]]:
        conn = sqlite3.connect(self._path(url), timeout=30, isolation_level=None)
        try:
            yield lambda sql: list(conn.execute(sql).fetchall())
        finally:
            conn.close()

    @staticmethod
    def server_pids(q: Callable[[str], list[tuple[Any, ...]]]) -> dict[int, str]:
        return {}  # SQLite runs inside the worker processes

    def bare_loop(self, n: int, *, partial_index: bool = False) -> float:
        """Bare BEGIN IMMEDIATE loop with sqlite3 (same pragmas as ductline's dialect)."""
        path = self._fresh_path("raw")
        conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("CREATE TABLE bench_jobs (id INTEGER PRIMARY KEY, status TEXT, "
                         "not_before INTEGER, payload TEXT)")
            if partial_index:
                conn.execute("CREATE INDEX bench_jobs_pending ON bench_jobs (id) WHERE status = 'pending'")
            now_ms = int(time.time() * 1000) - 1000
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO bench_jobs (status, not_before, payload) VALUES ('pending', ?, ?)",
                             [(now_ms, f"[{i}]") for i in range(n)])
            conn.execute("COMMIT")
            done = 0
            select = ("SELECT id FROM bench_jobs WHERE status = 'pending' AND not_before <= "
                      "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) ORDER BY id LIMIT 1")
            t0 = time.perf_counter()
            while True:
                conn.execute("BEGIN IMMEDIATE")
                row = conn.execute(select).fetchone()
                if row is None:
                    conn.execute("COMMIT")
                    break
                conn.execute("UPDATE bench_jobs SET status = 'done' WHERE id = ?", (row[0],))
                conn.execute("COMMIT")
                done += 1
            elapsed = time.perf_counter() - t0
        finally:
            conn.close()
        assert done == n, (done, n)
        return n / elapsed


# ======================================================================================
# The worker process
# ======================================================================================
def _child_pids(pid: int) -> list[int]:
    """PIDs whose parent is ``pid`` (scan of /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry))
    return found


class WorkerProcess:
    """One real ``python -m ductline worker`` process, always stopped on exit
    (SIGTERM, wait; SIGKILL by PID -- the worker and its own children -- only if it
    does not stop within ``stop_timeout``)."""

    def __init__(self, url: str, concurrency: int, log_dir: str, label: str,
                 prefix: list[str] | None = None, stop_timeout: float = 60.0) -> None:
        self.url = url
        self.concurrency = concurrency
        self.log_dir = log_dir
        self.log_path = os.path.join(log_dir, f"worker_{label}.log")
        self.prefix = prefix or []
        self.stop_timeout = stop_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0

    def __enter__(self) -> "WorkerProcess":
        env = {k: v for k, v in os.environ.items() if not k.startswith("DUCTLINE_")}
        env["DUCTLINE_SHUTDOWN_GRACE_SECONDS"] = "10"
        argv = self.prefix + [sys.executable, "-m", "ductline", "worker", "--app", str(APP),
                              "--database", self.url]
        if self.concurrency > 0:  # 0: the worker's default slots
            argv += ["--concurrency", str(self.concurrency)]
        self._log = open(self.log_path, "ab")
        self.started = time.perf_counter()
        # Own session: a Ctrl-C on the benchmark reaches us, and we stop the worker.
        # cwd: the (empty) log folder, so no stray ductline.toml is picked up.
        self.proc = subprocess.Popen(argv, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.log_dir)
        return self

    def check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"worker exited with {self.proc.returncode}; see {self.log_path}")

    def __exit__(self, *exc: Any) -> None:
        proc = self.proc
        if proc is None:
            return
        try:
            if proc.poll() is None:
                children = _child_pids(proc.pid)
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(self.stop_timeout)
                except subprocess.TimeoutExpired:
                    log(f"worker {proc.pid} did not stop within {self.stop_timeout} s; SIGKILL")
                    children = sorted(set(children + _child_pids(proc.pid)))
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
# CPU accounting (from /proc) and optional py-spy
# ======================================================================================
TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return 0.0
    fields = stat[stat.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def _machine_busy() -> tuple[float, float]:
    with open("/proc/stat") as fh:
        parts = [int(x) for x in fh.readline().split()[1:]]
    idle = parts[3] + parts[4]
    return (sum(parts) - idle) / TICK, sum(parts) / TICK


def cpu_snapshot(worker_pid: int, pg_pids: dict[int, str]) -> dict[str, Any]:
    """Per-process CPU seconds, grouped; ``pg_pids`` maps PostgreSQL server PIDs to a group."""
    busy, total = _machine_busy()
    groups: dict[int, str] = {worker_pid: "worker parent"}
    groups.update({p: "worker children" for p in _child_pids(worker_pid)})
    groups.update(pg_pids)
    groups[os.getpid()] = "bench driver (poller)"
    others: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in groups:
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            others[int(entry)] = (stat[stat.find("(") + 1:stat.rfind(")")],
                                  (int(fields[11]) + int(fields[12])) / TICK)
    return {"pids": {p: (g, _cpu_seconds(p)) for p, g in groups.items()}, "others": others,
            "machine": busy, "wall": time.perf_counter()}


def top_others(a: dict[str, Any], b: dict[str, Any], k: int = 5) -> list[tuple[str, float]]:
    """The other processes (by name) that used the most CPU between two snapshots."""
    by_name: dict[str, float] = {}
    for pid, (name, cpu_b) in b["others"].items():
        by_name[name] = by_name.get(name, 0.0) + max(cpu_b - a["others"].get(pid, (name, 0.0))[1], 0.0)
    return sorted(by_name.items(), key=lambda kv: -kv[1])[:k]


def cpu_delta(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
    """CPU seconds per group between two snapshots (a PID new in ``b`` counts from 0)."""
    out: dict[str, float] = {}
    for pid, (group, cpu_b) in b["pids"].items():
        cpu_a = a["pids"].get(pid, (group, 0.0))[1]
        out[group] = out.get(group, 0.0) + max(cpu_b - cpu_a, 0.0)
    machine = b["machine"] - a["machine"]
    out["rest of machine (kernel, irq, other procs)"] = machine - sum(out.values())
    out["machine total"] = machine
    return out


@contextmanager
def py_spy(pid: int, out: str | None) -> Iterator[None]:
    """Sample ``pid`` and its children with py-spy (non-blocking, raw collapsed stacks)
    while inside. py-spy counts a child blocked reading its pipe as busy: read the
    children's stacks below their ``recv`` only."""
    if not out:
        yield
        return
    exe = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    proc = subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", "250", "--nonblocking", "--subprocesses",
                             "--format", "raw", "--output", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        yield
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log(f"py-spy profile of pid {pid}: {out}")


# ======================================================================================
# Helpers
# ======================================================================================
def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))]


def wait_until(check: Callable[[], bool], timeout: float, what: str, worker: WorkerProcess | None = None,
               interval: float = 0.1) -> None:
    end = time.monotonic() + timeout
    while not check():
        if worker is not None:
            worker.check_alive()
        if time.monotonic() > end:
            raise TimeoutError(f"{what} not reached within {timeout} s")
        time.sleep(interval)


def count_runs(q: Callable[[str], list[tuple[Any, ...]]], pipeline: str) -> dict[str, int]:
    rows = q(f"SELECT status, count(*) FROM ductline_runs WHERE pipeline = '{pipeline}' GROUP BY status")
    return {status: int(n) for status, n in rows}


def warm_up(backend: Any, url: str, store: Any, worker: WorkerProcess, n: int) -> None:
    """Run ``n`` no-op runs so the worker and all its children are up and warm;
    ``n`` of 0 (the worker's default slots) means one per CPU, as the worker has."""
    n = n or os.cpu_count() or 2
    handles = [bench_app.bench_noop.trigger(-1, database=store) for _ in range(n)]
    for h in handles:
        end = time.monotonic() + 120
        while h.status() not in ("completed", "halted", "failed", "cancelled"):
            worker.check_alive()
            if time.monotonic() > end:
                raise TimeoutError("warm-up run did not finish within 120 s")
            time.sleep(0.02)


# ======================================================================================
# 1. Drain
# ======================================================================================
def bench_drain(backend: Any, n: int, concurrency: int, log_dir: str, label: str,
                timeout: float, profile: str | None = None) -> dict[str, Any]:
    url = backend.fresh()
    store = open_store(url)
    try:
        t0 = time.perf_counter()
        for i in range(n):
            bench_app.bench_noop.trigger(i, database=store)
        trigger_rate = n / (time.perf_counter() - t0)
    finally:
        store.close()
    snaps: list[tuple[int, dict[str, float]]] = []
    with backend.poller(url) as q, WorkerProcess(url, concurrency, log_dir, label) as worker:
        assert worker.proc is not None
        def done() -> bool:
            counts = count_runs(q, "bench_noop")
            bad = {k: v for k, v in counts.items() if k in ("halted", "failed", "cancelled")}
            if bad:
                raise RuntimeError(f"runs ended badly: {bad}; see {worker.log_path}")
            completed = counts.get("completed", 0)
            # CPU use over the steady part of the drain (first poll past 10 %, first past 90 %).
            mark = len(snaps)
            if mark < 2 and completed >= (0.1, 0.9)[mark] * n:
                snaps.append((completed, cpu_snapshot(worker.proc.pid, backend.server_pids(q))))  # type: ignore[union-attr]
            return completed >= n
        with py_spy(worker.proc.pid, profile and os.path.join(profile, f"{label}_worker.txt")):
            wait_until(done, timeout, f"{n} completed runs", worker, interval=0.1)
        wall = time.perf_counter() - worker.started
    first_start = backend.query(url, "SELECT min(started_ms) FROM ductline_attempts")[0][0]
    finishes = [int(r[0]) for r in backend.query(
        url, "SELECT finished_ms FROM ductline_runs ORDER BY finished_ms")]
    db_seconds = (finishes[-1] - int(first_start)) / 1000
    lo, hi = finishes[int(0.1 * n)], finishes[int(0.9 * n) - 1]
    steady = (int(0.9 * n) - int(0.1 * n)) / max((hi - lo) / 1000, 1e-9)
    attempts = backend.query(url, "SELECT count(*) FROM ductline_attempts")[0][0]
    cpu: dict[str, float] = {}
    if len(snaps) == 2:
        (c0, a), (c1, b) = snaps
        runs_done = max(c1 - c0, 1)
        cpu = {k: v * 1000 / runs_done for k, v in cpu_delta(a, b).items()}
        cpu["_cores"] = (b["machine"] - a["machine"]) / (b["wall"] - a["wall"])
        log(f"drain {label}: other processes, CPU ms/run: "
            + ", ".join(f"{name} {v * 1000 / runs_done:.3f}" for name, v in top_others(a, b)))
    res = {"db": n / db_seconds, "wall": n / wall, "steady": steady, "trigger": trigger_rate,
           "db_seconds": db_seconds, "attempts": int(attempts), "cpu": cpu}
    log(f"drain {label}: db {res['db']:.0f} runs/s ({db_seconds:.2f} s), wall {res['wall']:.0f} runs/s "
        f"({wall:.2f} s), steady {steady:.0f} runs/s, trigger {trigger_rate:.0f}/s, attempts {attempts}; "
        f"CPU ms/run " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items()))
    return res


# ======================================================================================
# 2. Chain hop latency
# ======================================================================================
def bench_chain(backend: Any, n: int, spacing_ms: float, concurrency: int, log_dir: str, label: str,
                timeout: float) -> dict[str, float]:
    url = backend.fresh()
    store = open_store(url)
    try:
        with backend.poller(url) as q, WorkerProcess(url, concurrency, log_dir, label) as worker:
            warm_up(backend, url, store, worker, concurrency)
            t0 = time.perf_counter()
            for i in range(n):
                target = t0 + i * spacing_ms / 1000
                delay = target - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                bench_app.bench_chain3.trigger(i, database=store)
            wait_until(lambda: count_runs(q, "bench_chain3").get("completed", 0) >= n, timeout,
                       f"{n} completed chain runs", worker, interval=0.05)
    finally:
        store.close()
    rows = backend.query(url, """
        SELECT j.run_id, j.step, a.started_ms, a.finished_ms, a.result, r.created_ms
        FROM ductline_attempts a
        JOIN ductline_jobs j ON j.id = a.job_id
        JOIN ductline_runs r ON r.id = j.run_id
        WHERE j.pipeline = 'bench_chain3'""")
    by_run: dict[str, dict[str, tuple[int, int]]] = {}
    created: dict[str, int] = {}
    retried = 0
    for run_id, step, started, finished, result, created_ms in rows:
        if result != "succeeded":
            retried += 1
            continue
        by_run.setdefault(run_id, {})[step] = (int(started), int(finished))
        created[run_id] = int(created_ms)
    hops: list[float] = []
    first: list[float] = []
    durations: list[float] = []
    for run_id, steps in by_run.items():
        for prev, nxt in (("chain_a", "chain_b"), ("chain_b", "chain_c")):
            hops.append(steps[nxt][0] - steps[prev][1])
        first.append(steps["chain_a"][0] - created[run_id])
        durations.extend(f - st for st, f in steps.values())
    e2e = [float(r[0]) for r in backend.query(
        url, "SELECT finished_ms - created_ms FROM ductline_runs WHERE pipeline = 'bench_chain3'")]
    res = {"p50": pct(hops, 50), "p99": pct(hops, 99), "max": max(hops), "n_hops": len(hops),
           "first_p50": pct(first, 50), "first_p99": pct(first, 99), "non_success_attempts": retried,
           "attempt_p50": pct(durations, 50), "attempt_p99": pct(durations, 99),
           "e2e_p50": pct(e2e, 50), "e2e_p99": pct(e2e, 99)}
    log(f"chain {label}: hops={len(hops)} p50 {res['p50']:.0f} ms p99 {res['p99']:.0f} ms max {res['max']:.0f} ms; "
        f"trigger->first start p50 {res['first_p50']:.0f} ms p99 {res['first_p99']:.0f} ms; "
        f"non-succeeded attempts {retried}; attempt started->finished p50 {res['attempt_p50']:.0f} ms "
        f"p99 {res['attempt_p99']:.0f} ms; run created->finished p50 {res['e2e_p50']:.0f} ms "
        f"p99 {res['e2e_p99']:.0f} ms")
    return res


# ======================================================================================
# 3. expand / collapse
# ======================================================================================
def bench_expand(backend: Any, n: int, concurrency: int, log_dir: str, label: str,
                 timeout: float, profile: str | None = None) -> dict[str, Any]:
    url = backend.fresh()
    store = open_store(url)
    timed_out = False
    try:
        with WorkerProcess(url, concurrency, log_dir, label) as worker:
            warm_up(backend, url, store, worker, concurrency)
            assert worker.proc is not None
            with py_spy(worker.proc.pid, profile and os.path.join(profile, f"{label}_worker.txt")):
                t0 = time.perf_counter()
                handle = bench_app.bench_expand.trigger(n, database=store)
                end = time.monotonic() + timeout
                status = handle.status()
                while status not in ("completed", "halted", "failed", "cancelled"):
                    worker.check_alive()
                    if time.monotonic() > end:
                        timed_out = True
                        break
                    try:
                        status = handle.wait(timeout=5)
                    except TimeoutError:
                        status = handle.status()
                wall = time.perf_counter() - t0
            output = handle.output() if status == "completed" else None
    finally:
        store.close()
    # Phase breakdown from the database clock.
    run_id = handle.id
    (created_ms, finished_ms), = backend.query(
        url, f"SELECT created_ms, finished_ms FROM ductline_runs WHERE id = '{run_id}'")
    steps = {}
    for step, n_att, n_ok, smin, smax, fmin, fmax in backend.query(url, f"""
            SELECT j.step, count(*), sum(CASE WHEN a.result = 'succeeded' THEN 1 ELSE 0 END),
                   min(a.started_ms), max(a.started_ms), min(a.finished_ms), max(a.finished_ms)
            FROM ductline_attempts a JOIN ductline_jobs j ON j.id = a.job_id
            WHERE j.run_id = '{run_id}' GROUP BY j.step"""):
        steps[step] = dict(n=int(n_att), ok=int(n_ok or 0), smin=smin, smax=smax, fmin=fmin, fmax=fmax)
    src, el, col = steps.get("expand_source"), steps.get("expand_element"), steps.get("expand_count")
    # Element throughput early vs late in the run (a rate that decays means per-element
    # cost grows with the size of the run).
    fins = [int(r[0]) for r in backend.query(url, f"""
            SELECT a.finished_ms FROM ductline_attempts a JOIN ductline_jobs j ON j.id = a.job_id
            WHERE j.run_id = '{run_id}' AND j.step = 'expand_element' AND a.finished_ms IS NOT NULL
            ORDER BY a.finished_ms""")]
    deciles: list[float] = []
    if len(fins) >= 20:
        k = len(fins) // 10
        for i in range(10):
            chunk = fins[i * k:(i + 1) * k + 1]
            deciles.append(k / max((chunk[-1] - chunk[0]) / 1000, 1e-3))

    def d(a: Any, b: Any) -> float | None:
        return None if a is None or b is None else (int(b) - int(a)) / 1000

    phases = {
        "trigger->source start": d(created_ms, src and src["smin"]),
        "source run": d(src and src["smin"], src and src["fmax"]),
        "source done->1st element start": d(src and src["fmax"], el and el["smin"]),
        "elements (1st start->last finish)": d(el and el["smin"], el and el["fmax"]),
        "last element->collapse start": d(el and el["fmax"], col and col["smin"]),
        "collapse run": d(col and col["smin"], col and col["fmax"]),
        "collapse done->run finished": d(col and col["fmax"], finished_ms),
    }
    res = {"wall": wall, "status": "timed out" if timed_out else status, "output": output,
           "elements_ok": el["ok"] if el else 0, "element_attempts": el["n"] if el else 0,
           "phases": phases, "deciles": deciles}
    if timed_out or status != "completed" or output != n:
        log(f"expand {label}: status={res['status']} output={output!r} elements ok={res['elements_ok']}/{n}")
    log(f"expand {label}: wall {wall:.2f} s; phases: "
        + ", ".join(f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in phases.items())
        + "; elements/s by decile of completions: " + " ".join(f"{v:.0f}" for v in deciles))
    return res


# ======================================================================================
# 4. The hop as a user sees it (marks inside the steps)
# ======================================================================================
def _mark_hops(handles: list[Any]) -> list[float]:
    """Hops in ms from the marks bench_marks3 returns: a returned -> b called,
    b returned -> c called."""
    hops: list[float] = []
    for h in handles:
        marks = h.output()
        hops += [(marks[1] - marks[0]) * 1000, (marks[3] - marks[2]) * 1000]
    return hops


def bench_hop(backend: Any, alone: int, burst: int, concurrency: int, log_dir: str, label: str,
              timeout: float) -> dict[str, float]:
    """``alone`` chains one after another (each waited for), then ``burst`` chains
    triggered at once (one trigger_many); hops from the marks taken in the steps."""
    url = backend.fresh()
    store = open_store(url)
    try:
        with WorkerProcess(url, concurrency, log_dir, label) as worker:
            warm_up(backend, url, store, worker, max(concurrency, 2))
            done = []
            for i in range(alone):
                h = bench_app.bench_marks3.trigger(i, database=store)
                if h.wait(timeout=60) != "completed":
                    raise RuntimeError(f"chain {h.id} did not complete")
                done.append(h)
            alone_hops = _mark_hops(done)
            handles = bench_app.bench_marks3.trigger_many(list(range(burst)), database=store)
            end = time.monotonic() + timeout
            for h in handles:
                worker.check_alive()
                if h.wait(timeout=max(1.0, end - time.monotonic())) != "completed":
                    raise RuntimeError(f"chain {h.id} did not complete")
            burst_hops = _mark_hops(handles)
    finally:
        store.close()
    res = {"alone_p50": pct(alone_hops, 50), "alone_p95": pct(alone_hops, 95),
           "burst_p50": pct(burst_hops, 50), "burst_p95": pct(burst_hops, 95), "burst_p99": pct(burst_hops, 99)}
    log(f"hop {label}: alone p50 {res['alone_p50']:.1f} ms p95 {res['alone_p95']:.1f} ms ({len(alone_hops)} hops); "
        f"{burst} at once p50 {res['burst_p50']:.1f} ms p95 {res['burst_p95']:.1f} ms p99 {res['burst_p99']:.1f} ms")
    return res


# ======================================================================================
# 5. A burst of delayed runs
# ======================================================================================
def bench_burst(backend: Any, n: int, ahead: float, concurrency: int, log_dir: str, label: str,
                timeout: float) -> dict[str, float]:
    """``n`` runs triggered one by one within one second, each with ``delay_until``
    ``ahead`` seconds after its trigger; lateness = the step called - delay_until."""
    from datetime import datetime, timezone
    url = backend.fresh()
    store = open_store(url)
    try:
        with WorkerProcess(url, concurrency, log_dir, label) as worker:
            warm_up(backend, url, store, worker, max(concurrency, 2))
            due: list[float] = []
            handles = []
            t0 = time.perf_counter()
            for i in range(n):
                target = t0 + i / n
                wait = target - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                at = time.time() + ahead
                handles.append(bench_app.bench_called.trigger(
                    i, database=store, delay_until=datetime.fromtimestamp(at, timezone.utc)))
                due.append(int(at * 1000) / 1000)  # stored in whole milliseconds
            end = time.monotonic() + timeout
            for h in handles:
                worker.check_alive()
                if h.wait(timeout=max(1.0, end - time.monotonic())) != "completed":
                    raise RuntimeError(f"run {h.id} did not complete")
            late = [(h.output() - d) * 1000 for h, d in zip(handles, due)]
    finally:
        store.close()
    res = {"p50": pct(late, 50), "p99": pct(late, 99), "max": max(late), "min": min(late)}
    log(f"burst {label}: lateness p50 {res['p50']:.1f} ms p99 {res['p99']:.1f} ms max {res['max']:.1f} ms "
        f"min {res['min']:.1f} ms")
    return res


# ======================================================================================
# 6. Trigger rates (no worker)
# ======================================================================================
def bench_trigger(backend: Any, single: int, bulk: int, batch: int) -> dict[str, float]:
    url = backend.fresh()
    store = open_store(url)
    try:
        bench_app.bench_noop.trigger(-1, database=store)  # connection up
        t0 = time.perf_counter()
        for i in range(single):
            bench_app.bench_noop.trigger(i, database=store)
        single_rate = single / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        for start in range(0, bulk, batch):
            bench_app.bench_noop.trigger_many(list(range(start, min(bulk, start + batch))), database=store)
        bulk_rate = bulk / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        bench_app.bench_noop.trigger_many(list(range(bulk)), database=store)
        one_call = bulk / (time.perf_counter() - t0)
    finally:
        store.close()
    n = backend.query(url, "SELECT count(*) FROM ductline_runs")[0][0]
    assert int(n) == 1 + single + 2 * bulk, n
    res = {"single": single_rate, "bulk": bulk_rate, "one_call": one_call}
    log(f"trigger: single {single_rate:.0f}/s; trigger_many batches of {batch} {bulk_rate:.0f}/s; "
        f"one call of {bulk} {one_call:.0f}/s")
    return res


# ======================================================================================
# Main
# ======================================================================================
def fmt_list(values: list[float], spec: str) -> str:
    return "[" + ", ".join(format(v, spec) for v in values) + "]"


def main() -> int:
    try:
        return _main()
    finally:  # temporary copies are ours to remove; worker logs are kept
        for folder in (os.environ.get("DUCTLINE_BENCH_SNAPSHOT"), _SQLITE_DIRS and _SQLITE_DIRS[0]):
            if folder and os.path.isdir(folder):
                shutil.rmtree(folder, ignore_errors=True)


_SQLITE_DIRS: list[str] = []


def _main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true",
                    help="small sizes: 1000 drain runs, 60 chains, expand 100/1000")
    ap.add_argument("--sqlite", action="store_true", help="run against a SQLite file instead of PostgreSQL")
    ap.add_argument("--pg-url", default=DEFAULT_PG,
                    help="admin URL; databases ductline_bench and ductline_bench_raw are (re)created next to it")
    ap.add_argument("--concurrency", type=int, default=0,
                    help="worker slots; 0 (default): the worker's default (one per CPU)")
    ap.add_argument("--runs", type=int, default=None, help="drain: number of runs (default 5000)")
    ap.add_argument("--chains", type=int, default=None, help="chain: number of runs (default 300)")
    ap.add_argument("--spacing-ms", type=float, default=20.0, help="chain: ms between triggers")
    ap.add_argument("--expand-sizes", default=None, help="comma list (default 1000,10000)")
    ap.add_argument("--expand-timeout", type=float, default=1800.0, help="seconds per expand run")
    ap.add_argument("--only", default="drain,chain,expand,hop,burst,trigger",
                    help="subset of drain,chain,expand,hop,burst,trigger")
    ap.add_argument("--hop-alone", type=int, default=40, help="hop: chains run one at a time")
    ap.add_argument("--hop-burst", type=int, default=300, help="hop: chains triggered at once")
    ap.add_argument("--burst", type=int, default=200, help="burst: delayed runs triggered within 1 s")
    ap.add_argument("--snapshot", action="store_true",
                    help="benchmark a frozen copy of src/ (taken at start) instead of the live tree")
    ap.add_argument("--py-spy", dest="py_spy", metavar="DIR", default=None,
                    help="diagnostic: in repeat 1, sample the worker parent and its children with py-spy "
                         "(raw collapsed stacks into DIR) during the drain and the largest expand; perturbs "
                         "those numbers")
    args = ap.parse_args()

    runs = args.runs or (1000 if args.quick else 5000)
    chains = args.chains or (60 if args.quick else 300)
    sizes = [int(s) for s in (args.expand_sizes or ("100,1000" if args.quick else "1000,10000")).split(",")]
    only = set(args.only.split(","))
    backend: Any = SqliteBackend() if args.sqlite else PgBackend(args.pg_url)
    log_dir = tempfile.mkdtemp(prefix="ductline_bench_logs_")
    import ductline
    src_at_start = _src_digest(Path(ductline.__file__).resolve().parent)
    if args.py_spy:
        os.makedirs(args.py_spy, exist_ok=True)
        args.py_spy = os.path.abspath(args.py_spy)

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    log(f"backend {backend.name}, concurrency {args.concurrency}, repeats {args.repeats}; worker logs in {log_dir}")
    drain: list[dict[str, float]] = []
    bare: list[float] = []
    bare_idx: list[float] = []
    chain: list[dict[str, float]] = []
    expand: dict[int, list[dict[str, Any]]] = {s: [] for s in sizes}
    hop: list[dict[str, float]] = []
    burst: list[dict[str, float]] = []
    trig: list[dict[str, float]] = []
    for r in range(args.repeats):
        if "hop" in only:
            log(f"repeat {r + 1}: hop")
            hop.append(bench_hop(backend, args.hop_alone, args.hop_burst, args.concurrency, log_dir, f"hop{r}",
                                 timeout=600.0))
        if "burst" in only:
            log(f"repeat {r + 1}: burst {args.burst}")
            burst.append(bench_burst(backend, args.burst, 3.0, args.concurrency, log_dir, f"burst{r}",
                                     timeout=120.0))
        if "trigger" in only:
            log(f"repeat {r + 1}: trigger")
            trig.append(bench_trigger(backend, 2000, 10000, 1000))
        if "drain" in only:
            log(f"repeat {r + 1}: drain {runs}")
            drain.append(bench_drain(backend, runs, args.concurrency, log_dir, f"drain{r}",
                                     timeout=max(600.0, runs / 5), profile=args.py_spy if r == 0 else None))
            bare.append(backend.bare_loop(runs))
            bare_idx.append(backend.bare_loop(runs, partial_index=True))
            log(f"bare {r}: {bare[-1]:.0f} rows/s; with partial index {bare_idx[-1]:.0f} rows/s")
        if "chain" in only:
            log(f"repeat {r + 1}: chain {chains}")
            chain.append(bench_chain(backend, chains, args.spacing_ms, args.concurrency, log_dir, f"chain{r}",
                                     timeout=600.0))
        if "expand" in only:
            for size in sizes:
                if expand[size] and expand[size][-1]["status"] == "timed out":
                    log(f"repeat {r + 1}: expand {size} skipped (timed out before)")
                    continue
                log(f"repeat {r + 1}: expand {size}")
                expand[size].append(bench_expand(
                    backend, size, args.concurrency, log_dir, f"expand{size}_{r}", timeout=args.expand_timeout,
                    profile=args.py_spy if r == 0 and size == max(sizes) else None))

    # ---------------------------------------------------------------- the table
    rows: list[tuple[str, str, str]] = []
    if drain:
        for key, title in (("db", f"drain {runs} no-op runs, db clock (1st attempt start -> last run finish)"),
                           ("wall", f"drain {runs} no-op runs, wall (worker spawn -> all completed seen)"),
                           ("steady", "drain steady state (10% -> 90% of completions, db clock)")):
            vals = [d[key] for d in drain]
            rows.append((title, f"{median(vals):8.0f} runs/s", fmt_list(vals, ".0f")))
        bare_name = "bare psycopg SKIP LOCKED loop" if backend.name == "postgresql" else "bare sqlite3 BEGIN IMMEDIATE loop"
        rows.append((f"{bare_name} (1 conn, 1 row/tx)", f"{median(bare):8.0f} rows/s", fmt_list(bare, ".0f")))
        rows.append(("RATIO ductline(db) / bare", f"{median([d['db'] for d in drain]) / median(bare):8.3f}", ""))
        rows.append(("RATIO ductline(steady) / bare",
                     f"{median([d['steady'] for d in drain]) / median(bare):8.3f}", ""))
        rows.append(("  ref: bare loop + partial index on pending", f"{median(bare_idx):8.0f} rows/s",
                     fmt_list(bare_idx, ".0f")))
        vals = [d["trigger"] for d in drain]
        rows.append(("  ref: enqueue via trigger() loop (not in drain)", f"{median(vals):8.0f} runs/s",
                     fmt_list(vals, ".0f")))
        cpus = [d["cpu"] for d in drain if d["cpu"]]
        if cpus:
            keys = list(dict.fromkeys(k for c in cpus for k in c))
            for key in keys:
                vals = [c.get(key, 0.0) for c in cpus]
                if key == "_cores":
                    rows.append(("  ref: drain steady, CPUs busy (whole machine)", f"{median(vals):8.2f} CPUs",
                                 fmt_list(vals, ".2f")))
                else:
                    rows.append((f"  ref: drain steady CPU/run: {key}", f"{median(vals):8.3f} ms",
                                 fmt_list(vals, ".3f")))
    if chain:
        for key, title in (("p50", "chain3 commit -> next attempt start (db clock) p50"),
                           ("p99", "chain3 commit -> next attempt start (db clock) p99"),
                           ("max", "chain3 commit -> next attempt start (db clock) max"),
                           ("first_p50", "  ref: trigger -> first attempt start p50"),
                           ("first_p99", "  ref: trigger -> first attempt start p99"),
                           ("attempt_p50", "  ref: attempt started -> finished (claim -> recorded) p50"),
                           ("attempt_p99", "  ref: attempt started -> finished (claim -> recorded) p99"),
                           ("e2e_p50", "  ref: chain3 run created -> finished p50"),
                           ("e2e_p99", "  ref: chain3 run created -> finished p99")):
            vals = [c[key] for c in chain]
            rows.append((title if title.startswith("  ref") else
                         f"{title} ({chains} runs, {int(chain[0]['n_hops'])} hops/repeat)",
                         f"{median(vals):8.0f} ms", fmt_list(vals, ".0f")))
    if hop:
        for key, title in (("alone_p50", "hop (a returned -> b called), one chain alone, p50"),
                           ("alone_p95", "hop, one chain alone, p95"),
                           ("burst_p50", f"hop, {args.hop_burst} chains triggered at once, p50"),
                           ("burst_p95", f"hop, {args.hop_burst} chains triggered at once, p95"),
                           ("burst_p99", f"hop, {args.hop_burst} chains triggered at once, p99")):
            vals = [h[key] for h in hop]
            rows.append((title, f"{median(vals):8.1f} ms", fmt_list(vals, ".1f")))
    if burst:
        for key, title in (("p50", f"burst of {args.burst} delayed runs: lateness (called - delay_until) p50"),
                           ("p99", "burst: lateness p99"), ("max", "burst: lateness max"),
                           ("min", "burst: lateness min")):
            vals = [b[key] for b in burst]
            rows.append((title, f"{median(vals):8.1f} ms", fmt_list(vals, ".1f")))
    if trig:
        for key, title in (("single", "trigger() loop, one process"),
                           ("bulk", "trigger_many, 10 calls of 1,000"),
                           ("one_call", "trigger_many, one call of 10,000")):
            vals = [t[key] for t in trig]
            rows.append((title, f"{median(vals):8.0f} runs/s", fmt_list(vals, ".0f")))
    if expand and any(expand.values()):
        walls: dict[int, float] = {}
        for size in sizes:
            res = expand[size]
            if not res:
                continue
            vals = [x["wall"] for x in res]
            note = "" if all(x["status"] == "completed" and x["output"] == size for x in res) else \
                " (NOT ALL COMPLETED: " + ", ".join(str(x["status"]) for x in res) + ")"
            walls[size] = median(vals)
            rows.append((f"expand {size} elements, trigger -> wait() returns{note}", f"{walls[size]:8.2f} s",
                         fmt_list(vals, ".2f")))
            for phase in res[0]["phases"]:
                pv = [x["phases"][phase] for x in res if x["phases"][phase] is not None]
                if pv:
                    rows.append((f"    {phase}", f"{median(pv):8.2f} s", fmt_list(pv, ".2f")))
            for idx, name in ((0, "first"), (9, "last")):
                dv = [x["deciles"][idx] for x in res if len(x["deciles"]) == 10]
                if dv:
                    rows.append((f"    element completions/s, {name} 10% of elements", f"{median(dv):8.0f} /s",
                                 fmt_list(dv, ".0f")))
        if len(sizes) == 2 and all(s in walls for s in sizes):
            small, big = sorted(sizes)
            rows.append((f"RATIO expand {big}/{small} (target <= {big // small}x: linear)",
                         f"{walls[big] / walls[small]:8.2f}x", ""))

    try:
        head = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(HERE.parent), "status", "--porcelain", "--", "src"],
                               capture_output=True, text=True, timeout=10).stdout.split("\n")
        dirty = [line for line in dirty if line.strip()]
        version = f"code: git {head or '?'}" + (f" + {len(dirty)} uncommitted change(s) under src/" if dirty else
                                               " (src/ clean)")
    except (OSError, subprocess.SubprocessError):
        version = "code: git state unknown"
    import ductline
    code_dir = Path(ductline.__file__).resolve().parent
    snapshot = os.environ.get("DUCTLINE_BENCH_SNAPSHOT")
    version += (f"; benchmarked a snapshot of src/ taken at start ({code_dir}), sources sha1 "
                f"{_src_digest(code_dir)}" if snapshot else
                f"; benchmarked the live tree {code_dir}, sources sha1 {src_at_start} at start, "
                f"{_src_digest(code_dir)} at end"
                + ("" if src_at_start == _src_digest(code_dir) else " (CHANGED DURING THE RUN)"))
    width = max(len(r[0]) for r in rows) if rows else 40
    vwidth = max(len(r[1]) for r in rows) if rows else 10
    print()
    print(f"ductline core benchmark -- backend {backend.name}, worker --concurrency {args.concurrency}, "
          f"{os.cpu_count()} CPUs, medians of {args.repeats} repeat(s) [per-repeat values]"
          + (" -- PROFILED with py-spy in repeat 1" if args.py_spy else ""))
    print(version)
    print("-" * (width + vwidth + 30))
    for name, value, per in rows:
        print(f"{name:<{width}}  {value:>{vwidth}}  {per}")
    print("-" * (width + vwidth + 30))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""A rolling deploy under load: three versions of one pipeline, workers replaced in
waves while runs are in flight.

    python bench/rolling_deploy.py [--backend postgres|sqlite] [--workers 4] [--concurrency 2]
                                   [--rate 8] [--wave 2] [--pause 3]
                                   [--admin-url postgresql://postgres@127.0.0.1:5432/test]

Pipeline "rolling" in three versions (bench/rolling_v1.py .. rolling_v3.py):
v1 ``a -> b -> c``; v2 renames ``b`` to ``b2``; v3 adds ``d`` after ``c``. A client
thread triggers ``--rate`` runs a second of the version deployed last, throughout.

1. ``--workers`` v1 workers (``--concurrency`` slots each) serve the first runs.
2. Deploy v2, letting old runs drain: the client switches to v2; v1 workers are
   SIGTERMed ``--wave`` at a time and replaced by v2 workers, ``--pause`` seconds
   apart, all but the last; the last v1 worker stops once no v1 run is unfinished.
3. Deploy v3, moving old runs: the client switches to v3; every v2 worker is replaced
   in waves, then ``ductline runs move`` moves the v2 runs still unfinished to v3.
4. The client stops; every run must complete.

Checked at the end: every run completed with the output of the version it finished
on; every job has exactly one succeeded attempt; no attempt ended on a missing step
(the error a worker without the step would record); every other attempt is one a
stopping worker gave back uncharged. Printed: runs by version, moved runs, attempts,
each phase's duration, run latency (trigger to completion) p50/p99 by phase.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402

from ductline.model.outcomes import GIVEN_BACK_PATTERN  # noqa: E402
from ductline.operations.move import move_runs  # noqa: E402
from ductline.store import fleet, open_store  # noqa: E402

APPS = {v: str(HERE / f"rolling_v{v}.py") for v in (1, 2, 3)}
STEPS = {1: ["a", "b", "c"], 2: ["a", "b2", "c"], 3: ["a", "b2", "c", "d"]}
MISSING_STEP = "%is not in pipeline%"  # what an attempt of a step its worker lacks would record


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def load(version: int) -> ModuleType:
    """Each version in its own module (they all define pipeline "rolling")."""
    name = f"rolling_v{version}"
    spec = importlib.util.spec_from_file_location(name, APPS[version])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Workers:
    """Worker processes by version, each in a process group of its own."""

    def __init__(self, url: str, concurrency: int, logs: str) -> None:
        self.url, self.concurrency, self.logs = url, concurrency, logs
        self.procs: list[tuple[int, subprocess.Popen[bytes]]] = []
        self.started = self.stopped = 0

    def start(self, version: int) -> None:
        out = open(os.path.join(self.logs, f"worker-{self.started:02d}-v{version}.log"), "ab")  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ductline", "--log-level", "WARNING", "worker", "--app", APPS[version],
                 "--database", self.url, "--concurrency", str(self.concurrency)],
                stdout=out, stderr=out, start_new_session=True)
        finally:
            out.close()
        self.procs.append((version, proc))
        self.started += 1
        # A deploy waits for a new worker to be up (registered: it recorded what it
        # serves) before it stops the next old one.
        deadline = time.monotonic() + 120
        while not query(self.url, "SELECT count(*) FROM ductline_workers WHERE pid = %s AND status = 'running'",
                        (proc.pid,))[0][0]:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker {proc.pid} did not start (exit code {proc.poll()})")
            time.sleep(0.1)

    def of(self, version: int) -> list[subprocess.Popen[bytes]]:
        return [p for v, p in self.procs if v == version and p.poll() is None]

    def stop(self, procs: list[subprocess.Popen[bytes]]) -> None:
        """SIGTERM (graceful: running attempts finish, claimed-ahead jobs go back) and wait."""
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            code = proc.wait(120)
            if code != 0:
                raise RuntimeError(f"worker {proc.pid} exited with {code}")
            self.stopped += 1
        self.procs = [(v, p) for v, p in self.procs if p not in procs]

    def stop_all(self) -> None:
        self.stop([p for _, p in self.procs if p.poll() is None])


class Client(threading.Thread):
    """Triggers ``rate`` runs a second of the current version; remembers each run's
    version and trigger time (monotonic) and the phase it was triggered in."""

    def __init__(self, store: Any, modules: dict[int, ModuleType], rate: float) -> None:
        super().__init__(daemon=True, name="client")
        self.store, self.modules, self.rate = store, modules, rate
        self.version = 1
        self.phase = "steady v1"
        self.runs: dict[str, tuple[int, float, str]] = {}
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []

    def run(self) -> None:
        try:
            n = 0
            start = time.monotonic()
            while not self.stopping.is_set():
                version, phase = self.version, self.phase
                handle = self.modules[version].rolling.trigger(n, database=self.store)
                self.runs[handle.id] = (version, time.monotonic(), phase)
                n += 1
                self.stopping.wait(max(0.0, start + n / self.rate - time.monotonic()))
        except BaseException as exc:  # reported at the end
            self.errors.append(exc)


_CONNECTIONS: dict[str, Any] = {}
_LOCK = threading.Lock()


def query(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read the database on one connection kept open (the bench polls often: a new
    PostgreSQL connection per poll would cost the server a process each time)."""
    with _LOCK:
        conn = _CONNECTIONS.get(url)
        if conn is None:
            conn = sqlite3.connect(url.removeprefix("sqlite:///"), check_same_thread=False) \
                if url.startswith("sqlite") else psycopg.connect(url, autocommit=True)
            _CONNECTIONS[url] = conn
        if url.startswith("sqlite"):
            rows = conn.execute(sql.replace("%s", "?"), params).fetchall()
            conn.commit()  # end the read, so the next one sees new rows
            return rows
        return conn.execute(sql, params).fetchall()


def close_connections() -> None:
    for conn in _CONNECTIONS.values():
        conn.close()
    _CONNECTIONS.clear()


def unfinished(url: str, fingerprint: str) -> int:
    return int(query(url, "SELECT count(*) FROM ductline_runs WHERE definition = %s "
                          "AND status IN ('pending', 'running')", (fingerprint,))[0][0])


def roll(workers: Workers, old: int, new: int, wave: int, pause: float, keep_last: bool, url: str,
         old_fp: str) -> None:
    """Replace the ``old`` workers by ``new`` ones, ``wave`` at a time; with
    ``keep_last``, the last old worker stops only once the old runs finished."""
    while True:
        olds = workers.of(old)
        if not olds:
            return
        last = len(olds) <= wave
        if last and keep_last:
            while unfinished(url, old_fp):
                time.sleep(0.2)
        batch = olds[:wave]
        workers.stop(batch)
        for _ in batch:
            workers.start(new)
        log(f"  wave: {len(batch)} v{old} worker(s) stopped, {len(batch)} v{new} started")
        if not last:
            time.sleep(pause)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--rate", type=float, default=8.0, help="runs triggered per second")
    parser.add_argument("--wave", type=int, default=2, help="workers replaced at once")
    parser.add_argument("--pause", type=float, default=3.0, help="seconds between waves")
    parser.add_argument("--steady", type=float, default=4.0, help="seconds of load between deploys")
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    logging.getLogger("ductline").setLevel(logging.ERROR)  # three modules define "rolling"

    folder = tempfile.mkdtemp(prefix="rolling-deploy-")
    name = f"ductline_rolling_bench_{os.getpid()}"
    if args.backend == "sqlite":
        url = f"sqlite:///{folder}/rolling.db"
    else:
        with psycopg.connect(args.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        url = f"{args.admin_url.rpartition('/')[0]}/{name}"
    store = open_store(url)
    store.migrate()
    modules = {v: load(v) for v in (1, 2, 3)}
    fps = {v: m.rolling.definition().fingerprint for v, m in modules.items()}
    log(f"{args.backend}: definitions v1 {fps[1]}, v2 {fps[2]}, v3 {fps[3]}; logs in {folder}")
    workers = Workers(url, args.concurrency, folder)
    client = Client(store, modules, args.rate)
    phases: dict[str, float] = {}
    moved: list[str] = []
    try:
        for _ in range(args.workers):
            workers.start(1)
        client.start()
        time.sleep(args.steady)

        log("deploy v2 (old runs drain on the last v1 worker)")
        began = time.monotonic()
        client.version, client.phase = 2, "deploy v2"
        roll(workers, 1, 2, args.wave, args.pause, True, url, fps[1])
        phases["deploy v2 (drain)"] = time.monotonic() - began
        client.phase = "steady v2"
        time.sleep(args.steady)

        log("deploy v3 (old runs moved)")
        began = time.monotonic()
        client.version, client.phase = 3, "deploy v3"
        roll(workers, 2, 3, args.wave, args.pause, False, url, fps[2])
        while True:  # no v2 worker is left: every v2 attempt ended, so nothing stays busy
            result = move_runs(store, fps[2], fps[3])
            moved += result.moved
            if not result.busy:
                break
            time.sleep(0.2)
        phases["deploy v3 (move)"] = time.monotonic() - began
        log(f"  moved {len(moved)} unfinished v2 run(s) to v3")
        client.phase = "steady v3"
        time.sleep(args.steady)
        client.stopping.set()
        client.join()
        if client.errors:
            raise client.errors[0]

        began = time.monotonic()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and query(url, "SELECT count(*) FROM ductline_runs "
                                                         "WHERE status IN ('pending', 'running')")[0][0]:
            time.sleep(0.2)
        phases["drain after the client stopped"] = time.monotonic() - began
        return report(url, store, client, fps, moved, phases, workers)
    finally:
        client.stopping.set()
        workers.stop_all()
        store.close()
        close_connections()
        if args.backend == "postgres":
            with psycopg.connect(args.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def report(url: str, store: Any, client: Client, fps: dict[int, str], moved: list[str], phases: dict[str, float],
           workers: Workers) -> int:
    by_fp = {fp: v for v, fp in fps.items()}
    runs = {r[0]: r for r in query(url, "SELECT id, status, definition, output, created_ms, finished_ms "
                                        "FROM ductline_runs")}
    assert set(runs) == set(client.runs), "runs in the database and triggered differ"
    failures = []
    steps_of: dict[str, list[str]] = {}
    for run_id, step in query(url, "SELECT run_id, step FROM ductline_jobs"):
        steps_of.setdefault(run_id, []).append(step)
    for run_id, (_, status, definition, _, _, _) in runs.items():
        version = by_fp[definition]
        if status != "completed":
            failures.append(f"run {run_id} is {status}")
        if sorted(steps_of[run_id]) != sorted(STEPS[version]):
            failures.append(f"run {run_id} (v{client.runs[run_id][0]} -> v{version}) has steps "
                            f"{sorted(steps_of[run_id])}")
    per_job = query(url, "SELECT j.id, sum(CASE WHEN a.result = 'succeeded' THEN 1 ELSE 0 END) "
                         "FROM ductline_jobs j LEFT JOIN ductline_attempts a ON a.job_id = j.id GROUP BY j.id")
    not_once = [job for job, n in per_job if n != 1]
    attempts = int(query(url, "SELECT count(*) FROM ductline_attempts")[0][0])
    missing = int(query(url, "SELECT count(*) FROM ductline_attempts WHERE error LIKE %s", (MISSING_STEP,))[0][0])
    given_back = int(query(url, "SELECT count(*) FROM ductline_attempts WHERE result <> 'succeeded' "
                                "AND error LIKE %s", (GIVEN_BACK_PATTERN,))[0][0])
    other = int(query(url, "SELECT count(*) FROM ductline_attempts WHERE result <> 'succeeded' "
                           "AND (error IS NULL OR error NOT LIKE %s)", (GIVEN_BACK_PATTERN,))[0][0])
    if not_once:
        failures.append(f"{len(not_once)} jobs without exactly one succeeded attempt")
    if missing:
        failures.append(f"{missing} attempts ended on a missing step")
    if other:
        failures.append(f"{other} failed attempts other than give-backs")

    started = {v: sum(1 for r in client.runs.values() if r[0] == v) for v in (1, 2, 3)}
    finished = {v: sum(1 for r in runs.values() if by_fp[r[2]] == v) for v in (1, 2, 3)}
    print()
    print(f"runs triggered: {len(runs)} (v1 {started[1]}, v2 {started[2]}, v3 {started[3]}); finished on "
          f"v1 {finished[1]}, v2 {finished[2]}, v3 {finished[3]}; moved v2 -> v3: {len(moved)}")
    print(f"jobs: {len(per_job)}, each with one succeeded attempt: {len(per_job) - len(not_once)}; "
          f"attempts: {attempts} (given back uncharged by stopping workers: {given_back}; "
          f"on a missing step: {missing}; other failures: {other})")
    print(f"workers started: {workers.started}, stopped with SIGTERM: {workers.stopped}")
    for phase, seconds in phases.items():
        print(f"{phase}: {seconds:.1f} s")
    latency: dict[str, list[float]] = {}  # created to finished, on the database clock
    for run_id, (_, _, phase) in client.runs.items():
        row = runs[run_id]
        latency.setdefault(phase, []).append((int(row[5]) - int(row[4])) / 1000)
    for phase, values in latency.items():
        values.sort()
        p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
        print(f"run latency, triggered during {phase}: p50 {statistics.median(values):.2f} s, "
              f"p99 {p99:.2f} s, max {values[-1]:.2f} s ({len(values)} runs)")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures[:20]))
        return 1
    print("OK: every step of every run succeeded exactly once; no attempt on a missing step")
    return 0


if __name__ == "__main__":
    sys.exit(main())

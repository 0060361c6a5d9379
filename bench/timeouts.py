#!/usr/bin/env python
"""Step-timeout kill-path benchmark of ductline (issue 3, "Performance").

    python bench/timeouts.py [--attempts 200] [--ignoring 40] [--database URL]
                             [--concurrency 4] [--noops 3] [--seed 1] [--out FILE.json]
                             [--trace]
    python bench/timeouts.py --diagnose FILE.json   # re-print a saved --trace run

ONE worker, run in this process (``build_worker(...)`` then ``Worker.run(stop_when=...)``
in a background thread) with default settings (``kill_grace_seconds`` 1 s), and
``--concurrency`` slots. Queued before it starts, in a seeded random order:

* ``--attempts`` stuck attempts (``timeout=1, max_retry=1``: each run halts after one
  timed-out attempt), half blocking in C (libc ``sleep`` via ctypes), half in a
  syscall (``read`` of a FIFO nobody writes) -- these die on SIGTERM;
* ``--ignoring`` stuck attempts that ignore SIGTERM (die on the SIGKILL sent
  ``kill_grace_seconds`` later);
* behind each stuck run, ``--noops`` ready no-op runs, so a slot freed by a kill
  always has ready work to take.

Steps are in bench/timeout_app.py. Measurements (CLOCK_MONOTONIC, shared by the
worker and its children):

* deadline: the enforcer's own deadline for the attempt (the ``deadline`` passed to
  ``Enforcer.watch``; the attempt's database deadline converted with the worker's
  measured clock offset);
* SIGTERM / SIGKILL sent: ``ductline.execution.process.Child.signal_group`` is wrapped
  here to note ``time.monotonic()`` per pid and signal;
* child dead: a separate observer process (no GIL, no database) waits on a pidfd
  of every stuck child and notes when it became readable (the child is a zombie);
  its own wake-up latency makes this an upper bound;
* child reaped: the ``timeout.overrun`` event (``overrun_seconds`` = deadline ->
  the worker loop saw the child gone and reaped it); "dead -> reaped" is the time
  the child waited for the loop (can be slightly negative: observer wake-up);
* timed_out recorded: the ``job.completed`` event of the stuck attempt (emitted after
  the recording transaction committed);
* next attempt started on that slot: the ``attempt.started`` event of the first
  attempt dispatched to the same slot index after the kill (the worker's ``claimer.start``
  is wrapped to learn the slot); also the time that attempt's step really began
  executing in its child (its own log line), and the same on the database clock
  (``started_ms`` of the next attempt - ``deadline_ms`` of the killed one).

--trace (diagnostics, slightly perturbing): also times every phase of the worker
loop and every ``wait()`` call with what woke it, and prints where the time from
the deadline to the next start goes (SIGTERM latency by what the loop was doing,
child exit time, loop lag and in which phase, refill/record/claim).

PostgreSQL URLs name the server: the benchmark drops and re-creates the database
``ductline_bench_timeouts`` on it. ``sqlite:///PATH`` uses a fresh file at PATH.
Nearest-rank percentiles.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
APP = HERE / "timeout_app.py"

import psycopg

from ductline.apps import import_app
from ductline.config import Settings
from ductline.observability import events
from ductline.observability.events import EventName
from ductline.execution import process as process_mod
from ductline.runtime.launch import build_worker
from ductline.store import open_store

DEFAULT_PG = os.environ.get("DUCTLINE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
PG_DB = "ductline_bench_timeouts" + os.environ.get("DUCTLINE_BENCH_DB_SUFFIX", "")
OBEYING = ("c", "syscall")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))]


# ======================================================================================
# databases
# ======================================================================================
def fresh_database(url: str) -> tuple[str, str]:
    """``(backend name, url of a fresh, migrated database)``."""
    if url.startswith("sqlite:"):
        path = url[len("sqlite:///"):]
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        backend = "sqlite"
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{PG_DB}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{PG_DB}"')
        url = f"{url.rpartition('/')[0]}/{PG_DB}"
        backend = "postgresql"
    store = open_store(url)
    try:
        store.migrate()
    finally:
        store.close()
    return backend, url


def db_attempts(url: str) -> dict[str, dict[str, Any]]:
    sql = ("SELECT a.job_id, j.pipeline, a.result, a.started_ms, a.deadline_ms, a.finished_ms "
           "FROM ductline_attempts a JOIN ductline_jobs j ON j.id = a.job_id")
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url[len("sqlite:///"):], timeout=30)
        try:
            rows = conn.execute(sql).fetchall()
        finally:
            conn.close()
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(sql).fetchall()
    return {r[0]: {"pipeline": r[1], "result": r[2], "started_ms": r[3], "deadline_ms": r[4],
                   "finished_ms": r[5]} for r in rows}


# ======================================================================================
# instrumentation (benchmark process only; nothing under src/ is changed)
# ======================================================================================
class Recorder:
    def __init__(self) -> None:
        self.signals: list[tuple[float, int, int]] = []          # (t, pid, sig)
        self.spawned: dict[int, float] = {}                       # pid -> Popen returned
        self.starts: list[dict[str, Any]] = []                    # every dispatch
        self.watches: dict[str, float | None] = {}                # job_id -> enforcer deadline
        self.events: list[tuple[float, str, dict[str, Any]]] = []
        self.completed = 0
        self.fresh: list[dict[str, Any]] = []                     # spares.fresh calls
        self.observer: int | None = None                          # pipe to the observer process
        self.trace: list[tuple[str, float, float]] | None = None  # --trace: loop phases
        self.waits: list[tuple[float, float, float | None, list[str]]] = []  # --trace: wait() calls

    def on_event(self, name: EventName, attrs: dict[str, Any]) -> None:
        t = time.monotonic()
        if name in (EventName.ATTEMPT_STARTED, EventName.TIMEOUT_OVERRUN, EventName.JOB_COMPLETED,
                    EventName.PROCESS_UNDEAD):
            self.events.append((t, str(name), dict(attrs)))
        if name == EventName.JOB_COMPLETED:
            self.completed += 1


def instrument(rec: Recorder) -> None:
    cls = process_mod.Child
    original_signal = cls.signal_group
    original_init = cls.__init__

    def signal_group(self: Any, sig: int) -> None:
        rec.signals.append((time.monotonic(), self.pid, int(sig)))
        original_signal(self, sig)

    def init(self: Any, *a: Any, **kw: Any) -> None:
        original_init(self, *a, **kw)
        rec.spawned[self.pid] = time.monotonic()

    cls.signal_group = signal_group  # type: ignore[method-assign]
    cls.__init__ = init  # type: ignore[method-assign]


def instrument_worker(worker: Any, rec: Recorder) -> None:
    original_start = worker.claimer.start
    original_watch = worker.enforcer.watch
    original_fresh = worker.spares.fresh
    current: dict[str, Any] = {}

    def watch(slot: int, child: Any, deadline: float | None) -> None:
        if "job" in current:
            rec.watches[current["job"]] = deadline
        original_watch(slot, child, deadline)

    def start(slot: Any, job: Any, **how: Any) -> None:  # how: a job sent ahead (at=, sent=)
        t = time.monotonic()
        current["job"] = job.job_id
        rec.starts.append({"t": t, "slot": slot.index, "pid": slot.child.pid, "job_id": job.job_id,
                           "pipeline": job.pipeline, "started_ms": job.started_ms,
                           "deadline_ms": job.deadline_ms})
        if rec.observer is not None and job.pipeline != "bench_timeout_noop":
            os.write(rec.observer, f"{slot.child.pid}\n".encode())
        try:
            original_start(slot, job, **how)
        finally:
            current.pop("job", None)

    def fresh() -> Any:
        spares = worker.spares.children()
        t = time.monotonic()
        child = original_fresh()
        rec.fresh.append({"t": t, "dt": time.monotonic() - t, "pid": child.pid,
                          "was_spare": child in spares,
                          "age": t - rec.spawned.get(child.pid, t)})
        return child

    worker.claimer.start = start
    worker.enforcer.watch = watch
    worker.spares.fresh = fresh
    if rec.trace is not None:  # --trace: when each phase of the worker loop ran
        # (object, method, label): the loop's phases are the worker's own methods; what
        # a ready descriptor causes is the child events' and the spares'.
        for owner, name, label in ((worker, "_flush", "_flush"), (worker, "_claim", "_claim"),
                                   (worker, "_expire_runs", "_expire_runs"), (worker, "_heartbeat", "_heartbeat"),
                                   (worker, "_maintain", "_maintain"), (worker, "_wait", "_wait"),
                                   (worker.events, "handle", "_handle"),
                                   (worker.events, "_runner_gone", "_runner_gone"),
                                   (worker.spares, "fresh", "_fresh_child"),
                                   # on the recorder's thread: one recording transaction
                                   (worker.outbox, "_record", "recorder:_record"),
                                   (worker, "_collect_undead", "_collect_undead")):
            setattr(owner, name, _traced(rec.trace, label, getattr(owner, name)))
        trace_waits(worker, rec)
        # the periodic scans (run by a maintenance thread in newer workers)
        from ductline.runtime import maintenance
        for module, name in ((maintenance, "rescue_expired"), (maintenance, "expire_due"),
                             (maintenance, "sweep_orphans")):
            if hasattr(module, name):
                setattr(module, name, _traced(rec.trace, f"scan:{name}", getattr(module, name)))


def trace_waits(worker: Any, rec: Recorder) -> None:
    """Wrap the worker module's ``wait_ready`` (`ductline.runtime.readiness.ready`): note
    what woke the loop -- ``sentinel:PID`` (pidfd readable: the child is a zombie),
    ``eof:PID`` / ``data:PID`` (its socket), ``wakeup`` (self-pipe)."""
    from ductline.runtime import worker as worker_mod

    original = worker_mod.wait_ready

    def label(x: Any) -> str:
        if x == worker.wakeup.fileno():
            return "wakeup"
        for slot in worker.slots:
            for runner in (slot.runner if hasattr(slot, "runner") else None, slot.child):
                if runner is None:
                    continue
                if x == runner.sentinel:
                    return f"sentinel:{runner.pid}"
                if x is runner.conn:
                    try:
                        sock = socket.socket(fileno=os.dup(x.fileno()))
                        try:
                            eof = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
                        except BlockingIOError:
                            eof = False
                        finally:
                            sock.close()
                    except OSError:
                        eof = False
                    return f"{'eof' if eof else 'data'}:{runner.pid}"
        return "?"

    def wait(objects: Any, timeout: float | None = None) -> Any:
        t = time.monotonic()
        ready = original(objects, timeout)
        rec.waits.append((t, time.monotonic(), timeout, [label(x) for x in ready]))
        return ready

    worker_mod.wait_ready = wait


def _traced(trace: list[tuple[str, float, float]], name: str, fn: Any) -> Any:
    def wrapper(*a: Any, **kw: Any) -> Any:
        t = time.monotonic()
        try:
            return fn(*a, **kw)
        finally:
            trace.append((name, t, time.monotonic()))
    return wrapper


# A separate process that waits on a pidfd of every stuck child and notes when it
# became readable (the child is dead: a zombie), independent of the worker loop and
# of this process's GIL.
OBSERVER = r"""
import os, select, sys, time
out = open(sys.argv[1], "w")
ep = select.epoll()
ep.register(0, select.EPOLLIN)
fds, buf = {}, b""
while True:
    for fd, _ in ep.poll():
        if fd == 0:
            data = os.read(0, 4096)
            if not data:
                out.close()
                sys.exit(0)
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                pid = int(line)
                try:
                    pfd = os.pidfd_open(pid)
                except ProcessLookupError:
                    continue
                fds[pfd] = pid
                ep.register(pfd, select.EPOLLIN)
        else:
            out.write(f"{fds[fd]} {time.monotonic():.6f}\n")
            ep.unregister(fd)
            os.close(fd)
            del fds[fd]
"""


def our_children() -> list[int]:
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            found.append(int(entry))
    return found


# ======================================================================================
# the run
# ======================================================================================
def run(args: argparse.Namespace) -> dict[str, Any]:
    backend, url = fresh_database(args.database)
    module, _ = import_app(str(APP))
    tmp = tempfile.mkdtemp(prefix="ductline_bench_timeouts_")
    fifo = os.path.join(tmp, "never_written.fifo")
    os.mkfifo(fifo)
    step_log = os.path.join(tmp, "steps.log")

    rng = random.Random(args.seed)
    half = args.attempts // 2
    stuck = ["c"] * half + ["syscall"] * (args.attempts - half) + ["ignore"] * args.ignoring
    rng.shuffle(stuck)
    order = ["noop"] * (2 * args.concurrency)  # warm-up: every slot has run once
    for kind in stuck:
        order.append(kind)
        order.extend(["noop"] * args.noops)

    store = open_store(url)
    t0 = time.perf_counter()
    for kind in order:
        module.PIPELINES[kind].trigger(step_log, fifo, database=store)
    log(f"{backend}: triggered {len(order)} runs ({len(stuck)} stuck) in {time.perf_counter() - t0:.1f} s")

    rec = Recorder()
    dead_log = os.path.join(tmp, "dead.log")
    observer = subprocess.Popen([sys.executable, "-c", OBSERVER, dead_log], stdin=subprocess.PIPE)
    assert observer.stdin is not None
    rec.observer = observer.stdin.fileno()
    if args.trace:
        rec.trace = []
    instrument(rec)
    unsubscribe = events.subscribe(rec.on_event)
    settings = Settings(database_url=url)
    worker = build_worker(store, [str(APP)], args.concurrency, settings)
    instrument_worker(worker, rec)
    total = len(order)
    failure: list[BaseException] = []

    def target() -> None:
        try:
            worker.run(stop_when=lambda: rec.completed >= total)
        except BaseException as exc:  # noqa: BLE001 -- reported by the main thread
            failure.append(exc)

    load_before = os.getloadavg()
    thread = threading.Thread(target=target, name="bench-worker", daemon=True)
    started = time.monotonic()
    thread.start()
    log(f"worker thread started (pid {os.getpid()}); expect ~"
        f"{(args.attempts + 2 * args.ignoring) / args.concurrency:.0f} s")
    budget = 120 + 3 * len(stuck)
    try:
        while thread.is_alive():
            thread.join(timeout=5)
            if thread.is_alive():
                log(f"  {rec.completed}/{total} jobs completed, {len(rec.signals)} signals sent")
            if time.monotonic() - started > budget:
                log("time budget exceeded; stopping the worker")
                worker.request_stop()
                thread.join(timeout=60)
                break
    except KeyboardInterrupt:
        worker.request_stop()
        thread.join(timeout=60)
        raise
    finally:
        unsubscribe()
        elapsed = time.monotonic() - started
        rec.observer = None
        observer.stdin.close()
        try:
            observer.wait(timeout=10)
        except subprocess.TimeoutExpired:
            observer.kill()
            observer.wait()
        leftovers = our_children()
        deadline = time.monotonic() + 5
        while leftovers and time.monotonic() < deadline:
            time.sleep(0.1)
            for pid in leftovers:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
            leftovers = our_children()
        for pid in leftovers:  # only our own children, by pid
            log(f"killing leftover child {pid}")
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        store.close()
    if failure:
        raise failure[0]
    load_after = os.getloadavg()

    dead: dict[int, float] = {}
    with open(dead_log) as fh:
        for line in fh:
            pid, t = line.split()
            dead.setdefault(int(pid), float(t))
    return analyse(args, backend, url, rec, step_log, stuck, total, elapsed, load_before, load_after, dead)


def analyse(args: argparse.Namespace, backend: str, url: str, rec: Recorder, step_log: str,
            stuck: list[str], total: int, elapsed: float, load_before: Any, load_after: Any,
            dead: dict[int, float]) -> dict[str, Any]:
    kind_of = {"bench_timeout_c": "c", "bench_timeout_syscall": "syscall",
               "bench_timeout_ignore": "ignore", "bench_timeout_noop": "noop"}
    db = db_attempts(url)
    marks: dict[int, list[float]] = defaultdict(list)
    with open(step_log) as fh:
        for line in fh:
            _, pid, t = line.split()
            marks[int(pid)].append(float(t))
    by_event: dict[str, dict[str, tuple[float, dict[str, Any]]]] = defaultdict(dict)
    for t, name, attrs in rec.events:
        if "job_id" in attrs:
            by_event[name].setdefault(attrs["job_id"], (t, attrs))
    sigs: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for t, pid, sig in rec.signals:
        sigs[pid].append((t, sig))
    starts_by_slot: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for s in rec.starts:
        starts_by_slot[s["slot"]].append(s)

    def first_after(values: list[float], t: float) -> float | None:
        later = [v for v in values if v >= t]
        return min(later) if later else None

    kills = []
    for s in rec.starts:
        kind = kind_of[s["pipeline"]]
        if kind == "noop":
            continue
        job = s["job_id"]
        deadline = rec.watches.get(job)
        k: dict[str, Any] = {"kind": kind, "job_id": job, "slot": s["slot"], "pid": s["pid"],
                             "dispatched": s["t"], "deadline": deadline}
        term = [t for t, sig in sigs[s["pid"]] if sig == signal.SIGTERM and t >= s["t"]]
        kill = [t for t, sig in sigs[s["pid"]] if sig == signal.SIGKILL and t >= s["t"]]
        k["term"] = min(term) if term else None
        k["dead"] = dead.get(s["pid"])
        k["kill"] = min(kill) if kill else None
        over = by_event[str(EventName.TIMEOUT_OVERRUN)].get(job)
        k["overrun"] = over[1]["overrun_seconds"] if over else None
        k["overrun_event_t"] = over[0] if over else None
        done = by_event[str(EventName.JOB_COMPLETED)].get(job)
        k["recorded"] = done[0] if done else None
        k["result"] = done[1].get("result") if done else None
        exec_marks = marks.get(s["pid"], [])
        k["executing"] = first_after(exec_marks, s["t"])
        row = db.get(job, {})
        k["db"] = row
        nxt = next((n for n in starts_by_slot[s["slot"]] if n["t"] > s["t"]), None)
        if nxt is not None:
            k["next_job"] = nxt["job_id"]
            k["next_kind"] = kind_of[nxt["pipeline"]]
            k["next_pid"] = nxt["pid"]
            k["next_dispatch"] = nxt["t"]
            ev = by_event[str(EventName.ATTEMPT_STARTED)].get(nxt["job_id"])
            k["next_started_event"] = ev[0] if ev else None
            k["next_executing"] = first_after(marks.get(nxt["pid"], []), nxt["t"])
            k["next_child_age"] = nxt["t"] - rec.spawned.get(nxt["pid"], nxt["t"])
            nrow = db.get(nxt["job_id"], {})
            if nrow.get("started_ms") is not None and row.get("deadline_ms") is not None:
                k["next_db_ms"] = nrow["started_ms"] - row["deadline_ms"]
        kills.append(k)

    def ms(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else (a - b) * 1000

    groups = {"C (libc sleep)": ("c",), "syscall (FIFO read)": ("syscall",),
              "SIGTERM-obeying (C + syscall)": OBEYING, "SIGTERM-ignoring": ("ignore",)}
    metrics = [
        ("deadline -> SIGTERM sent", lambda k: ms(k["term"], k["deadline"])),
        ("deadline -> SIGKILL sent", lambda k: ms(k["kill"], k["deadline"])),
        ("deadline -> child dead (pidfd readable, observer process)", lambda k: ms(k["dead"], k["deadline"])),
        ("deadline -> child reaped (timeout.overrun)",
         lambda k: None if k["overrun"] is None else k["overrun"] * 1000),
        ("  of which: child dead -> reaped by the worker loop",
         lambda k: None if k["overrun"] is None or k["dead"] is None
         else (k["deadline"] + k["overrun"] - k["dead"]) * 1000),
        ("deadline -> timed_out recorded (job.completed)", lambda k: ms(k["recorded"], k["deadline"])),
        ("deadline -> next attempt started on slot (attempt.started)",
         lambda k: ms(k.get("next_started_event"), k["deadline"])),
        ("deadline -> next step executing in its child", lambda k: ms(k.get("next_executing"), k["deadline"])),
        ("next attempt: dispatched -> step executing in its child",
         lambda k: ms(k.get("next_executing"), k.get("next_dispatch"))),
        ("DB clock: next started_ms - killed deadline_ms", lambda k: k.get("next_db_ms")),
        ("DB clock: killed attempt finished_ms - deadline_ms",
         lambda k: None if k["db"].get("finished_ms") is None or k["db"].get("deadline_ms") is None
         else k["db"]["finished_ms"] - k["db"]["deadline_ms"]),
    ]
    grace_ms = Settings().kill_grace_seconds * 1000
    targets = {
        ("deadline -> child reaped (timeout.overrun)", "SIGTERM-obeying (C + syscall)"): 50.0,
        ("deadline -> child reaped (timeout.overrun)", "SIGTERM-ignoring"): grace_ms + 50.0,
        ("deadline -> next attempt started on slot (attempt.started)", "SIGTERM-obeying (C + syscall)"): 150.0,
    }
    table = []
    for mname, fn in metrics:
        for gname, kinds in groups.items():
            vals = [v for v in (fn(k) for k in kills if k["kind"] in kinds) if v is not None]
            if not vals:
                continue
            target = targets.get((mname, gname))
            p99 = pct(vals, 99)
            table.append({"metric": mname, "group": gname, "n": len(vals), "p50": pct(vals, 50),
                          "p99": p99, "max": max(vals), "target_p99": target,
                          "ok": None if target is None else p99 <= target})
    results = {k["result"] for k in kills}
    fresh_cold = sum(1 for f in rec.fresh if not f["was_spare"])
    summary = {
        "backend": backend, "concurrency": args.concurrency, "grace_s": grace_ms / 1000,
        "stuck": len(stuck), "kills_seen": len(kills), "results": sorted(str(r) for r in results),
        "jobs": total, "elapsed_s": elapsed, "load_before": load_before, "load_after": load_after,
        "fresh_child_calls": len(rec.fresh), "fresh_child_not_warm_spare": fresh_cold,
        "fresh_child_popen_ms_p50": pct([f["dt"] * 1000 for f in rec.fresh], 50),
        "fresh_child_popen_ms_max": max([f["dt"] * 1000 for f in rec.fresh], default=float("nan")),
        "spare_age_at_use_ms_p50": pct([f["age"] * 1000 for f in rec.fresh if f["was_spare"]], 50),
        "next_child_age_ms_p50": pct([k["next_child_age"] * 1000 for k in kills if "next_child_age" in k], 50),
        "next_child_age_ms_p1": pct([k["next_child_age"] * 1000 for k in kills if "next_child_age" in k], 1),
        "undead": sum(1 for _, n, _ in rec.events if n == str(EventName.PROCESS_UNDEAD)),
    }
    return {"summary": summary, "table": table, "kills": kills, "fresh": rec.fresh,
            "signals": rec.signals, "trace": rec.trace, "waits": rec.waits, "spawned": rec.spawned,
            "marks": {str(pid): v for pid, v in marks.items()}}


# ======================================================================================
# --trace diagnostics: where the time between the deadline and the next start goes
# ======================================================================================
TOP_PHASES = ("_flush", "_claim", "_expire_runs", "_heartbeat", "_maintain", "_wait", "_collect_undead")


def _dist(values: list[float]) -> str:
    if not values:
        return "n 0"
    return f"n {len(values):3d}  p50 {pct(values, 50):7.1f}  p99 {pct(values, 99):7.1f}  max {max(values):7.1f}"


def diagnose(res: dict[str, Any]) -> None:
    trace = sorted(res.get("trace") or [], key=lambda x: x[1])
    waits = sorted(res.get("waits") or [], key=lambda x: x[0])
    if not trace or not waits:
        return
    import bisect

    wait_enter = [w[0] for w in waits]
    top = [p for p in trace if p[0] in TOP_PHASES]
    top_start = [p[1] for p in top]
    spawned = {int(k): v for k, v in res["spawned"].items()}
    marks = {int(k): v for k, v in res["marks"].items()}

    def phase_at(t: float) -> str:
        i = bisect.bisect_right(top_start, t) - 1
        if i < 0 or top[i][2] < t:
            return "between phases"
        if top[i][0] != "_wait":
            return top[i][0]
        j = bisect.bisect_right(wait_enter, t) - 1
        if j >= 0 and waits[j][0] <= t <= waits[j][1]:
            return "select() (GIL released)"
        return "_wait: handling (reap/Popen/recv)"

    def busy_in(a: float, b: float) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        i = max(0, bisect.bisect_left(top_start, a) - 1)
        while i < len(top) and top[i][1] < b:
            name, t0, t1 = top[i]
            overlap = min(t1, b) - max(t0, a)
            if overlap > 0:
                out[name] += overlap * 1000
            i += 1
        return out

    print("\n-- diagnostics (--trace) --")
    print(f"loop iterations (wait() calls): {len(waits)}; wait() calls woken by a child's socket at EOF "
          f"(child exiting, pidfd not yet readable): {sum(1 for w in waits if any(l.startswith('eof:') for l in w[3]))}")
    for group, kinds in (("obeying", OBEYING), ("ignoring", ("ignore",))):
        kills = [k for k in res["kills"] if k["kind"] in kinds and k["overrun"] is not None]
        late: dict[str, list[float]] = defaultdict(list)
        exit_idle: list[float] = []
        busy_delay: list[float] = []
        spins: list[int] = []
        spin_ms: list[float] = []
        busy_phases: dict[str, float] = defaultdict(float)
        n_busy = 0
        for k in kills:
            if k["term"] is not None:
                late[phase_at(k["deadline"])].append((k["term"] - k["deadline"]) * 1000)
            sig = k["kill"] if group == "ignoring" else k["term"]
            if sig is None:
                continue
            pid = k["pid"]
            j = bisect.bisect_left(wait_enter, sig - 2.0)
            seen = None
            eofs = []
            while j < len(waits):
                w = waits[j]
                if w[1] >= sig and f"eof:{pid}" in w[3]:
                    eofs.append(w[1])
                if w[1] >= sig and f"sentinel:{pid}" in w[3]:
                    seen = j
                    break
                j += 1
            spins.append(len(eofs))
            if seen is None:
                continue
            w = waits[seen]
            if eofs:
                spin_ms.append((w[1] - eofs[0]) * 1000)
            if w[1] - max(w[0], sig) > 0.0005:  # the loop sat in select() until the pidfd fired
                readable = w[1]
            else:  # readable before this wait(): after the previous one returned (select
                n_busy += 1  # reports every ready fd) -- the loop was busy meanwhile
                readable = max(waits[seen - 1][1] if seen > 0 else sig, sig)
                for name, ms_ in busy_in(readable, w[0]).items():
                    busy_phases[name] += ms_
            exit_idle.append((readable - sig) * 1000)
            busy_delay.append((w[1] - readable) * 1000)
        print(f"{group}: deadline -> SIGTERM by what the worker thread was doing at the deadline:")
        for where, vals in sorted(late.items(), key=lambda x: -len(x[1])):
            print(f"    {where:<36} {_dist(vals)}")
        print(f"{group}: {'SIGKILL' if group == 'ignoring' else 'SIGTERM'} -> child reapable (pidfd readable; "
              f"lower bound when the loop was busy) {_dist(exit_idle)}")
        print(f"{group}: reapable -> seen by the loop (upper bound; {n_busy} kills found the loop busy) "
              f"{_dist(busy_delay)}")
        if busy_phases:
            print("    busy in: " + ", ".join(f"{n} {v:.0f} ms" for n, v in
                                             sorted(busy_phases.items(), key=lambda x: -x[1])))
        print(f"{group}: loop iterations spun on the EOF socket per kill {_dist([float(x) for x in spins])}")
        print(f"{group}: first EOF -> pidfd seen (ms)                    {_dist(spin_ms)}")

    # the next start on the slot
    gone = sorted([p for p in trace if p[0] in ("_runner_gone", "_child_gone")], key=lambda p: p[1])
    gone_start = [p[1] for p in gone]
    refill, to_dispatch, in_flush, in_claim, in_other = [], [], [], [], []
    for k in res["kills"]:
        if k["kind"] not in OBEYING or k.get("next_dispatch") is None or k["overrun"] is None:
            continue
        reap = k["deadline"] + k["overrun"]
        i = bisect.bisect_right(gone_start, reap) - 1
        if i < 0 or gone[i][2] < reap:
            continue
        refilled = gone[i][2]
        refill.append((refilled - reap) * 1000)
        to_dispatch.append((k["next_dispatch"] - refilled) * 1000)
        b = busy_in(refilled, k["next_dispatch"])
        in_flush.append(b.get("_flush", 0.0))
        in_claim.append(b.get("_claim", 0.0))
        in_other.append(sum(v for n, v in b.items() if n not in ("_flush", "_claim")))
    print("obeying: reaped -> slot refilled (_runner_gone: reap + spare Popen)     " + _dist(refill))
    print("obeying: refilled -> next attempt dispatched                           " + _dist(to_dispatch))
    print("    of which recording the outcomes (_flush)                           " + _dist(in_flush))
    print("    of which claiming (_claim)                                         " + _dist(in_claim))
    print("    of which other phases (_wait incl. handling other children, ...)   " + _dist(in_other))
    # interpreter start-up of a child (spawn -> first step executing, for children
    # given their first job within 50 ms of being spawned)
    first_dispatch: dict[int, float] = {}
    for k in res["kills"]:
        if k.get("next_pid") is not None:
            first_dispatch.setdefault(k["next_pid"], k["next_dispatch"])
    boot = []
    for pid, t_spawn in spawned.items():
        d = first_dispatch.get(pid)
        if d is not None and d - t_spawn < 0.05 and marks.get(pid):
            boot.append((min(marks[pid]) - t_spawn) * 1000)
    cold = [k for k in res["kills"] if k["kind"] in OBEYING and k.get("next_executing") is not None]
    slow = [k for k in cold if k["next_executing"] - k["next_dispatch"] > 0.02]
    print("child start-up, spawn -> first step executing (children dispatched <50 ms after spawn) " + _dist(boot))
    print(f"obeying kills whose next job waited > 20 ms in a child still starting up: {len(slow)}/{len(cold)}")
    scans = [p for p in trace if p[0].startswith("scan:")]
    db = [p for p in trace if p[0] in ("_flush", "_claim")]
    slow_db = [p for p in db if p[2] - p[1] > 0.03]
    overlapping = [p for p in slow_db if any(s[1] < p[2] and s[2] > p[1] for s in scans)]
    print(f"loop DB phases (_flush/_claim with or without work): {len(db)}; > 30 ms: {len(slow_db)}, of which "
          f"overlapping a maintenance scan: {len(overlapping)}; scans: {len(scans)}, "
          f"longest {max(((s[2] - s[1]) * 1000 for s in scans), default=0):.1f} ms")


def print_table(res: dict[str, Any]) -> None:
    s = res["summary"]
    print(f"\nductline step-timeout kill path -- {s['backend']}, 1 in-process worker, concurrency "
          f"{s['concurrency']}, kill_grace_seconds {s['grace_s']:g}, timeout 1 s")
    print(f"{s['stuck']} stuck attempts ({s['kills_seen']} seen, results {', '.join(s['results'])}), "
          f"{s['jobs']} jobs in all, {s['elapsed_s']:.1f} s; load avg before "
          f"{s['load_before'][0]:.2f}, after {s['load_after'][0]:.2f}")
    print(f"{'metric (ms)':<62}{'group':<31}{'n':>4}{'p50':>9}{'p99':>9}{'max':>9}  target p99")
    last = None
    for r in res["table"]:
        metric = r["metric"] if r["metric"] != last else ""
        last = r["metric"]
        target = "" if r["target_p99"] is None else \
            f"<= {r['target_p99']:.0f}  {'OK' if r['ok'] else 'MISSED'}"
        print(f"{metric:<62}{r['group']:<31}{r['n']:>4}{r['p50']:>9.1f}{r['p99']:>9.1f}{r['max']:>9.1f}  {target}")
    print(f"slot refills: {s['fresh_child_calls']} (the spare taken: "
          f"{s['fresh_child_calls'] - s['fresh_child_not_warm_spare']}); Popen in the loop p50 "
          f"{s['fresh_child_popen_ms_p50']:.1f} ms, max {s['fresh_child_popen_ms_max']:.1f} ms; age of the child "
          f"taking the next job p50 {s['next_child_age_ms_p50']:.0f} ms, p1 {s['next_child_age_ms_p1']:.0f} ms; "
          f"process.undead {s['undead']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attempts", type=int, default=200, help="SIGTERM-obeying stuck attempts (half C, half syscall)")
    ap.add_argument("--ignoring", type=int, default=40, help="stuck attempts that ignore SIGTERM")
    ap.add_argument("--noops", type=int, default=3, help="ready no-op runs queued behind each stuck run")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--database", default=DEFAULT_PG,
                    help=f"postgresql://... (server; database {PG_DB} is re-created) or sqlite:///PATH")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="write every measurement (per kill) as JSON here")
    ap.add_argument("--trace", action="store_true",
                    help="also time every phase of the worker loop (saved with --out; diagnostics)")
    ap.add_argument("--diagnose", metavar="FILE.json", help="print table + diagnostics of a saved --trace run")
    args = ap.parse_args()
    if args.diagnose:
        with open(args.diagnose) as fh:
            saved = json.load(fh)
        print_table(saved)
        diagnose(saved)
        return 0
    for key in [k for k in os.environ if k.startswith("DUCTLINE_")]:
        del os.environ[key]  # default settings
    res = run(args)
    print_table(res)
    if args.trace:
        diagnose(res)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1, default=str)
        log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

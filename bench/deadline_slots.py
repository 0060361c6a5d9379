"""Run deadlines with more runs than slots: is any attempt started after its run's
deadline, and how soon after the deadline are the children gone?

30 runs (``--runs``) triggered at once onto one worker with 6 slots
(``--concurrency``); each run has a 3 s deadline, a quick first step and a second
step stuck in C for a minute, so every run ends at its deadline while others wait
for a slot (claimed ahead, given back, claimed again). Each step notes its start
(wall clock) and pid; a thread of this process watches those pids every
millisecond and notes when each one dies (a zombie counts as dead: its parent
has not reaped it yet). Printed per backend:

- child gone after the deadline: death of the stuck step's child - the run's
  deadline (ms; p50, p99, max);
- attempts started after their run's deadline (a step's own start > the run's
  deadline), which must be 0;
- the worker's own ``timeout.overrun`` figure is not used: it is what this checks.

    python bench/deadline_slots.py [--runs 30] [--concurrency 6] [--backends postgresql,sqlite]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import deadline_slots_app  # noqa: E402

from ductline.store import open_store  # noqa: E402

PG_ADMIN = os.environ.get("DUCTLINE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def fresh_url(backend: str, tmp: str) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp}/deadline_slots.db"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS "ductline_bench_deadline_slots" WITH (FORCE)')
        conn.execute('CREATE DATABASE "ductline_bench_deadline_slots"')
    return PG_ADMIN.rpartition("/")[0] + "/ductline_bench_deadline_slots"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class Deaths:
    """Polls the noted pids every millisecond; remembers when each stopped running."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.died: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @staticmethod
    def _running(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().rpartition(")")[2].split()[0] != "Z"
        except OSError:
            return False

    def _run(self) -> None:
        seen: set[int] = set()
        read: set[str] = set()
        while not self.stop.is_set():
            for name in os.listdir(self.folder):
                if name in read or name.endswith(".tmp"):
                    continue
                read.add(name)
                what, _, _, pid = open(os.path.join(self.folder, name)).read().split()
                if what == "stuck":
                    seen.add(int(pid))
            now = time.time() * 1000
            for pid in seen - self.died.keys():
                if not self._running(pid):
                    self.died[pid] = now
            time.sleep(0.001)


def measure(backend: str, runs: int, concurrency: int, steps: int) -> tuple[list[float], int, int]:
    with tempfile.TemporaryDirectory() as tmp:
        starts = os.path.join(tmp, "starts")
        os.mkdir(starts)
        url = fresh_url(backend, tmp)
        store = open_store(url)
        store.migrate()
        worker = subprocess.Popen([sys.executable, "-m", "ductline", "--log-level", "WARNING", "worker",
                                   "--app", str(HERE / "deadline_slots_app.py"), "--database", url,
                                   "--concurrency", str(concurrency)],
                                  env={**os.environ, "PYTHONPATH": str(HERE.parent / "src"),
                                       "DUCTLINE_BENCH_STARTS": starts})
        deaths = Deaths(starts)
        try:
            time.sleep(3)  # the worker's children are ready
            pipeline = deadline_slots_app.pipeline if steps == 2 else deadline_slots_app.single
            handles = [pipeline.trigger(i, database=store) for i in range(runs)]
            for h in handles:
                assert h.wait(300) == "failed", h.id
            time.sleep(0.5)
            deaths.stop.set()
            deaths.thread.join()
            notes = [open(os.path.join(starts, n)).read().split() for n in os.listdir(starts)
                     if not n.endswith(".tmp")]
            deadline = {i: store.get_run(h.id)["deadline_ms"] for i, h in enumerate(handles)}
            late_starts = sum(1 for what, run, at, pid in notes if float(at) > deadline[int(run)])
            gone = [deaths.died[int(pid)] - deadline[int(run)] for what, run, at, pid in notes
                    if what == "stuck" and int(pid) in deaths.died]
            missing = sum(1 for what, run, at, pid in notes if what == "stuck" and int(pid) not in deaths.died)
            return gone, late_starts, missing
        finally:
            deaths.stop.set()
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
            store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--backends", default="postgresql,sqlite")
    parser.add_argument("--steps", type=int, choices=(1, 2), default=2,
                        help="2: a quick step, then the stuck one; 1: the stuck step alone")
    args = parser.parse_args()
    print(f"ductline run deadlines, more runs than slots -- {args.runs} runs at once, 3 s deadline, one worker "
          f"--concurrency {args.concurrency}, {args.steps} step(s) per run, {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}")
    print(f"{'backend':<11}{'child gone after the deadline (ms)':>36}{'p50':>7}{'p99':>7}{'max':>7}"
          f"{'started after it':>18}{'deaths unseen':>15}")
    for backend in args.backends.split(","):
        gone, late, missing = measure(backend, args.runs, args.concurrency, args.steps)
        print(f"{backend:<11}{len(gone):>36}{statistics.median(gone):>7.0f}{pct(gone, 0.99):>7.0f}"
              f"{max(gone):>7.0f}{late:>18}{missing:>15}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""The hop alone, side by side: versions of the code measured in the same minutes.

    python bench/hop_side.py --rev before=main~3 --rev after=HEAD [--chains 100]
                             [--burst 300 --burst-rounds 4] [--postgres] [--priority 10]

Each ``--rev NAME=REV`` is a git revision of this repository, exported (``git
archive``) to a temporary folder; one real worker process per revision (``python -m
ductline worker``, default settings, that revision's code on ``PYTHONPATH``) serves a
database of its own. The chains (``bench_marks3``: a -> b -> c, marks taken inside
the steps) then alternate between the workers, one at a time, the order reversed
every other chain, so every version sees the same minutes of a busy machine. A hop
is "a returned -> b called" (and b -> c). With ``--burst N``, each worker in turn
also runs N chains triggered at once (one ``trigger_many``), ``--burst-rounds`` times.

``--priority N`` runs the benchmark and its workers (and their children) at
``SCHED_RR`` priority N (needs the privilege), so that other work on the machine
does not queue them behind it: on a loaded machine the figures then show the code's
path, not the run queue. The workers are put back to normal priority before they are
stopped. On PostgreSQL the server's processes keep their priority.

Prints percentiles of the hops of each version (ms).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_app  # noqa: E402
import core  # noqa: E402
from ductline.store import open_store  # noqa: E402


def export(rev: str, into: Path) -> Path:
    """The ``src`` folder of ``rev``, exported into ``into``; returns the folder to put on PYTHONPATH."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(HERE.parent), "archive", rev, "src"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def database(name: str, folder: Path, pg_url: str | None) -> str:
    """A fresh, migrated database for the version ``name``: a file in ``folder``, or a
    PostgreSQL database of its own next to ``pg_url`` (`core.PgBackend`)."""
    if pg_url is not None:
        return core.PgBackend(pg_url).fresh(f"ductline_hop_side_{name}")
    return core.migrated(f"sqlite:///{folder}/{name}.db")


def descendants(pid: int) -> set[int]:
    rows = [line.split() for line in subprocess.run(["ps", "-eo", "pid,ppid"], capture_output=True,
                                                     text=True).stdout.splitlines()[1:]]
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        found.add(current)
        todo += [int(child) for child, parent in rows if int(parent) == current and int(child) not in found]
    return found


def normal_priority(pid: int) -> None:
    """``pid`` and everything below it back to SCHED_OTHER (every thread)."""
    for each in descendants(pid):
        subprocess.run(["chrt", "-a", "-o", "-p", "0", str(each)], capture_output=True)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[int(p / 100 * (len(ordered) - 1))]


def hops_of(handle: Any) -> list[float]:
    marks = handle.output()
    return [(marks[1] - marks[0]) * 1000, (marks[3] - marks[2]) * 1000]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", action="append", required=True, help="NAME=REV (at least two)")
    ap.add_argument("--chains", type=int, default=100, help="chains alone per version")
    ap.add_argument("--burst", type=int, default=0, help="chains triggered at once per round (0: none)")
    ap.add_argument("--burst-rounds", type=int, default=2)
    ap.add_argument("--postgres", action="store_true", help="PostgreSQL instead of a SQLite file")
    ap.add_argument("--pg-url", default=core.DEFAULT_PG, help="admin URL; a database per version is made next to it")
    ap.add_argument("--priority", type=int, default=0, help="SCHED_RR priority (0: normal scheduling)")
    args = ap.parse_args()

    versions = dict(item.split("=", 1) for item in args.rev)
    folder = Path(tempfile.mkdtemp(prefix="ductline_hop_side_"))
    workers: dict[str, subprocess.Popen[bytes]] = {}
    stores: dict[str, Any] = {}
    alone: dict[str, list[float]] = {name: [] for name in versions}
    bursts: dict[str, list[list[float]]] = {name: [] for name in versions}
    prefix = ["chrt", "-r", str(args.priority)] if args.priority else []
    try:
        for name, rev in versions.items():
            code = export(rev, folder / name)
            url = database(name, folder, args.pg_url if args.postgres else None)
            stores[name] = open_store(url)
            env = {k: v for k, v in os.environ.items() if not k.startswith("DUCTLINE_")}
            env["PYTHONPATH"] = str(code)
            env["DUCTLINE_SHUTDOWN_GRACE_SECONDS"] = "10"
            log = open(folder / f"{name}.log", "wb")
            workers[name] = subprocess.Popen(
                prefix + [sys.executable, "-m", "ductline", "worker", "--app", str(HERE / "bench_app.py"),
                          "--database", url],
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder,
                start_new_session=True)
        if args.priority:
            os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(args.priority))
        for name in versions:  # warm: every worker and its children up
            for i in range(4):
                if bench_app.bench_marks3.trigger(i, database=stores[name]).wait(timeout=120) != "completed":
                    raise RuntimeError(f"warm-up chain of {name} did not complete")
        names = list(versions)
        for i in range(args.chains):
            for name in names if i % 2 == 0 else names[::-1]:
                handle = bench_app.bench_marks3.trigger(i, database=stores[name])
                if handle.wait(timeout=60) != "completed":
                    raise RuntimeError(f"chain {handle.id} of {name} did not complete")
                alone[name] += hops_of(handle)
        for r in range(args.burst_rounds if args.burst else 0):
            for name in names if r % 2 == 0 else names[::-1]:
                handles = bench_app.bench_marks3.trigger_many(list(range(args.burst)), database=stores[name])
                found: list[float] = []
                for handle in handles:
                    if handle.wait(timeout=300) != "completed":
                        raise RuntimeError(f"chain {handle.id} of {name} did not complete")
                    found += hops_of(handle)
                bursts[name].append(found)
    finally:
        if args.priority:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            for worker in workers.values():
                normal_priority(worker.pid)  # a worker stopping at real-time priority may starve its own threads
        for worker in workers.values():
            worker.send_signal(signal.SIGTERM)
        for worker in workers.values():
            try:
                worker.wait(60)
            except subprocess.TimeoutExpired:
                worker.kill()
        for store in stores.values():
            store.close()
    load = open("/proc/loadavg").read().split()[0]
    print(f"hop alone, {'PostgreSQL' if args.postgres else 'SQLite'}, {args.chains} chains per version "
          f"(load average {load}); ms")
    for name in versions:
        h = alone[name]
        print(f"  {name:>12}: p10 {percentile(h, 10):.2f}  p25 {percentile(h, 25):.2f}  p50 {percentile(h, 50):.2f}"
              f"  p75 {percentile(h, 75):.2f}  p90 {percentile(h, 90):.2f}  ({len(h)} hops)")
    for name, rounds in bursts.items():
        if rounds:
            print(f"  {name:>12}: {args.burst} chains at once, p50 / p95 per round: "
                  + ", ".join(f"{percentile(g, 50):.1f} / {percentile(g, 95):.1f}" for g in rounds))
    shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

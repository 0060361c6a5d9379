#!/usr/bin/env python
"""The fleet at full size, and how claiming scales with worker processes.

    python bench/fleet.py [--runs 2000] [--processes 1,4,16] [--concurrency 2]
                          [--kill-every 10] [--admin-url postgresql://postgres@127.0.0.1:5432/test]

For each process count P (one fresh database each, side by side in one invocation):
a real PgBouncer (transaction pooling) in front of PostgreSQL, ``--runs`` runs of
the fleet pipeline (expand 20 + collapse + chain: 23 jobs each) triggered first, then
P worker processes (``--concurrency`` slots each, distinct host names, a process
group each) started through PgBouncer with LISTEN on a direct connection. With
``--kill-every S`` and P > 1, a random worker's process group is SIGKILLed every
S/2..3S/2 seconds and started again (the chaos of tests/fleet, at full size).

Afterwards the same checks as the fleet test (every run completed, every step
succeeded exactly once, every extra attempt a crash of a killed worker), and:

* drain: jobs per second, first claim to last run finished (wall clock);
* claim latency p50/p99: the worker's own timing of each claim statement (pool
  checkout, PgBouncer, PostgreSQL), from the claim events (tests/apps/fleet_app.py);
* conflicts: claims that returned fewer jobs than asked while more jobs were ready
  than the fleet has slots (bench/claimlog.py), as a share of such claims.

Load is 127.0.0.1 only; the databases are dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
sys.path[:0] = [str(HERE), str(TESTS), str(TESTS / "apps")]

import fleet_app  # noqa: E402
import pgbouncer_support  # noqa: E402
import psycopg  # noqa: E402
from claimlog import ReadySampler, pct, read_claims  # noqa: E402
from fleet_support import Chaos, Fleet, verify  # noqa: E402

from ductline.store import open_store  # noqa: E402


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def recreate(admin_url: str, name: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{admin_url.rpartition('/')[0]}/{name}"
    store = open_store(url)
    store.migrate()
    store.close()
    return url


def drop(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def one(admin_url: str, bouncer: pgbouncer_support.PgBouncer, processes: int, runs: int, concurrency: int,
        kill_every: float | None) -> dict[str, float]:
    name = f"ductline_fleet_bench_{os.getpid()}_{processes}"
    direct = recreate(admin_url, name)
    through = bouncer.url(name)
    os.environ["DUCTLINE_DATABASE_POOLING"] = "transaction"
    os.environ["DUCTLINE_LISTEN_DATABASE_URL"] = direct
    folder = tempfile.mkdtemp(prefix="fleet-bench-")
    try:
        store = open_store(through)
        try:
            handles = [fleet_app.fleet.trigger(fleet_app.WIDTH, database=store) for _ in range(runs)]
        finally:
            store.close()
        ids = [h.id for h in handles]
        env = {"DUCTLINE_LEASE_SECONDS": "10", "DUCTLINE_HEALTH_CHECK_INTERVAL": "1",
               "DUCTLINE_RETRY_DELAY": "0", "FLEET_CLAIM_LOG": folder}
        fleet = Fleet(through, processes, concurrency=concurrency, env=env, log_dir=folder)
        started = time.monotonic()
        stopping.append(fleet)
        fleet.start_all()
        chaos = Chaos(fleet, kill_every / 2, kill_every * 1.5) if kill_every and processes > 1 else None
        with ReadySampler(direct) as sampler, psycopg.connect(direct, autocommit=True) as conn:
            if chaos is not None:
                chaos.__enter__()
            try:
                while True:
                    done = conn.execute("SELECT count(*) FROM ductline_runs WHERE status = 'completed'").fetchone()
                    if done and done[0] >= runs:
                        break
                    if time.monotonic() - started > 3600:
                        raise TimeoutError("the fleet did not finish within an hour")
                    time.sleep(0.5)
            finally:
                if chaos is not None:
                    chaos.__exit__(None, None, None)
            ended = time.monotonic()
        fleet.stop()
        with psycopg.connect(direct, autocommit=True) as conn:
            counts = verify(conn, ids, fleet.killed, fleet_app.WIDTH)
        claims = read_claims(folder)
        first = min((c.at for c in claims if c.claimed), default=started)
        busy = [c for c in claims if c.at <= ended]
        seconds = [c.seconds for c in busy]
        conflicts, plenty = sampler.conflicts(busy, processes * concurrency)
        result = {
            "processes": processes, "runs": runs, "jobs": counts["jobs"], "kills": counts["kills"],
            "crashed": counts["crashed"], "jobs_per_second": counts["jobs"] / (ended - first),
            "claims": len(busy), "claim_p50_ms": pct(seconds, 50) * 1000, "claim_p99_ms": pct(seconds, 99) * 1000,
            "conflicts": conflicts, "plenty": plenty,
        }
        log(f"P={processes}: {result}")
        return result
    finally:
        for running in stopping:
            running.stop()  # also when interrupted: the workers live in sessions of their own
        stopping.clear()
        drop(admin_url, name)


stopping: list[Fleet] = []


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # unwinds through the finally blocks: workers stopped, databases dropped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--processes", default="1,4,16")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--kill-every", type=float, default=10.0, help="seconds; 0: no kills")
    parser.add_argument("--admin-url", default=os.environ.get("DUCTLINE_TEST_PG_URL",
                                                              "postgresql://postgres@127.0.0.1:5432/test"))
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _interrupted)
    bouncer = pgbouncer_support.start(args.admin_url, pool_size=20)
    results = []
    try:
        for processes in [int(p) for p in args.processes.split(",")]:
            results.append(one(args.admin_url, bouncer, processes, args.runs, args.concurrency,
                               args.kill_every or None))
    finally:
        bouncer.stop()
    print()
    print(f"{'processes':>9} {'runs':>5} {'jobs/s':>7} {'claim p50':>10} {'claim p99':>10} "
          f"{'conflicts':>16} {'kills':>5} {'crashed':>7}")
    for r in results:
        share = r["conflicts"] / r["plenty"] if r["plenty"] else 0.0
        print(f"{r['processes']:>9} {r['runs']:>5} {r['jobs_per_second']:>7.0f} {r['claim_p50_ms']:>8.1f}ms "
              f"{r['claim_p99_ms']:>8.1f}ms {r['conflicts']:>6}/{r['plenty']:<6}{share:>4.0%} "
              f"{r['kills']:>5} {r['crashed']:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The fleet: 16 worker processes with distinct host identities (host names and
process groups) share one PostgreSQL through a real PgBouncer in transaction pooling
mode, while a random worker is SIGKILLed (its whole process group, as a lost host)
every few seconds and started again. Every run completes, every step has exactly one
succeeded attempt, and every other attempt is a crash on a worker that was killed.

Sized for the suite (100 runs of expand 20 + collapse + chain: 2,300 jobs); the
full-size version with latency figures is bench/fleet.py.
"""

from __future__ import annotations

import fleet_app
import pgbouncer_support
import psycopg
import pytest
from fleet_support import Chaos, Fleet, verify
from helpers import FAST_ENV, wait_for

pytestmark = [pytest.mark.parametrize("backend", ["postgres"]), pytest.mark.timeout(300)]

WORKERS = 16
RUNS = 100


def test_sixteen_workers_through_pgbouncer_survive_random_kills(store, db_url, pgbouncer, monkeypatch, tmp_path):
    url = pgbouncer_support.route(pgbouncer, db_url, monkeypatch, listen=True)
    # A lease long enough that a live worker on a loaded machine never loses one: every
    # crash the test sees must then come from a kill.
    gate = tmp_path / "gate"
    env = {**FAST_ENV, "DUCTLINE_LEASE_SECONDS": "8", "DUCTLINE_RETRY_DELAY": "0", "FLEET_GATE": str(gate)}
    fleet = Fleet(url, WORKERS, concurrency=1, env=env, log_dir=str(tmp_path))
    fleet.start_all()
    try:
        with psycopg.connect(db_url, autocommit=True) as conn:
            wait_for(lambda: conn.execute("SELECT count(DISTINCT host) FROM ductline_workers").fetchone()[0]
                     == WORKERS, timeout=120, interval=0.2)
        from ductline.store import open_store

        through = open_store(url)
        try:
            handles = [fleet_app.fleet.trigger(fleet_app.WIDTH, database=through) for _ in range(RUNS)]
        finally:
            through.close()
        ids = [h.id for h in handles]
        with Chaos(fleet, 2.0, 4.0) as chaos, psycopg.connect(db_url, autocommit=True) as conn:
            # The first steps wait until a worker was killed: the chaos runs while the
            # runs do, however fast the fleet works through them afterwards.
            wait_for(lambda: fleet.killed, timeout=60, interval=0.1)
            gate.touch()
            def settled() -> bool:
                row = conn.execute("SELECT count(*) FILTER (WHERE status IN ('completed', 'failed', 'halted', "
                                   "'cancelled')) FROM ductline_runs WHERE id = ANY(%s)", (ids,)).fetchone()
                return bool(row[0] == RUNS)

            wait_for(settled, timeout=240, interval=0.25)
        assert not chaos.errors, chaos.errors
        with psycopg.connect(db_url, autocommit=True) as conn:
            counts = verify(conn, ids, fleet.killed, fleet_app.WIDTH)
            hosts = conn.execute("SELECT count(DISTINCT host) FROM ductline_workers").fetchone()[0]
        assert hosts == WORKERS
        assert counts["kills"] >= 1, counts
        print(counts)
    finally:
        fleet.stop()

"""Retention applied by the workers' maintenance thread (the ``retention`` setting):
ended runs go whole, payload chunks with them; halted, paused and pending runs stay;
rows of workers stopped long ago go; one maintainer of the fleet prunes at a time.
Both backends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pause_app
import prune_app
import psycopg
import pytest
import rt_app
from helpers import FAST_ENV, stop_worker, wait_for
from test_prune import HOUR_MS, cli, past_the_last_finish, rows_of, worker_ids, worker_row

from ductline.operations.prune import prune
from ductline.operations.cancel import cancel_run
from ductline.views import run_view

APPS = Path(__file__).parent.parent / "apps"


def start_worker(db_url, env):
    argv = [sys.executable, "-m", "ductline", "worker", "--database", db_url, "--concurrency", "2"]
    for app in ("prune_app.py", "rt_app.py", "pause_app.py"):
        argv += ["--app", str(APPS / app)]
    return subprocess.Popen(argv, env={**os.environ, **FAST_ENV, **env})


def gone(store, run_id):
    return set(rows_of(store, run_id).values()) == {0}


def test_workers_prune_ended_runs_and_keep_halted_paused_and_pending(store, db_url, tmp_path):
    fanned = [prune_app.fanned.trigger(5, database=store) for _ in range(3)]
    large = prune_app.large.trigger(3 * 1024 * 1024, database=store)  # out-of-line output: chunks
    cancelled = prune_app.fanned.trigger(2, database=store, delay=3600)
    cancel_run(store, cancelled.id)
    halted = rt_app.failing.trigger(1, database=store)
    paused = pause_app.chain.trigger(1, database=store)
    pending = prune_app.fanned.trigger(3, database=store, delay=3600)
    worker_row(store, "stopped-long-ago", stopped=True, age_ms=48 * HOUR_MS)  # history: goes too
    worker = start_worker(db_url, {"DUCTLINE_RETENTION": "1s", "RT_HALT_FILE": str(tmp_path / "halt")})
    try:
        wait_for(lambda: "stopped-long-ago" not in worker_ids(store), timeout=60)
        assert len(worker_ids(store)) == 1  # its own row, live, stays
        wait_for(lambda: halted.status() == "halted" and paused.status() == "paused", timeout=60)
        wait_for(lambda: rows_of(store, large.id)["ductline_payload_chunks"] > 1 or gone(store, large.id))
        wait_for(lambda: all(gone(store, h.id) for h in [*fanned, large, cancelled]), timeout=90)
        for kept in (halted, paused, pending):
            rows = rows_of(store, kept.id)
            assert rows["ductline_runs"] == 1 and rows["ductline_jobs"] >= 1, (kept, rows)
        assert run_view(store, halted.id)["status"] == "halted"
        assert run_view(store, paused.id)["status"] == "paused"
    finally:
        stop_worker(worker)
    # `ductline prune` too: nothing unfinished goes by default, a named status does.
    assert cli("prune", "--older-than", "0s", "--database", db_url).returncode == 0
    assert all(rows_of(store, h.id)["ductline_runs"] == 1 for h in (halted, paused, pending))
    done = cli("prune", "--older-than", "0s", "--status", "halted", "--database", db_url)
    assert done.returncode == 0 and "deleted 1 run(s)" in done.stdout, done.stderr
    assert gone(store, halted.id)
    assert all(rows_of(store, h.id)["ductline_runs"] == 1 for h in (paused, pending))


@pytest.mark.parametrize("backend", ["postgres"])
def test_one_maintainer_prunes_at_a_time(store, db_url):
    ended = [prune_app.large.trigger(10, database=store) for _ in range(3)]
    from helpers import drive

    drive(store, prune_app.large)
    past_the_last_finish(store)
    with psycopg.connect(db_url) as holder:  # another worker's maintenance thread, mid-batch
        holder.execute("SELECT pg_advisory_xact_lock(4242002)")
        report = prune(store, 0, exclusive=True)
        assert report.yielded and not report.complete and report.runs == 0
        assert all(rows_of(store, h.id)["ductline_runs"] == 1 for h in ended)
        assert prune(store, 0, dry_run=True).runs == 3
    report = prune(store, 0, exclusive=True)  # the other's transaction ended: its turn is free
    assert report.complete and report.runs == 3
    assert all(gone(store, h.id) for h in ended)

"""Durability of the new checkpoints, on both backends: a move killed inside its
transaction (``during_move``) or after a batch committed (``after_move``), and a
worker killed right after it recorded its queues and definitions
(``after_register``). Each run still finishes with every step succeeding exactly
once, and no attempt is charged to a job nobody could run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from ductline import views
from ductline.store.records import LoadedDefinition
from tests.helpers import FAST_ENV, STARTED, stop_worker, wait_for
from tests.versions.version_support import V1, V2, V2_APP, sql, v1, v2


def move_cli(db_url: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ductline", "runs", "move", "--from", V1.fingerprint,
                           "--to", V2.fingerprint, "--map", "b=b2", "--database", db_url],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **(env or {})})


def new_worker(db_url: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "ductline", "worker", "--app", V2_APP, "--database", db_url,
                             "--concurrency", "2"], env={**os.environ, **FAST_ENV, **(env or {})})
    STARTED.append(proc)
    return proc


def assert_each_step_succeeded_once(db_url: str, run_ids: list[str]) -> None:
    for run_id in run_ids:
        rows = sql(db_url, "SELECT j.step, a.result FROM ductline_jobs j JOIN ductline_attempts a ON a.job_id = j.id "
                           "WHERE j.run_id = %s ORDER BY j.created_ms", (run_id,))
        assert sorted(rows) == sorted([("a", "succeeded"), ("b2", "succeeded"), ("c", "succeeded")]), rows


@pytest.mark.parametrize("checkpoint", ["during_move", "after_move"])
def test_a_move_killed_at_a_checkpoint_loses_nothing(store: Any, db_url: str, checkpoint: str) -> None:
    runs = [v1.versioned.trigger(i, database=store) for i in range(3)]
    store.register_worker("loader", "h", 1, 1, definitions=[LoadedDefinition.of(V2)])
    killed = move_cli(db_url, {"DUCTLINE_FAULT": checkpoint})
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    moved = {r.id for r in runs if store.get_run(r.id)["definition"] == V2.fingerprint}
    # Inside the transaction nothing committed; after the batch all three did.
    assert moved == (set() if checkpoint == "during_move" else {r.id for r in runs})
    again = move_cli(db_url)
    assert again.returncode == 0, again.stderr
    assert f"moved {3 - len(moved)} run(s)" in again.stdout
    worker = new_worker(db_url)
    try:
        for r in runs:
            assert r.wait(60) == "completed"
    finally:
        assert stop_worker(worker) == 0
    assert_each_step_succeeded_once(db_url, [r.id for r in runs])


def test_a_worker_killed_after_registering_loses_nothing(store: Any, db_url: str) -> None:
    doomed = new_worker(db_url, {"DUCTLINE_FAULT": "after_register"})
    assert doomed.wait(60) == -signal.SIGKILL
    run = v2.versioned.trigger(1, database=store)
    # Its row says it serves the queue until its heartbeat is a lease old (3 s here).
    wait_for(lambda: views.run_view(store, run.id, live_within_seconds=3)["steps"][0]["unserved"]
             == "no live worker serves queue 'default'", timeout=30)
    worker = new_worker(db_url)
    try:
        assert run.wait(60) == "completed"
    finally:
        assert stop_worker(worker) == 0
    rows = sql(db_url, "SELECT j.step, a.result FROM ductline_jobs j JOIN ductline_attempts a ON a.job_id = j.id "
                       "WHERE j.run_id = %s", (run.id,))
    assert sorted(rows) == [("a", "succeeded"), ("b2", "succeeded"), ("c", "succeeded")]

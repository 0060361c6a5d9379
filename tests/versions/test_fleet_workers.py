"""Real worker processes: a step waits for a worker of its queue; old and new code
serve one database, each claiming only its own definition's jobs; the CLI shows
why a job waits, lists runs by definition and moves them (the commands run by the
command line's entry point in the test process, `helpers.ductline_in_process`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from ductline import views
from ductline.store.records import LoadedDefinition
from tests.helpers import FAST_ENV, STARTED, ductline_in_process, stop_worker, wait_for
from tests.versions.version_support import V1, V1_APP, V2, V2_APP, v1, v2

QUEUE_APP = str(Path(__file__).parents[1] / "apps" / "queue_app.py")


def worker(db_url: str, app: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "ductline", "worker", "--app", app, "--database", db_url,
                             "--concurrency", "1", *extra], env={**os.environ, **FAST_ENV, **(env or {})})
    STARTED.append(proc)
    return proc


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return ductline_in_process(*args, env={"COLUMNS": "200"})


def status(store: Any, run_id: str) -> str:
    return str(store.get_run(run_id)["status"])


def test_a_step_runs_on_a_worker_of_its_queue(db_url: str, store: Any) -> None:
    from tests.apps import queue_app

    run = queue_app.rendering.trigger(1, database=store)
    plain = worker(db_url, QUEUE_APP, env={"QUEUE_APP_ROLE": "plain"})
    try:
        wait_for(lambda: [j["step"] for j in store.run_jobs(run.id)] == ["prepare", "render"], timeout=60)
        shown = cli("show", run.id, "--database", db_url)
        assert "step render waits: no live worker serves queue 'gpu'" in shown.stdout, shown.stdout
        gpu = worker(db_url, QUEUE_APP, "--queue", "gpu", env={"QUEUE_APP_ROLE": "gpu"})
        try:
            wait_for(lambda: status(store, run.id) == "completed", timeout=60)
        finally:
            assert stop_worker(gpu) == 0
    finally:
        assert stop_worker(plain) == 0
    assert json.loads(store.get_run(run.id)["output"]) == {"value": 20, "role": "gpu"}
    assert all(j["attempts"] == 1 for j in store.run_jobs(run.id))


def test_old_and_new_code_serve_one_database(db_url: str, store: Any) -> None:
    old = v1.versioned.trigger(1, database=store)
    new_worker = worker(db_url, V2_APP)
    try:
        new = v2.versioned.trigger(1, database=store)
        wait_for(lambda: status(store, new.id) == "completed", timeout=60)
        # The new code's worker left the old run alone: pending, no attempt charged.
        assert [(j["step"], j["status"], j["attempts"]) for j in store.run_jobs(old.id)] == [("a", "pending", 0)]
        shown = cli("show", old.id, "--database", db_url)
        assert f"step a waits: no live worker has step 'a' of definition {V1.fingerprint[:8]}" in shown.stdout, \
            shown.stdout
        assert f"definition {V1.fingerprint}" in shown.stdout
        listed = cli("runs", "--version", V1.fingerprint[:8], "--json", "--database", db_url)
        assert [r["run_id"] for r in json.loads(listed.stdout)] == [old.id], listed.stderr
        # An operator moves it (its waiting step, a, is in both versions).
        moved = cli("runs", "move", "--from", V1.fingerprint, "--to", V2.fingerprint[:8], "--database", db_url)
        assert moved.returncode == 0 and "moved 1 run(s)" in moved.stdout, moved.stdout + moved.stderr
        wait_for(lambda: status(store, old.id) == "completed", timeout=60)
    finally:
        assert stop_worker(new_worker) == 0
    assert json.loads(store.get_run(old.id)["output"]) == {"value": 4, "version": 2}


def test_the_cli_refuses_a_move_that_leaves_a_job_without_a_step(db_url: str, store: Any) -> None:
    from tests.versions.version_support import drive

    run = v1.versioned.trigger(1, database=store)
    assert drive(store, V1, steps=1) == ["a"]
    store.register_worker("w-new", "h", 1, 1, definitions=[LoadedDefinition.of(V2)])
    refused = cli("runs", "move", "--from", V1.fingerprint[:8], "--to", V2.fingerprint[:8], "--database", db_url)
    assert refused.returncode == 2 and "move refused" in refused.stderr and "'b'" in refused.stderr, refused.stderr
    moved = cli("runs", "move", "--from", V1.fingerprint[:8], "--to", V2.fingerprint[:8], "--map", "b=b2",
                "--json", "--database", db_url)
    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout)["moved"] == [run.id]
    # The command says once what it did: on stdout, not again in a log line.
    again = cli("runs", "move", "--from", V1.fingerprint, "--to", V2.fingerprint[:8], "--database", db_url)
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"moved 0 run(s) of {V2.name} from definition {V1.fingerprint} to {V2.fingerprint}\n"
    assert "run(s)" not in again.stderr, again.stderr
    shown = cli("show", run.id, "--database", db_url)
    assert f"moved from {V1.fingerprint} to {V2.fingerprint} (b=b2) at " in shown.stdout, shown.stdout
    # The move's time is ISO 8601 UTC with a Z, as every other time of the CLI and the
    # API; the database keeps it as at_ms.
    (stored,) = json.loads(store.get_run(run.id)["metadata"])["moves"]
    at = views.iso(stored["at_ms"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", at or ""), at
    assert f"(b=b2) at {at}" in shown.stdout
    expected = {"from": V1.fingerprint, "to": V2.fingerprint, "steps": {"b": "b2"}, "at": at}
    assert json.loads(cli("show", run.id, "--json", "--database", db_url).stdout)["metadata"]["moves"] == [expected]
    from starlette.testclient import TestClient

    from ductline.web import create_app

    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        assert client.get(f"/api/runs/{run.id}").json()["metadata"]["moves"] == [expected]
    listed = cli("definitions", "--json", "--database", db_url)
    rows = json.loads(listed.stdout)
    assert [d["fingerprint"] for d in rows["definitions"]] == [V2.fingerprint]
    assert rows["queues"] == [{"queue": "default", "ready": 1, "live_workers": 1}]

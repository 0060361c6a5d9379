"""A step that every shutdown interrupts does not start again forever: its attempts
are released (nothing charged) up to ``max_releases`` times in a row (the setting,
default `MAX_RELEASES`), then the run halts with ``job_releases_exhausted`` (real
workers, SIGTERM, both backends)."""

from __future__ import annotations

import json

import rt_app
from ductline.model.outcomes import RELEASED_TYPE
from ductline.model.states import HaltReason
from helpers import ductline_in_process, start_worker, stop_worker, wait_for

ENV = {"DUCTLINE_SHUTDOWN_GRACE_SECONDS": "0.2", "DUCTLINE_KILL_GRACE_SECONDS": "0.2"}


def attempts(store, run_id):
    return store.run_attempts(run_id)


def interrupt(store, db_url, handle, times: int, env: dict[str, str]) -> None:
    """Start a worker on the run's one long step and stop it mid-attempt, ``times`` times."""
    for n in range(1, times + 1):
        proc = start_worker(db_url, concurrency=1, env=env)
        try:
            wait_for(lambda: any(a["result"] is None for a in attempts(store, handle.id)))
        finally:
            assert stop_worker(proc) == 0
        wait_for(lambda: all(a["result"] is not None for a in attempts(store, handle.id)))
        if n < times:
            job = store.run_jobs(handle.id)[0]
            assert (store.get_run(handle.id)["status"], job["status"]) == ("running", "pending")


def test_a_step_every_shutdown_interrupts_halts_its_run_after_max_releases(store, db_url):
    # The recording worker's setting sets the limit (2 here, so the test starts two
    # workers, not the default's five; the default is checked in tests/unit).
    handle = rt_app.busy.trigger(600, database=store)  # naps ten minutes: every deploy cuts it
    interrupt(store, db_url, handle, 2, {**ENV, "DUCTLINE_MAX_RELEASES": "2"})
    run = store.get_run(handle.id)
    assert run["status"] == "halted" and run["halt_reason"] == HaltReason.JOB_RELEASES_EXHAUSTED
    ended = attempts(store, handle.id)
    assert len(ended) == 2
    assert {(a["result"], a["error_type"]) for a in ended} == {("cancelled", RELEASED_TYPE)}
    job = store.run_jobs(handle.id)[0]
    assert (job["status"], job["failures"], job["crashes"]) == ("failed", 0, 0)
    assert "interrupted by a worker's shutdown grace 2 times in a row (at most 2)" in json.loads(run["metadata"])["error"]
    # The CLI says why, in words.
    shown = ductline_in_process("show", handle.id, "--database", db_url)
    assert "job_releases_exhausted" in shown.stdout
    assert "interrupted by a worker's shutdown grace 2 times in a row (at most 2)" in shown.stdout
    # So does the dashboard's run page.
    from starlette.testclient import TestClient

    from ductline.web import create_app

    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        page = client.get(f"/runs/{handle.id}")
    assert page.status_code == 200
    assert "Run halted (job_releases_exhausted)" in page.text
    assert "interrupted by a worker&#39;s shutdown grace (a deploy, a scale-down) too many times" in page.text


def test_an_attempt_that_ends_otherwise_resets_the_count(store, db_url):
    handle = rt_app.flaky_pipeline.trigger(1, database=store)
    job = store.run_jobs(handle.id)[0]
    claimed = store.claim("w", ["rt_flaky"], 1, 30_000)[0]
    assert claimed.job_id == job["id"]
    with store.transaction() as tx:
        assert tx.release_job(claimed.job_id, claimed.lease_token, counted=True)
        assert tx.job_budget(claimed.job_id).releases == 1
    claimed = store.claim("w", ["rt_flaky"], 1, 30_000)[0]
    with store.transaction() as tx:
        assert tx.retry_job(claimed.job_id, claimed.lease_token, 0)
        budget = tx.job_budget(claimed.job_id)
        assert (budget.releases, budget.failures) == (0, 1)

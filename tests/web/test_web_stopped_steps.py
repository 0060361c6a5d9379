"""A step run a run's stop ended in flight reads as what it is -- failed by the run
deadline, cancelled by a cancel -- with the stop's message as its attempt's error, never
also as skipped: in ``ductline show``, ``show --json``, the API's run view and the run
page. Both backends."""

from __future__ import annotations

import json

import rt_app
import web_support
from helpers import ductline_in_process

from ductline.engine.stop import expire
from ductline.operations.cancel import cancel_run
from ductline.store import Store
from ductline.views import run_view
from ductline.web import create_app


def _show(run_id: str, *flags: str, db_url: str, columns: str | None = None) -> str:
    """What ``ductline show`` prints, run by the command line's entry point in this process."""
    done = ductline_in_process("show", run_id, *flags, "--database", db_url,
                               env=None if columns is None else {"COLUMNS": columns})
    assert done.returncode == 0, done.stderr
    return done.stdout

DEADLINE_ERROR = "stopped at the run deadline: the run exceeded its deadline of 2 s"


def _ended_at_the_deadline(store: Store) -> str:
    handle = rt_app.deadline_chain.trigger(1, database=store)
    (quick,) = web_support.claim(store, rt_app.deadline_chain)
    web_support.succeed(store, rt_app.deadline_chain, quick, 1)
    web_support.claim(store, rt_app.deadline_chain)  # "stuck" is running when the deadline fires
    with store.transaction() as tx:
        assert expire(tx, rt_app.deadline_chain.definition(), handle.id)
    return handle.id


def _steps(view: dict) -> dict[str, dict]:
    return {s["step"]: s for s in view["steps"]}


def _page_and_api(store: Store, run_id: str) -> tuple[str, dict]:
    from starlette.testclient import TestClient

    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        return client.get(f"/runs/{run_id}").text, client.get(f"/api/runs/{run_id}").json()


def test_a_step_ended_by_the_run_deadline_reads_failed_with_that_error(store, db_url, monkeypatch):
    monkeypatch.delenv("DUCTLINE_DASHBOARD_TOKEN", raising=False)
    run_id = _ended_at_the_deadline(store)
    shown = json.loads(_show(run_id, "--json", db_url=db_url))
    page, api = _page_and_api(store, run_id)
    for view in (run_view(store, run_id), shown, api):
        steps = _steps(view)
        stuck = steps["stuck"]
        assert (stuck["status"], stuck["skip_reason"], stuck["skip_root"]) == ("failed", None, None)
        last = stuck["attempts"][-1]
        assert (last["result"], last["error_type"], last["error"]) == ("timed_out", "TimeoutError", DEADLINE_ERROR)
        assert (steps["after"]["status"], steps["after"]["skip_reason"]) == ("skipped", "workflow timeout")
    text = _show(run_id, db_url=db_url, columns="250")
    [row] = [line for line in text.splitlines() if "stuck" in line and "failed" in line]
    assert f"TimeoutError: {DEADLINE_ERROR}" in row and "skipped" not in row
    # The page says it once, as the attempt's error; only "after" reads skipped.
    assert f"skipped: {DEADLINE_ERROR}" not in page
    assert "skipped: workflow timeout" in page and DEADLINE_ERROR in page


def test_a_step_ended_by_a_cancel_reads_cancelled_not_skipped(store, monkeypatch):
    monkeypatch.delenv("DUCTLINE_DASHBOARD_TOKEN", raising=False)
    handle = rt_app.chain.trigger(1, database=store)
    web_support.claim(store, rt_app.chain)  # the first step is running when the run is cancelled
    cancel_run(store, handle.id)
    page, api = _page_and_api(store, handle.id)
    for view in (run_view(store, handle.id), api):
        first = view["steps"][0]
        assert (first["status"], first["skip_reason"]) == ("cancelled", None)
        assert first["attempts"][-1]["result"] == "cancelled"
    assert "skipped: the run was cancelled" not in page


def test_a_step_stopped_by_the_run_deadline_is_no_free_failure(store, monkeypatch):
    # The engine recorded it timed_out at the run deadline: no retry used, none to follow,
    # the run failed. The page and the API count it apart, never as a free failure.
    monkeypatch.delenv("DUCTLINE_DASHBOARD_TOKEN", raising=False)
    run_id = _ended_at_the_deadline(store)
    (stuck,) = [j for j in store.run_jobs(run_id) if j["step"] == "stuck"]
    assert (stuck["status"], stuck["failures"]) == ("failed", 0)
    page, api = _page_and_api(store, run_id)
    assert api["failures"] == {"free": 0, "paid": 0, "deadline": 1}
    assert _steps(api)["stuck"]["failures"] == {"free": 0, "paid": 0, "deadline": 1}
    assert 'id="failures" data-free="0" data-paid="0" data-deadline="1">1 stopped at the run deadline' in page
    assert "free failure" not in page and "1 free" not in page

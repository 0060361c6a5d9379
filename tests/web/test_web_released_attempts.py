"""An attempt its worker gave back (claimed ahead and not started, or interrupted by
a shutdown) reads ``released``, not ``cancelled`` (which reads as an operator's
cancel): in ``ductline show``, ``show --json``, the API's run view and the run page.
It stays stored ``cancelled`` with error type ``Released``. Both backends."""

from __future__ import annotations

import json

import rt_app
import web_support
from helpers import ductline_in_process

from ductline.engine import record
from ductline.model.endings import SHUTDOWN_ERROR
from ductline.model.outcomes import GIVEN_BACK, RELEASED_TYPE, Ended
from ductline.model.states import AttemptResult
from ductline.store import Store
from ductline.views import run_view
from ductline.web import create_app


def _show(run_id: str, *flags: str, db_url: str, columns: str | None = None) -> str:
    """What ``ductline show`` prints, run by the command line's entry point in this process."""
    done = ductline_in_process("show", run_id, *flags, "--database", db_url,
                               env=None if columns is None else {"COLUMNS": columns})
    assert done.returncode == 0, done.stderr
    return done.stdout


def _release(store: Store, error: str, interrupted: bool) -> None:
    (job,) = web_support.claim(store, rt_app.chain)
    attempt = record.Attempt(job.job_id, job.run_id, job.step, job.scope, job.attempt, job.lease_token)
    with store.transaction() as tx:
        done = record.failure(tx, rt_app.chain.definition(), attempt,
                              Ended(AttemptResult.CANCELLED, RELEASED_TYPE, error, released=True,
                                    interrupted=interrupted), None)
    assert done.outcome is record.Outcome.RELEASED


def test_a_released_attempt_reads_released_not_cancelled(store, db_url, monkeypatch):
    from starlette.testclient import TestClient

    monkeypatch.delenv("DUCTLINE_DASHBOARD_TOKEN", raising=False)
    handle = rt_app.chain.trigger(1, database=store)
    _release(store, f"{GIVEN_BACK}: its worker stopped", interrupted=False)  # claimed ahead, not started
    _release(store, SHUTDOWN_ERROR, interrupted=True)  # killed at the end of a shutdown grace
    stored = store.run_attempts(handle.id)
    assert {(a["result"], a["error_type"]) for a in stored} == {("cancelled", RELEASED_TYPE)}

    shown = json.loads(_show(handle.id, "--json", db_url=db_url))
    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        page = client.get(f"/runs/{handle.id}").text
        api = client.get(f"/api/runs/{handle.id}").json()
    for view in (run_view(store, handle.id), shown, api):
        first = view["steps"][0]
        assert first["status"] == "pending"
        assert [a["result"] for a in first["attempts"]] == ["released", "released"]
        assert [a["error_type"] for a in first["attempts"]] == [RELEASED_TYPE, RELEASED_TYPE]
    text = _show(handle.id, db_url=db_url, columns="250")
    assert "cancelled" not in text and text.count("released") >= 2, text
    assert 'class="badge s-released">released</span>' in page
    assert "cancelled" not in page

"""Free and paid failures (before and after a crossed boundary) and the root of a
skip, on the run page and in the API, on both backends."""

from __future__ import annotations

import re

import pause_app
import rt_app
import web_support
from helpers import drive
from web_support import Raw

from ductline.engine import stop
from ductline.store import Store
from ductline.web import create_app


def test_failures_before_and_after_a_boundary_are_told_apart(backend, store: Store):
    from starlette.testclient import TestClient

    handle = rt_app.unsafe.trigger(1, database=store)
    (job,) = web_support.claim(store, rt_app.unsafe)
    web_support.fail(store, rt_app.unsafe, job, "failed before paying")  # free: retried at once
    (job,) = web_support.claim(store, rt_app.unsafe)
    store.mark_boundary(job.job_id, job.lease_token, "charged the card")
    web_support.fail(store, rt_app.unsafe, job, "failed after paying")  # paid: the run halts
    assert handle.status() == "halted"
    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        page = client.get(f"/runs/{handle.id}").text
        assert re.search(r'id="failures" data-free="1" data-paid="1"', page)
        assert '<strong class="paid">1 paid</strong>' in page
        run = client.get(f"/api/runs/{handle.id}").json()
    assert run["failures"] == {"free": 1, "paid": 1, "deadline": 0}
    assert run["steps"][0]["failures"] == {"free": 1, "paid": 1, "deadline": 0}


def test_a_skipped_step_run_names_the_step_whose_stop_skipped_it(backend, store: Store, db_url: str):
    from starlette.testclient import TestClient

    handle = pause_app.expiring.trigger(3, database=store)
    assert drive(store, pause_app.expiring) == ["prepare"]
    Raw(backend, db_url).run([("UPDATE ductline_jobs SET pause_expires_ms = created_ms - 60000 "
                               "WHERE run_id = ? AND status = 'paused'", (handle.id,))])
    assert stop.expire_due(store, {"pause_expiring": pause_app.expiring.definition()}) == 1
    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        page = client.get(f"/runs/{handle.id}").text
        assert 'skipped: pause expired, because of step <a href="#step-approve" class="skip-root">approve</a>' in page
        assert "1 step run(s) skipped (pause expired), because of step approve." in page
        (finish,) = [s for s in client.get(f"/api/runs/{handle.id}").json()["steps"] if s["step"] == "finish"]
    assert finish["skip_root"] == "approve"

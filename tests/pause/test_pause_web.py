"""The dashboard on a paused run (both backends): the run page shows the paused step,
"waiting for resume" and the expiry; the Resume button needs the token and the
session's CSRF token; the JSON API resumes with a bearer token (409 when not paused)."""

from __future__ import annotations

import re

import pause_app
import pytest
from pause_support import drive, jobs_by_step
from starlette.testclient import TestClient

from ductline.web import create_app

TOKEN = "pause-dashboard-token"


@pytest.fixture
def client(store, monkeypatch):
    monkeypatch.delenv("DUCTLINE_DASHBOARD_TOKEN", raising=False)
    with TestClient(create_app(store, token=TOKEN, poll_seconds=0.05), base_url="http://localhost") as c:
        yield c


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match is not None, "no CSRF field on the page"
    return match.group(1)


def log_in(client) -> None:
    csrf = csrf_of(client.get("/login").text)
    answer = client.post("/login", data={"token": TOKEN, "csrf": csrf, "next": "/"}, follow_redirects=False)
    assert answer.status_code == 303


def paused(store, pipeline=pause_app.long, arg: int = 1):
    handle = pipeline.trigger(arg, database=store)
    drive(store, pipeline)
    assert handle.status() == "paused"
    return handle


def test_the_run_page_shows_the_paused_step_and_resumes_it_with_csrf(client, store):
    handle = paused(store)
    expires = jobs_by_step(store, handle.id)["approve"]["pause_expires_ms"]
    anonymous = client.get(f"/runs/{handle.id}").text
    assert "Paused: waiting for resume" in anonymous and 'id="resume"' not in anonymous
    assert "paused: waiting for resume · the pause expires" in anonymous
    assert f'data-until-ms="{expires}"' in anonymous
    forged = client.post(f"/runs/{handle.id}/resume", data={"csrf": "made-up", "input": "1"},
                         follow_redirects=False)
    assert forged.status_code == 403 and handle.status() == "paused"

    log_in(client)
    page = client.get(f"/runs/{handle.id}").text
    assert 'id="resume"' in page and 'id="cancel"' in page
    csrf = csrf_of(page)
    bad = client.post(f"/runs/{handle.id}/resume", data={"csrf": csrf, "input": "{nope"}, follow_redirects=True)
    assert "Not resumed: the input is not valid JSON" in bad.text and handle.status() == "paused"
    done = client.post(f"/runs/{handle.id}/resume", data={"csrf": csrf, "input": '{"ok": true}'},
                       follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == f"/runs/{handle.id}"
    assert "Run resumed: approve runs now with the new input." in client.get(f"/runs/{handle.id}").text
    assert handle.status() == "running"
    drive(store, pause_app.long)
    assert handle.output() == {"approved": {"ok": True}}
    again = client.post(f"/runs/{handle.id}/resume", data={"csrf": csrf}, follow_redirects=True)
    assert f"Not resumed: run {handle.id} is completed; only a paused run can be resumed" in again.text


def test_the_api_resumes_with_a_bearer_token_once(client, store):
    handle = paused(store, pause_app.chain, 6)
    url = f"/api/runs/{handle.id}/resume"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert client.post(url).status_code == 401
    assert client.post(url, headers=auth, content=b"[1]").json() == {
        "error": "request body must be a JSON object, got list", "status": 400}
    assert client.post(url, headers=auth, json={"inputs": 1}).json() == {
        "error": "unknown field(s) ['inputs']; the only field is 'input'", "status": 422}
    assert client.post("/api/runs/" + "a" * 32 + "/resume", headers=auth).status_code == 404
    assert handle.status() == "paused"
    answer = client.post(url, headers=auth, json={"input": "approved"})
    assert (answer.status_code, answer.json()) == (200, {"run_id": handle.id, "resumed": True, "steps": ["approve"]})
    conflict = client.post(url, headers=auth, json={})
    assert (conflict.status_code, conflict.json()["error"]) == (
        409, f"run {handle.id} is running; only a paused run can be resumed")
    drive(store, pause_app.chain)
    assert handle.output() == {"approved": "approved"}
    schema = client.get("/api/openapi.json").json()
    assert schema["paths"]["/api/runs/{run_id}/resume"]["post"]["summary"] == (
        "Resume a paused run: its paused step runs now, optionally with a new input.")


def test_a_run_failed_by_an_expired_pause_explains_why(client, store):
    import time

    from ductline.engine import stop as abort

    handle = paused(store, pause_app.expiring)
    time.sleep(1.05)
    assert abort.expire_due(store, {}) == 1  # the pipeline is not loaded here: the reason still reads right
    page = client.get(f"/runs/{handle.id}").text
    assert "Failed: pause expired" in page
    assert "The pause before step &#39;approve&#39; expired after 1 s without a resume, so the run failed " \
           "closed." in page

"""The dashboard on a run that waits for an event (both backends): the run page
shows the waiting step and its event; the Send event form needs the token and the
session's CSRF token; the JSON API sends with a bearer token (409 for a finished
run, nothing written); the API's run lists the events sent."""

from __future__ import annotations

import re

import events_app
import pytest
from helpers import drive
from starlette.testclient import TestClient

from ductline.web import create_app

TOKEN = "events-dashboard-token"


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


def waiting(store, arg: int = 1):
    handle = events_app.orders.trigger(arg, database=store)
    assert drive(store, events_app.orders) == ["prepare"]
    return handle


def test_the_run_page_shows_the_wait_and_sends_the_event_with_csrf(client, store):
    handle = waiting(store)
    anonymous = client.get(f"/runs/{handle.id}").text
    assert "waiting for event <code>paid</code> · no timeout" in anonymous and 'id="send"' not in anonymous
    assert "Running: waiting for an event" in anonymous and "Its wait has no timeout." in anonymous
    forged = client.post(f"/runs/{handle.id}/send", data={"csrf": "made-up", "event": "paid", "data": "1"},
                         follow_redirects=False)
    assert forged.status_code == 403 and store.run_events(handle.id) == []

    log_in(client)
    page = client.get(f"/runs/{handle.id}").text
    assert 'id="send"' in page and '<option value="paid">paid</option>' in page
    csrf = csrf_of(page)
    bad = client.post(f"/runs/{handle.id}/send", data={"csrf": csrf, "event": "paid", "data": "{nope"},
                      follow_redirects=True)
    assert "Not sent: the data is not valid JSON" in bad.text and store.run_events(handle.id) == []
    done = client.post(f"/runs/{handle.id}/send", data={"csrf": csrf, "event": "paid", "data": '{"ok": true}',
                                                         "key": "k"}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == f"/runs/{handle.id}"
    assert "Event &#39;paid&#39; sent: step ship runs now." in client.get(f"/runs/{handle.id}").text
    again = client.post(f"/runs/{handle.id}/send", data={"csrf": csrf, "event": "paid", "data": "2", "key": "k"},
                        follow_redirects=True)
    assert "with this key was sent already: nothing changed." in again.text
    drive(store, events_app.orders)
    assert handle.output() == {"shipped": {"ok": True}}
    late = client.post(f"/runs/{handle.id}/send", data={"csrf": csrf, "event": "paid"}, follow_redirects=True)
    assert f"Not sent: run {handle.id} is completed; an event can be sent only to an unfinished run" in late.text
    assert len(store.run_events(handle.id)) == 1


def test_the_api_sends_with_a_bearer_token(client, store):
    handle = waiting(store, 6)
    url = f"/api/runs/{handle.id}/send"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert client.post(url, json={"event": "paid"}).status_code == 401
    assert client.post(url, headers=auth, content=b"[1]").json() == {
        "error": "request body must be a JSON object, got list", "status": 400}
    assert client.post(url, headers=auth, json={"event": "paid", "dta": 1}).json() == {
        "error": "unknown field(s) ['dta']; the fields are 'event', 'data' and 'key'", "status": 422}
    assert client.post(url, headers=auth, json={"data": 1}).status_code == 422
    assert client.post(url, headers=auth, json={"event": ""}).status_code == 422
    assert client.post("/api/runs/" + "a" * 32 + "/send", headers=auth, json={"event": "paid"}).status_code == 404
    assert store.run_events(handle.id) == []
    shown = client.get(f"/api/runs/{handle.id}").json()
    ship = next(s for s in shown["steps"] if s["step"] == "ship")
    assert (ship["status"], ship["waiting_for"], ship["wait_expires"]) == ("deferred", "paid", None)
    answer = client.post(url, headers=auth, json={"event": "paid", "data": {"amount": 4}, "key": "pay-1"})
    body = answer.json()
    assert (answer.status_code, body["duplicate"], body["step"], body["event"]) == (200, False, "ship", "paid")
    again = client.post(url, headers=auth, json={"event": "paid", "data": 5, "key": "pay-1"}).json()
    assert (again["duplicate"], again["event_id"], again["step"]) == (True, body["event_id"], None)
    drive(store, events_app.orders)
    assert handle.output() == {"shipped": {"amount": 4}}
    conflict = client.post(url, headers=auth, json={"event": "paid"})
    assert (conflict.status_code, conflict.json()["error"]) == (
        409, f"run {handle.id} is completed; an event can be sent only to an unfinished run "
             "(pending, running, paused or halted)")
    (event,) = client.get(f"/api/runs/{handle.id}").json()["events"]
    assert (event["name"], event["key"], event["data"], event["consumed_by"]) == ("paid", "pay-1", {"amount": 4},
                                                                                 "ship")
    schema = client.get("/api/openapi.json").json()
    assert schema["paths"]["/api/runs/{run_id}/send"]["post"]["summary"] == (
        "Send an event to a run: a step waiting for it runs now with its data; else it is kept.")


def test_a_run_failed_by_a_wait_that_timed_out_explains_why(client, store):
    import time

    from ductline.engine import stop

    handle = events_app.expiring.trigger(2, database=store)
    assert drive(store, events_app.expiring, skip=("slow_side",)) == ["prepare"]
    time.sleep(1.2)  # the wait's timeout (1 s) passes on the database clock
    assert stop.expire_waits(store, {"events_expiring": events_app.expiring.definition()}) == 1
    page = client.get(f"/runs/{handle.id}").text
    assert "Failed: event timed out" in page
    assert "The event &#39;paid&#39; awaited before step &#39;ship&#39; did not come within 1 s, so the run " \
           "failed." in page

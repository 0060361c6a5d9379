"""A run keeps at most ``max_kept_events`` events no wait has consumed: a send that
would keep one more is refused (`ductline.TooManyKeptEvents`: CLI exit 2, API 409)
and writes nothing; one that a waiting step consumes at once, and a repeat of a keyed
send, are never refused for it (both backends, and `ductline.local`)."""

from __future__ import annotations

import asyncio
import json

import events_app
import pytest
from helpers import drive, ductline_in_process
from starlette.testclient import TestClient

from ductline import InvalidStateError, TooManyKeptEvents
from ductline.local import start
from ductline.web import create_app

TOKEN = "cap-token"


def kept(store, run_id):
    return [(e["name"], json.loads(e["data"])) for e in store.run_events(run_id) if e["consumed_ms"] is None]


@pytest.fixture
def cap_of_three(monkeypatch):
    monkeypatch.setenv("DUCTLINE_MAX_KEPT_EVENTS", "3")


def test_a_send_over_the_cap_is_refused_and_loses_nothing(store, cap_of_three):
    handle = events_app.orders.trigger(1, database=store)   # not at its wait yet: sends are kept
    for n in range(3):
        assert handle.send(f"note{n}", n, key=f"k{n}").step is None
    with pytest.raises(TooManyKeptEvents, match=rf"run {handle.id} keeps 3 events that no wait has consumed yet, "
                                                r"the most it may \(max_kept_events = 3\); this event was refused") as refused:
        handle.send("paid", "too many")
    assert isinstance(refused.value, InvalidStateError)
    assert (refused.value.run_id, refused.value.kept, refused.value.limit) == (handle.id, 3, 3)
    assert kept(store, handle.id) == [("note0", 0), ("note1", 1), ("note2", 2)]
    again = handle.send("note1", "again", key="k1")   # a repeat of a keyed send writes nothing: not refused
    assert again.duplicate
    # The wait consumes nothing of these (it waits for "paid"), but a send it consumes
    # at once keeps nothing, so it goes through at the cap.
    assert drive(store, events_app.orders) == ["prepare"]
    assert handle.send("paid", {"amount": 3}).step == "ship"
    with pytest.raises(TooManyKeptEvents):
        handle.send("later", 1)
    assert drive(store, events_app.orders) == ["ship", "finish"]
    assert handle.output() == {"shipped": {"amount": 3}}
    assert len(store.run_events(handle.id)) == 4


def test_a_consumed_event_frees_its_place(store, monkeypatch):
    monkeypatch.setenv("DUCTLINE_MAX_KEPT_EVENTS", "1")
    handle = events_app.orders.trigger(1, database=store)
    handle.send("paid", "first")
    with pytest.raises(TooManyKeptEvents):
        handle.send("paid", "second")
    drive(store, events_app.orders, skip=("ship",))   # prepare: the wait consumes "first"
    assert kept(store, handle.id) == []
    assert handle.send("paid", "second").step is None  # kept: room again
    assert kept(store, handle.id) == [("paid", "second")]


def test_the_cli_refuses_with_exit_2_and_says_why(store, db_url, cap_of_three):
    handle = events_app.orders.trigger(1, database=store)
    for n in range(3):
        handle.send(f"note{n}", n)
    done = ductline_in_process("send", handle.id, "paid", "--data", "1", "--database", db_url)
    assert done.returncode == 2, done
    assert f"error: TooManyKeptEvents: run {handle.id} keeps 3 events" in done.stderr
    assert "max_kept_events = 3" in done.stderr
    assert kept(store, handle.id) == [("note0", 0), ("note1", 1), ("note2", 2)]


def test_the_api_answers_409_over_the_cap_and_413_over_the_payload_limit(store, monkeypatch, cap_of_three):
    monkeypatch.delenv("DUCTLINE_DASHBOARD_TOKEN", raising=False)
    handle = events_app.orders.trigger(1, database=store)
    url = f"/api/runs/{handle.id}/send"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(store, token=TOKEN, poll_seconds=0.05), base_url="http://localhost") as client:
        for n in range(3):
            assert client.post(url, headers=auth, json={"event": f"note{n}", "data": n}).status_code == 200
        over = client.post(url, headers=auth, json={"event": "paid", "data": 1})
        assert over.status_code == 409
        assert over.json()["error"].startswith(f"run {handle.id} keeps 3 events that no wait has consumed yet")
        monkeypatch.setenv("DUCTLINE_PAYLOAD_MAX_BYTES", "100")
        big = client.post(url, headers=auth, json={"event": "paid", "data": "x" * 200})
        assert big.status_code == 413
        assert "exceed the limit of 100 bytes (payload_max_bytes)" in big.json()["error"]
        schema = client.get("/api/openapi.json").json()["paths"]["/api/runs/{run_id}/send"]["post"]
        assert {"409", "413"} <= set(schema["responses"])
    assert kept(store, handle.id) == [("note0", 0), ("note1", 1), ("note2", 2)]


def test_a_local_run_keeps_at_most_the_cap(monkeypatch):
    monkeypatch.setenv("DUCTLINE_MAX_KEPT_EVENTS", "2")

    async def main():
        run = start(events_app.slow_orders, 1)   # its first step takes a second: these sends are kept
        run.send("a", 1)
        run.send("b", 2)
        with pytest.raises(TooManyKeptEvents, match=r"max_kept_events = 2"):
            run.send("paid", 3)
        run.cancel()
        return await run.result()

    assert asyncio.run(main()).status == "cancelled"

"""Starting a run from the JSON API with an idempotency ``key`` and a ``priority``
(both backends): the same checks as `Pipeline.trigger` with precise 422 messages, 201
with ``created: true`` for a new run, 200 with ``created: false`` and the active run
that holds the key."""

from __future__ import annotations

import json

import pytest
import rt_app  # noqa: F401 - registers rt_chain for the dashboard
from starlette.testclient import TestClient

from ductline.handle import RunHandle
from ductline.store import Store
from ductline.web import create_app

TOKEN = "start-key-priority-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
URL = "/api/pipelines/rt_chain/runs"


@pytest.fixture
def client(store, monkeypatch):
    monkeypatch.delenv("DUCTLINE_DASHBOARD_TOKEN", raising=False)
    with TestClient(create_app(store, token=TOKEN, poll_seconds=0.05), base_url="http://localhost") as c:
        yield c


def all_runs(store: Store) -> list[str]:
    return [r["id"] for r in store.list_runs(limit=1000)]


def test_a_key_starts_one_run_and_returns_it_while_it_is_active(client, store):
    first = client.post(URL, json={"args": [1], "key": "order-42"}, headers=AUTH)
    assert first.status_code == 201, first.text
    run_id = first.json()["run_id"]
    links = {"run": f"/api/runs/{run_id}", "page": f"/runs/{run_id}", "events": f"/api/runs/{run_id}/events"}
    assert first.json() == {"run_id": run_id, "pipeline": "rt_chain", "created": True, "links": links}
    assert first.headers["location"] == f"/api/runs/{run_id}"
    assert store.get_run(run_id)["idempotency_key"] == "order-42"

    again = client.post(URL, json={"args": [2], "key": "order-42", "priority": 5}, headers=AUTH)
    assert again.status_code == 200, again.text
    assert again.json() == {"run_id": run_id, "pipeline": "rt_chain", "created": False, "links": links}
    assert "location" not in again.headers
    assert all_runs(store) == [run_id]
    assert (store.get_run(run_id)["args"], store.get_run(run_id)["priority"]) == ("[1]", 0)

    other = client.post(URL, json={"args": [4], "key": "order-43"}, headers=AUTH)
    assert (other.status_code, other.json()["created"]) == (201, True)

    RunHandle(run_id, store).cancel()  # an ended run frees its key
    fresh = client.post(URL, json={"args": [3], "key": "order-42"}, headers=AUTH)
    assert (fresh.status_code, fresh.json()["created"]) == (201, True)
    assert fresh.json()["run_id"] not in (run_id, other.json()["run_id"])


def test_a_priority_overrides_the_pipelines_and_null_fields_are_absent(client, store):
    for priority in (-100, 7, 100):
        answer = client.post(URL, json={"args": [1], "priority": priority}, headers=AUTH)
        assert answer.status_code == 201, answer.text
        assert store.get_run(answer.json()["run_id"])["priority"] == priority
    plain = client.post(URL, json={"args": [1], "key": None, "priority": None}, headers=AUTH)
    assert plain.status_code == 201
    run = store.get_run(plain.json()["run_id"])
    assert (run["idempotency_key"], run["priority"]) == (None, 0)
    assert client.post(URL, json={"args": [1], "key": "k" * 1000}, headers=AUTH).status_code == 201


BAD = [
    ({"key": 5}, "key must be a JSON string, got 5"),
    ({"key": ["a"]}, 'key must be a JSON string, got ["a"]'),
    ({"key": ""}, "key must be 1 to 1000 characters without NUL or lone surrogates, got 0 characters"),
    ({"key": "k" * 1001}, "key must be 1 to 1000 characters without NUL or lone surrogates, got 1001 characters"),
    ({"key": "a\x00b"}, "key must be 1 to 1000 characters without NUL or lone surrogates, got 3 characters with a NUL"),
    ({"key": "a\ud800"}, "key must be 1 to 1000 characters without NUL or lone surrogates, "
                          "got 2 characters with a lone surrogate"),
    ({"priority": 1.5}, "priority must be a whole number from -100 to 100 (a JSON integer), got 1.5"),
    ({"priority": True}, "priority must be a whole number from -100 to 100 (a JSON integer), got true"),
    ({"priority": "5"}, 'priority must be a whole number from -100 to 100 (a JSON integer), got "5"'),
    ({"priority": 101}, "priority must be from -100 to 100, got 101"),
    ({"priority": -101}, "priority must be from -100 to 100, got -101"),
    ({"prio": 1}, "unknown field(s) 'prio'; allowed: args, delay, delay_until, timeout, key, priority, tags"),
]


@pytest.mark.parametrize("body,message", BAD, ids=[m for _, m in BAD])
def test_a_bad_key_or_priority_gets_a_precise_422_and_writes_nothing(client, store, body, message):
    answer = client.post(URL, content=json.dumps(body).encode(), headers={**AUTH, "Content-Type": "application/json"})
    assert (answer.status_code, answer.json()) == (422, {"error": message, "status": 422})
    assert all_runs(store) == []


def test_the_openapi_schema_describes_key_priority_and_the_200(client):
    start = client.get("/api/openapi.json").json()["paths"]["/api/pipelines/{name}/runs"]["post"]
    props = start["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert props["key"] == {"type": "string", "minLength": 1, "maxLength": 1000,
                            "description": "idempotency key (no NUL or lone surrogate): while a run of the pipeline holding it is "
                                           "active, that run is returned (200, created: false) and nothing is "
                                           "started"}
    assert (props["priority"]["type"], props["priority"]["minimum"], props["priority"]["maximum"]) == (
        "integer", -100, 100)
    assert start["responses"]["201"]["description"] == "a run was started: {run_id, pipeline, created: true, links}"
    assert "created: false" in start["responses"]["200"]["description"]

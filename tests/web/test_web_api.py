"""The JSON API: the reads, starting a run with precise 4xx answers, the OpenAPI schema."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
import rt_app
import web_support
from web_support import TOKEN

from ductline.store import Store
from ductline.views import run_view

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def all_runs(store: Store) -> list[str]:
    return [r["id"] for r in store.list_runs(limit=1000)]


def test_runs_and_run_and_workers(client, seeded, sqlite_store: Store):
    listed = client.get("/api/runs").json()
    assert [r["run_id"] for r in listed["runs"]] == [seeded[k] for k in ("delayed", "running", "halted", "completed")]
    assert listed["next_cursor"] is None and listed["prev_cursor"] is None
    first = listed["runs"][2]
    assert first["status"] == "halted" and first["halt_reason"] == "job_retries_exhausted"
    assert set(first) >= {"run_id", "pipeline", "status", "created_at", "started_at", "finished_at"}
    assert client.get("/api/runs?status=halted&pipeline=rt_failing").json()["runs"][0]["run_id"] == seeded["halted"]

    one = client.get(f"/api/runs/{seeded['halted']}").json()
    shown = json.loads(json.dumps(run_view(sqlite_store, seeded["halted"])))
    # The fields of `ductline show --json`, plus outputs and failures of each step run.
    assert {k: v for k, v in one.items() if k not in ("steps", "failures")} == \
        {k: v for k, v in shown.items() if k != "steps"}
    assert [{k: v for k, v in step.items() if k not in ("output", "failures")} for step in one["steps"]] == \
        shown["steps"]
    assert one["failures"] == {"free": 2, "paid": 0, "deadline": 0} \
        and one["steps"][0]["failures"] == {"free": 2, "paid": 0, "deadline": 0}

    workers = client.get("/api/workers").json()
    (worker,) = workers["workers"]
    assert worker["id"] == web_support.WORKER and worker["health"] == "healthy" and worker["busy"] == 1
    assert worker["queues"] == ["default"]  # the queues it claims from

    overview = client.get("/api/overview").json()
    assert overview["runs"]["halted"] == 1 and overview["runs"]["failed"] == 0
    assert overview["jobs"] == {"ready": 2, "delayed": 1, "running": 1}


def test_bad_listing_queries_are_400_with_a_message(client, seeded):
    for query, words in (("status=nope", "unknown status"), ("after=%%%", "malformed cursor"),
                         ("limit=0", "limit must be"), ("limit=abc", "limit must be"),
                         ("limit=201", "limit must be"), ("after=1.a&before=1.b", "not both")):
        answer = client.get(f"/api/runs?{query}")
        assert answer.status_code == 400, query
        assert words in answer.json()["error"], query
    assert client.get("/api/runs/nope").status_code == 404
    assert client.get("/api/runs/nope").json()["error"] == \
        "run 'nope' not found (a prefix of a run id needs at least 6 characters)"


def test_start_a_run(client, sqlite_store: Store):
    before = sqlite_store.now_ms()
    answer = client.post("/api/pipelines/rt_chain/runs", json={"args": [4], "delay": 60, "timeout": 120},
                         headers=AUTH)
    assert answer.status_code == 201, answer.text
    run_id = answer.json()["run_id"]
    assert answer.headers["location"] == f"/api/runs/{run_id}"
    run = sqlite_store.get_run(run_id)
    assert (run["pipeline"], run["status"], run["args"], run["timeout_seconds"]) == ("rt_chain", "pending", "[4]", 120)
    assert run["not_before_ms"] >= before + 60_000

    when = datetime.now(timezone.utc) + timedelta(hours=1)
    later = client.post("/api/pipelines/rt_chain/runs", json={"args": [1], "delay_until": when.isoformat()},
                        headers=AUTH)
    assert later.status_code == 201
    assert abs(sqlite_store.get_run(later.json()["run_id"])["not_before_ms"] - when.timestamp() * 1000) < 2
    # An empty body starts a run without arguments (rt_context's first step takes any).
    empty = client.post("/api/pipelines/rt_context/runs", content=b"", headers=AUTH)
    assert empty.status_code == 201 and sqlite_store.get_run(empty.json()["run_id"])["args"] == "[]"


PAST = (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()
BAD_BODIES = [
    (b"{not json", 400, "not valid JSON"),
    (b"[1, 2]", 400, "must be a JSON object, got list"),
    (json.dumps({"argz": []}).encode(), 422, "unknown field(s) 'argz'"),
    (json.dumps({"args": 5}).encode(), 422, "args must be a JSON list"),
    (json.dumps({"delay": 1.5}).encode(), 422, "delay must be a whole number of seconds"),
    (json.dumps({"delay": "5m"}).encode(), 422, "delay must be a whole number of seconds"),
    (json.dumps({"delay": True}).encode(), 422, "delay must be a whole number of seconds"),
    (json.dumps({"delay": -1}).encode(), 422, "delay must be at least 0 seconds"),
    (json.dumps({"timeout": 0}).encode(), 422, "timeout must be at least 1 second"),
    (json.dumps({"delay": 5, "delay_until": "2099-01-01T00:00:00+00:00"}).encode(), 422, "not both"),
    (json.dumps({"delay_until": "2099-01-01T00:00:00"}).encode(), 422, "has no UTC offset"),
    (json.dumps({"delay_until": "tomorrow"}).encode(), 422, "is not ISO 8601"),
    (json.dumps({"delay_until": 12}).encode(), 422, "must be an ISO 8601 string"),
    (json.dumps({"args": [1], "delay_until": PAST}).encode(), 422, "delay_until is in the past"),
    (json.dumps({"args": [1, 2]}).encode(), 422, "step 'add_one' cannot take its arguments"),
    (json.dumps({"args": [{"__ductline__": "x"}]}).encode(), 422, "reserved by ductline"),
    (b"\xff\xfe", 400, "not UTF-8"),
    (b'{"args": ["' + b"x" * 1_100_000 + b'"]}', 413, "the limit is 1048576"),
]


@pytest.mark.parametrize("body,status,words", BAD_BODIES, ids=[w for _, _, w in BAD_BODIES])
def test_bad_start_input_gets_a_precise_4xx_and_writes_nothing(client, seeded, sqlite_store: Store, body, status,
                                                                words):
    before = all_runs(sqlite_store)
    answer = client.post("/api/pipelines/rt_chain/runs", content=body,
                         headers={**AUTH, "Content-Type": "application/json"})
    assert answer.status_code == status, answer.text
    assert words in answer.json()["error"]
    assert all_runs(sqlite_store) == before


def test_starting_needs_the_bearer_token_and_a_known_pipeline(make_client, seeded, sqlite_store: Store):
    client = make_client()
    before = all_runs(sqlite_store)
    missing = client.post("/api/pipelines/rt_chain/runs", json={})
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in missing.json()["error"]
    wrong = client.post("/api/pipelines/rt_chain/runs", json={}, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    basic = client.post("/api/pipelines/rt_chain/runs", json={}, headers={"Authorization": f"Basic {TOKEN}"})
    assert basic.status_code == 401
    unknown = client.post("/api/pipelines/no_such_pipeline/runs", json={}, headers=AUTH)
    assert unknown.status_code == 404 and "--app" in unknown.json()["error"]
    read_only = make_client(token=None).post("/api/pipelines/rt_chain/runs", json={}, headers=AUTH)
    assert read_only.status_code == 403 and "read-only" in read_only.json()["error"]
    assert all_runs(sqlite_store) == before


def test_a_logged_in_browser_session_is_not_a_bearer_token(client, seeded, sqlite_store: Store):
    from test_web_actions import log_in

    log_in(client)
    assert client.post("/api/pipelines/rt_chain/runs", json={}).status_code == 401
    assert client.post(f"/api/runs/{seeded['halted']}/retry").status_code == 401


def test_retry_and_cancel_through_the_api(client, seeded, sqlite_store: Store):
    assert client.post(f"/api/runs/{seeded['completed']}/retry", headers=AUTH).status_code == 409
    answer = client.post(f"/api/runs/{seeded['halted']}/retry", headers=AUTH)
    assert answer.status_code == 200 and answer.json() == {"run_id": seeded["halted"], "revived": True}
    assert sqlite_store.get_run(seeded["halted"])["status"] == "running"
    assert client.post("/api/runs/nope/retry", headers=AUTH).status_code == 404
    assert client.post(f"/api/runs/{seeded['running']}/cancel", headers=AUTH).json()["cancelled"] is True
    assert client.post(f"/api/runs/{seeded['running']}/cancel", headers=AUTH).status_code == 409


def test_the_api_retries_a_crossed_step_only_when_forced_by_name(client, sqlite_store: Store):
    handle = web_support.halted_after_a_boundary(sqlite_store)
    assert sqlite_store.get_run(handle.id)["halt_reason"] == "unsafe_to_retry"
    plain = client.post(f"/api/runs/{handle.id}/retry", headers=AUTH)
    assert plain.status_code == 409
    assert "pays_then_fails" in plain.json()["error"] and "?force=STEP" in plain.json()["error"]
    assert sqlite_store.get_run(handle.id)["status"] == "halted"
    wrong = client.post(f"/api/runs/{handle.id}/retry?force=nope", headers=AUTH)
    assert wrong.status_code == 409 and sqlite_store.get_run(handle.id)["status"] == "halted"
    forced = client.post(f"/api/runs/{handle.id}/retry?force=pays_then_fails", headers=AUTH)
    assert forced.status_code == 200 and forced.json() == {"run_id": handle.id, "revived": True}
    assert sqlite_store.get_run(handle.id)["status"] == "running"


def test_pipelines_lists_known_and_stored_ones(client, seeded):
    pipelines = {p["name"]: p for p in client.get("/api/pipelines").json()["pipelines"]}
    assert pipelines["rt_chain"]["known"] is True
    assert pipelines["rt_chain"]["steps"] == ["add_one", "double", "async_square"]
    assert pipelines["rt_failing"]["runs"]["halted"] == 1


def test_openapi_schema_describes_the_api(client):
    schema = client.get("/api/openapi.json").json()
    assert schema["openapi"].startswith("3.")
    paths = schema["paths"]
    assert {"/api/runs", "/api/runs/{run_id}", "/api/runs/{run_id}/events", "/api/workers",
            "/api/pipelines/{name}/runs"} <= set(paths)
    start = paths["/api/pipelines/{name}/runs"]["post"]
    assert set(start["requestBody"]["content"]["application/json"]["schema"]["properties"]) == \
        {"args", "delay", "delay_until", "timeout", "key", "priority", "tags"}
    assert "422" in start["responses"] and start["summary"].startswith("Start a run")
    assert [p["name"] for p in paths["/api/runs"]["get"]["parameters"]] == ["status", "pipeline", "tag", "after",
                                                                           "before", "limit", "parent"]
    assert "/" not in paths and "/runs/{run_id}" not in paths  # pages are not API


def test_started_run_is_visible_to_the_store(client, sqlite_store: Store):
    run_id = client.post("/api/pipelines/rt_failing/runs", json={"args": [1]}, headers=AUTH).json()["run_id"]
    (job,) = web_support.claim(sqlite_store, rt_app.failing)
    assert job.run_id == run_id


def test_every_run_path_takes_a_unique_prefix_as_the_cli_does(client, seeded, sqlite_store: Store):
    running = seeded["running"]
    assert client.get(f"/api/runs/{running[:8]}/logs").status_code == 200
    events = client.get(f"/api/runs/{seeded['halted'][:8]}/events")
    assert events.status_code == 200 and "workflow_end" in events.text
    answer = client.post(f"/api/runs/{running[:8]}/cancel", headers=AUTH)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"run_id": running, "cancelled": True}
    assert sqlite_store.get_run(running)["status"] == "cancelled"
    retried = client.post(f"/api/runs/{seeded['halted'][:8]}/retry", headers=AUTH)
    assert retried.status_code == 200, retried.text
    missing = client.post("/api/runs/" + "0" * 32 + "/cancel", headers=AUTH)
    assert missing.status_code == 404 and "not found" in missing.json()["error"]
    short = client.post("/api/runs/abc/cancel", headers=AUTH)
    assert short.status_code == 404 and "at least 6 characters" in short.json()["error"]

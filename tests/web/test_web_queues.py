"""The dashboard's queues and versions: the overview's queue table, a step that waits
for a worker none of the live ones is, a run's definition, and the move API."""

from __future__ import annotations

from pathlib import Path
import sys

from ductline.store import Store
from ductline.store.records import LoadedDefinition
from web_support import TOKEN

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.apps import queue_app  # noqa: E402
from tests.versions.version_support import V1, V2, v1  # noqa: E402

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_the_overview_lists_each_queue_with_its_ready_jobs_and_live_workers(client, sqlite_store: Store) -> None:
    queue_app.licensed.trigger(1, database=sqlite_store)  # its first step waits in "licence"
    sqlite_store.register_worker("w1", "h", 1, 2, queues=["default"])
    page = client.get("/")
    assert page.status_code == 200
    text = page.text
    assert 'data-queue="licence"' in text and 'data-queue="default"' in text
    licence = text[text.index('data-queue="licence"'):].split("</tr>")[0]
    assert "<td>1</td>" in licence and "none" in licence  # one ready job, no live worker


def test_a_run_page_says_why_a_step_waits_and_shows_the_definition(client, sqlite_store: Store) -> None:
    run = queue_app.licensed.trigger(1, database=sqlite_store)
    page = client.get(f"/runs/{run.id}")
    assert "no live worker serves queue &#39;licence&#39;" in page.text, page.text
    assert queue_app.licensed.definition().fingerprint in page.text
    sqlite_store.register_worker("w1", "h", 1, 2, queues=["licence"])
    assert "no live worker serves" not in client.get(f"/runs/{run.id}").text


def test_the_api_moves_runs_and_refuses_a_move_that_leaves_a_job_without_a_step(client, sqlite_store: Store,
                                                                                make_client) -> None:
    run = v1.versioned.trigger(1, database=sqlite_store)
    body = {"from": V1.fingerprint, "to": V2.fingerprint[:8]}
    assert client.post("/api/runs/move", json=body).status_code == 401
    assert make_client(token=None).post("/api/runs/move", json=body, headers=AUTH).status_code == 403
    assert client.post("/api/runs/move", json=body, headers=AUTH).status_code == 404  # v2 not loaded yet
    sqlite_store.register_worker("w-new", "h", 1, 1, definitions=[LoadedDefinition.of(V2)])
    assert client.post("/api/runs/move", json={**body, "map": {"a": "zz"}}, headers=AUTH).status_code == 409
    assert client.post("/api/runs/move", json={**body, "map": [1]}, headers=AUTH).status_code == 400
    moved = client.post("/api/runs/move", json={**body, "map": {"b": "b2"}}, headers=AUTH)
    assert moved.status_code == 200, moved.text
    assert moved.json()["moved"] == [run.id] and moved.json()["to"] == V2.fingerprint
    assert sqlite_store.get_run(run.id)["definition"] == V2.fingerprint
    page = client.get(f"/runs/{run.id}").text
    assert f"{V1.fingerprint} → {V2.fingerprint} at " in page, page  # its only job, a, kept its name

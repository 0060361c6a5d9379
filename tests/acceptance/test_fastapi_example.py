"""The FastAPI example: a request starts a run, a real worker runs it, the request
answers with its result; a malformed body starts nothing."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import start_worker, stop_worker

EXAMPLE = Path(__file__).parents[2] / "examples" / "fastapi_service.py"


def test_a_request_triggers_a_run_and_answers_with_its_result(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path}/service.db"
    monkeypatch.setenv("DUCTLINE_DATABASE_URL", url)
    monkeypatch.setenv("WORD_STATS_WAIT", "180")  # a loaded machine: bound a failure only
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        import fastapi_service
        from fastapi.testclient import TestClient

        worker = start_worker(url, app=str(EXAMPLE))
        try:
            with TestClient(fastapi_service.app) as client:
                answer = client.post("/stats", json={"text": "to be or not to be"})
                assert answer.status_code == 200, answer.text
                body = answer.json()
                assert (body["words"], body["letters"], body["longest"]) == (6, 13, 3)
                assert len(body["run_id"]) == 32
                refused = client.post("/stats", json={"words": 1})
                assert refused.status_code == 422  # the body is validated before any run starts
        finally:
            stop_worker(worker)
    finally:
        sys.path.remove(str(EXAMPLE.parent))

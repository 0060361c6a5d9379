"""The FastAPI example: a request starts a run, a real worker runs it, the request
answers with its result; a malformed body starts nothing; the lifespan opens the
database at startup (an unmigrated PostgreSQL stops the service there) and closes it
at shutdown; the async client drives the application with its lifespan."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from asgi_lifespan import LifespanManager

from ductline import SchemaError
from helpers import start_worker, stop_worker

EXAMPLE = Path(__file__).parents[2] / "examples" / "fastapi_service.py"


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("WORD_STATS_WAIT", "180")  # a loaded machine: bound a failure only
    monkeypatch.syspath_prepend(str(EXAMPLE.parent))
    import fastapi_service

    yield fastapi_service
    sys.modules.pop("fastapi_service", None)


def test_a_request_triggers_a_run_and_answers_with_its_result(db_url: str, service: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    monkeypatch.setenv("DUCTLINE_DATABASE_URL", db_url)
    worker = start_worker(db_url, app=str(EXAMPLE))
    try:
        with TestClient(service.app) as client:  # runs the lifespan
            answer = client.post("/stats", json={"text": "to be or not to be"})
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert (body["words"], body["letters"], body["longest"]) == (6, 13, 3)
            assert len(body["run_id"]) == 32
            later = client.get(f"/stats/{body['run_id']}")
            assert later.status_code == 200 and later.json() == body
            refused = client.post("/stats", json={"words": 1})
            assert refused.status_code == 422  # the body is validated before any run starts
            assert client.get("/stats/" + "0" * 32).status_code == 404
    finally:
        stop_worker(worker)


def test_the_async_client_sends_requests_at_once_through_the_lifespan(db_url: str, service: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUCTLINE_DATABASE_URL", db_url)
    texts = ["to be or not to be", "that is the question", "whether tis nobler"]

    async def scenario() -> list[httpx.Response]:
        async with LifespanManager(service.app) as manager:
            transport = httpx.ASGITransport(app=manager.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
                # Three requests wait for their runs at the same time: the handlers
                # wait in threads, never on the event loop.
                return list(await asyncio.gather(*(client.post("/stats", json={"text": t}) for t in texts)))

    worker = start_worker(db_url, app=str(EXAMPLE))
    try:
        answers = asyncio.run(scenario())
    finally:
        stop_worker(worker)
    assert [a.status_code for a in answers] == [200, 200, 200], [a.text for a in answers]
    assert [a.json()["words"] for a in answers] == [len(t.split()) for t in texts]
    assert len({a.json()["run_id"] for a in answers}) == 3


def test_an_unmigrated_postgresql_stops_the_service_at_startup(empty_pg_url: str, service: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUCTLINE_DATABASE_URL", empty_pg_url)

    async def start() -> None:
        async with LifespanManager(service.app):
            raise AssertionError("the service started")

    with pytest.raises(SchemaError, match="ductline migrate"):
        asyncio.run(start())

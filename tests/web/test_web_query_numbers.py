"""Numbers in the API's query strings and headers are ASCII digits only: other
scripts' digits (``١٢``) and superscripts (``²``), which ``str.isdigit`` takes, are a
400 that names the parameter, never a misread value or a 500."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import pytest
from web_support import TOKEN

UNICODE_DIGITS = ["١٢", "²", "１", "٣"]


@pytest.mark.parametrize("digits", UNICODE_DIGITS)
def test_a_limit_in_other_digits_is_a_400_naming_it(client, seeded, digits):
    answer = client.get(f"/api/runs?limit={quote(digits)}")
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == f"limit must be an integer from 1 to 200, got {digits!r}"
    # The same limit in ASCII digits still reads.
    assert len(client.get("/api/runs?limit=1").json()["runs"]) == 1


@pytest.mark.parametrize("digits", UNICODE_DIGITS)
def test_a_cursor_in_other_digits_is_malformed(client, seeded, digits):
    answer = client.get(f"/api/runs?after={quote(digits)}.{seeded['completed']}")
    assert answer.status_code == 400, answer.text
    assert "malformed cursor" in answer.json()["error"]


@pytest.mark.parametrize("digits", UNICODE_DIGITS)
def test_events_since_in_other_digits_is_a_400_before_the_stream(client, seeded, digits):
    answer = client.get(f"/api/runs/{seeded['completed']}/events?since={quote(digits)}")
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == f"since must be milliseconds since the epoch, got {digits!r}"


def test_events_since_past_a_64_bit_count_is_a_400(client, seeded):
    answer = client.get(f"/api/runs/{seeded['completed']}/events?since={'9' * 30}")
    assert answer.status_code == 400 and "since must be milliseconds" in answer.json()["error"]


def test_a_content_length_in_other_digits_is_no_crash(make_client, seeded, sqlite_store):
    # Header values are Latin-1 bytes: '\xb2' is '²', which str.isdigit takes and int()
    # refuses. Sent to the app as an HTTP server hands it over (a test client would
    # re-encode it); the body's own count still holds the limit.
    app = make_client().app
    sent, answer = [{"type": "http.request", "body": b'{"args": [1]}', "more_body": False}], []

    async def receive() -> dict[str, Any]:
        return sent.pop(0) if sent else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        answer.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/api/pipelines/rt_chain/runs", "raw_path": b"/api/pipelines/rt_chain/runs",
             "query_string": b"", "root_path": "", "server": ("localhost", 80), "client": ("127.0.0.1", 1),
             "headers": [(b"host", b"localhost"), (b"authorization", f"Bearer {TOKEN}".encode()),
                         (b"content-type", b"application/json"), (b"content-length", b"\xb2")]}
    asyncio.run(app(scope, receive, send))
    assert answer[0]["status"] == 201, answer
    assert len(sqlite_store.list_runs(limit=100)) == len(seeded) + 1

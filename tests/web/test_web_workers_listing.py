"""``GET /api/workers`` and the overview page list the live workers and those
stopped or lost within the last 15 minutes; ``?all=1`` (``?workers=all`` on the
page) lists every row (`ductline.model.workers.shown_within_ms`)."""

from __future__ import annotations

from workers_support import EVERY, RECENT, seed_workers


def test_api_and_overview_hide_long_gone_workers_unless_asked(sqlite_store, client) -> None:
    seed_workers(sqlite_store)
    assert {w["id"] for w in client.get("/api/workers").json()["workers"]} == RECENT
    assert {w["id"] for w in client.get("/api/workers?all=1").json()["workers"]} == EVERY
    page = client.get("/").text
    assert 'data-worker="w-stopped-now"' in page and 'data-worker="w-stopped-old"' not in page
    assert 'href="?workers=all"' in page
    everything = client.get("/?workers=all").text
    assert 'data-worker="w-stopped-old"' in everything and 'data-worker="w-lost-old"' in everything

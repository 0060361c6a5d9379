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


def test_api_workers_reads_all_as_yes_or_no_and_refuses_anything_else(sqlite_store, client) -> None:
    """``?all=yes`` listed only the recent workers: a value it did not know was read as no."""
    seed_workers(sqlite_store)
    for yes in ("1", "true", "yes", "TRUE"):
        assert {w["id"] for w in client.get(f"/api/workers?all={yes}").json()["workers"]} == EVERY
    for no in ("0", "false", "no", ""):
        assert {w["id"] for w in client.get(f"/api/workers?all={no}").json()["workers"]} == RECENT
    refused = client.get("/api/workers?all=maybe")
    assert refused.status_code == 400 and "all must be one of 1, true, yes, 0, false, no" in refused.text

"""Which worker rows a listing shows (`ductline.model.workers.shown_within_ms`):
``ductline workers``, the dashboard's reader and ``GET /api/workers`` show the live
workers and those stopped or lost within the last 15 minutes; ``--all`` (``?all=1``)
shows every row. Both backends."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from ductline.observability.command import workers
from ductline.web.reader import DashboardReader
from workers_support import EVERY, RECENT, seed_workers

def listed(db_url: str, *args: str) -> dict[str, str]:
    result = CliRunner().invoke(workers, ["--json", *args, "--database", db_url],
                                env={"DUCTLINE_LEASE_SECONDS": "30"})
    assert result.exit_code == 0, result.output
    return {w["id"]: w["health"] for w in json.loads(result.stdout)}


def test_workers_lists_live_and_recently_gone_ones_and_all_with_a_flag(store, db_url) -> None:
    seed_workers(store)
    shown = listed(db_url)
    assert set(shown) == RECENT, shown
    assert (shown["w-live"], shown["w-stopped-now"], shown["w-lost-now"]) == ("healthy", "stopped", "lost")
    assert set(listed(db_url, "--all")) == EVERY


def test_the_dashboard_reader_applies_the_same_rule(store) -> None:
    seed_workers(store)
    reader = DashboardReader(store)
    assert {w["id"] for w in reader.workers(30)} == RECENT
    assert {w["id"] for w in reader.workers(30, everything=True)} == EVERY


def test_a_lease_longer_than_the_window_keeps_every_live_worker(store) -> None:
    seed_workers(store)
    # With a three-hour lease the two-hour-old silent worker is late, not lost: still live, still shown.
    shown = {w["id"]: w["health"] for w in DashboardReader(store).workers(3 * 3600)}
    assert shown["w-lost-old"] == "late"

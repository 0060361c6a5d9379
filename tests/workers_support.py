"""Worker rows of every age for the tests of which workers a listing shows."""

from __future__ import annotations

from typing import Any

TWO_HOURS_MS = 2 * 3600 * 1000
RECENT = {"w-live", "w-stopped-now", "w-lost-now"}
EVERY = RECENT | {"w-stopped-old", "w-lost-old"}


def seed_workers(store: Any) -> None:
    """A live worker, one stopped and one lost a minute ago, one stopped and one lost two hours ago."""
    for name in sorted(EVERY):
        store.register_worker(name, "host-a", 100 + len(name), 2)
    store.worker_stopped("w-stopped-now")
    store.worker_stopped("w-stopped-old")
    with store.dialect.transaction() as s:  # ages their last heartbeat, as time would
        conn = getattr(s, "_conn")
        conn.execute(f"UPDATE ductline_workers SET heartbeat_ms = heartbeat_ms - {TWO_HOURS_MS}, "
                     f"started_ms = started_ms - {TWO_HOURS_MS} WHERE id IN ('w-stopped-old', 'w-lost-old')")
        conn.execute("UPDATE ductline_workers SET heartbeat_ms = heartbeat_ms - 60000 WHERE id = 'w-lost-now'")

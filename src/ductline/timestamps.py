"""The one text form of ductline's own times in what the CLI and the API give out:
ISO 8601 in UTC to the millisecond, ending in ``Z`` (``2030-01-02T09:04:05.120Z``).
Stored times stay epoch milliseconds; a user's own values (a step's ``datetime``
output) keep their offset."""

from __future__ import annotations

from datetime import datetime, timezone


def iso(ms: int | float | None) -> str | None:
    """Epoch milliseconds as ``2030-01-02T09:04:05.120Z``; ``None`` for ``None``."""
    if ms is None:
        return None
    return datetime.fromtimestamp(int(ms) / 1000, tz=timezone.utc).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")

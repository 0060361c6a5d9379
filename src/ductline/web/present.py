"""Formatting for people on call: times, ages, durations, previews (Jinja filters)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ductline import timestamps
from ductline.safetext import printable
from ductline.store import payloads
from ductline.web import values
from ductline.web.reader import COUNT_CAP

PREVIEW_CHARS = 240
FULL_CHARS = 20_000


def clock(ms: int | None) -> str:
    """``2030-01-02 09:04:05 UTC`` (to the second; the title attribute has milliseconds)."""
    if ms is None:
        return "—"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(ms: int | None) -> str:
    """`ductline.timestamps.iso`, ``""`` for ``None``."""
    return timestamps.iso(ms) or ""


def duration(ms: int | float | None) -> str:
    """``850 ms``, ``4.2 s``, ``3 m 07 s``, ``2 h 05 m``, ``3 d 4 h``."""
    if ms is None:
        return "—"
    ms = max(0, int(ms))
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    s = int(seconds)
    if s < 3600:
        return f"{s // 60} m {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} m"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def ago(ms: int | None, now_ms: int) -> str:
    """``5 s ago`` / ``in 3 m 00 s`` against the database clock."""
    if ms is None:
        return ""
    delta = now_ms - ms
    return f"{duration(delta)} ago" if delta >= 0 else f"in {duration(-delta)}"


def short_id(run_id: str) -> str:
    return run_id[:12]


def preview(text: str | None, limit: int = PREVIEW_CHARS) -> str:
    """A stored value (JSON text) on one line as `ductline.web.values` shows it, cut
    at ``limit`` characters; a value stored out of line shows as ``<payload 3.2 MiB>``
    (its size, never its content)."""
    if text is None:
        return ""
    return values.text(values.decode(text), limit)


def pretty(text: str | None, limit: int = FULL_CHARS) -> str:
    """A stored value laid out over lines for reading (`ductline.web.values.pretty`),
    cut at ``limit`` characters (an out-of-line value: ``<payload 3.2 MiB>``; the page
    links to its download)."""
    if text is None:
        return ""
    return values.pretty(values.decode(text), limit)


def payload_id(text: str | None) -> str:
    """The payload id when ``text`` is an out-of-line reference, else ``""``."""
    ref = payloads.parse_reference(text)
    return "" if ref is None else ref.id


def dumps(value: Any) -> str:
    """A decoded value (the run's metadata) laid out for reading (`ductline.web.values.pretty`)."""
    return values.pretty(value)


def text(value: object) -> object:
    """Any text for a page, made safe to show (`ductline.safetext.printable`): the
    templates' finalizer, so every ``{{ expression }}`` goes through it."""
    if type(value) is str:  # noqa: E721 - Markup (a str subclass) is already HTML
        return printable(value)
    return value


def count(n: int) -> str:
    """A run count of the overview: above the reader's cap it reads "1,000+"."""
    return f"{COUNT_CAP:,}+" if n > COUNT_CAP else str(n)


FILTERS = {"count": count, "clock": clock, "iso": iso, "duration": duration, "short_id": short_id, "preview": preview,
           "pretty": pretty, "dumps": dumps, "payload_id": payload_id}

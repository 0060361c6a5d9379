"""The JSON API's table in the dashboard guide lists every route the API serves, with
its method, and names nothing the API does not serve."""

from __future__ import annotations

import re
from pathlib import Path

from ductline.web.api import routes

PAGE = Path(__file__).resolve().parents[2] / "docs" / "howto" / "dashboard.md"
UNLISTED = {"/api/openapi.json"}  # named in the section's text


def served() -> set[str]:
    return {f"{method} {route.path}" for route in routes if route.path not in UNLISTED
            for method in sorted(route.methods or ()) if method != "HEAD"}


def listed() -> set[str]:
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## JSON API"):]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    found = set()
    for row in rows:
        for method, path in re.findall(r"`(GET|POST|PUT|DELETE) (/[^`?]*)", row.split(" | ")[0]):
            found.add(f"{method} {path}")
    return found


def test_every_route_is_in_the_table_and_every_row_is_served():
    assert served() - listed() == set(), "routes missing from docs/howto/dashboard.md's API table"
    assert listed() - served() == set(), "rows of the API table the API does not serve"

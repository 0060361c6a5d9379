"""Docstrings and comments cite documents a reader of the repository can open: every
``docs/...md`` path named in src/ exists, and every section named with it (``"Title"``
right after the path) begins a heading of that page."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "src" / "ductline").rglob("*.py"))
# docs/howto/timeouts.md, "How the kill works"  (the section is optional; a line break
# inside the reference is allowed)
REFERENCE = re.compile(r'(docs/[\w/.-]+\.md)(?:,\s*"([^"]+)")?')


def _headings(page: Path) -> set[str]:
    return {line.lstrip("#").strip() for line in page.read_text().splitlines() if line.startswith("#")}


def test_cited_pages_and_sections_exist() -> None:
    broken = []
    cited = 0
    for source in SOURCES:
        text = source.read_text()
        for match in REFERENCE.finditer(text):
            cited += 1
            page = ROOT / match.group(1)
            where = f"{source.relative_to(ROOT)}: {match.group(0)!r}"
            if not page.is_file():
                broken.append(f"{where} (no such page)")
            elif match.group(2) and not any(h.startswith(" ".join(match.group(2).split())) for h in _headings(page)):
                broken.append(f"{where} (no such section)")
    assert cited > 0
    assert not broken, "\n".join(broken)


def test_no_reference_to_documents_outside_the_repository() -> None:
    outside = [str(s.relative_to(ROOT)) for s in SOURCES if "DESIGN.md" in s.read_text()]
    assert not outside

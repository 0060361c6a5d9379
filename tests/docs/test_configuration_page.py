"""The configuration reference lists every setting with its environment variable."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from ductline.config import Settings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "configuration.md"


def test_every_setting_is_documented_with_its_variable() -> None:
    text = PAGE.read_text()
    missing = [f.name for f in fields(Settings)
               if f"| `{f.name}` | `DUCTLINE_{f.name.upper()}` |" not in text]
    assert not missing, f"settings missing from {PAGE.name}: {missing}"

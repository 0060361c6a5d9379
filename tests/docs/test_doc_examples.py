"""Every ```python block of the how-to pages runs as it is, as a script of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).parents[2] / "docs"
PAGES = ("logs.md", "testing.md", "health.md")
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks():
    for page in PAGES:
        for number, match in enumerate(BLOCK.finditer((DOCS / page).read_text()), 1):
            yield pytest.param(match.group(1), id=f"{page}#{number}")


@pytest.mark.parametrize("code", list(blocks()))
def test_block_runs(code, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCTLINE_")}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_page_has_a_block():
    assert len(list(blocks())) >= len(PAGES)

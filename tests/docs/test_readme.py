"""The README's two commands stay exactly as CI and users run them, and every page
it links to exists."""

from __future__ import annotations

import re
from pathlib import Path

from test_code_blocks import REPO, read_blocks

RUN_MAIN_JOB = ("python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
                "ductline run examples/stdlib_index.py:pipeline")
RUN_TESTS = ("python3 -m venv .venv && . .venv/bin/activate && pip install -q -e '.[test]' && "
             "python -m pytest -q")


def test_the_two_commands_are_the_first_shell_blocks() -> None:
    shell = [b.code.strip() for b in read_blocks(REPO / "README.md") if b.language == "sh"]
    assert shell[:2] == [RUN_MAIN_JOB, RUN_TESTS]


def test_links_into_the_docs_resolve() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", text)
    assert targets, "the README links into docs/"
    missing = [t for t in targets if not (REPO / t).is_file()]
    assert not missing, missing


def test_ci_builds_the_site_strictly() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "mkdocs build --strict" in ci
    assert Path(REPO / "mkdocs.yml").is_file()

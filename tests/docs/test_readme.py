"""The README's two commands stay exactly as CI and users run them, and its links work
on a package index page: absolute, into the documentation site, at pages that exist."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from test_code_blocks import REPO, read_blocks

RUN_MAIN_JOB = ("python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
                "ductline run examples/stdlib_index.py:pipeline")
RUN_TESTS = "./scripts/test"
INSTALL = 'pip install "ductline[postgres,dashboard]"'
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _shell_blocks(page: Path) -> list[str]:
    return [b.code.strip() for b in read_blocks(page) if b.language == "sh"]


def site_url() -> str:
    # mkdocs.yml names Python objects with !!python tags; only the site's address is read.
    config = yaml.load((REPO / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    url = config["site_url"]
    assert url.startswith("https://") and url.endswith("/"), url
    return str(url)


def page_of(url: str) -> Path | None:
    """The docs/ page a site URL shows (MkDocs' directory URLs), or None."""
    path = url.removeprefix(site_url()).split("#")[0]
    candidates = [REPO / "docs" / "index.md"] if not path else \
        [REPO / "docs" / f"{path.rstrip('/')}.md", REPO / "docs" / path / "index.md"]
    return next((c for c in candidates if c.is_file()), None)


def test_the_main_job_is_the_first_command_and_the_tests_have_theirs() -> None:
    shell = _shell_blocks(REPO / "README.md")
    assert shell[0] == RUN_MAIN_JOB
    assert RUN_TESTS in shell
    assert shell.index(RUN_TESTS) < 4, "the test command is near the top"


def test_ci_runs_the_readme_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    # Report options may follow (the slowest tests listed); nothing that selects tests.
    assert re.search(rf"^check \"test suite\" {re.escape(RUN_TESTS)}( --durations=\d+)?$", ci, re.M), ci


def test_the_docs_install_line() -> None:
    assert INSTALL in _shell_blocks(REPO / "README.md")
    assert INSTALL in _shell_blocks(REPO / "docs" / "index.md")


def test_links_are_absolute_and_the_site_pages_exist() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    links = LINK.findall(text)
    relative = [link for link in links if not link.startswith(("https://", "#"))]
    assert not relative, f"relative links break on a package index page: {relative}"
    into_site = [link for link in links if link.startswith(site_url())]
    assert len(into_site) > 20, "the README links into the documentation site"
    missing = [link for link in into_site if page_of(link) is None]
    assert not missing, missing
    headings = {"-".join(re.sub(r"[^\w\s-]", "", line.lstrip("#").strip().lower()).split())
                for line in text.splitlines() if line.startswith("#")}
    anchors = [link[1:] for link in links if link.startswith("#")]
    assert all(anchor in headings for anchor in anchors), anchors


def test_the_package_urls_point_at_the_site() -> None:
    urls = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
    assert urls["Documentation"] == site_url()
    assert all(url.startswith(site_url()) and page_of(url) for url in urls.values()), urls


def test_ci_builds_the_site_strictly() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "mkdocs build --strict" in ci
    assert Path(REPO / "mkdocs.yml").is_file()

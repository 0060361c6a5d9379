"""The README's two commands stay exactly as CI and users run them, and its links work
where it is read: in the repository, and as the package's long description
(pyproject.toml's ``readme``). pyproject.toml's [project.urls] names no repository to
make them absolute with, so they are relative, to pages of docs/ that exist (a site
built from docs/ may not be up, or not at this version)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from test_code_blocks import REPO, read_blocks

RUN_MAIN_JOB = ("python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
                "ductline run examples/stdlib_index.py:pipeline")
RUN_TESTS = "./scripts/test"
INSTALL = 'pip install -e "path/to/ductline[postgres,dashboard]"'  # from a checkout: not on a package index
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


# Keys of [project.urls] that name the repository (links could then be absolute into it).
REPOSITORY_KEYS = ("repository", "source", "source code", "code", "github")


def test_links_go_to_docs_pages_that_exist_not_to_a_hosted_site() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    links = LINK.findall(text)
    urls = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
    assert not any(key.lower() in REPOSITORY_KEYS for key in urls), \
        "pyproject.toml names the repository: make the README's links absolute into it"
    into_site = [link for link in links if link.startswith(site_url())]
    assert not into_site, f"links into a hosted site, which may not be up: {into_site}"
    relative = [link for link in links if not link.startswith(("https://", "http://", "#"))]
    assert len(relative) > 20, "the README links to the documentation in docs/"
    assert all(link.startswith("docs/") for link in relative), relative
    missing = [link for link in relative if not (REPO / link.split("#")[0]).is_file()]
    assert not missing, missing
    assert site_url() not in text, "the README names a hosted site"
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

"""What pyproject.toml promises a user who installs ductline from a package index: the
PostgreSQL extras (with and without the binary build), each requirement stated once,
the OTLP exporter in the otel extra, and an sdist that carries the tests, docs and
examples (`.ci/package` builds both packages and runs the main job from the wheel)."""

from __future__ import annotations

import re
import tomllib
from typing import Any

from test_code_blocks import REPO

PROJECT: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]
REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)(?:\[(?P<extras>[^\]]*)\])?(?P<spec>.*)$")


def _parse(requirement: str) -> tuple[str, set[str], str]:
    match = REQUIREMENT.match(requirement.replace(" ", ""))
    assert match, requirement
    extras = {e for e in (match["extras"] or "").split(",") if e}
    return match["name"].lower().replace("_", "-"), extras, match["spec"]


def _resolved(extra: str) -> list[tuple[str, set[str], str]]:
    """The requirements of an extra, with ductline's own extras expanded."""
    out = []
    for requirement in EXTRAS[extra]:
        name, extras, spec = _parse(requirement)
        if name == "ductline":
            for inner in sorted(extras):
                out.extend(_resolved(inner))
        else:
            out.append((name, extras, spec))
    return out


def test_the_library_extra_has_no_binary_build_and_the_application_extra_has() -> None:
    library = _resolved("postgres-lib")
    assert {name for name, _, _ in library} == {"psycopg", "psycopg-pool"}
    assert not any("binary" in extras or name == "psycopg-binary" for name, extras, _ in library)
    application = _resolved("postgres")
    assert ("psycopg", {"binary"}, "") in application  # psycopg pins its binary to its own version
    assert all(requirement in application for requirement in library)


def test_each_requirement_is_stated_once_with_a_lower_bound() -> None:
    bounds: dict[str, list[str]] = {}
    for extra, requirements in [("dependencies", PROJECT["dependencies"]), *EXTRAS.items()]:
        for requirement in requirements:
            name, _, spec = _parse(requirement)
            if name != "ductline" and spec:
                bounds.setdefault(name, []).append(f"{extra}: {requirement}")
            elif name != "ductline":
                assert name == "psycopg", f"{extra}: {requirement} has no lower bound"
    repeated = {name: where for name, where in bounds.items() if len(where) > 1}
    assert not repeated, repeated
    assert all(">=" in r.split(": ", 1)[1] for where in bounds.values() for r in where)


def test_the_otel_extra_exports_over_otlp() -> None:
    names = {name for name, _, _ in _resolved("otel")}
    assert "opentelemetry-exporter-otlp-proto-http" in names


def test_the_sdist_carries_tests_docs_and_examples() -> None:
    manifest = (REPO / "MANIFEST.in").read_text(encoding="utf-8").split("\n")
    for folder in ("tests", "docs", "examples", "deploy"):
        assert f"graft {folder}" in manifest
    assert "include scripts/test" in manifest
    ci = (REPO / ".ci" / "package").read_text(encoding="utf-8")
    assert "python -m build" in ci and "stdlib_index.py:pipeline" in ci

"""The project's main job, examples/stdlib_index.py, run for real through the CLI.

Each test starts ``python -m ductline run .../stdlib_index.py:pipeline`` in a
subprocess on real standard-library files (limited to the first 400 so the test
stays fast) and checks the run's JSON line and the two report files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers import truncate as _truncate

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "stdlib_index.py"
LIMIT = 400
COUNTERS = ("files", "modules", "classes", "functions", "lines", "imports", "errors")


def run_example(tmp_path: Path, *extra: str) -> dict[str, Any]:
    env = {**os.environ, "STDLIB_INDEX_OUT": str(tmp_path)}
    env.pop("DUCTLINE_DATABASE_URL", None)  # SQLite in tmp_path unless --database is given
    proc = subprocess.run(
        [sys.executable, "-m", "ductline", "run", f"{EXAMPLE}:pipeline", "--args", f"[{LIMIT}]", "--json",
         *extra],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    lines = proc.stdout.strip().splitlines()
    assert lines, f"no stdout\nstderr:\n{proc.stderr}"
    result = json.loads(lines[-1])
    assert result["status"] == "completed", result
    assert result["pipeline"] == "stdlib_index"
    assert result["halt_reason"] is None
    return result


def check_reports(result: dict[str, Any], tmp_path: Path) -> None:
    output = result["output"]
    md, js = Path(output["markdown"]), Path(output["json"])
    assert md.is_absolute() and js.is_absolute()
    assert md == tmp_path / "stdlib_report.md" and js == tmp_path / "stdlib_report.json"
    assert md.is_file() and js.is_file()

    totals = output["totals"]
    assert set(COUNTERS) <= set(totals)
    assert totals["files"] == LIMIT  # the installed stdlib has far more than 400 non-test files
    assert totals["batches"] == 3    # 150 + 150 + 100
    assert totals["modules"] == totals["files"] - totals["errors"]
    assert totals["modules"] > 0
    for key in ("classes", "functions", "lines", "imports"):
        assert totals[key] > 0, key
    assert totals["lines"] > totals["functions"] > 0
    assert totals["lines"] > totals["modules"]

    report = json.loads(js.read_text(encoding="utf-8"))
    assert report["totals"] == totals
    assert len(report["errors"]) == totals["errors"]
    largest = report["largest_modules"]
    assert 0 < len(largest) <= 15
    sizes = [m["lines"] for m in largest]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] <= totals["lines"]
    imported = report["most_imported"]
    assert 0 < len(imported) <= 15
    counts = [m["imported_by"] for m in imported]
    assert counts == sorted(counts, reverse=True) and counts[0] <= totals["modules"]

    text = md.read_text(encoding="utf-8")
    assert text.startswith("# Python standard library index")
    assert "## Totals" in text and "## Largest modules" in text and "## Most imported modules" in text
    assert f"| modules | {totals['modules']:,} |" in text
    assert f"`{largest[0]['module']}`" in text and f"`{imported[0]['module']}`" in text


def test_stdlib_index_on_sqlite(tmp_path: Path) -> None:
    result = run_example(tmp_path)
    assert (tmp_path / "ductline.db").is_file()  # the default store, in the cwd
    check_reports(result, tmp_path)


def test_stdlib_index_on_postgres(tmp_path: Path, pg_base_url: str) -> None:
    _truncate(pg_base_url)
    result = run_example(tmp_path, "--database", pg_base_url)
    assert not (tmp_path / "ductline.db").exists()
    check_reports(result, tmp_path)

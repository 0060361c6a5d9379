"""Index the Python standard library installed on this machine.

The pipeline reads real files: it finds the stdlib directory with
``sysconfig.get_paths()["stdlib"]``, lists every ``*.py`` file under it, parses each
one with ``ast`` and writes a report of the totals, the largest modules and the most
imported modules.

Run it from any directory (SQLite is the default store, ``ductline.db`` in the cwd)::

    ductline run examples/stdlib_index.py:pipeline
    ductline run examples/stdlib_index.py:pipeline --args '[300]'   # first 300 files only
    ductline run examples/stdlib_index.py:pipeline --json           # last line: JSON of the run

The reports ``stdlib_report.md`` and ``stdlib_report.json`` are written to the
current directory, or to the directory named by ``STDLIB_INDEX_OUT``.

Shape::

    list_sources ─expand─> index_batch (one per batch of ~150 files, timeout 120 s)
                 ─collapse─> merge_counts
                 ─divide─> largest_modules | most_imported
                 ─combine (delay 1 s)─> write_report

What is indexed:

* Skipped: ``site-packages`` (third-party code, not the standard library),
  ``__pycache__``, and the standard library's own test suites, i.e. every
  directory named ``test``, ``tests`` or ``idle_test`` (``Lib/test``,
  ``unittest/test``, ``lib2to3/tests``, ``idlelib/idle_test``, ...). The
  ``unittest`` and ``doctest`` modules themselves are kept.
* A file that cannot be read, decoded or parsed is counted under ``errors`` (with
  its path and the error message) and is not a module; it never fails the step.
* ``functions`` counts every ``def`` and ``async def``, methods and nested
  functions included; ``classes`` counts every ``class`` statement, nested ones
  included; ``imports`` counts ``import`` and ``from ... import`` statements
  anywhere in the file; ``lines`` counts physical lines.
* "Most imported" ranks top-level modules by how many *other* modules import
  them: a file counts once per top-level name however often it imports it, and
  imports inside a module's own top-level package (``asyncio.tasks`` importing
  ``asyncio.events``, relative imports) are not counted.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import sysconfig
import warnings
from datetime import datetime, timezone

from ductline import Pipeline

BATCH_SIZE = 150
TOP_N = 15
SKIPPED_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__", "test", "tests", "idle_test"})
OUT_ENV = "STDLIB_INDEX_OUT"
REPORT_MD = "stdlib_report.md"
REPORT_JSON = "stdlib_report.json"
COUNTERS = ("files", "modules", "classes", "functions", "lines", "imports", "errors")


def _stdlib_root() -> str:
    return os.path.realpath(sysconfig.get_paths()["stdlib"])


def _module_name(path: str, root: str) -> str:
    """``.../asyncio/tasks.py`` -> ``asyncio.tasks``; ``json/__init__.py`` -> ``json``."""
    rel = os.path.relpath(os.path.realpath(path), root)
    if rel.startswith(os.pardir):  # not under the stdlib: fall back to the file's stem
        rel = os.path.basename(path)
    parts = rel[:-3].split(os.sep) if rel.endswith(".py") else rel.split(os.sep)
    if len(parts) > 1 and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# -- steps --------------------------------------------------------------------------


def list_sources(limit=None):
    """Sorted absolute paths of the stdlib's ``*.py`` files, in batches of ~150.

    ``limit`` (an int >= 0, or None for all) keeps only the first ``limit`` files.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative int or None, got {limit!r}")
    root = _stdlib_root()
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        files.extend(os.path.join(folder, n) for n in names if n.endswith(".py"))
    files.sort(key=lambda p: os.path.relpath(p, root).split(os.sep))
    if limit is not None:
        files = files[:limit]
    return [files[i:i + BATCH_SIZE] for i in range(0, len(files), BATCH_SIZE)]


def index_batch(paths):
    """Parse each file of one batch; return small JSON-able counts."""
    root = _stdlib_root()
    out = {key: 0 for key in COUNTERS}
    out["module_lines"] = []   # [{"module": str, "lines": int}], in batch order
    out["imported_by"] = {}    # top-level module -> number of files importing it
    out["error_files"] = []    # [{"path": str, "error": str}]
    for path in paths:
        out["files"] += 1
        name = _module_name(path, root)
        try:
            with open(path, "rb") as fh:
                source = fh.read()
            with warnings.catch_warnings():  # invalid escapes etc. are not our business
                warnings.simplefilter("ignore")
                tree = ast.parse(source, filename=path)
        except Exception as exc:  # unreadable, undecodable or unparsable: count it, go on
            out["errors"] += 1
            out["error_files"].append({"path": path, "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        lines = len(source.splitlines())
        own_package = name.split(".")[0]
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out["functions"] += 1
            elif isinstance(node, ast.ClassDef):
                out["classes"] += 1
            elif isinstance(node, ast.Import):
                out["imports"] += 1
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                out["imports"] += 1
                if node.level == 0 and node.module:  # relative imports stay in the package
                    imported.add(node.module.split(".")[0])
        imported.discard(own_package)
        for top in imported:
            out["imported_by"][top] = out["imported_by"].get(top, 0) + 1
        out["modules"] += 1
        out["lines"] += lines
        out["module_lines"].append({"module": name, "lines": lines})
    return out


def merge_counts(batches):
    """Totals over all batches, every module's line count and the merged import counts."""
    totals = {key: 0 for key in COUNTERS}
    totals["batches"] = len(batches)
    module_lines, imported_by, error_files = [], {}, []
    for batch in batches:
        for key in COUNTERS:
            totals[key] += batch[key]
        module_lines.extend(batch["module_lines"])
        error_files.extend(batch["error_files"])
        for top, count in batch["imported_by"].items():
            imported_by[top] = imported_by.get(top, 0) + count
    return {"totals": totals, "module_lines": module_lines, "imported_by": imported_by,
            "error_files": error_files}


def largest_modules(merged):
    """The 15 modules with the most lines (ties by name); carries the totals on."""
    ranked = sorted(merged["module_lines"], key=lambda m: (-m["lines"], m["module"]))
    return {"totals": merged["totals"], "error_files": merged["error_files"], "top": ranked[:TOP_N]}


def most_imported(merged):
    """The 15 top-level modules imported by the most other modules (ties by name)."""
    ranked = sorted(merged["imported_by"].items(), key=lambda item: (-item[1], item[0]))
    return {"distinct": len(ranked),
            "top": [{"module": name, "imported_by": count} for name, count in ranked[:TOP_N]]}


def write_report(summaries):
    """Write ``stdlib_report.md`` and ``stdlib_report.json``; return their paths and the totals."""
    largest, imported = summaries
    totals = largest["totals"]
    out_dir = os.path.abspath(os.environ.get(OUT_ENV) or os.getcwd())
    os.makedirs(out_dir, exist_ok=True)
    generated = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    stdlib = _stdlib_root()
    python = sys.version.split()[0]

    report = {
        "generated_at": generated,
        "python": python,
        "stdlib": stdlib,
        "totals": totals,
        "largest_modules": largest["top"],
        "most_imported": imported["top"],
        "distinct_modules_imported": imported["distinct"],
        "errors": largest["error_files"],
    }
    md = [
        "# Python standard library index",
        "",
        f"Python {python}, `{stdlib}`; generated {generated}.",
        "Test suites (`test`, `tests`, `idle_test`) and `site-packages` are not indexed.",
        "",
        "## Totals",
        "",
        "| | count |",
        "|---|---:|",
    ]
    md += [f"| {key} | {totals[key]:,} |" for key in (*COUNTERS, "batches")]
    md += ["", f"## Largest modules (top {TOP_N}, by lines)", "",
           "| # | module | lines |", "|---:|---|---:|"]
    md += [f"| {i} | `{m['module']}` | {m['lines']:,} |" for i, m in enumerate(largest["top"], 1)]
    md += ["", f"## Most imported modules (top {TOP_N}, by number of importing modules)", "",
           "| # | module | imported by |", "|---:|---|---:|"]
    md += [f"| {i} | `{m['module']}` | {m['imported_by']:,} |" for i, m in enumerate(imported["top"], 1)]
    if largest["error_files"]:
        md += ["", "## Files that could not be parsed", ""]
        md += [f"- `{e['path']}`: {e['error']}" for e in largest["error_files"]]
    md.append("")

    paths = {}
    for filename, text in ((REPORT_MD, "\n".join(md)), (REPORT_JSON, json.dumps(report, indent=2) + "\n")):
        path = os.path.join(out_dir, filename)
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:  # write then rename: a retry never sees half a file
            fh.write(text)
        os.replace(tmp, path)
        paths[filename] = path
    return {"markdown": paths[REPORT_MD], "json": paths[REPORT_JSON], "totals": totals}


pipeline = (
    Pipeline("stdlib_index")
    .start(list_sources)
    .expand(to=index_batch, timeout=120)
    .collapse(into=merge_counts)
    .divide(to=[largest_modules, most_imported])
    .combine(into=write_report, delay=1)
)

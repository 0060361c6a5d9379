"""Run tags in the store: written with their run, read for one run, and run listings
filtered by tags (every tag must match). The rule for what a tag may be is
`ductline.model.tags`; everything here takes tags already checked."""

from __future__ import annotations

import json
from typing import Any

from ductline.model.tags import Tags
from ductline.store.session import Dialect
from ductline.store.tx import Tx

# A cursor later than any run: the first page of a newest-first listing.
TOP_MS = 2 ** 62


def write(tx: Tx, run_id: str, tags: Tags) -> None:
    """Write the tags of run ``run_id`` inside ``tx`` (the transaction writing the run)."""
    if tags:
        tx.s.execute("insert_run_tags", {"items": json.dumps([[run_id, k, v] for k, v in tags])})


def write_many(tx: Tx, tagged: list[tuple[str, Tags]]) -> None:
    """`write` for many runs in one statement."""
    items = [[run_id, k, v] for run_id, tags in tagged for k, v in tags]
    if items:
        tx.s.execute("insert_run_tags", {"items": json.dumps(items)})


def of_run(dialect: Dialect, run_id: str) -> dict[str, str]:
    """The tags of run ``run_id`` as ``{key: value}`` in key order (``{}``: none)."""
    with dialect.reader() as s:
        return {r["key"]: r["value"] for r in s.fetch("run_tags", {"run_id": run_id})}


def runs(dialect: Dialect, tags: Tags, *, status: str | None = None, pipeline: str | None = None,
         cursor: tuple[int, str] = (TOP_MS, ""), newer: bool = False, limit: int = 50) -> list[dict[str, Any]]:
    """Runs carrying every tag of ``tags`` (non-empty), optionally of one status and
    pipeline: newest first older than ``cursor`` = ``(created_ms, id)``, or with
    ``newer`` the runs after it, oldest first."""
    if not tags:
        raise ValueError("runs() needs at least one tag")
    key, value = tags[0]
    params = {"key": key, "value": value, "tags": json.dumps([list(t) for t in tags[1:]]),
              "status": status, "pipeline": pipeline, "created_ms": cursor[0], "id": cursor[1], "limit": limit}
    with dialect.reader() as s:
        return s.fetch("tagged_runs_newer" if newer else "tagged_runs_older", params)

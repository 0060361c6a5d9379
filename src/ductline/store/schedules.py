"""Store verbs of schedules (table ``ductline_schedules``, statements in each
dialect's ``schedule_queries.sql``).

A row per schedule: its definition (pipeline, cron, JSON args), ``enabled`` (the
operator's switch), ``defined`` (0 once the code of the workers serving its pipeline
no longer declares it), ``next_fire_ms`` (the next tick, epoch ms UTC) and the last
tick fired with its run. Moving ``next_fire_ms`` on is a compare-and-set, made in the
transaction that inserts the tick's run: the writer whose update changes one row owns
the tick, every other writer changes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from ductline.store.store import Store, Tx


@dataclass(frozen=True)
class DueSchedule:
    """A schedule row as the scheduler reads it, with the database clock it was read at."""

    name: str
    pipeline: str
    cron: str
    args: str
    next_fire_ms: int
    now_ms: int


def sync(store: Store, schedules: list[Any], pipelines: list[str],
         next_fire: Callable[[str, int], int]) -> int:
    """Write a starting worker's schedule definitions in one transaction.

    Each schedule in ``schedules`` (objects with ``name``, ``pipeline``, ``cron``,
    ``args``) is inserted, or updated keeping its ``next_fire_ms`` unless its cron
    changed or it had been removed from code (then ``next_fire(cron, now_ms)``). Rows
    of ``pipelines`` that are not in ``schedules`` are marked ``defined = 0``: kept
    with their history, never fired. ``enabled`` is left as the operator set it.

    Returns:
        The number of rows marked removed from code.
    """
    with store.transaction() as tx:
        now = tx.now_ms()
        for entry in schedules:
            tx.s.execute("upsert_schedule", {
                "name": entry.name, "pipeline": entry.pipeline, "cron": entry.cron, "args": entry.args,
                "next_fire_ms": next_fire(entry.cron, now),
            })
        if not pipelines:
            return 0
        return tx.s.execute("undefine_schedules", {"pipelines": json.dumps(pipelines),
                                                   "names": json.dumps([s.name for s in schedules])})


def upcoming(store: Store, pipelines: list[str], limit: int = 50) -> list[DueSchedule]:
    """The ``limit`` enabled, defined schedules of ``pipelines`` that fire first."""
    if not pipelines:
        return []
    with store.dialect.reader() as s:
        rows = s.fetch("upcoming_schedules", {"pipelines": json.dumps(pipelines), "limit": limit})
    return [DueSchedule(r["name"], r["pipeline"], r["cron"], r["args"], int(r["next_fire_ms"]),
                        int(r["now_ms"])) for r in rows]


def advance(tx: Tx, name: str, cron: str, expected_ms: int, next_fire_ms: int,
            last_fire_ms: int | None = None, last_run_id: str | None = None) -> bool:
    """Compare-and-set: move ``next_fire_ms`` from ``expected_ms`` on (and record the
    tick fired, if any). ``False``, with nothing written, when another writer moved it
    first, the cron changed, or the schedule was disabled or removed meanwhile."""
    return tx.s.execute("advance_schedule", {
        "name": name, "cron": cron, "expected_ms": expected_ms, "next_fire_ms": next_fire_ms,
        "last_fire_ms": last_fire_ms, "last_run_id": last_run_id,
    }) == 1


def set_last_run(tx: Tx, name: str, run_id: str) -> None:
    tx.s.execute("set_schedule_run", {"name": name, "run_id": run_id})


def set_run_metadata(tx: Tx, run_id: str, metadata: dict[str, Any]) -> None:
    """Replace a run's metadata (the scheduler writes it for the run it just inserted)."""
    tx.s.execute("set_run_metadata", {"run_id": run_id, "metadata": json.dumps(metadata)})


def list_all(store: Store) -> list[dict[str, Any]]:
    """Every schedule row, by name."""
    with store.dialect.reader() as s:
        return s.fetch("list_schedules")


def set_enabled(store: Store, name: str, enabled: bool, next_fire: Callable[[str, int], int]) -> bool | None:
    """The operator's switch. Enabling a disabled schedule moves its next fire to the
    first tick after now (ticks missed while disabled are not fired); disabling keeps
    it. Returns ``None`` if no schedule has that name, else whether anything changed."""
    with store.transaction() as tx:
        rows = tx.s.fetch("schedule_for_update", {"name": name})
        if not rows:
            return None
        row = rows[0]
        if bool(row["enabled"]) == enabled:
            return False
        nxt = next_fire(row["cron"], tx.now_ms()) if enabled else None
        tx.s.execute("set_schedule_enabled", {"name": name, "enabled": 1 if enabled else 0,
                                              "next_fire_ms": nxt})
        return True


def get(store: Store, name: str) -> dict[str, Any] | None:
    """The schedule row named ``name`` (``None``: there is none)."""
    with store.dialect.reader() as s:
        found = s.fetch("get_schedule", {"name": name})
    return found[0] if found else None


def claim_tick(tx: Tx, name: str, tick_ms: int, run_id: str) -> bool:
    """Claim tick ``tick_ms`` of schedule ``name`` for run ``run_id`` inside ``tx`` (the
    transaction that inserts the run). ``False``, with nothing written, when the tick
    has a run already: a racing claim waits for the first one's commit, then finds it."""
    return tx.s.execute("claim_schedule_tick", {"schedule": name, "tick_ms": tick_ms, "run_id": run_id}) == 1


def set_tick_run(tx: Tx, name: str, tick_ms: int, run_id: str) -> None:
    tx.s.execute("set_tick_run", {"schedule": name, "tick_ms": tick_ms, "run_id": run_id})


def tick_runs(store: Store, name: str, from_ms: int, to_ms: int) -> dict[int, str]:
    """``{tick_ms: run_id}`` of the ticks of ``name`` in ``[from_ms, to_ms]`` that have a run."""
    with store.dialect.reader() as s:
        return {int(r["tick_ms"]): r["run_id"] for r in s.fetch("tick_runs", {"schedule": name, "from_ms": from_ms,
                                                                             "to_ms": to_ms})}

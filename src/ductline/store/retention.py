"""Deleting finished runs whole, and the rows of workers gone long ago: the store
verbs of retention (`ductline.operations.prune` decides what and when)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ductline import faults
from ductline.store.store import Store, Tx

# What a run holds, child rows first (the order the foreign keys need).
_TABLES = ("chunks", "payloads", "step_logs", "events", "attempts", "context", "fanins", "tags", "operator_actions",
           "jobs", "runs")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A run that may be pruned: its id, age (finish time, or creation time if it has
    not finished) and how many rows it holds."""

    run_id: str
    age_ms: int
    weight: int


def candidates(store: Store, statuses: list[str], cutoff_ms: int, after: tuple[int, str],
               limit: int) -> list[Candidate]:
    """Runs of ``statuses`` that ended (or were created, if not ended) before
    ``cutoff_ms`` or at it (database clock), oldest first, after the keyset position
    ``after`` = ``(age_ms, run_id)``."""
    with store.dialect.reader() as s:
        rows = s.fetch("prune_candidates", {"statuses": json.dumps(statuses), "cutoff_ms": cutoff_ms,
                                            "after_ms": after[0], "after_id": after[1], "limit": limit})
    return [Candidate(r["id"], int(r["age_ms"]), 1 + int(r["weight"] or 0)) for r in rows]


def take_turn(tx: Tx) -> bool:
    """Take the fleet-wide pruning turn for the rest of ``tx``; ``False`` when
    another worker's maintenance thread holds it."""
    return bool(tx.s.fetch("prune_exclusive")[0]["locked"])


def lockable_runs(tx: Tx, run_ids: list[str], statuses: list[str]) -> tuple[list[str], int]:
    """Lock, for the rest of ``tx``, the runs of ``run_ids`` that may be deleted: still
    in ``statuses``, not held by another transaction (PostgreSQL), and with no job
    claimed by a worker (a live attempt would go on writing for its run after it was
    gone). Returns their ids and how many runs were left for a claimed job."""
    locked = [r["id"] for r in tx.s.fetch("prune_lock", {"run_ids": json.dumps(sorted(run_ids)),
                                                          "statuses": json.dumps(statuses)})]
    if not locked:
        return [], 0
    # After the runs are locked: a job insert (its foreign key's lock on the run)
    # can no longer add work to them, so what is busy now stays known.
    busy = {r["run_id"] for r in tx.s.fetch("prune_busy", {"run_ids": json.dumps(locked)})}
    return [run_id for run_id in locked if run_id not in busy], len(busy)


def delete_runs(tx: Tx, run_ids: list[str], statuses: list[str]) -> dict[str, int]:
    """Delete the runs of ``run_ids`` that `lockable_runs` takes, with their jobs,
    attempts, step logs, payloads, context, tags and operator actions, inside ``tx``.
    Returns the rows deleted per table (``runs`` included) and, under ``busy``, how
    many runs were left whole for a claimed job."""
    locked, busy = lockable_runs(tx, run_ids, statuses)
    counts = dict.fromkeys(_TABLES, 0)
    counts["busy"] = busy
    if not locked:
        return counts
    ids = json.dumps(locked)
    for table in _TABLES:
        counts[table] = tx.s.execute(f"prune_{table}", {"run_ids": ids})
        if table == "attempts":
            faults.checkpoint("during_prune")
    return counts


def delete_workers(tx: Tx, stopped_before_ms: int, lost_before_ms: int, limit: int) -> int:
    """Delete at most ``limit`` rows of workers gone long ago, inside ``tx`` (see
    `ductline.model.workers.prune_cutoffs`); returns how many."""
    return tx.s.execute("prune_workers", {"stopped_before": stopped_before_ms, "lost_before": lost_before_ms,
                                          "limit": limit})


def prunable_workers(store: Store, stopped_before_ms: int, lost_before_ms: int) -> int:
    """How many worker rows `delete_workers` would delete in all."""
    with store.dialect.reader() as s:
        rows = s.fetch("prunable_workers", {"stopped_before": stopped_before_ms, "lost_before": lost_before_ms})
    return int(rows[0]["n"])

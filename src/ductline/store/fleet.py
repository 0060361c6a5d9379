"""Store verbs of queues and definition versions (statements in
``shared/fleet_queries.sql``): what the live workers serve, the ready jobs per queue,
the definitions workers loaded, runs by definition, and the writes of moving a run
to another definition (`ductline.engine.move`)."""

from __future__ import annotations

import json
import re
from typing import Any

from ductline.errors import DefinitionNotFound
from ductline.model.moves import JobMove
from ductline.model.serving import LIVE_WITHIN_SECONDS, Offer
from ductline.store.records import LoadedDefinition
from ductline.store.store import Store, Tx

_HEX = re.compile(r"[0-9a-f]{1,64}")


def live_offers(store: Store, within_seconds: float = LIVE_WITHIN_SECONDS) -> list[Offer]:
    """What each live worker (status live, heartbeat within ``within_seconds``: the
    lease, as `ductline.model.workers` judges) claims."""
    with store.dialect.reader() as s:
        rows = s.fetch("live_offers", {"max_age_ms": int(within_seconds * 1000)})
    return [Offer(frozenset(json.loads(r["queues"])), frozenset(json.loads(r["definitions"]))) for r in rows]


def ready_per_queue(store: Store) -> dict[str, int]:
    """``{queue: ready jobs}`` of the queues holding any."""
    with store.dialect.reader() as s:
        return {r["queue"]: int(r["ready"]) for r in s.fetch("ready_per_queue", {})}


def _loaded(row: dict[str, Any]) -> LoadedDefinition:
    return LoadedDefinition(row["fingerprint"], row["pipeline"], tuple(json.loads(row["steps"]).items()))


def definitions(store: Store) -> list[LoadedDefinition]:
    """Every definition a worker has loaded, by pipeline, oldest first."""
    with store.dialect.reader() as s:
        return [_loaded(r) for r in s.fetch("list_definitions", {})]


def check_prefix(prefix: str) -> str:
    """A fingerprint or its first digits, lower-cased.

    Raises:
        ValueError: not 1 to 64 hexadecimal digits.
    """
    text = prefix.strip().lower()
    if _HEX.fullmatch(text) is None:
        raise ValueError(f"a definition fingerprint is hexadecimal digits, got {prefix!r}")
    return text


def definition(store: Store, prefix: str) -> LoadedDefinition:
    """The loaded definition whose fingerprint is or starts with ``prefix``.

    Raises:
        ValueError: ``prefix`` is not hexadecimal.
        DefinitionNotFound: none, or several, match.
    """
    text = check_prefix(prefix)
    with store.dialect.reader() as s:
        rows = s.fetch("find_definitions", {"pattern": text + "%"})
    if not rows:
        raise DefinitionNotFound(f"no worker has loaded a definition {text} (a worker records each definition "
                                 "it loads when it starts)")
    if len(rows) > 1:
        raise DefinitionNotFound(f"{text} starts several fingerprints ({', '.join(r['fingerprint'] for r in rows)}); "
                                 "give more digits")
    return _loaded(rows[0])


def run_definitions(store: Store, pipeline: str, prefix: str) -> list[str]:
    """The fingerprints starting with ``prefix`` that unfinished runs of ``pipeline`` follow.

    Raises:
        ValueError: ``prefix`` is not hexadecimal.
    """
    with store.dialect.reader() as s:
        return [r["definition"] for r in s.fetch("run_definitions_like", {"pipeline": pipeline,
                                                                          "pattern": check_prefix(prefix) + "%"})]


def runs_of(store: Store, prefix: str, *, status: str | None = None, pipeline: str | None = None,
            limit: int = 50) -> list[dict[str, Any]]:
    """Runs whose definition fingerprint starts with ``prefix``, newest first
    (``"-"``: runs started before versions were recorded).

    Raises:
        ValueError: ``prefix`` is neither ``"-"`` nor hexadecimal.
    """
    pattern = "" if prefix.strip() == "-" else check_prefix(prefix) + "%"
    with store.dialect.reader() as s:
        return s.fetch("runs_of_definitions", {"pattern": pattern, "status": status, "pipeline": pipeline,
                                               "limit": limit})


# -- moving runs (inside a transaction of the store) ----------------------------------------


def runs_to_move(tx: Tx, pipeline: str, definition: str, limit: int, run_id: str | None = None) -> list[str]:
    """Ids of up to ``limit`` unfinished runs of ``pipeline`` following ``definition``."""
    return [r["id"] for r in tx.s.fetch("runs_to_move", {"pipeline": pipeline, "definition": definition,
                                                         "limit": limit, "run_id": run_id})]


def jobs_to_move(tx: Tx, run_id: str) -> list[tuple[str, str, str]]:
    """``(job_id, step, status)`` of every job of the run."""
    return [(r["id"], r["step"], r["status"]) for r in tx.s.fetch("jobs_to_move", {"run_id": run_id})]


def move_run(tx: Tx, run_id: str, from_definition: str, to_definition: str, moves: list[JobMove],
             renames: dict[str, str], metadata: dict[str, Any]) -> bool:
    """Write a run's move: its jobs (step, queue, fingerprint), its fan-ins' step names,
    its fingerprint and ``metadata``. ``False`` (nothing written) if the run no longer
    follows ``from_definition``."""
    if tx.s.execute("move_run", {"run_id": run_id, "definition": to_definition, "from_definition": from_definition,
                                 "metadata": json.dumps(metadata)}) != 1:
        return False
    tx.s.execute_many("move_job", [{"id": m.job_id, "step": m.step, "queue": m.queue, "definition": to_definition}
                                   for m in moves])
    for old, new in sorted(renames.items()):
        tx.s.execute("rename_fanin", {"run_id": run_id, "old_step": old, "new_step": new})
    return True

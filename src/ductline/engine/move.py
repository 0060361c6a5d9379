"""Moving a run to another definition of its pipeline, applied inside a store
transaction (the rule: `ductline.model.moves`).

The run row is locked as a stop locks it (`Tx.run_metadata` with ``for_stop``):
claims share-lock a run and skip one being moved, and recording an outcome waits for
the move to commit. A run with an attempt running is not moved (its worker, of the
old definition, would route its outcome by the old graph): the caller moves it once
the attempt has ended.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from ductline.model.moves import MoveRefused, plan_run
from ductline.model.states import UNFINISHED_RUN, JobStatus, RunStatus
from ductline.store import fleet
from ductline.store.records import LoadedDefinition
from ductline.store.store import Tx


class Moved(StrEnum):
    MOVED = "moved"
    BUSY = "busy"    # an attempt runs: not moved now
    GONE = "gone"    # finished, or moved by someone else meanwhile


def move(tx: Tx, run_id: str, from_definition: str, target: LoadedDefinition, mapping: dict[str, str]) -> Moved:
    """Move one run from ``from_definition`` to ``target`` inside ``tx``, renaming
    steps by ``mapping``, and record the move in its metadata (``moves``: a list of
    ``{from, to, steps, at_ms}``, oldest first).

    Raises:
        MoveRefused: a job that may still run would have no step in ``target``.
    """
    info = tx.run_metadata(run_id, for_stop=True)
    if info is None or RunStatus(info["status"]) not in UNFINISHED_RUN:
        return Moved.GONE
    jobs = fleet.jobs_to_move(tx, run_id)
    if any(status == JobStatus.RUNNING for _, _, status in jobs):
        return Moved.BUSY
    moves, missing = plan_run(jobs, mapping, dict(target.step_queues))
    if missing:
        raise MoveRefused(f"run {run_id}: definition {target.fingerprint} of {target.pipeline!r} has no step "
                          f"{', '.join(repr(m) for m in missing)} (give --map OLD=NEW for a renamed step)")
    renamed = {old: new for old, new in mapping.items() if any(step == old for _, step, _ in jobs)}
    metadata: dict[str, Any] = dict(info["metadata"])
    metadata["moves"] = [*metadata.get("moves", []), {"from": from_definition, "to": target.fingerprint,
                                                      "steps": renamed, "at_ms": tx.now_ms()}]
    if not fleet.move_run(tx, run_id, from_definition, target.fingerprint, moves, renamed, metadata):
        return Moved.GONE
    tx.notify()  # its ready jobs are claimable by other workers now
    return Moved.MOVED

"""Moving in-flight runs from one definition of a pipeline to another: the
operator's explicit step of a rolling deploy (docs/howto/rolling-deploy.md), behind
``ductline runs move`` and the dashboard's API.

Every candidate run is checked before anything is written: if the mapping would
leave a job that may still run without a step in the target definition, the whole
move is refused and nothing changes. Runs are then moved in batches, one
transaction each (`ductline.engine.move`); a run with an attempt running at that
moment is left for a later move (its worker routes the outcome by the old graph).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ductline import faults
from ductline.dsl.fingerprint import LENGTH
from ductline.engine.move import Moved, move
from ductline.errors import DefinitionNotFound
from ductline.model.moves import MoveRefused, check_mapping, plan_run
from ductline.store import Store, fleet

log = logging.getLogger("ductline.operations")
BATCH = 100  # runs per transaction


@dataclass
class MoveResult:
    """What a move did: the runs moved, and those left because an attempt ran."""

    pipeline: str
    from_definition: str
    to_definition: str
    moved: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)


def parse_mapping(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``["old=new", ...]`` as ``{old: new}``.

    Raises:
        MoveRefused: a pair is not ``OLD=NEW`` with both names given, a step is
            mapped twice, or two steps map to one.
    """
    mapping: dict[str, str] = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise MoveRefused(f"a mapping is OLD=NEW (a step's old and new names), got {pair!r}")
        if old.strip() in mapping:
            raise MoveRefused(f"step {old.strip()!r} is mapped twice")
        mapping[old.strip()] = new.strip()
    check_mapping(mapping)
    return mapping


def move_runs(store: Store, from_definition: str, to_definition: str, mapping: dict[str, str] | None = None, *,
              run_id: str | None = None) -> MoveResult:
    """Move the unfinished runs of one definition to another of the same pipeline.

    Args:
        from_definition: the fingerprint the runs follow, or its first digits as a
            worker recorded it; ``"-"`` for runs started before versions were recorded
            (their pipeline is the target's).
        to_definition: a fingerprint (or first digits) a worker has loaded: its steps
            and queues are read from the store.
        mapping: ``{old step: new step}`` for renamed steps; others keep their names.
        run_id: move only this run.

    Returns:
        The runs moved, and those left because an attempt was running.

    Raises:
        DefinitionNotFound: the target (or a prefix of the source) names no loaded
            definition, or several.
        ValueError: a fingerprint is not hexadecimal.
        MoveRefused: the definitions are of different pipelines or the same, the
            mapping is not one-to-one, or it leaves a job that may still run without
            a step (nothing is written).
    """
    steps = dict(mapping or {})
    check_mapping(steps)
    target = fleet.definition(store, to_definition)
    source = _source(store, from_definition, target.pipeline)
    if source == target.fingerprint:
        raise MoveRefused(f"the runs already follow definition {source}")
    result = MoveResult(target.pipeline, source, target.fingerprint)
    refused: list[str] = []
    with store.transaction() as tx:  # every candidate checked first (nothing written): refuse before any write
        for candidate in fleet.runs_to_move(tx, target.pipeline, source, 1_000_000, run_id):
            _, missing = plan_run(fleet.jobs_to_move(tx, candidate), steps, dict(target.step_queues))
            if missing:
                refused.append(f"run {candidate} has jobs of {', '.join(repr(m) for m in missing)}")
    if refused:
        raise MoveRefused(f"definition {target.fingerprint} of {target.pipeline!r} lacks steps that runs of "
                          f"{source or '-'} still need ({'; '.join(refused[:5])}"
                          f"{'; ...' if len(refused) > 5 else ''}): give --map OLD=NEW for renamed steps")
    done: set[str] = set()
    while True:
        with store.transaction() as tx:
            batch = [r for r in fleet.runs_to_move(tx, target.pipeline, source, BATCH + len(done), run_id)
                     if r not in done][:BATCH]
            outcomes: dict[str, Moved] = {}
            for r in batch:
                outcomes[r] = move(tx, r, source, target, steps)
                faults.checkpoint("during_move")
        if not batch:
            break
        faults.checkpoint("after_move")
        done.update(batch)
        result.moved += [r for r, o in outcomes.items() if o is Moved.MOVED]
        result.busy += [r for r, o in outcomes.items() if o is Moved.BUSY]
    # DEBUG, as a resume or a send: the caller says what was moved (the CLI prints it,
    # the API answers it) and each run's metadata keeps its move.
    log.debug("Moved %d run(s) of %s from definition %s to %s (%d left: an attempt was running)",
             len(result.moved), target.pipeline, source or "-", target.fingerprint, len(result.busy))
    return result


def _source(store: Store, text: str, pipeline: str) -> str:
    if text.strip() == "-":
        return ""
    prefix = fleet.check_prefix(text)
    try:
        found = fleet.definition(store, prefix)
    except DefinitionNotFound:
        # Runs triggered by code no worker loaded: named by the fingerprint they follow.
        followed = fleet.run_definitions(store, pipeline, prefix)
        if not followed and len(prefix) == LENGTH:
            return prefix  # a whole fingerprint no run follows (any more): nothing to move
        if len(followed) != 1:
            raise DefinitionNotFound(f"{prefix} names {'no' if not followed else 'several'} definition(s) that "
                                     f"unfinished runs of {pipeline!r} follow") from None
        return followed[0]
    if found.pipeline != pipeline:
        raise MoveRefused(f"definition {found.fingerprint} is of pipeline {found.pipeline!r}, "
                          f"the target of {pipeline!r}: a run moves within its pipeline")
    return found.fingerprint

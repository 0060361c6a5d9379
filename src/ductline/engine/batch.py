"""Outcomes waiting to be recorded, and the batch recorder.

A worker collects the outcomes of its children and records them together in one
transaction, so a busy worker pays one commit for many completions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from ductline.dsl.graph import Definition, TransitionKind
from ductline.dsl.options import DEFAULT_QUEUE
from ductline.model.outcomes import MAX_RELEASES, RELEASED_TYPE, Ended
from ductline.model.states import AttemptResult, JobStatus
from ductline.observability.events import RESULT_LABELS, EventName, emit
from ductline.engine.stop import Unchanged, expire
from ductline import faults
from ductline.engine import childruns, record
from ductline.engine.lost import Lost, report_lost
from ductline.model.children import starts_children
from ductline.model import stops
from ductline.engine.advance import Completed, advance_many
from ductline.store.records import ClaimedJob, NewJob
from ductline.store.store import Tx
from ductline.store import Store, payloads

log = logging.getLogger("ductline.engine")


@dataclass(frozen=True, slots=True)
class Outcome:
    attempt: record.Attempt
    pipeline: str
    result: AttemptResult
    output: str | None = None
    error_type: str | None = None
    error: str | None = None
    traceback: str | None = None
    release: bool = False  # give the job back without charging a budget
    interrupted: bool = False  # released by the shutdown grace while it ran (`Ended.interrupted`)
    run_deadline: bool = False  # the run deadline killed it: end the whole run
    route_key: str | None = None  # str(output) as the child rendered it (a divert's key)

    def ended(self) -> Ended:
        """How the attempt ended, for the rulebook."""
        if self.release:
            return Ended(AttemptResult.CANCELLED, RELEASED_TYPE, self.error, released=True,
                         interrupted=self.interrupted)
        return Ended(self.result, self.error_type, self.error)


@dataclass(slots=True)
class Handoff:
    """A recording worker's free slots, offered to the next steps its batch makes
    ready: up to ``slots`` of them are inserted already claimed by ``worker_id``
    (`ductline.store.tx.Tx.insert_claimed`), without a claim that reads the ready
    queues. Only jobs of ``pipelines`` in ``queues`` (those the worker serves) are given.
    ``claimed`` is what the last recording gave (set inside its transaction; emptied
    when a transaction starts, so a rolled-back attempt leaves nothing)."""

    worker_id: str
    lease_ms: int
    slots: int
    pipelines: frozenset[str]
    claimed: list[ClaimedJob] = field(default_factory=list)
    queues: frozenset[str] = frozenset({DEFAULT_QUEUE})


def job_extra(a: record.Attempt) -> dict[str, object]:
    return {"run_id": a.run_id, "job_id": a.job_id, "step": a.step, "attempt": a.attempt}


def record_batch(store: Store, outcomes: list[Outcome], definitions: dict[str, Definition],
                 retry_delay: int, limits: payloads.Limits | None = None, *,
                 now_ms: Callable[[], float], then: Callable[[Tx], None] | None = None,
                 origin: str = "", handoff: Handoff | None = None,
                 max_releases: int = MAX_RELEASES) -> list[record.Recorded]:
    """Record every outcome in one transaction. Raises `StoreError` (and records
    nothing) if the database fails; the caller keeps the batch and tries again.

    Plain successes -- the bulk of the work -- are recorded together: one statement
    completes them all, one closes their attempts, one inserts every job they
    create. Everything else (failures, fan-outs to check, deadlines) goes one by one.
    Outputs above ``limits.inline_bytes`` are stored out of line (`ductline.store.payloads`)
    in this transaction, after the fenced write that completes their job.
    ``now_ms`` is the worker's reading of the database clock (job runtimes).
    ``then``, if given, runs last inside the same transaction (the worker claims
    there for the slots this batch freed: one commit for both). ``origin``, the
    recording worker's id, is the payload of the transaction's notifications
    (`ductline.store.tx.Tx.origin`). ``handoff``, if given, takes the batch's ready
    next steps for the recording worker's free slots as they are inserted (before
    ``then``, which then sees them claimed). ``max_releases`` is the worker's setting
    of that name (`ductline.model.outcomes.Budget.max_releases`).
    """
    limits = limits or payloads.DEFAULT_LIMITS
    results: list[record.Recorded | None] = [None] * len(outcomes)
    bulk = [i for i, o in enumerate(outcomes) if _plain_success(o, definitions)]
    plain = set(bulk)
    locks = [o.attempt.run_id for o in outcomes if not o.run_deadline]
    if handoff is not None:
        handoff.claimed = []
    with store.transaction() as tx:
        tx.origin = origin
        # The runs first: a stop of one of them (cancel, deadline) and this batch take
        # turns, so no outcome is recorded into a run that a stop has already ended.
        # A batch of plain successes only locks them in its first statement.
        if len(bulk) < len(outcomes):
            tx.lock_runs(locks)
        # Jobs created by this batch are inserted by its last statement, so their
        # not-before times count from (just before) the commit, not from earlier work.
        sink: list[NewJob] = []
        for i, o in enumerate(outcomes):
            definition = definitions.get(o.pipeline)
            if o.run_deadline or i in plain:
                continue  # a run deadline ends the whole run: its own transaction, below
            elif (o.result is AttemptResult.SUCCEEDED and definition is not None
                  and starts_children(o.output)):
                assert o.output is not None
                results[i] = childruns.start(tx, definition, o.attempt, o.output, retry_delay, limits, definitions)
            elif o.result is AttemptResult.SUCCEEDED and definition is not None:
                assert o.output is not None
                results[i] = record.success(tx, definition, o.attempt, o.output, retry_delay, sink, limits,
                                            o.route_key)
            else:
                results[i] = record.failure(tx, definition, o.attempt, o.ended(), o.traceback, retry_delay,
                                            max_releases=max_releases)
        if bulk:
            _record_successes(tx, outcomes, bulk, definitions, retry_delay, results, sink, limits, locks)
        if handoff is None:
            tx.insert_jobs(sink, notify=False)
        else:
            handoff.claimed = tx.insert_claimed(sink, handoff.worker_id, handoff.lease_ms, handoff.slots,
                                                handoff.pipelines, handoff.queues)
        # Each ended attempt of a limited step frees a slot of its key: hand it on.
        limited = [o.attempt for o in outcomes if o.attempt.limit_key and not o.run_deadline]
        tx.release_slots([a.job_id for a in limited])
        tx.unthrottle([a.limit_key for a in limited if a.limit_key])
        if then is not None:
            then(tx)
        tx.notify_unclaimed(sink)  # after the claim: the jobs it took need no wake-up
    childruns.committed(tx)
    if any(r is not None and r.outcome is record.Outcome.AWAITING for r in results):
        faults.checkpoint("after_children_started")  # committed: the children wait for a worker
    for i, o in enumerate(outcomes):
        if o.run_deadline:
            results[i] = _run_deadline(store, definitions.get(o.pipeline), o.attempt)
    return _finish(store, outcomes, [r for r in results if r is not None], now_ms())


def _run_deadline(store: Store, definition: Definition | None, a: record.Attempt) -> record.Recorded:
    """The run deadline killed this attempt: end the whole run (`operations.stop.expire`)
    in a transaction of its own (it rolls back if the run ended meanwhile)."""
    try:
        with store.transaction() as tx:
            if tx.lease_state(a.job_id) != (a.lease_token, JobStatus.RUNNING):
                return record.LOST
            # One its worker never started (claimed after the deadline) is skipped as waiting.
            ended = expire(tx, definition, a.run_id, unstarted=None if a.begun else a.lease_token)
    except Unchanged:
        return record.LOST
    childruns.committed(tx)
    return record.Recorded(record.Outcome.FAILED, reason=stops.DEADLINE_REASON, run_failed=ended)


def _plain_success(o: Outcome, definitions: dict[str, Definition]) -> bool:
    """Whether ``o`` is recorded with the batched statements of `_record_successes`:
    a success of a known step whose output needs no check (no expand after it)."""
    definition = definitions.get(o.pipeline)
    return (not o.run_deadline and o.result is AttemptResult.SUCCEEDED and definition is not None
            and not starts_children(o.output)
            and o.attempt.step in definition.nodes and not needs_fanout_check(definition, o.attempt.step)
            and not record.needs_route_key(definition, o.attempt.step, o.output or "null", o.route_key))


def needs_fanout_check(definition: Definition, step: str) -> bool:
    transition = definition.nodes[step].next
    return transition is not None and transition.kind is TransitionKind.EXPAND


def _record_successes(tx: Tx, outcomes: list[Outcome], indexes: list[int],
                      definitions: dict[str, Definition], retry_delay: int,
                      results: list[record.Recorded | None], sink: list[NewJob],
                      limits: payloads.Limits, locks: list[str]) -> None:
    """Record the plain successes at ``indexes``; ``locks``: the batch's runs, locked
    first (already, unless the batch holds nothing else)."""
    attempts = [outcomes[i].attempt for i in indexes]
    # A large output's job row holds a reference; its payload is written only once
    # the lease is known to be held (no orphan payloads from lost leases).
    prepared = {i: payloads.prepare(outcomes[i].output or "null", limits) for i in indexes}
    held = tx.complete_and_close([(a.job_id, a.attempt, a.lease_token, prepared[i][0], a.started_ms,
                                   a.deadline_ms) for i, a in zip(indexes, attempts)], lock_runs=locks)
    # Runs whose last step completed here are completed by one statement at the end
    # (one round trip, however many runs end in this batch).
    finish: list[tuple[str, str]] = []
    ending: list[int] = []
    completed_here: list[int] = []
    completions: list[tuple[Definition, Completed]] = []
    for i, a in zip(indexes, attempts):
        if a.job_id not in held:
            results[i] = record.LOST
            continue
        o = outcomes[i]
        stored, pending = prepared[i]
        if pending is not None:
            payloads.write(tx, a.run_id, pending, limits)
        completed_here.append(i)
        completions.append((definitions[o.pipeline], Completed(a.run_id, a.step, a.scope, stored,
                                                               o.output if pending is not None else None,
                                                               o.route_key)))
    # Advanced together: the batch's arrivals at fan-ins are counted by one statement.
    moves = advance_many(tx, completions, retry_delay, sink, limits, finish)
    for i, moved in zip(completed_here, moves):
        if moved.completes_run:
            ending.append(i)
        results[i] = record.Recorded(record.Outcome.COMPLETED, run_completed=moved.run_completed, enqueued=moved.enqueued,
                                     paused=moved.paused, skipped=moved.skipped, deferred=moved.deferred)
    if finish:
        completed = tx.complete_runs(finish)
        childruns.settled(tx, sorted(completed), definitions, retry_delay, limits)
        for i in ending:
            run_id = outcomes[i].attempt.run_id
            if run_id in completed:
                completed.discard(run_id)  # a run completes once: its first outcome says so
                results[i] = record.Recorded(record.Outcome.COMPLETED, run_completed=True)


def _finish(store: Store, outcomes: list[Outcome], results: list[record.Recorded],
            now_ms: float) -> list[record.Recorded]:
    lost = []
    for o, done in zip(outcomes, results):
        _log(o, done)
        if done.outcome is record.Outcome.LOST:
            a = o.attempt
            lost.append(Lost(o.pipeline, a.step, a.run_id, a.job_id, a.attempt))
        else:
            _emit(o, done, now_ms)
    # Another writer (the run's stop, a rescue) recorded these attempts first: what it
    # recorded says which event they get (`ductline.engine.lost`).
    report_lost(store, lost)
    return results


def _emit(o: Outcome, done: record.Recorded, now_ms: float) -> None:
    a = o.attempt
    fields = {"pipeline": o.pipeline, "step": a.step, "run_id": a.run_id, "job_id": a.job_id,
              "attempt": a.attempt}
    if done.outcome is record.Outcome.RELEASED:
        return
    runtime = None if a.started_ms is None else max(0.0, (now_ms - a.started_ms) / 1000)
    emit(EventName.JOB_COMPLETED, **fields, result=RESULT_LABELS[o.result.value], runtime_seconds=runtime,
         error_type=o.error_type, outcome=done.outcome, reason=done.reason)
    for step, count in (done.enqueued or {}).items():
        emit(EventName.JOB_ENQUEUED, pipeline=o.pipeline, step=step, run_id=a.run_id, count=count)
    for step in done.paused:
        emit(EventName.PIPELINE_PAUSED, pipeline=o.pipeline, run_id=a.run_id, step=step)
    if done.run_completed:
        emit(EventName.PIPELINE_COMPLETED, pipeline=o.pipeline, run_id=a.run_id)
    if done.halted:
        emit(EventName.PIPELINE_HALTED, pipeline=o.pipeline, run_id=a.run_id, reason=done.reason)
    if done.run_failed:
        emit(EventName.PIPELINE_FAILED, pipeline=o.pipeline, run_id=a.run_id)


def _next_attempt(done: record.Recorded) -> str:
    """``"; next attempt in 16 s, after crash 5 of at most 10 (...)"`` for a retry, else ``""``."""
    if done.outcome is not record.Outcome.RETRY or done.retry_in_ms is None:
        return ""
    return f"; next attempt in {done.retry_in_ms / 1000:g} s" + (f", {done.why}" if done.why else "")


def _log(o: Outcome, done: record.Recorded) -> None:
    extra = job_extra(o.attempt)
    if done.outcome is record.Outcome.LOST:
        if o.run_deadline or o.result is AttemptResult.CANCELLED:
            # The run's stop (its deadline, a cancel) recorded this attempt already.
            log.info("Attempt ended by the run's stop; recorded by the stop", extra=extra)
        else:
            log.warning("Lease lost; result dropped", extra=extra)
        return
    if o.interrupted:
        # The worker's stop killed it at the end of its shutdown grace: one line per
        # attempt, so the log says what the stop did (the recorded row says it too).
        if done.outcome is record.Outcome.RELEASED:
            log.warning("Attempt killed at the end of the shutdown grace; released to run again", extra=extra)
        else:
            log.warning("Attempt killed at the end of the shutdown grace; not released: its step was "
                        "interrupted by a shutdown too many times in a row", extra=extra)
    if o.run_deadline:
        log.error("Run deadline exceeded; run failed", extra=extra)
    elif o.result is AttemptResult.TIMED_OUT:
        if done.outcome is record.Outcome.RETRY:
            log.warning("Job timed out", extra=extra)
        else:
            log.error("Job exhausted retries and timed out", extra=extra)
    elif o.result is AttemptResult.ERRORED:
        log.warning("Job errored: %s: %s%s", o.error_type, o.error, _next_attempt(done), extra=extra)
    elif o.result is AttemptResult.CRASHED:
        # A step that kills its child every time waits minutes in all before its run
        # halts (the crash budget's backoff): each line says for what.
        log.warning("Job crashed: %s%s", o.error, _next_attempt(done), extra=extra)
    if done.paused:
        log.info("Run paused before step(s) %s: waiting for resume", ", ".join(done.paused), extra=extra)
    if done.deferred:
        log.info("Run waits for an event before step(s) %s", ", ".join(done.deferred), extra=extra)
    if done.halted:
        log.error("Pipeline halted: %s", done.reason, extra=extra)

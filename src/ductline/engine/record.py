"""Recording attempt outcomes: the worker applies the rulebook's `Verdict`
(`ductline.model.outcomes.decide`) with fenced writes, halts, and advances.

Every function here runs inside one write transaction; it locks the run first
(`Tx.lock_runs`: outcomes and stops of a run take turns) and then makes the write
that is conditional on the lease token. If that write changes nothing the
lease was lost (the attempt was rescued or cancelled meanwhile): the outcome is
dropped and the caller logs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ductline import codec
from ductline.dsl.graph import Definition, TransitionKind
from ductline.dsl.options import StepOptions
from ductline.model.outcomes import (
    MAX_RELEASES, Action, Budget, Charge, Ended, Verdict, check_expand_output, decide, retry_reason,
)
from ductline.model.routing import job_spec
from ductline.model.states import AttemptResult, HaltReason, JobStatus
from ductline.engine.stop import fail_fast
from ductline.engine.advance import Completed, advance
from ductline.store import payloads
from ductline.store.records import NewJob
from ductline.store.store import Tx
from ductline.engine import childruns
from ductline.model.children import starts_children

ON_HALT_STEP = "__on_halt__"


@dataclass(frozen=True, slots=True)
class Attempt:
    """The identity of one attempt, as far as recording needs it."""

    job_id: str
    run_id: str
    step: str
    scope: str
    attempt: int
    lease_token: str
    started_ms: int | None = None
    limit_key: str | None = None  # the job's concurrency/rate limit key, if limited
    deadline_ms: int | None = None  # the deadline it ran under (epoch ms), if any
    begun: bool = True  # False: claimed ahead and given back before it started


class Outcome(StrEnum):
    """What recording an attempt did to its job."""

    COMPLETED = "completed"  # succeeded; the jobs it routes to were created
    AWAITING = "awaiting"    # succeeded in starting child runs; the job awaits them (ductline.children)
    RETRY = "retry"          # a new attempt is scheduled
    RELEASED = "released"    # given back by a worker's shutdown, nothing charged
    FAILED = "failed"        # out of budget or not retryable (the run may have halted)
    LOST = "lost"            # the lease was no longer held: nothing was written


@dataclass(frozen=True, slots=True)
class Recorded:
    """What recording did (`Outcome`); ``halted`` when this outcome halted the run."""

    outcome: Outcome
    halted: bool = False
    reason: str | None = None
    run_completed: bool = False
    run_failed: bool = False
    enqueued: dict[str, int] | None = None
    paused: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()  # steps recorded skipped (a divert's routes not taken)
    deferred: tuple[str, ...] = ()  # steps whose step runs now wait for an event
    retry_in_ms: int | None = None  # a retry: how long the job waits (database clock)
    why: str | None = None  # a retry: why, in the words of the budgets (`retry_reason`)


LOST = Recorded(Outcome.LOST)


def halt(tx: Tx, definition: Definition | None, run_id: str, reason: HaltReason, step: str,
         error: str | None, retry_delay: int = 0) -> bool:
    """Halt the run (once) and, if the pipeline has one, queue its ``on_halt``
    handler; with ``on_failure="fail_fast"`` cancel the siblings still running."""
    details = {"reason": reason.value, "step": step, "error": error}
    halted = tx.halt_run(run_id, reason.value, {"halted_step": step, "error": error, "reasons": [details]})
    if halted:
        # A job its worker holds for its not-before time has not begun
        # (`ductline.model.stops.begun_by`): it waits, held like the pending jobs the
        # halt just held, instead of starting at its time in a halted run.
        tx.take_back_unstarted(run_id)
        childruns.settled(tx, [run_id], retry_delay=retry_delay or childruns.DEFAULT_RETRY_DELAY)
    if halted and definition is not None and definition.on_failure == "fail_fast":
        fail_fast(tx, run_id, step)
    if halted and definition is not None and definition.on_halt is not None:
        args = codec.dumps([[details]], what="on_halt reasons")
        spec = job_spec(definition, ON_HALT_STEP, "", args, retry_delay)
        tx.insert_jobs([NewJob.of(run_id, definition.name, ON_HALT_STEP, "", args, spec,
                                  status=JobStatus.PENDING.value, delay_ms=0)])
    return halted


def success(tx: Tx, definition: Definition, a: Attempt, output: str, retry_delay: int,
            sink: list[NewJob] | None = None, limits: payloads.Limits | None = None,
            route_key: str | None = None) -> Recorded:
    """Record a succeeded attempt and advance the run in the same transaction.

    An output is read as a structure only (`ductline.codec.structure`): the parent
    builds no user value. An expand's output is checked first
    (`check_expand_output`), and a divert's must have a route key (``route_key``,
    rendered where the step ran, or plain enough to render here): an output that
    cannot be expanded or routed is recorded as that error instead. An ``output``
    (JSON text) above ``limits.inline_bytes`` is stored out of line once the fenced
    write kept the job.
    """
    if starts_children(output):  # ductline.children([...]): the job awaits them
        started: Recorded = childruns.start(tx, definition, a, output, retry_delay,
                                            limits or payloads.DEFAULT_LIMITS)
        return started
    tx.lock_runs([a.run_id])  # before any job row: the order stops take too (no deadlock)
    node = definition.node(a.step)
    if node.next is not None and node.next.kind is TransitionKind.EXPAND:  # decode only what is checked
        refused = check_expand_output(node, codec.structure(output))
        if refused is not None:
            return failure(tx, definition, a, refused, None)
    if needs_route_key(definition, a.step, output, route_key):
        return failure(tx, definition, a, unroutable(a.step), None)
    stored, pending = payloads.prepare(output, limits or payloads.DEFAULT_LIMITS)
    if not tx.complete_job(a.job_id, a.lease_token, stored):
        return LOST
    if pending is not None:
        payloads.write(tx, a.run_id, pending, limits or payloads.DEFAULT_LIMITS)
    tx.close_attempt(a.job_id, a.attempt, a.lease_token, AttemptResult.SUCCEEDED, started_ms=a.started_ms,
                     deadline_ms=a.deadline_ms)
    if a.step == ON_HALT_STEP:
        return Recorded(Outcome.COMPLETED)
    moved = advance(tx, definition, Completed(a.run_id, a.step, a.scope, stored,
                                              output if pending is not None else None, route_key),
                    retry_delay, sink, limits)
    return Recorded(Outcome.COMPLETED, run_completed=moved.run_completed, enqueued=moved.enqueued, paused=moved.paused,
                    skipped=moved.skipped, deferred=moved.deferred)


def needs_route_key(definition: Definition, step: str, output: str, route_key: str | None) -> bool:
    """A divert's output holds a user type and no route key came with it: the
    parent cannot route it without running user code."""
    node = definition.nodes.get(step)
    if route_key is not None or node is None or node.next is None or node.next.kind is not TransitionKind.DIVERT:
        return False
    return codec.plain_str(codec.structure(output)) is None


def unroutable(step: str) -> Ended:
    """The error of an attempt whose divert key could not be rendered."""
    return Ended(AttemptResult.ERRORED, "TypeError",
                 f"step {step!r} is followed by divert and returned a value of a user type, but no route key "
                 "(str of the output) came with it")


def failure(tx: Tx, definition: Definition | None, a: Attempt, ended: Ended, traceback: str | None,
            retry_delay: int = 0, *, max_releases: int = MAX_RELEASES) -> Recorded:
    """Record an attempt that did not succeed (errored, timed out, crashed, or
    released by a worker's shutdown) as the rulebook decides (`decide`).
    ``max_releases`` is the recording worker's setting (`Budget.max_releases`)."""
    tx.lock_runs([a.run_id])  # before any job row: the order stops take too (no deadlock)
    row = tx.job_budget(a.job_id)
    budget = Budget(row.failures, row.crashes, row.max_retry, row.max_crash, row.retry_delay_seconds, row.boundary,
                    row.releases, max_releases)
    verdict = decide(ended, budget, _options(definition, a.step), handler=a.step == ON_HALT_STEP)
    if (row.lease_token, row.status) != (a.lease_token, JobStatus.RUNNING):
        return LOST
    # The attempt ends first, so the retry's not-before (read by the next statement)
    # is never earlier than the attempt's finish plus the delay.
    tx.close_attempt(a.job_id, a.attempt, a.lease_token, ended.result, ended.error_type, ended.error, traceback,
                     started_ms=a.started_ms, deadline_ms=a.deadline_ms, finished_ms=ended.finished_ms)
    if not _apply(tx, a, verdict):  # the job's run ended (cancel, deadline): the attempt stays closed
        return LOST
    if verdict.action is Action.RETRY:
        why = retry_reason(ended.result.value, ended.error_type, max_retry=budget.max_retry,
                           max_crash=budget.max_crash, failures=budget.failures + (verdict.charge is Charge.FAILURE),
                           crashes=budget.crashes + (verdict.charge is Charge.CRASH))
        return Recorded(Outcome.RETRY, retry_in_ms=verdict.delay_ms, why=why or None)
    if verdict.action is Action.RELEASE:
        return Recorded(Outcome.RELEASED)
    if verdict.halt is None:
        return Recorded(Outcome.FAILED)
    halted = halt(tx, definition, a.run_id, verdict.halt, a.step, verdict.detail, retry_delay)
    return Recorded(Outcome.FAILED, halted, verdict.halt.value)


def _apply(tx: Tx, a: Attempt, verdict: Verdict) -> bool:
    """Move the job as the verdict says (fenced on the lease token)."""
    crashed = verdict.charge is Charge.CRASH
    if verdict.action is Action.RETRY:
        return tx.retry_job(a.job_id, a.lease_token, verdict.delay_ms, crashed=crashed,
                            charged=verdict.charge is not None)
    if verdict.action is Action.RELEASE:
        released = tx.release_job(a.job_id, a.lease_token, counted=verdict.charge is Charge.RELEASE)
        if released and not a.begun:
            tx.unstart_run(a.run_id)  # if nothing of the run ran, its clock starts with the next claim
        return released
    return tx.fail_job(a.job_id, a.lease_token, crashed=crashed, released=verdict.charge is Charge.RELEASE)


def _options(definition: Definition | None, step: str) -> StepOptions | None:
    """The step's options from the definition this worker loaded (``None`` if the
    pipeline or step is unknown here: the job's stored budget and fixed delay apply)."""
    if definition is None:
        return None
    try:
        return definition.node(step).options
    except KeyError:
        return None

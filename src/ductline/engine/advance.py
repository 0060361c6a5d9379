"""Advancing a run after a step completed: the worker applies the rulebook's
`ductline.model.routing.Routing` inside the transaction that records the completion.

Fan-ins never scan their siblings on each completion: a ``ductline_fanins`` row per
fan-in counts arrivals, and only the arrival that completes it gathers the outputs
(once, in ``to=`` order for ``combine`` and element order for ``collapse``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from ductline import codec
from ductline.dsl.graph import Definition
from ductline.model.routing import ROUTE_NOT_TAKEN, Create, JobSpec, Routing, gathered_args, job_specs, route
from ductline.model.states import JobStatus
from ductline.engine.events import insert_deferred
from ductline.engine.pause import insert_paused
from ductline.store import payloads
from ductline.store.records import NewJob, new_job_ids
from ductline.store.store import Tx
from ductline.engine import childruns


@dataclass(frozen=True, slots=True)
class Completed:
    run_id: str
    step: str
    scope: str
    output: str  # JSON text as stored: the value, or a payload reference (ductline.store.payloads)
    value: str | None = None  # the full JSON text when ``output`` is a reference
    route_key: str | None = None  # str(output), rendered where the step ran (a divert's key)


@dataclass(frozen=True, slots=True)
class Advanced:
    enqueued: dict[str, int]   # jobs created, by step
    run_completed: bool = False
    paused: tuple[str, ...] = ()  # steps whose jobs were created paused
    deferred: tuple[str, ...] = ()  # steps whose jobs were created waiting for an event
    completes_run: bool = False  # the run's completion was handed to the caller's ``finish`` list
    skipped: tuple[str, ...] = ()  # steps recorded skipped (a divert's routes not taken)


def _full_output(tx: Tx, done: Completed) -> str:
    """The completed step's whole JSON text (an out-of-line output is read back only
    if the caller did not pass it along)."""
    if done.value is not None:
        return done.value
    return payloads.load_in(tx, done.run_id, done.output)


def _loader(tx: Tx, done: Completed) -> Callable[[], Any]:
    """Reads ``done``'s output as a structure (no user type is built: the parent never
    runs user code), if the rulebook needs it (expand, divert)."""
    return lambda: codec.structure(_full_output(tx, done))


def advance(tx: Tx, definition: Definition, done: Completed, retry_delay: int,
            sink: list[NewJob] | None = None, limits: payloads.Limits | None = None,
            finish: list[tuple[str, str]] | None = None) -> Advanced:
    """Create the jobs that follow ``done`` (or complete the run after its last step).

    A halted run keeps advancing what finishes, but the jobs it creates are held
    until the run is retried, so nothing new starts (the insert decides, reading the
    run's status in the same statement).

    Args:
        retry_delay: the configured default retry delay in seconds (a step's own wins).
        sink: if given, the new jobs are appended to it for the caller to insert
            with others of the same transaction; otherwise they are inserted here.
        limits: payload limits: an expand element's or a fan-in's input above the
            inline limit is stored out of line (default `payloads.DEFAULT_LIMITS`).
            Other inputs are ``[output]``, and an out-of-line output is passed on as
            its reference, never copied.
        finish: if given and ``done`` was the run's last step, ``(run_id, output)``
            is appended to it for the caller to complete with others of the same
            transaction (`Tx.complete_runs`), and the result says ``completes_run``.
    """
    return advance_many(tx, [(definition, done)], retry_delay, sink, limits, finish)[0]


def advance_many(tx: Tx, completions: list[tuple[Definition, Completed]], retry_delay: int,
                 sink: list[NewJob] | None = None, limits: payloads.Limits | None = None,
                 finish: list[tuple[str, str]] | None = None) -> list[Advanced]:
    """`advance` for the completions of one recording batch, in their order; the
    arguments are `advance`'s. Their fan-in arrivals are counted by one statement
    (`Tx.arrive_fanins`), so a batch of a hundred elements of one collapse costs one
    round trip there, not a hundred. The completion whose arrival completes a
    fan-in (the batch's last one for it) gathers its inputs, as in `advance`."""
    limits = limits or payloads.DEFAULT_LIMITS
    results: list[Advanced | None] = [None] * len(completions)
    moving: list[tuple[int, Definition, Completed, Routing]] = []
    arrivals: dict[tuple[str, str, str], list[int]] = {}  # fan-in -> [expected, arrivals, last index]
    for i, (definition, done) in enumerate(completions):
        routing = route(definition, done.step, done.scope, done.output, _loader(tx, done), done.value,
                        done.route_key)
        if routing.completes_run:
            if finish is not None:
                finish.append((done.run_id, done.output))
                results[i] = Advanced({}, completes_run=True)
            else:
                completed = tx.complete_run(done.run_id, done.output)
                if completed:
                    childruns.settled(tx, [done.run_id], retry_delay=retry_delay, limits=limits)
                results[i] = Advanced({}, run_completed=completed)
            continue
        if routing.opens is not None:
            tx.create_fanin(done.run_id, *routing.opens)
        gather = routing.gather
        if gather is not None:
            # expected=-1: a collapse's row was created with the element count at expand time.
            counted = arrivals.setdefault((done.run_id, gather.target, gather.scope),
                                          [-1 if gather.expected is None else gather.expected, 0, i])
            counted[1] += 1
            counted[2] = i
        moving.append((i, definition, done, routing))
    full = tx.arrive_fanins([(*key, expected, n) for key, (expected, n, _) in arrivals.items()])
    for i, definition, done, routing in moving:
        creates = list(routing.creates)
        gather = routing.gather
        if gather is not None and (key := (done.run_id, gather.target, gather.scope)) in full \
                and arrivals[key][2] == i:
            # Out-of-line outputs are gathered as their references (resolved when the
            # job starts); a large gathered input is itself stored out of line.
            if gather.elements:
                outputs = tx.gather_elements(done.run_id, gather.sources[0], gather.scope)
            else:
                found = tx.gather_branches(done.run_id, gather.scope, list(gather.sources))
                outputs = [found[source] for source in gather.sources]
            creates.append(Create(gather.target, gather.scope, gathered_args(outputs), spill=True))
        moved = _create(tx, definition, done.run_id, creates, retry_delay, sink, limits)
        if routing.skips:  # a divert's routes not taken
            tx.insert_skipped(done.run_id, definition.name,
                              [(d.step, d.scope, d.elem_index, d.root) for d in routing.skips], ROUTE_NOT_TAKEN)
            moved = dataclasses.replace(moved, skipped=tuple(d.step for d in routing.skips))
        results[i] = moved
    return [r for r in results if r is not None]


def _create(tx: Tx, definition: Definition, run_id: str, creates: list[Create], retry_delay: int,
            sink: list[NewJob] | None, limits: payloads.Limits) -> Advanced:
    """Make the jobs of ``creates`` (inserted here, or appended to ``sink``)."""
    if not creates:  # an arrival at a fan-in that others complete: each element but the last
        return Advanced({})
    specs = job_specs(definition, [(c.step, c.scope, c.full_args or c.args) for c in creates], retry_delay)
    ids = new_job_ids(len(creates))
    jobs = [_job(tx, definition, run_id, create, spec, job_id, limits)
            for create, spec, job_id in zip(creates, specs, ids)]
    waiting = jobs
    if definition.pauses:  # paused steps' jobs are inserted now, as 'paused' rows
        waiting = insert_paused(tx, definition, jobs)
    deferred: tuple[str, ...] = ()
    if definition.waits:  # steps that wait for an event: deferred rows now, or ready with a kept event
        waiting = insert_deferred(tx, definition, waiting, limits)
        released = {j.id for j in waiting}
        deferred = tuple(sorted({j.step for j in jobs if j.status == JobStatus.DEFERRED and j.id not in released}))
    if sink is None:
        tx.insert_jobs(waiting)
    else:
        sink.extend(waiting)
    enqueued: dict[str, int] = {}
    for job in jobs:
        enqueued[job.step] = enqueued.get(job.step, 0) + 1
    paused = tuple(sorted({j.step for j in jobs if j.status == JobStatus.PAUSED}))
    return Advanced(enqueued, paused=paused, deferred=deferred)


def _job(tx: Tx, definition: Definition, run_id: str, create: Create, spec: JobSpec, job_id: str,
         limits: payloads.Limits) -> NewJob:
    """The job of one created step run, of ``spec`` (its limit key computed from the
    full input); a large input of an expand element or a fan-in is stored out of line."""
    stored = payloads.spill(tx, run_id, create.args, limits) if create.spill else create.args
    job = NewJob.of(run_id, definition.name, create.step, create.scope, stored, spec, job_id=job_id)
    if spec.paused:
        return dataclasses.replace(job, status=JobStatus.PAUSED.value)
    if create.step in definition.waits:
        return dataclasses.replace(job, status=JobStatus.DEFERRED.value)
    return job

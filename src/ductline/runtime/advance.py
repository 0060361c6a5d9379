"""Advancing a run after a step completed: which jobs to create, inside the
transaction that records the completion.

Fan-ins never scan their siblings on each completion: a ``ductline_fanins`` row per
fan-in counts arrivals, and only the arrival that completes it gathers the outputs
(once, in ``to=`` order for ``combine`` and element order for ``collapse``).
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass

from ductline import codec
from ductline.dsl.graph import Definition, Node, TransitionKind
from ductline.runtime import scopes
from ductline.store import payloads
from ductline.runtime.limits import limit_key
from ductline.store.records import NewJob
from ductline.store.store import Tx


class FanoutRefused(Exception):
    """The output of a step followed by ``expand`` cannot be expanded."""

    def __init__(self, message: str, *, too_many: bool) -> None:
        super().__init__(message)
        self.too_many = too_many


@dataclass(frozen=True, slots=True)
class Completed:
    run_id: str
    step: str
    scope: str
    output: str  # JSON text as stored: the value, or a payload reference (ductline.store.payloads)
    value: str | None = None  # the full JSON text when ``output`` is a reference


def _full_output(tx: Tx, done: Completed) -> str:
    """The completed step's whole JSON text (an out-of-line output is read back only
    if the caller did not pass it along)."""
    if done.value is not None:
        return done.value
    return payloads.load_in(tx, done.run_id, done.output)


def check_fanout(node: Node, output: str) -> None:
    """Raise `FanoutRefused` if ``node`` expands and its output cannot be expanded."""
    if node.next is None or node.next.kind is not TransitionKind.EXPAND:
        return
    value = codec.loads(output)
    if not isinstance(value, list):
        raise FanoutRefused(
            f"step {node.name!r} is followed by expand, so it must return a list, "
            f"not {type(value).__name__}", too_many=False)
    if len(value) > node.next.max_fanout:
        raise FanoutRefused(f"step {node.name!r} returned {len(value)} elements; "
                            f"max_fanout is {node.next.max_fanout}", too_many=True)


def new_job(definition: Definition, retry_delay: int, run_id: str, step: str, scope: str,
            input_json: str, status: str) -> NewJob:
    node = definition.node(step)
    opts = node.options
    index = scopes.element_index(scope) if node.depth > 0 else None
    return NewJob(
        id=uuid.uuid4().hex, run_id=run_id, pipeline=definition.name, step=step, scope=scope,
        parent_scope=scopes.parent(scope) if index is not None else None, elem_index=index,
        status=status, input=input_json, delay_ms=opts.delay * 1000, max_retry=opts.max_retry,
        max_crash=opts.max_crash,
        retry_delay_seconds=retry_delay if opts.retry_delay is None else opts.retry_delay,
        timeout_seconds=timeout_floor(opts.timeout), priority=opts.priority,
        limit_key=limit_key(definition.name, step, opts, input_json),
    )


def timeout_floor(timeout: object) -> int | None:
    """The timeout stored on a job: seconds, or a scaled timeout's floor (the child
    reports the scaled value when the attempt starts)."""
    from ductline.dsl.timeouts import ScaledTimeout

    return timeout.floor if isinstance(timeout, ScaledTimeout) else timeout  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class Advanced:
    enqueued: dict[str, int]   # jobs created, by step
    run_completed: bool = False
    paused: tuple[str, ...] = ()  # steps whose jobs were created paused


def advance(tx: Tx, definition: Definition, done: Completed, retry_delay: int,
            sink: list[NewJob] | None = None, limits: payloads.Limits | None = None) -> Advanced:
    """Create the jobs that follow ``done`` (or complete the run after its last step).

    A halted run keeps advancing what finishes, but the jobs it creates are held
    until the run is retried, so nothing new starts (the insert decides, reading the
    run's status in the same statement).

    Args:
        sink: if given, the new jobs are appended to it for the caller to insert
            with others of the same transaction; otherwise they are inserted here.
        limits: payload limits: an expand element's or a fan-in's input above the
            inline limit is stored out of line (default `payloads.DEFAULT_LIMITS`).
            Other inputs are ``[output]``, and an out-of-line output is passed on as
            its reference, never copied.
    """
    node = definition.node(done.step)
    if definition.on_halt is not None and node is definition.on_halt:
        return Advanced({})
    status = "auto"
    transition = node.next
    if transition is None:
        return Advanced({}, run_completed=tx.complete_run(done.run_id, done.output))

    def make(step: str, scope: str, input_json: str, stored: str | None = None, *,
             spill: bool = False) -> NewJob:
        """A job whose input is ``input_json`` (what its limit key is computed from),
        stored as ``stored`` (an out-of-line output stays a reference), or spilled
        out of line when ``spill`` is set and it is above the inline limit."""
        job = new_job(definition, retry_delay, done.run_id, step, scope, input_json, status)
        if spill:
            stored = payloads.spill(tx, done.run_id, input_json, limits or payloads.DEFAULT_LIMITS)
        return job if stored is None or stored is input_json else dataclasses.replace(job, input=stored)

    as_args = f"[{done.output}]"
    full_args = as_args if done.value is None else f"[{done.value}]"
    kind = transition.kind
    jobs: list[NewJob] = []
    if kind in (TransitionKind.CHAIN, TransitionKind.CONVERGE, TransitionKind.DIVIDE):
        jobs = [make(target, done.scope, full_args, as_args) for target in transition.targets]
    elif kind is TransitionKind.DIVERT:
        key = str(codec.loads(_full_output(tx, done)))
        routes = transition.routes
        index = routes.index(key) if key in routes else routes.index("otherwise")
        jobs = [make(transition.targets[index], done.scope, full_args, as_args)]
    elif kind is TransitionKind.EXPAND:
        elements = codec.loads(_full_output(tx, done))
        assert transition.collapse is not None
        if elements:
            tx.create_fanin(done.run_id, transition.collapse, done.scope, len(elements))
            head = transition.targets[0]
            jobs = [make(head, scopes.child(done.scope, i), f"[{codec.dumps(element)}]", spill=True)
                    for i, element in enumerate(elements)]
        else:  # a collapse fires exactly once, also for zero elements
            jobs = [make(transition.collapse, done.scope, "[[]]")]
    elif kind is TransitionKind.COLLAPSE:
        target = transition.targets[0]
        outer = scopes.parent(done.scope)
        # expected=-1: the row was created with the element count at expand time.
        if tx.arrive_fanin(done.run_id, target, outer, -1):
            # Out-of-line outputs are gathered as their references (resolved when the
            # job starts); a large gathered input is itself stored out of line.
            outputs = tx.gather_elements(done.run_id, done.step, outer)
            jobs = [make(target, outer, "[[" + ",".join(outputs) + "]]", spill=True)]
    elif kind is TransitionKind.COMBINE:
        target = transition.targets[0]
        sources = list(transition.sources)
        if tx.arrive_fanin(done.run_id, target, done.scope, len(sources)):
            outputs = tx.gather_branches(done.run_id, done.scope, sources)
            jobs = [make(target, done.scope, "[[" + ",".join(outputs[s] for s in sources) + "]]", spill=True)]
    waiting = jobs
    if definition.pauses:  # paused steps' jobs are inserted now, as 'paused' rows
        from ductline.runtime.pause import insert_paused

        waiting = insert_paused(tx, definition, jobs)
    if sink is None:
        tx.insert_jobs(waiting)
    else:
        sink.extend(waiting)
    enqueued: dict[str, int] = {}
    for job in jobs:
        enqueued[job.step] = enqueued.get(job.step, 0) + 1
    paused = tuple(sorted({j.step for j in jobs if j.step in definition.pauses}))
    return Advanced(enqueued, paused=paused)

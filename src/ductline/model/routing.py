"""Which step runs a completion creates, for every transition, and what each new
job carries (its budgets, timeout, priority, limit key, delay and pause).

Pure: the worker applies a `Routing` inside the transaction that records the
completion (fan-ins counted by a row per fan-in), the in-process executor in
memory. Rules (docs/concepts/pipelines.md, "Transitions"):

- ``chain``, ``divide``, ``converge``: each target receives ``[output]``.
- ``divert``: the route whose key equals ``str(output)``, else ``otherwise``; the
  step runs of the routes not taken (up to where the routes meet) are recorded
  skipped with reason `ROUTE_NOT_TAKEN`, their root the step that diverted.
- ``expand``: one step run per element, in child scopes; zero elements create the
  collapse at once with ``[[]]`` (a collapse fires exactly once).
- ``collapse``: counted; the last element to arrive creates the collapse with the
  element outputs in element order.
- ``combine``: counted; the last branch to arrive creates the combine with the
  branch outputs in ``to=`` order.
- The last step of the pipeline completes the run with its output. The ``on_halt``
  handler creates nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ductline import codec
from ductline.dsl.graph import Definition, TransitionKind
from ductline.dsl.options import DEFAULT_QUEUE
from ductline.dsl.timeouts import ScaledTimeout
from ductline.model import scopes
from ductline.model.cascade import Dependent, dependents
from ductline.model.claim_order import UNDER_WAY, phase_of
from ductline.model.limits import limit_key
from ductline.model.states import JobStatus, RunStatus, waiting_status


ROUTE_NOT_TAKEN = "route not taken"  # skip reason of a divert's other routes


@dataclass(frozen=True, slots=True)
class Create:
    """A step run to create.

    Attributes:
        step: its step.
        scope: its scope (`ductline.model.scopes`).
        args: its input as stored, a JSON list of positional arguments (an
            out-of-line output passed on stays a reference).
        full_args: the same input with every value in full, when it differs
            from ``args`` (a limit key is computed from it).
        spill: a large input may be stored out of line (expand elements and
            gathered fan-in inputs; other inputs pass a reference on).
    """

    step: str
    scope: str
    args: str
    full_args: str | None = None
    spill: bool = False


@dataclass(frozen=True, slots=True)
class Gather:
    """A fan-in arrival: count it; the arrival that completes the count gathers the
    outputs (`gathered_args`) and creates ``target`` at ``scope``.

    Attributes:
        target: the fan-in step.
        scope: the fan-in's scope.
        expected: how many arrivals complete it (``combine``: the branch count);
            ``None`` for a ``collapse``, whose count was opened by its expand.
        sources: ``combine``: the branch tails in ``to=`` order; ``collapse``: the
            one step whose element outputs are gathered in element order.
    """

    target: str
    scope: str
    expected: int | None
    sources: tuple[str, ...]

    @property
    def elements(self) -> bool:
        return self.expected is None


@dataclass(frozen=True, slots=True)
class Routing:
    """What one completion leads to.

    Attributes:
        creates: step runs to create now.
        opens: an expand's fan-in to open: ``(collapse step, scope, element count)``.
        gather: a fan-in arrival to count.
        completes_run: the run completes with this output.
        skips: step runs of a divert's routes not taken, recorded skipped
            (`ROUTE_NOT_TAKEN`).
    """

    creates: tuple[Create, ...] = ()
    opens: tuple[str, str, int] | None = None
    gather: Gather | None = None
    completes_run: bool = False
    skips: tuple[Dependent, ...] = ()


def route(definition: Definition, step: str, scope: str, output: str,
          value: Callable[[], Any], full_output: str | None = None, route_key: str | None = None) -> Routing:
    """Route the output of a completed step run.

    Args:
        definition: the pipeline.
        step, scope: the step run that completed.
        output: its output's JSON text as stored (a value or a reference).
        value: returns the output's structure in full (`ductline.codec.structure`:
            tagged values stay tagged, no user type is built); called only by a
            divert and an expand, which look inside it.
        full_output: the output's full JSON text when ``output`` is a reference.
        route_key: ``str(output)`` as the process that ran the step rendered it
            (a divert's key); computed here from the structure when not given.

    Raises:
        TypeError: a divert's output holds a user type and no ``route_key`` was given
            (only the process that ran the step can render it).
    """
    node = definition.node(step)
    if definition.on_halt is not None and node is definition.on_halt:
        return Routing()
    transition = node.next
    if transition is None:
        return Routing(completes_run=True)
    args = f"[{output}]"
    full_args = None if full_output is None else f"[{full_output}]"
    kind = transition.kind
    if kind in (TransitionKind.CHAIN, TransitionKind.CONVERGE, TransitionKind.DIVIDE):
        return Routing(tuple(Create(target, scope, args, full_args) for target in transition.targets))
    if kind is TransitionKind.DIVERT:
        key = route_key if route_key is not None else codec.plain_str(value())
        if key is None:
            raise TypeError(f"step {step!r} is followed by divert and returned a value of a user type; its "
                            "route key (str of the output) must come from the process that ran it")
        routes = transition.routes
        index = routes.index(key) if key in routes else routes.index("otherwise")
        taken = transition.targets[index]
        return Routing((Create(taken, scope, args, full_args),),
                       skips=not_taken(definition, step, scope, taken, transition.targets))
    if kind is TransitionKind.EXPAND:
        assert transition.collapse is not None
        elements = value()
        if not elements:
            return Routing((Create(transition.collapse, scope, "[[]]"),))
        head = transition.targets[0]
        return Routing(tuple(Create(head, scopes.child(scope, i), f"[{codec.structure_text(element)}]", spill=True)
                             for i, element in enumerate(elements)),
                       opens=(transition.collapse, scope, len(elements)))
    if kind is TransitionKind.COLLAPSE:
        return Routing(gather=Gather(transition.targets[0], scopes.parent(scope), None, (step,)))
    assert kind is TransitionKind.COMBINE
    return Routing(gather=Gather(transition.targets[0], scope, len(transition.sources), transition.sources))


def not_taken(definition: Definition, step: str, scope: str, taken: str,
              targets: tuple[str, ...]) -> tuple[Dependent, ...]:
    """The step runs only the routes other than ``taken`` lead to: what those
    routes reach, less what the taken route reaches too (where the routes meet and
    after). Each is rooted at ``step``, the step that diverted."""
    shared = {(d.step, d.scope) for d in dependents(definition, [(taken, scope)])} | {(taken, scope)}
    others = [(target, scope) for target in targets if target != taken]
    found = [(target, scope) for target, _ in others] + \
        [(d.step, d.scope) for d in dependents(definition, others)]
    seen: set[tuple[str, str]] = set()
    skips = []
    for item in found:
        if item not in shared and item not in seen:
            seen.add(item)
            skips.append(Dependent(item[0], item[1], step))
    return tuple(skips)


def gathered_args(outputs: list[str]) -> str:
    """The input of a fan-in step: one argument, the list of gathered outputs (JSON
    texts, in ``to=`` or element order)."""
    return "[[" + ",".join(outputs) + "]]"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a new job of a step carries, fixed when it is created.

    Attributes:
        parent_scope, elem_index: where it sits in its expand (``None`` at top level).
        delay_ms: its delay after the completion that created it.
        max_retry, max_crash, retry_delay_seconds: its budgets and fixed retry delay.
        timeout_seconds: its step timeout (a scaled timeout's floor), or ``None``.
        priority: the step's priority (added to the run's).
        limit_key: its concurrency/rate limit key, or ``None``.
        paused: it waits for a resume (``.pause(before=)``) ...
        pause_timeout_seconds: ... at most this long (``None``: no limit).
        phase: its place in the claim order at equal priority
            (`ductline.model.claim_order`: the first step of a run comes after
            the jobs of runs already under way).
        queue: the queue it waits in (`Definition.queue_of`).
        definition: the fingerprint of the definition that created it: only a
            worker that loaded that definition claims it.
    """

    parent_scope: str | None
    elem_index: int | None
    delay_ms: int
    max_retry: int
    max_crash: int
    retry_delay_seconds: float
    timeout_seconds: int | None
    priority: int
    limit_key: str | None
    paused: bool
    pause_timeout_seconds: int | None
    phase: int = UNDER_WAY
    queue: str = DEFAULT_QUEUE
    definition: str = ""


def timeout_floor(timeout: object) -> int | None:
    """The timeout stored on a job: seconds, or a scaled timeout's floor (the
    attempt reports the scaled value once it has sized its input)."""
    if isinstance(timeout, ScaledTimeout):
        return int(timeout.floor)
    return None if timeout is None else int(timeout)  # type: ignore[call-overload]


def job_spec(definition: Definition, step: str, scope: str, input_json: str,
             default_retry_delay: float) -> JobSpec:
    """The `JobSpec` of a new job of ``step`` at ``scope`` whose full input is
    ``input_json``; ``default_retry_delay`` (seconds) applies when the step sets none."""
    node = definition.node(step)
    options = node.options
    index = scopes.element_index(scope) if node.depth > 0 else None
    return JobSpec(
        parent_scope=scopes.parent(scope) if index is not None else None, elem_index=index,
        delay_ms=options.delay * 1000, max_retry=options.max_retry, max_crash=options.max_crash,
        retry_delay_seconds=default_retry_delay if options.retry_delay is None else options.retry_delay,
        timeout_seconds=timeout_floor(options.timeout), priority=options.priority,
        limit_key=limit_key(definition.name, step, options, input_json),
        paused=step in definition.pauses, pause_timeout_seconds=definition.pauses.get(step),
        phase=phase_of(definition, step, scope), queue=definition.queue_of(step),
        definition=definition.fingerprint,
    )


def job_specs(definition: Definition, step_runs: list[tuple[str, str, str]],
              default_retry_delay: float) -> list[JobSpec]:
    """`job_spec` for each ``(step, scope, input_json)`` of ``step_runs``, in their order.

    What depends only on the step and on the scope around the step run (budgets,
    timeout, priority, pause, phase, queue, definition) is worked out once per such
    pair by `job_spec`; each step run adds its element index and its limit key
    (`ductline.model.limits.limit_key`, which reads the input when the step's limit
    is keyed). An expand's thousands of elements then cost one spec, not one each.
    """
    shared: dict[tuple[str, str, bool], JobSpec] = {}
    specs = []
    for step, scope, input_json in step_runs:
        index = scopes.element_index(scope) if definition.node(step).depth > 0 else None
        # An element's phase and parent follow from its enclosing scope alone.
        key = (step, scope if index is None else scopes.parent(scope), index is None)
        base = shared.get(key)
        if base is None:
            base = shared[key] = job_spec(definition, step, scope, input_json, default_retry_delay)
            specs.append(base)
            continue
        options = definition.node(step).options
        specs.append(JobSpec(
            parent_scope=base.parent_scope, elem_index=index, delay_ms=base.delay_ms, max_retry=base.max_retry,
            max_crash=base.max_crash, retry_delay_seconds=base.retry_delay_seconds,
            timeout_seconds=base.timeout_seconds, priority=base.priority,
            limit_key=limit_key(definition.name, step, options, input_json), paused=base.paused,
            pause_timeout_seconds=base.pause_timeout_seconds, phase=base.phase, queue=base.queue,
            definition=base.definition))
    return specs


def initial_status(spec: JobSpec, run: RunStatus) -> JobStatus:
    """The status a new job starts in: paused before a pause, else waiting
    (pending, or held in a halted run)."""
    return JobStatus.PAUSED if spec.paused else waiting_status(run)

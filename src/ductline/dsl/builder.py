"""The mutable half of the DSL: cursors that add steps and transitions.

A cursor has a tail (the step the next transition starts from) and a stack of open
fan-outs (``divide``, ``expand``, ``divert``) that a matching fan-in closes. The
pipeline itself is the root cursor; ``branch(name)`` returns the cursor of one
branch of the innermost open ``divide``/``divert``, so each branch can be extended
on its own before it is combined.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Never, Self, Unpack

from ductline.dsl.graph import EventWait, TransitionKind, Transition, check_event_name
from ductline.dsl.options import (DEFAULT_MAX_FANOUT, MAX_FANOUT, StepOptions, StepOptionsArgs, build_options,
                                  check_option_names, unknown_keywords)
from ductline.dsl.steps import check_name, reference, step_kind
from ductline.durations import optional_seconds
from ductline.errors import DefinitionError


@dataclass(slots=True)
class _Draft:
    name: str
    ref: str
    kind: str
    options: StepOptions
    depth: int
    func: Callable[..., Any]
    next: Transition | None = None


@dataclass(slots=True)
class _Frame:
    kind: TransitionKind  # DIVIDE, DIVERT or EXPAND
    source: str
    branches: list["Cursor"] = field(default_factory=list)
    routes: tuple[str, ...] = ()


class _Graph:
    """Drafts shared by every cursor of one pipeline."""

    def __init__(self, pipeline: str) -> None:
        self.pipeline = pipeline
        self.drafts: dict[str, _Draft] = {}
        self.pauses: dict[str, int | None] = {}
        self.waits: dict[str, EventWait] = {}
        self.frozen = False

    def check_open(self) -> None:
        if self.frozen:
            raise DefinitionError(
                f"pipeline {self.pipeline!r} is already in use (triggered or loaded by a worker); "
                "define every transition before using it")

    def step_before(self, before: Any, call: str, doing: str) -> str:
        """The name of the step ``before`` names (its name or its callable) for
        ``call(before=...)``.

        Raises:
            TypeError: ``before`` is neither a ``str`` nor a callable.
            DefinitionError: no such step (yet), or several steps run that callable.
        """
        if isinstance(before, str):
            if before not in self.drafts:
                raise DefinitionError(f"{call}(before={before!r}): pipeline {self.pipeline!r} has no step "
                                      f"named {before!r} (add the step before {doing})")
            return before
        if callable(before):
            names = [d.name for d in self.drafts.values() if d.func is before]
            label = getattr(before, "__name__", repr(before))
            if not names:
                raise DefinitionError(f"{call}(before={label}): pipeline {self.pipeline!r} has no step "
                                      f"running {label} (add the step before {doing})")
            if len(names) > 1:
                raise DefinitionError(f"{call}(before={label}): steps {names} all run {label}; "
                                      f"name the one to {call} before")
            return names[0]
        raise TypeError(f"{call}(before=...) takes a step's name or its callable, "
                        f"not {type(before).__name__} ({before!r})")

    def add(self, step: Any, depth: int, name: str | None, opts: Mapping[str, Any], where: str = "a transition",
            keywords: tuple[str, ...] = ("name",)) -> str:
        self.check_open()
        check_option_names(dict(opts), where, keywords)
        kind = step_kind(step)
        ref = reference(step)
        step_name = getattr(step, "__name__", None) if name is None else name
        if not isinstance(step_name, str) or not step_name:
            raise DefinitionError(f"step name must be a non-empty str, got {step_name!r}")
        check_name(step_name, "step name")
        if step_name in self.drafts or step_name == "__on_halt__":
            raise DefinitionError(
                f"pipeline {self.pipeline!r} already has a step named {step_name!r}; give one name="
            )
        options = build_options(**opts)
        self.drafts[step_name] = _Draft(step_name, ref, kind, options, depth, step)
        return step_name

    def link(self, source: str, transition: Transition) -> None:
        draft = self.drafts[source]
        if draft.next is not None:  # pragma: no cover - guarded by cursor state
            raise DefinitionError(f"step {source!r} already has a transition")
        draft.next = transition


def _names(name: Any, count: int, verb: str) -> list[str | None]:
    if name is None:
        return [None] * count
    if isinstance(name, str):
        if count != 1:
            raise DefinitionError(f"{verb}(name=...) needs a list of {count} names, one per branch")
        return [name]
    if isinstance(name, (list, tuple)) and len(name) == count:
        return list(name)
    raise DefinitionError(f"{verb}(name=...) needs a list of {count} names, one per branch, got {name!r}")


class Cursor:
    """Adds transitions after a tail step. Every method returns the cursor, so
    calls chain; the pipeline is the root cursor."""

    def __init__(self, graph: _Graph, tail: str | None, depth: int, owner: str) -> None:
        self._graph = graph
        self._tail = tail
        self._depth = depth
        self._frames: list[_Frame] = []
        self._owner = owner  # for messages: "pipeline 'x'" or "branch 'b'"
        self._closed = False

    # -- helpers ---------------------------------------------------------------
    def _require_tail(self, verb: str) -> str:
        if self._closed:
            raise DefinitionError(f"{self._owner} was already combined; it cannot be extended")
        if self._tail is None:
            if self._frames and self._frames[-1].kind is not TransitionKind.EXPAND:
                raise DefinitionError(
                    f"{verb} after {self._frames[-1].kind}: extend a branch with .branch(name) "
                    f"or close it with {'combine' if self._frames[-1].kind is TransitionKind.DIVIDE else 'converge'}"
                )
            raise DefinitionError(f"{verb} before start: call start(step) first")
        return self._tail

    def _step_list(self, to: Any, verb: str) -> list[Any]:
        if not isinstance(to, (list, tuple)) or not to:
            raise DefinitionError(f"{verb}(to=...) needs a non-empty list of steps, got {to!r}")
        return list(to)

    # -- transitions -----------------------------------------------------------
    def chain(self, to: Any, *, name: str | None = None, **opts: Unpack[StepOptionsArgs]) -> Self:
        """Run ``to`` after the tail, with the tail's output as its input."""
        tail = self._require_tail("chain")
        target = self._graph.add(to, self._depth, name, opts, "chain()")
        self._graph.link(tail, Transition(TransitionKind.CHAIN, (target,)))
        self._tail = target
        return self

    def divide(self, to: Any, *, name: Any = None, **opts: Unpack[StepOptionsArgs]) -> Self:
        """Static fan-out: every step in ``to`` receives the tail's output.

        Options apply to every branch head; ``name`` is a list of names in ``to=``
        order (a ``str`` for a single branch). Extend a branch with
        ``.branch(step_or_name)``; close the fan-out with ``combine``.
        """
        tail = self._require_tail("divide")
        steps = self._step_list(to, "divide")
        names = _names(name, len(steps), "divide")
        heads = [self._graph.add(step, self._depth, n, opts, "divide()") for step, n in zip(steps, names)]
        self._graph.link(tail, Transition(TransitionKind.DIVIDE, tuple(heads)))
        frame = _Frame(TransitionKind.DIVIDE, tail)
        frame.branches = [Cursor(self._graph, h, self._depth, f"branch {h!r}") for h in heads]
        self._frames.append(frame)
        self._tail = None
        return self

    def divert(self, to: Any, *, name: Any = None, **opts: Unpack[StepOptionsArgs]) -> Self:
        """Conditional routing on ``str(output)``: ``to`` maps keys to steps and
        must contain ``"otherwise"``; ``name`` is a list of names in ``to=`` order
        (a ``str`` for a single route). Close with ``converge``."""
        tail = self._require_tail("divert")
        if not isinstance(to, dict) or not to:
            raise DefinitionError(f"divert(to=...) needs a dict of key -> step, got {to!r}")
        if "otherwise" not in to:
            raise DefinitionError("divert(to=...) needs an 'otherwise' route")
        for key in to:
            if not isinstance(key, str):
                raise DefinitionError(f"divert keys are compared with str(output); {key!r} is not a str")
        routes = tuple(to)
        names = _names(name, len(routes), "divert")
        heads = [self._graph.add(to[key], self._depth, n, opts, "divert()") for key, n in zip(routes, names)]
        self._graph.link(tail, Transition(TransitionKind.DIVERT, tuple(heads), routes=routes))
        frame = _Frame(TransitionKind.DIVERT, tail, routes=routes)
        frame.branches = [Cursor(self._graph, h, self._depth, f"branch {h!r}") for h in heads]
        self._frames.append(frame)
        self._tail = None
        return self

    def expand(self, to: Any, *, name: str | None = None, max_fanout: int = DEFAULT_MAX_FANOUT,
               **opts: Unpack[StepOptionsArgs]) -> Self:
        """Dynamic fan-out: one run of ``to`` per element of the tail's output
        (which must be a list of at most ``max_fanout`` elements). Close with
        ``collapse``."""
        tail = self._require_tail("expand")
        if isinstance(max_fanout, bool) or not isinstance(max_fanout, int):
            raise TypeError(f"max_fanout must be an int, not {type(max_fanout).__name__}")
        if not 1 <= max_fanout <= MAX_FANOUT:
            raise ValueError(f"max_fanout must be from 1 to {MAX_FANOUT:,}, got {max_fanout}")
        head = self._graph.add(to, self._depth + 1, name, opts, "expand()", ("name", "max_fanout"))
        self._graph.link(tail, Transition(TransitionKind.EXPAND, (head,), max_fanout=max_fanout))
        self._frames.append(_Frame(TransitionKind.EXPAND, tail))
        self._depth += 1
        self._tail = head
        return self

    def combine(self, into: Any, *, name: str | None = None, **opts: Unpack[StepOptionsArgs]) -> Self:
        """Fan-in of the innermost ``divide``: ``into`` receives the list of branch
        outputs in ``to=`` order."""
        frame = self._peek(TransitionKind.DIVIDE, "combine")
        tails = tuple(self._branch_tail(b) for b in frame.branches)
        target = self._graph.add(into, self._depth, name, opts, "combine()")
        self._close(frame)
        for index, tail in enumerate(tails):
            self._graph.link(tail, Transition(TransitionKind.COMBINE, (target,), branch_index=index, sources=tails))
        self._tail = target
        return self

    def converge(self, into: Any, *, name: str | None = None, **opts: Unpack[StepOptionsArgs]) -> Self:
        """Fan-in of the innermost ``divert``: ``into`` receives the output of the
        route that ran."""
        frame = self._peek(TransitionKind.DIVERT, "converge")
        tails = [self._branch_tail(b) for b in frame.branches]
        target = self._graph.add(into, self._depth, name, opts, "converge()")
        self._close(frame)
        for tail in tails:
            self._graph.link(tail, Transition(TransitionKind.CONVERGE, (target,)))
        self._tail = target
        return self

    def collapse(self, into: Any, *, name: str | None = None, **opts: Unpack[StepOptionsArgs]) -> Self:
        """Fan-in of the innermost ``expand``: ``into`` receives the list of element
        outputs in element order (``[]`` for an empty list); it runs exactly once."""
        if not self._frames or self._frames[-1].kind is not TransitionKind.EXPAND:
            raise DefinitionError("collapse without expand" + self._open_hint())
        tail = self._require_tail("collapse")
        target = self._graph.add(into, self._depth - 1, name, opts, "collapse()")
        frame = self._frames.pop()
        self._depth -= 1
        self._graph.link(tail, Transition(TransitionKind.COLLAPSE, (target,)))
        source = self._graph.drafts[frame.source]
        assert source.next is not None
        source.next = Transition(TransitionKind.EXPAND, source.next.targets, collapse=target,
                                 max_fanout=source.next.max_fanout)
        self._tail = target
        return self

    def pause(self, before: Any, timeout: Any = None, **unknown: Never) -> Self:
        """Make the run wait for a person before step ``before`` runs.

        When the step's job is created it is stored ``paused`` (one row: no thread,
        no lease) and the run's status becomes ``paused``; other branches keep
        running. ``ductline resume RUN_ID [--input JSON]`` or
        ``RunHandle.resume(input=...)`` lets it run, optionally with a new input.
        The tail of the cursor does not move, so transitions chain on after it.

        Args:
            before: the step to pause before: its name (``str``) or its callable,
                already added to this pipeline; not the start step.
            timeout: ``int`` seconds or a whole-second ``timedelta`` the pause may
                last; when it passes without a resume the run fails closed
                (``failed``, reason ``pause_expired``). ``None`` waits forever.

        Raises:
            TypeError: ``before`` is neither a ``str`` nor a callable,
                ``timeout`` is not a duration, or an unknown keyword (the message
                names the closest valid one).
            ValueError: ``timeout`` is negative or zero.
            DefinitionError: no step ``before`` in this pipeline (yet), it names
                the start step, several steps use that callable, or the step
                already has a pause.
        """
        if unknown:  # caught here to name the valid options; ``Never`` keeps a type checker flagging it
            raise unknown_keywords("pause()", list(unknown), ("before", "timeout"), "pause options")
        graph = self._graph
        graph.check_open()
        seconds = optional_seconds(timeout, field="pause timeout", allow_zero=False)
        name = graph.step_before(before, "pause", "pausing before it")
        if name == next(iter(graph.drafts)):
            raise DefinitionError(f"pause(before={name!r}): {name!r} is the start step; a run cannot "
                                  "pause before it starts (trigger it later, or pause before a later step)")
        if name in graph.pauses:
            raise DefinitionError(f"pipeline {graph.pipeline!r} already pauses before step {name!r}")
        if name in graph.waits:
            raise DefinitionError(f"pipeline {graph.pipeline!r} waits for event {graph.waits[name].event!r} "
                                  f"before step {name!r}; a step may wait for a person or for an event, not both")
        graph.pauses[name] = seconds
        return self

    def wait_for(self, event: Any, before: Any, timeout: Any = None, **unknown: Never) -> Self:
        """Make the run wait for the named event before step ``before`` runs.

        When the step's job is created it is stored ``deferred`` (one row: no
        slot, no thread, no lease); the run stays ``running`` and other branches
        keep running. ``RunHandle.send(event, data)``, ``ductline send RUN EVENT
        --data JSON``, the API or the dashboard delivers the event: the step then
        runs with the event's data as its single argument (in place of the
        previous step's output). An event sent before the run reaches the wait is
        kept and consumed when it does; each event is consumed once.
        The tail of the cursor does not move, so transitions chain on after it.

        Args:
            event: the event's name (``str``, 1 to 200 characters, no control
                characters); unique among the pipeline's waits.
            before: the step to wait before: its name (``str``) or its callable,
                already added to this pipeline; not the start step and not a
                step inside an ``expand``.
            timeout: ``int`` seconds or a whole-second ``timedelta`` the wait may
                last; when it passes without the event the run fails
                (``failed``, reason ``event_timed_out``). ``None`` waits forever.

        Raises:
            TypeError: ``event`` is not a ``str``, ``before`` is neither a
                ``str`` nor a callable, ``timeout`` is not a duration, or an
                unknown keyword.
            ValueError: ``event`` is empty, too long or has control characters;
                ``timeout`` is negative or zero.
            DefinitionError: no step ``before`` in this pipeline (yet), it is the
                start step or inside an ``expand``, it already waits for an
                event or is paused before, or another step waits for ``event``.
        """
        if unknown:
            raise unknown_keywords("wait_for()", list(unknown), ("event", "before", "timeout"), "wait_for options")
        graph = self._graph
        graph.check_open()
        check_event_name(event)
        seconds = optional_seconds(timeout, field="event wait timeout", allow_zero=False)
        name = graph.step_before(before, "wait_for", "waiting before it")
        if name == next(iter(graph.drafts)):
            raise DefinitionError(f"wait_for(before={name!r}): {name!r} is the start step; a run cannot wait "
                                  "before it starts (trigger it when the event happens instead)")
        if graph.drafts[name].depth > 0:
            raise DefinitionError(f"wait_for(before={name!r}): {name!r} runs once per element of an expand; "
                                  "one event cannot be consumed by each element (wait before the expand)")
        if name in graph.waits:
            raise DefinitionError(f"pipeline {graph.pipeline!r} already waits for event "
                                  f"{graph.waits[name].event!r} before step {name!r}")
        if name in graph.pauses:
            raise DefinitionError(f"pipeline {graph.pipeline!r} pauses before step {name!r}; a step may "
                                  "wait for a person or for an event, not both")
        if any(w.event == event for w in graph.waits.values()):
            raise DefinitionError(f"pipeline {graph.pipeline!r} already waits for event {event!r}; "
                                  "an event name is waited for before one step only")
        graph.waits[name] = EventWait(event, seconds)
        return self

    def branch(self, step: Any) -> "Cursor":
        """The cursor of one branch of the innermost open ``divide``/``divert``,
        by step or name, to extend it before the fan-in."""
        name = step if isinstance(step, str) else getattr(step, "__name__", None)
        for frame in reversed(self._frames):
            if frame.kind is TransitionKind.EXPAND:
                break
            for cursor in frame.branches:
                if cursor._owner == f"branch {name!r}":
                    return cursor
            break
        raise DefinitionError(f"no open divide or divert has a branch {name!r}")

    # -- closing ---------------------------------------------------------------
    def _open_hint(self) -> str:
        if self._frames:
            return f" (the innermost open fan-out is a {self._frames[-1].kind})"
        return ""

    def _peek(self, kind: TransitionKind, verb: str) -> _Frame:
        self._graph.check_open()
        if not self._frames or self._frames[-1].kind is not kind:
            raise DefinitionError(f"{verb} without {kind}" + self._open_hint())
        return self._frames[-1]

    def _close(self, frame: _Frame) -> None:
        self._frames.pop()
        for branch in frame.branches:
            branch._closed = True

    def _branch_tail(self, branch: "Cursor") -> str:
        if branch._frames:
            raise DefinitionError(
                f"{branch._owner} has an open {branch._frames[-1].kind}; close it before the fan-in"
            )
        assert branch._tail is not None
        return branch._tail

    def _check_closed(self) -> None:
        if self._frames:
            closer = {TransitionKind.DIVIDE: "combine", TransitionKind.EXPAND: "collapse",
                      TransitionKind.DIVERT: "converge"}[self._frames[-1].kind]
            raise DefinitionError(
                f"{self._owner} ends with an open {self._frames[-1].kind}; close it with {closer}"
            )

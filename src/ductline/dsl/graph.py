"""The immutable result of the DSL: steps (nodes) joined by transitions.

Every step appears once in a pipeline, so each node has at most one outgoing
transition (``next``). Fan-ins are described on the *incoming* side: each branch
tail's transition names the fan-in step and the tail's position among its siblings,
so a completion can decide alone whether it closes the fan-in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable

from ductline.dsl.options import DEFAULT_QUEUE, StepOptions


class TransitionKind(StrEnum):
    CHAIN = "chain"
    DIVIDE = "divide"
    COMBINE = "combine"
    EXPAND = "expand"
    COLLAPSE = "collapse"
    DIVERT = "divert"
    CONVERGE = "converge"


@dataclass(frozen=True, slots=True)
class Transition:
    """How a node's output moves on.

    Attributes:
        kind: the transition's kind.
        targets: the created steps (``divide``: one per branch, in ``to=`` order;
            ``divert``: one per route; others: exactly one).
        routes: for ``divert``, the key (``str(output)``) each route matches, in the
            same order as ``targets``; ``"otherwise"`` is the fallback.
        branch_index: for ``combine``, this tail's position in ``to=`` order.
        sources: for ``combine``, every branch tail in ``to=`` order.
        collapse: for ``expand``, the step that gathers the elements.
        max_fanout: for ``expand``, the largest list accepted.
    """

    kind: TransitionKind
    targets: tuple[str, ...]
    routes: tuple[str, ...] = ()
    branch_index: int = 0
    sources: tuple[str, ...] = ()
    collapse: str | None = None
    max_fanout: int = 0

    @property
    def hands_on(self) -> bool:
        """Each completion readies the next step at once (``chain``, ``divide``,
        ``expand``, ``divert``, ``converge``); a ``combine`` or ``collapse`` waits
        for its siblings."""
        return self.kind not in (TransitionKind.COMBINE, TransitionKind.COLLAPSE)


EVENT_NAME_MAX = 200
"""Characters an event's name (and a send's idempotency key) may have."""


@dataclass(frozen=True, slots=True)
class EventWait:
    """A wait for an event before a step (``.wait_for(event, before=step)``).

    Attributes:
        event: the event's name.
        timeout: seconds the wait may last (``None``: forever).
    """

    event: str
    timeout: int | None


def is_unicode(text: str) -> bool:
    """Whether ``text`` holds no lone surrogate (``"\\ud800"``), i.e. can be stored
    as UTF-8 text and read back as itself."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_event_name(name: object, what: str = "an event's name") -> str:
    """``name`` if it is a valid event name (or send key): a ``str`` of 1 to
    `EVENT_NAME_MAX` characters without control characters or lone surrogates
    (a lone surrogate cannot be stored as text: it would be kept as its escape and
    alias another name or key).

    Raises:
        TypeError: not a ``str``.
        ValueError: empty, too long, with a control character or a lone surrogate.
    """
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, not {type(name).__name__} ({name!r})")
    if not name or len(name) > EVENT_NAME_MAX:
        raise ValueError(f"{what} must have 1 to {EVENT_NAME_MAX} characters, not {len(name)}")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError(f"{what} must not contain control characters: {name!r}")
    if not is_unicode(name):
        raise ValueError(f"{what} must not contain lone surrogates: {name!r}")
    return name


@dataclass(frozen=True, slots=True)
class Node:
    """A step of the definition.

    Attributes:
        name: unique within the pipeline.
        ref: ``module:qualname`` of the callable.
        kind: ``"function"``, ``"async"`` or ``"class"``.
        options: validated options.
        depth: how many ``expand`` scopes enclose the step (0 at top level).
        next: the outgoing transition, ``None`` for the last step.
    """

    name: str
    ref: str
    kind: str
    options: StepOptions
    depth: int
    next: Transition | None
    func: Callable[..., Any] = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Definition:
    """A validated pipeline graph.

    Attributes:
        name: the pipeline's name.
        start: the first step's name.
        nodes: every step by name, in declaration order.
        timeout: the whole-run deadline in seconds, or ``None``.
        on_halt: the halt handler node, or ``None``.
        on_failure: ``"halt"`` (running siblings finish) or ``"fail_fast"``
            (running siblings are cancelled when a step fails for good).
        priority: the default priority of its runs (a trigger may override it).
        pauses: steps that wait for a person before they run (``.pause(before=)``),
            by name, with the pause's timeout in seconds (``None``: no timeout).
        waits: steps that wait for an event before they run (``.wait_for(event,
            before=)``), by name.
        queue: the queue of its steps that name none (``Pipeline(queue=)``).
        fingerprint: what identifies this version of the graph among deploys
            (`ductline.dsl.fingerprint`); ``""`` for none.
    """

    name: str
    start: str
    nodes: dict[str, Node]
    timeout: int | None
    on_halt: Node | None
    on_failure: str = "halt"
    priority: int = 0
    pauses: dict[str, int | None] = field(default_factory=dict)
    waits: dict[str, EventWait] = field(default_factory=dict)
    queue: str = DEFAULT_QUEUE
    fingerprint: str = ""

    def queue_of(self, step: str) -> str:
        """The queue jobs of ``step`` wait in: its own ``queue=``, else the pipeline's."""
        return self.node(step).options.queue or self.queue

    @property
    def queues(self) -> list[str]:
        """Every queue a job of this pipeline can wait in, sorted."""
        steps = [*self.nodes, *([] if self.on_halt is None else [self.on_halt.name])]
        return sorted({self.queue_of(step) for step in steps})

    def node(self, name: str) -> Node:
        if self.on_halt is not None and name == self.on_halt.name:
            return self.on_halt
        return self.nodes[name]

    @property
    def last(self) -> str:
        """The step whose completion completes the run (the only top-level end)."""
        for node in self.nodes.values():
            if node.next is None and node.depth == 0:
                return node.name
        raise AssertionError("a validated definition has a last step")


def served_definitions(definitions: dict[str, Definition]) -> list[str]:
    """The fingerprints a worker that loaded ``definitions`` claims jobs of: theirs,
    and ``""`` (runs started before versions were recorded, which any worker of
    their pipeline serves)."""
    return sorted({"", *(d.fingerprint for d in definitions.values())})


def definition_for(definitions: dict[str, Definition], pipeline: str, fingerprint: str) -> Definition | None:
    """The definition of ``pipeline`` this process loaded, if it is the one a run
    with ``fingerprint`` follows (or either is from before versions): another
    version's graph must not route, gather or skip for that run."""
    definition = definitions.get(pipeline)
    if definition is None or not fingerprint or not definition.fingerprint:
        return definition
    return definition if definition.fingerprint == fingerprint else None


def find_node(definitions: dict[str, Definition], pipeline: str, step: str) -> Node | None:
    """The node of ``step`` in ``pipeline`` among ``definitions``, if this process knows it
    (a worker may claim a job of a step a deploy renamed or removed)."""
    definition = definitions.get(pipeline)
    return definition.nodes.get(step) if definition is not None else None

"""In-memory state of an in-process run: step runs, attempt outcomes, and the walk
over the definition graph used to skip dependents.

A step run is identified by its step name and its *scope*: a tuple of element
indexes, one per enclosing ``expand`` (``()`` at top level), the same addressing as
the durable engine's ``"0/3"`` scopes. ``None`` in a scope stands for the elements
of an expand that never produced any (only skipped step runs have it).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterator

from ductline.dsl.graph import Definition, Node, TransitionKind

Scope = tuple[int | None, ...]

TERMINAL = frozenset({"completed", "failed", "skipped", "cancelled"})


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def scope_text(scope: Scope) -> str:
    return "/".join("*" if i is None else str(i) for i in scope)


def scope_key(scope: Scope) -> tuple[int, ...]:
    """Sort key: element order, never-created elements last."""
    return tuple((1 << 62) if i is None else i for i in scope)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended.

    Attributes:
        result: ``succeeded``, ``errored``, ``timed_out`` or ``crashed``.
        output: JSON text of the output when succeeded.
        reusable: the child process that ran it may run another attempt.
    """

    result: str
    output: str | None = None
    error_type: str | None = None
    error: str | None = None
    traceback: str | None = None
    reusable: bool = False


@dataclass(slots=True)
class Limit:
    """An attempt's step timeout, movable while it runs (a scaled timeout is
    reported by the attempt once it has sized its input).

    Attributes:
        started: event-loop time the attempt started.
        seconds: the timeout in seconds, ``None`` for none.
    """

    started: float
    seconds: float | None

    @property
    def at(self) -> float | None:
        return None if self.seconds is None else self.started + self.seconds


@dataclass(eq=False, slots=True)
class StepRun:
    """One step run and its attempts."""

    node: Node
    scope: Scope
    input: str                      # JSON list of positional arguments
    job_id: str
    status: str = "pending"         # pending | running | completed | failed | skipped | cancelled
    output: Any = None
    output_json: str | None = None
    error_type: str | None = None
    error: str | None = None
    skip_reason: str | None = None
    attempts: int = 0
    failures: int = 0               # errored and timed-out attempts (max_retry)
    crashes: int = 0                # crashed attempts (max_crash)
    boundary: str | None = None     # set by ductline.cross_boundary()
    started_at: datetime | None = None
    finished_at: datetime | None = None
    attempt_started: float = 0.0    # clock.now() at the current attempt's start
    task: asyncio.Task[None] | None = None
    span: Any = None                # the current attempt's span, if tracing

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def index(self) -> int | None:
        return self.scope[-1] if self.scope else None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def label(self) -> str:
        return self.name if not self.scope else f"{self.name}[{scope_text(self.scope)}]"


def successors(definition: Definition, step: str, scope: Scope) -> Iterator[tuple[str, Scope]]:
    """The step runs that would follow ``(step, scope)``, for skipping.

    After an ``expand`` whose source never completed the elements are unknown:
    they are represented once, with ``None`` as their index.
    """
    transition = definition.node(step).next
    if transition is None:
        return
    if transition.kind is TransitionKind.EXPAND:
        yield transition.targets[0], scope + (None,)
    elif transition.kind is TransitionKind.COLLAPSE:
        yield transition.targets[0], scope[:-1]
    else:
        for target in transition.targets:
            yield target, scope

"""`PipelineBuilder`: the DSL's pipeline declaration and the registry of the
pipelines defined in this process. `ductline.Pipeline` adds the client verbs
(trigger) on top of it; the DSL itself never touches a database."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Never, Self, Unpack

from ductline.dsl.builder import Cursor, _Graph
from ductline.dsl.fingerprint import fingerprint
from ductline.dsl.graph import Definition, Node
from ductline.dsl.options import StepOptionsArgs, DEFAULT_QUEUE, build_options, check_priority, check_queue, unknown_keywords
from ductline.dsl.steps import check_name, reference, step_kind
from ductline.durations import optional_seconds
from ductline.errors import DefinitionError, PipelineNotFound

log = logging.getLogger("ductline")

# Pipelines register themselves by name when they are defined, so a worker that
# imported an app module can find the definition of any run it claims.
_REGISTRY: dict[str, "PipelineBuilder"] = {}


def registered(name: str) -> "PipelineBuilder":
    """The pipeline of that name defined in this process.

    Raises:
        PipelineNotFound: if no imported module defined it.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise PipelineNotFound(f"no pipeline named {name!r} is defined in this process") from None


def registered_definition(name: str) -> Definition | None:
    """The validated definition of the pipeline of that name, if this process
    defined it (and it is valid), else ``None``."""
    known = _REGISTRY.get(name)
    if known is None:
        return None
    try:
        return known.definition()
    except DefinitionError:
        return None


def registered_names() -> list[str]:
    return sorted(_REGISTRY)


class PipelineBuilder(Cursor):
    """The declaration half of `ductline.Pipeline`: a named definition built by chaining
    transitions (arguments and errors: see `ductline.Pipeline`)."""

    # The options `__init__` takes, listed by the error for one it does not.
    OPTIONS = ("name", "timeout", "on_failure", "priority", "queue")

    def __init__(self, name: str, timeout: Any = None, *, on_failure: str = "halt",
                 priority: int = 0, queue: str = DEFAULT_QUEUE, **unknown: Never) -> None:
        # ``**unknown`` catches a misspelt option so the error can name the valid
        # ones; typed ``Never`` so a type checker still flags it.
        if unknown:
            raise unknown_keywords(f"Pipeline({name!r})", list(unknown), self.OPTIONS, "Pipeline options")
        if not isinstance(name, str) or not name.strip():
            raise TypeError(f"pipeline name must be a non-empty str, got {name!r}")
        check_name(name, "pipeline name")
        if on_failure not in ("halt", "fail_fast"):
            raise ValueError(f"on_failure must be 'halt' or 'fail_fast', got {on_failure!r}")
        self.on_failure = on_failure
        self.priority = check_priority(priority)
        self.queue = check_queue(queue)
        self.name = name
        self.timeout = optional_seconds(timeout, field="timeout", allow_zero=False)
        graph = _Graph(name)
        super().__init__(graph, None, 0, f"pipeline {name!r}")
        self._start: str | None = None
        self._on_halt: Node | None = None
        self._definition: Definition | None = None
        if name in _REGISTRY:
            log.warning("Pipeline %r is defined twice in this process; the later definition replaces "
                        "the earlier (give pipelines unique names)", name)
        _REGISTRY[name] = self

    def start(self, step: Any, *, name: str | None = None, **opts: Unpack[StepOptionsArgs]) -> Self:
        """Declare the first step; it receives the trigger's arguments.

        Raises:
            DefinitionError: if ``start`` was already called.
        """
        if self._start is not None:
            raise DefinitionError(f"pipeline {self.name!r}: start() may be called only once")
        self._start = self._graph.add(step, 0, name, opts, "start()")
        self._tail = self._start
        return self

    def on_halt(self, handler: Any) -> Self:
        """Run ``handler(reasons)`` at most once each time a run halts; ``reasons``
        is a list of dicts with ``reason``, ``step`` and ``error``."""
        self._graph.check_open()
        if self._on_halt is not None:
            raise DefinitionError(f"pipeline {self.name!r}: on_halt() may be called only once")
        kind = step_kind(handler)
        self._on_halt = Node(
            name="__on_halt__", ref=reference(handler), kind=kind,
            options=build_options(max_retry=1, max_crash=0), depth=0, next=None, func=handler,
        )
        return self

    def definition(self) -> Definition:
        """The validated, immutable graph (built once, on first use).

        Raises:
            DefinitionError: no start step, or a fan-out left open.
        """
        if self._definition is None:
            if self._start is None:
                raise DefinitionError(f"pipeline {self.name!r} has no start step")
            self._check_closed()
            nodes = {
                d.name: Node(d.name, d.ref, d.kind, d.options, d.depth, d.next, d.func)
                for d in self._graph.drafts.values()
            }
            built = Definition(self.name, self._start, nodes, self.timeout, self._on_halt,
                               self.on_failure, self.priority, pauses=dict(self._graph.pauses),
                               waits=dict(self._graph.waits), queue=self.queue)
            self._definition = replace(built, fingerprint=fingerprint(built))
            self._graph.frozen = True
        return self._definition

    def __repr__(self) -> str:
        return f"Pipeline({self.name!r})"

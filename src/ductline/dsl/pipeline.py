"""`Pipeline`: the public builder and its registry of known definitions."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ductline.dsl.builder import Cursor, _Graph
from ductline.dsl.graph import Definition, Node
from ductline.dsl.options import build_options, check_priority
from ductline.dsl.steps import reference, step_kind
from ductline.durations import optional_seconds
from ductline.errors import DefinitionError, PipelineNotFound

if TYPE_CHECKING:
    from datetime import datetime
    from ductline.handle import RunHandle

log = logging.getLogger("ductline")

# Pipelines register themselves by name when they are defined, so a worker that
# imported an app module can find the definition of any run it claims.
_REGISTRY: dict[str, "Pipeline"] = {}


def registered(name: str) -> "Pipeline":
    """The pipeline of that name defined in this process.

    Raises:
        PipelineNotFound: if no imported module defined it.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise PipelineNotFound(f"no pipeline named {name!r} is defined in this process") from None


def registered_names() -> list[str]:
    return sorted(_REGISTRY)


class Pipeline(Cursor):
    """A named pipeline definition, built by chaining transitions.

    Args:
        name: unique name of the pipeline (stored with every run).
        timeout: whole-run deadline, an ``int`` of seconds or a whole-second
            ``timedelta``, measured on the database clock from the run's first
            attempt start; ``None`` for none.
        on_failure: ``"halt"`` (default: when a step fails for good, siblings
            already running finish and nothing new starts) or ``"fail_fast"``
            (siblings still running are cancelled at once).
        priority: default priority of its runs, -100 to 100 (default 0); a
            trigger may override it, and each step's ``priority=`` is added.

    Raises:
        TypeError: ``name`` is not a ``str``, ``timeout`` is not a duration, or
            ``priority`` is not an ``int``.
        ValueError: ``timeout`` is negative or zero, or ``priority`` is outside -100..100.

    Example::

        pipeline = Pipeline("enrich").start(query).expand(to=load).collapse(into=report)
    """

    def __init__(self, name: str, timeout: Any = None, *, on_failure: str = "halt",
                 priority: int = 0) -> None:
        if not isinstance(name, str) or not name.strip():
            raise TypeError(f"pipeline name must be a non-empty str, got {name!r}")
        if on_failure not in ("halt", "fail_fast"):
            raise ValueError(f"on_failure must be 'halt' or 'fail_fast', got {on_failure!r}")
        self.on_failure = on_failure
        self.priority = check_priority(priority)
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

    def start(self, step: Any, *, name: str | None = None, **opts: Any) -> "Pipeline":
        """Declare the first step; it receives the trigger's arguments.

        Raises:
            DefinitionError: if ``start`` was already called.
        """
        if self._start is not None:
            raise DefinitionError(f"pipeline {self.name!r}: start() may be called only once")
        self._start = self._graph.add(step, 0, name, opts)
        self._tail = self._start
        return self

    def on_halt(self, handler: Any) -> "Pipeline":
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
            self._definition = Definition(self.name, self._start, nodes, self.timeout, self._on_halt,
                                          self.on_failure, self.priority, pauses=dict(self._graph.pauses))
            self._graph.frozen = True
        return self._definition

    def trigger(
        self,
        *args: Any,
        delay: Any = None,
        delay_until: "datetime | None" = None,
        timeout: Any = None,
        database: Any = None,
        key: str | None = None,
        priority: int | None = None,
    ) -> "RunHandle":
        """Start a run of this pipeline.

        Args:
            *args: arguments of the first step; each must obey the JSON rule. Their
                JSON above ``payload_inline_bytes`` (default 1 MiB) is stored out of
                line with the run; above ``payload_max_bytes`` (64 MiB) it is refused.
            delay: overrides the start step's delay (int seconds or ``timedelta``).
            delay_until: an aware ``datetime`` to start at instead.
            timeout: overrides the whole-run deadline (seconds or ``timedelta``).
            database: a database URL or a ``Store``; defaults to the configured one.
            key: an idempotency key (1 to 1000 characters, no NUL). While a run of
                this pipeline holding the same key is active (pending, running,
                paused or halted), triggering again starts nothing and returns that
                run's handle with ``created=False``; once it completed, failed or was
                cancelled the key is free again.
            priority: this run's priority instead of the pipeline's (-100 to 100);
                each job's priority is its run's plus its step's ``priority=``.

        Returns:
            A `RunHandle` with ``id``, ``status()`` and ``wait(timeout)``.

        Raises:
            TypeError: an argument does not round-trip through JSON, or a duration
                has the wrong type.
            ValueError: ``delay`` and ``delay_until`` together, a naive or past
                ``delay_until``, a negative duration, or an invalid ``key``.
                Nothing is written.
            ductline.PayloadTooLarge: (a ``ValueError``) the arguments' JSON is above
                ``payload_max_bytes`` of the triggering process's settings. Nothing
                is written.
        """
        from ductline.trigger import trigger_run

        return trigger_run(self, args, delay=delay, delay_until=delay_until, timeout=timeout,
                           database=database, key=key, priority=priority)

    def __repr__(self) -> str:
        return f"Pipeline({self.name!r})"

"""`Pipeline`: the public pipeline declaration (`ductline.dsl`) with the client
verbs that start runs (`ductline.operations.trigger`)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ductline.dsl.pipeline import PipelineBuilder

if TYPE_CHECKING:
    from ductline.handle import RunHandle


class Pipeline(PipelineBuilder):
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
        queue: the queue of its steps that name none with ``queue=`` (default
            ``"default"``); a worker claims only the queues it serves
            (``ductline worker --queue``).

    Raises:
        TypeError: ``name`` is not a ``str``, ``timeout`` is not a duration,
            ``priority`` is not an ``int``, or an option it does not take (the
            message names the closest valid one and lists them; so does every
            transition for an unknown step option).
        ValueError: ``timeout`` is negative or zero, ``priority`` is outside -100..100,
            or ``queue`` is not a queue name (`ductline.dsl.options.check_queue`).
        DefinitionError: ``name`` is longer than 200 characters or not printable
            text (`ductline.dsl.steps.check_name`); step names follow the same rule.

    Example:
        ```python
        pipeline = Pipeline("enrich").start(query).expand(to=load).collapse(into=report)
        ```
    """

    def trigger(
        self,
        *args: Any,
        delay: Any = None,
        delay_until: "datetime | None" = None,
        timeout: Any = None,
        database: Any = None,
        key: str | None = None,
        priority: int | None = None,
        tags: "Mapping[str, str] | None" = None,
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
            key: an idempotency key (1 to 1000 characters, no NUL or lone
                surrogate). While a run of this pipeline holding the same key is active (pending, running,
                paused or halted), triggering again starts nothing and returns that
                run's handle with ``created=False``; once it completed, failed or was
                cancelled the key is free again.
            priority: this run's priority instead of the pipeline's (-100 to 100);
                each job's priority is its run's plus its step's ``priority=``.
            tags: labels to find the run by (``{"customer": "acme"}``; ``ductline runs
                --tag customer=acme``): at most 20, each key 1 to 64 letters, digits
                or ``_ . - : /``, each value a ``str`` of at most 256 characters
                without NUL (`ductline.model.tags`). Written with the run.

        Returns:
            A `RunHandle` with ``id``, ``status()`` and ``wait(timeout)``.

        Raises:
            RuntimeError: called at the top level of a module while ductline
                imports it as an app (a worker, its children, a command given
                ``--app``) to find its steps (guard the call with
                ``if __name__ == "__main__":``). Nothing is written.
            TypeError: an argument does not round-trip through JSON, or a duration
                has the wrong type; `ductline.StepSignatureError` (a ``TypeError``)
                when the arguments do not bind to the first step's signature
                (its constructor's for a `ductline.Step` subclass), checked as its
                attempt would check them. Nothing is written.
            ValueError: ``delay`` and ``delay_until`` together, a naive or past
                ``delay_until``, a negative duration, an invalid ``key``, or tags
                past a limit (the message names it). Nothing is written.
            ductline.PayloadTooLarge: (a ``ValueError``) the arguments' JSON is above
                ``payload_max_bytes`` of the triggering process's settings. Nothing
                is written.
        """
        from ductline.execution import importing
        from ductline.handle import RunHandle  # here: a worker's children import pipelines, never trigger
        from ductline.operations.trigger import trigger_run

        importing.refuse(f"{self.name}.trigger()")
        store, triggered = trigger_run(self.definition(), args, database=database, delay=delay,
                                       delay_until=delay_until, timeout=timeout, key=key, priority=priority,
                                       tags=tags)
        return RunHandle(triggered.run_id, store, created=triggered.created)

    def trigger_many(
        self,
        args_list: Iterable[Any],
        *,
        delay: Any = None,
        delay_until: "datetime | None" = None,
        timeout: Any = None,
        database: Any = None,
        priority: int | None = None,
        tags: "Mapping[str, str] | None" = None,
    ) -> list[RunHandle]:
        """Start many runs of this pipeline in one transaction: all of them, or none.

        Every element is validated and encoded before anything is written; the runs
        and their first jobs are then written with a few set-based statements, so a
        bulk load costs far fewer round trips than a loop of `trigger` calls. When
        anything below is raised, nothing is written.

        Args:
            args_list: one element per run: a ``tuple`` is that run's positional
                arguments; any other value is its single argument (so
                ``trigger_many([1, 2])`` starts two runs, like ``trigger(1)`` and
                ``trigger(2)``; pass ``([1, 2],)`` for one run whose argument is a
                list). Each argument obeys the JSON rule of `trigger`.
            delay: as in `trigger`, for every run of the call.
            delay_until: as in `trigger`, for every run of the call.
            timeout: as in `trigger`, for every run of the call.
            database: as in `trigger`.
            priority: as in `trigger`, for every run of the call.
            tags: as in `trigger`, on every run of the call.

        Returns:
            One `RunHandle` per element, in order (an empty list for no elements).

        Raises:
            RuntimeError: called at the top level of a module while ductline
                imports it as an app (a worker, its children, a command given
                ``--app``) to find its steps (guard the call with
                ``if __name__ == "__main__":``). Nothing is written.
            TypeError: ``args_list`` is not an iterable of elements (a ``str``,
                ``bytes`` or ``dict`` is refused), an element does not round-trip
                through JSON or does not bind to the first step's signature (the
                message names the element's index), or a duration has the wrong type.
            ValueError: as in `trigger` (``delay`` with ``delay_until``, a naive or
                past ``delay_until``, a negative duration).
            ductline.PayloadTooLarge: (a ``ValueError``) an element's arguments are
                above ``payload_max_bytes``; the message names its index.
            ductline.StoreError: the database failed; the transaction rolled back.
        """
        from ductline.execution import importing
        from ductline.handle import RunHandle
        from ductline.operations.trigger import trigger_runs

        importing.refuse(f"{self.name}.trigger_many()")
        store, triggered = trigger_runs(self.definition(), args_list, database=database, delay=delay,
                                        delay_until=delay_until, timeout=timeout, priority=priority,
                                        tags=tags)
        return [RunHandle(t.run_id, store) for t in triggered]

    async def trigger_async(self, *args: Any, delay: Any = None, delay_until: "datetime | None" = None,
                            timeout: Any = None, database: Any = None, key: str | None = None,
                            priority: int | None = None, tags: "Mapping[str, str] | None" = None) -> RunHandle:
        """`trigger` for asyncio code: the database work runs in a worker thread, so
        the event loop is never blocked. Same arguments, result and errors."""
        import asyncio

        return await asyncio.to_thread(self.trigger, *args, delay=delay, delay_until=delay_until,
                                       timeout=timeout, database=database, key=key, priority=priority,
                                       tags=tags)

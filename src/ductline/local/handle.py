"""`LocalRun`: an in-process run under way, which its caller may cancel or resume."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ductline import codec
from ductline.execution import importing
from ductline.model.inputs import NO_INPUT
from ductline.local.clock import Clock
from ductline.engine.events import Sent
from ductline.local.driver import Driver
from ductline.local.options import OnUpdate, Resume, definition_of, run_options
from ductline.local.results import WorkflowResult


class LocalRun:
    """A run of `ductline.local.start`, executing in the running event loop.

    Its methods must be called from the loop's thread.
    """

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._task = asyncio.create_task(driver.run(), name=f"ductline run {driver.run_id}")

    @property
    def id(self) -> str:
        """The run id (32 hex characters)."""
        return self._driver.run_id

    @property
    def status(self) -> str:
        """The run's `RunStatus` value: ``pending``, ``running``, ``paused``,
        ``halted`` (running siblings may still finish), ``completed``, ``failed``
        or ``cancelled``."""
        return self._driver.status().value

    def done(self) -> bool:
        """Whether the run has finished and its result is ready."""
        return self._task.done()

    def cancel(self) -> None:
        """Cancel the run at once: in-flight attempts are recorded ``cancelled``
        (their children killed), waiting and paused step runs and the dependents
        of every open step run are skipped with reason ``cancelled``, and the run
        ends ``cancelled``. `result` then returns (it does not raise).

        Raises:
            InvalidStateError: the run already finished.
        """
        self._driver.cancel()

    def resume(self, input: Any = NO_INPUT) -> list[str]:
        """Resume a paused run: its paused step runs become ready at once (after
        what is left of their step's delay) and the run ``running`` again.

        Args:
            input: the paused step's new single argument, any value that
                round-trips through JSON; omitted (`ductline.handle.NO_INPUT`), the
                step runs with the input it was paused with.

        Returns:
            The names of the steps resumed.

        Raises:
            TypeError: ``input`` does not round-trip through JSON.
            PayloadTooLarge: ``input`` is above ``payload_max_bytes`` as JSON.
            InvalidStateError: the run is not paused (also: it halted, or it
                ended), or an input was given while several step runs are paused.
                Nothing is changed.
        """
        return self._driver.resume(input)

    def send(self, event: str, data: Any = None, key: str | None = None) -> Sent:
        """Send the event ``event`` to the run (``.wait_for(event, before=step)``):
        a step run waiting for it becomes ready at once with ``data`` as its single
        argument; otherwise the event is kept until the run reaches the wait.

        Args:
            event: the event's name.
            data: any value that round-trips through JSON; default ``None``.
            key: an idempotency key: a second send with the same key writes
                nothing and returns ``Sent(duplicate=True)``.

        Returns:
            `ductline.engine.events.Sent` (``event_id``, ``duplicate``, ``step``).

        Raises:
            TypeError, ValueError: a bad ``event`` or ``key``, or ``data`` that
                does not round-trip.
            PayloadTooLarge: ``data`` is above ``payload_max_bytes`` as JSON.
            InvalidStateError: the run already finished. Nothing is written.
            TooManyKeptEvents: no step waits for ``event`` now and the run keeps
                ``max_kept_events`` events already. Nothing is written.
        """
        return self._driver.send(event, data, key)

    async def result(self) -> WorkflowResult:
        """Wait for the run to end and return its result.

        Cancelling the task that awaits this cancels the run as `execute_async`
        does: its children are killed, its tasks awaited, and `CancelledError`
        is raised again.

        Raises:
            Exception: whatever the executor raised (a bug, or a ``resume``
                callable's error), after the run was cancelled.
        """
        return await self._task

    def __repr__(self) -> str:
        return f"LocalRun({self.id!r}, {self.status!r})"


def start(pipeline: Any, *args: Any, timeout: Any = None, on_update: OnUpdate | None = None,
          clock: Clock | None = None, concurrency: int | None = None, retry_delay: Any = None,
          kill_grace: Any = None, tracer_provider: Any = None, resume: Resume | None = None,
          log_level: str | None = None, inline: bool = False, events: Mapping[str, Any] | None = None,
          mark_succeeded: Mapping[str, Any] | None = None) -> LocalRun:
    """Start a pipeline in the running event loop, without a database, and return
    its `LocalRun` at once (the options are those of `ductline.execute`).

    ``inline=True`` runs sync steps in threads of this process instead of child
    processes (`ductline.testing`: mocks and ``monkeypatch`` reach them).

    Unlike `execute`, a pause without a timeout that ``resume`` does not cover is
    allowed: the run waits in ``paused`` until `LocalRun.resume` or `LocalRun.cancel`;
    so is a wait for an event without a timeout that ``events`` does not give
    (`LocalRun.send` delivers it).

    Raises:
        RuntimeError: no event loop is running.
        TypeError, ValueError, DefinitionError: as `ductline.execute`, before
            anything runs.
    """
    asyncio.get_running_loop()  # RuntimeError outside a loop, before anything is built
    importing.refuse("ductline.execute()")
    definition = definition_of(pipeline)
    args_json = codec.dumps(list(args), what="arguments")
    options = run_options(definition, timeout=timeout, on_update=on_update, clock=clock,
                          concurrency=concurrency, retry_delay=retry_delay, kill_grace=kill_grace,
                          tracer_provider=tracer_provider, resume=resume, log_level=log_level, inline=inline,
                          events=events, mark_succeeded=mark_succeeded)
    return LocalRun(Driver(definition, args_json, options))

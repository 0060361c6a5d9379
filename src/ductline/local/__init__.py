"""The in-process executor: run a pipeline without a database.

``ductline.execute(pipeline, *args)`` runs a pipeline in one asyncio event loop over
an in-memory store, with the worker's own engine (`ductline.engine`): every outcome
is recorded, routed, halted, stopped, paused and resumed by the code a worker runs,
with the same rulebook (`ductline.model`): sync steps in killable child processes,
``async def`` steps in the loop, the same per-step timeouts, retry budgets and retry
options, delays, fan-out/fan-in, halts (with ``on_halt`` and
``on_failure="fail_fast"``), pauses and their resumes, and a whole-run deadline
that cancels and awaits everything in flight and returns a `WorkflowResult` (it
never raises for a timeout or a cancel).
It is also the test mode for users' pipelines: pass a ``clock`` to shorten delays.
`start` returns a `LocalRun` to cancel or resume the run while it runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ductline.local.clock import Clock, RealClock
from ductline.local.handle import LocalRun, start
from ductline.local.options import OnUpdate, Resume, check_resumable, check_sendable, definition_of
from ductline.local.results import AttemptRecord, LogEntry, StepResult, WorkflowResult

__all__ = ["AttemptRecord", "Clock", "LocalRun", "LogEntry", "RealClock", "StepResult", "WorkflowResult", "execute",
           "execute_async", "start"]


async def execute_async(
    pipeline: Any,
    *args: Any,
    timeout: Any = None,
    on_update: OnUpdate | None = None,
    clock: Clock | None = None,
    concurrency: int | None = None,
    retry_delay: Any = None,
    kill_grace: Any = None,
    tracer_provider: Any = None,
    resume: Resume | None = None,
    log_level: str | None = None,
    events: Mapping[str, Any] | None = None,
    mark_succeeded: Mapping[str, Any] | None = None,
) -> WorkflowResult:
    """Run ``pipeline`` to its end in the running event loop; see `execute`.

    Cancelling the task that awaits it cancels the run (children killed, tasks
    awaited) and raises `asyncio.CancelledError` again.
    """
    check_resumable(definition_of(pipeline), resume)
    check_sendable(definition_of(pipeline), events)
    run = start(pipeline, *args, timeout=timeout, on_update=on_update, clock=clock, concurrency=concurrency,
                retry_delay=retry_delay, kill_grace=kill_grace, tracer_provider=tracer_provider, resume=resume,
                log_level=log_level, events=events, mark_succeeded=mark_succeeded)
    return await run.result()


def execute(
    pipeline: Any,
    *args: Any,
    timeout: Any = None,
    on_update: OnUpdate | None = None,
    clock: Clock | None = None,
    concurrency: int | None = None,
    retry_delay: Any = None,
    kill_grace: Any = None,
    tracer_provider: Any = None,
    resume: Resume | None = None,
    log_level: str | None = None,
    events: Mapping[str, Any] | None = None,
    mark_succeeded: Mapping[str, Any] | None = None,
) -> WorkflowResult:
    """Run a pipeline in this process, without a database, and return its result.

    Args:
        pipeline: a `ductline.Pipeline` (or its `Definition`).
        *args: the first step's arguments; each must obey the JSON rule.
        timeout: whole-run deadline in seconds (``int``, ``float`` or
            ``timedelta``); defaults to the pipeline's ``timeout``. It starts when
            the first attempt starts (after a start delay) and keeps counting
            during delays and pauses.
        on_update: called with an event dict (``type`` ``workflow_start``,
            ``step_start``, ``step_end``, ``step_held``, ``step_paused``,
            ``step_resumed``, ``step_waiting`` or ``workflow_end``; ``workflow_end`` has a ``status``
            of ``success``, ``failed``, ``timeout`` or ``cancelled``; see
            `ductline.local.report`). An exception it raises is logged and changes
            nothing.
        clock: an object with ``async sleep(seconds)`` and ``now()`` used for step
            delays, retry delays, rate limits and pause timeouts (tests pass a
            fast one, e.g. `ductline.testing.FakeClock`); default: real time.
            Step timeouts always use real time; the run deadline does too and,
            with a `FakeClock`, also passes when the clock's time does.
        concurrency: the most attempts that run at once, as a worker's slots: sync
            steps in child processes (or threads), ``async def`` steps in the event
            loop; default 4. Ready jobs are claimed for free slots in the worker's
            claim order, so independent branches start together as on a worker.
        retry_delay: default seconds between a failed attempt and the next
            (a step's ``retry_delay=`` wins); default: the configured one (10 s).
        kill_grace: seconds between SIGTERM and SIGKILL when a child is killed;
            default: the configured one (1 s).
        tracer_provider: an OpenTelemetry tracer provider; default the global
            one. Ignored when ``opentelemetry`` is not installed.
        resume: who resumes the run's pauses (``.pause(before=step)``) at once:
            a mapping ``{step_name: new_input}``, or a callable
            ``(step_name, current_input) -> new_input`` (``async`` or not) called
            for each paused step run; `ductline.handle.NO_INPUT` as the new input
            keeps the input the step was paused with. A pause it does not cover
            expires after its timeout (the run fails closed, ``halt_reason``
            ``pause_expired``).
        log_level: the lowest level of step log records kept for steps without
            their own ``log_level=`` (``"DEBUG"`` .. ``"CRITICAL"``); default the
            ``step_log_level`` setting (``INFO``). Each attempt's records are in
            ``StepResult.history[i].logs`` (`LogEntry`), at most
            ``step_log_max_bytes`` (1 MiB) of text each, the cut marked.
        events: events sent to the run as it begins, ``{event_name: data}``:
            each is kept until the run reaches its wait (``.wait_for(event,
            before=step)``), which then runs the step with ``data`` as its single
            argument. A wait without a timeout must be given its event here; one
            with a timeout that is not fails the run after it (``halt_reason``
            ``event_timed_out``). To send while the run runs, use
            `ductline.local.start` and `LocalRun.send`.
        mark_succeeded: ``{step_name: output}``: when the run halts with nothing
            left running, each named step's failed, held or cancelled step run
            (the first, in element order) is marked succeeded with ``output``
            without running it, as an operator's ``ductline mark-succeeded`` marks
            it on a database (`ductline.engine.mark`: the halted run is revived
            as a retry revives it and continues from that step). Each step is
            marked once; a step that never fails is never marked.

    Returns:
        A `WorkflowResult`: ``status`` (``completed``, ``halted``, ``failed`` or
        ``cancelled``), ``overall_status`` (``"success"`` when completed, else
        ``"failed"``), one `StepResult` per step run in declaration order, and
        ``metadata`` with ``timeout_exceeded``, ``timeout_seconds``, ``error``,
        ``halt_reason``, ``failed_step`` and ``output``.

    Raises:
        TypeError: an argument or a ``resume`` input does not round-trip through
            JSON, or an option has the wrong type.
        ValueError: a negative or zero timeout, a bad ``concurrency``, or a
            ``resume`` mapping naming a step the pipeline does not pause before, or
            a ``log_level`` that names no level.
        RuntimeError: called from a running event loop (use `execute_async`), or
            at the top level of a module while ductline imports it as an app (a
            worker, its children, a command given ``--app``) to find its steps
            (guard the call with ``if __name__ == "__main__":``).
        DefinitionError: the pipeline is invalid, a sync step lives where a child
            process cannot import it, or it pauses before a step without a
            timeout that ``resume`` does not cover (nobody could resume it), or it
            waits for an event without a timeout that ``events`` does not give.
        Exception: what a ``resume`` callable raised (the run is cancelled first).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("ductline.execute() cannot run inside a running event loop; "
                           "use 'await ductline.execute_async(...)'")
    return asyncio.run(execute_async(
        pipeline, *args, timeout=timeout, on_update=on_update, clock=clock, concurrency=concurrency,
        retry_delay=retry_delay, kill_grace=kill_grace, tracer_provider=tracer_provider, resume=resume,
        log_level=log_level, events=events, mark_succeeded=mark_succeeded))

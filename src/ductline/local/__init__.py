"""The in-process executor: run a pipeline without a database.

``ductline.execute(pipeline, *args, timeout=None)`` runs every step in one asyncio
event loop with the rules of the durable engine (DESIGN.md, "Whole-run timeout"):
sync steps in killable child processes, ``async def`` steps in the loop, the same
per-step timeouts, retry budgets, delays and fan-out/fan-in, and a whole-run
deadline under ``asyncio.timeout`` that cancels and awaits everything in flight and
returns a `WorkflowResult` (it never raises for a timeout). It is also the test
mode for users' pipelines: pass a ``clock`` to shorten delays.
"""

from __future__ import annotations

import asyncio
import math
from datetime import timedelta
from typing import Any, Callable

from ductline import codec
from ductline.config import load_settings
from ductline.dsl.graph import Definition
from ductline.errors import DefinitionError
from ductline.local.engine import Clock, RealClock, Run
from ductline.local.results import StepResult, WorkflowResult
from ductline.local.tracing import Tracing

__all__ = ["Clock", "RealClock", "StepResult", "WorkflowResult", "execute", "execute_async"]


def _seconds(value: Any, field: str, *, allow_zero: bool) -> float:
    """A duration for the executor: ``int`` or ``float`` seconds, or a ``timedelta``."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{field} must be a number of seconds or a datetime.timedelta, "
                        f"not {type(value).__name__} ({value!r})")
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{field} must be {'at least 0' if allow_zero else 'greater than 0'} seconds, "
                         f"got {value!r}")
    return value


def _definition(pipeline: Any) -> Definition:
    if isinstance(pipeline, Definition):
        return pipeline
    definition = getattr(pipeline, "definition", None)
    if not callable(definition):
        raise TypeError(f"execute() needs a ductline Pipeline, got {type(pipeline).__name__}")
    return definition()  # type: ignore[no-any-return]


async def execute_async(
    pipeline: Any,
    *args: Any,
    timeout: Any = None,
    on_update: Callable[[dict[str, Any]], Any] | None = None,
    clock: Clock | None = None,
    concurrency: int | None = None,
    retry_delay: Any = None,
    kill_grace: Any = None,
    tracer_provider: Any = None,
) -> WorkflowResult:
    """Run ``pipeline`` to its end in the running event loop; see `execute`."""
    definition = _definition(pipeline)
    if definition.pauses:
        # Nobody can resume a run that lives in this call: refuse rather than hang
        # or silently skip the human's decision.
        steps = ", ".join(repr(s) for s in definition.pauses)
        raise DefinitionError(
            f"execute() cannot run pipeline {definition.name!r}: it pauses before step {steps} for a "
            "person to resume it, and the in-process executor has nobody to resume it. Run it on a "
            "worker (trigger, then `ductline resume`), or test the steps around the pause without it")
    args_json = codec.dumps(list(args), what="arguments")
    limit = definition.timeout if timeout is None else timeout
    seconds = None if limit is None else _seconds(limit, "timeout", allow_zero=False)
    if concurrency is None:
        concurrency = 4
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an int of at least 1, got {concurrency!r}")
    if retry_delay is None or kill_grace is None:
        settings = load_settings()
        retry_delay = settings.retry_delay if retry_delay is None else retry_delay
        kill_grace = settings.kill_grace_seconds if kill_grace is None else kill_grace
    run = Run(definition, args_json, timeout=seconds, on_update=on_update,
              clock=RealClock() if clock is None else clock, concurrency=concurrency,
              retry_delay=_seconds(retry_delay, "retry_delay", allow_zero=True),
              kill_grace=_seconds(kill_grace, "kill_grace", allow_zero=True),
              tracing=Tracing(tracer_provider))
    return await run.run()


def execute(
    pipeline: Any,
    *args: Any,
    timeout: Any = None,
    on_update: Callable[[dict[str, Any]], Any] | None = None,
    clock: Clock | None = None,
    concurrency: int | None = None,
    retry_delay: Any = None,
    kill_grace: Any = None,
    tracer_provider: Any = None,
) -> WorkflowResult:
    """Run a pipeline in this process, without a database, and return its result.

    Args:
        pipeline: a `ductline.Pipeline` (or its `Definition`).
        *args: the first step's arguments; each must obey the JSON rule.
        timeout: whole-run deadline in seconds (``int``, ``float`` or
            ``timedelta``); defaults to the pipeline's ``timeout``. It starts when
            the first attempt is about to run (after a start delay).
        on_update: called with an event dict (``type`` ``workflow_start``,
            ``step_start``, ``step_end`` or ``workflow_end``; ``workflow_end`` has a
            ``status`` of ``success``, ``failed`` or ``timeout``). An exception it
            raises is logged and changes nothing.
        clock: an object with ``async sleep(seconds)`` and ``now()`` used for step
            delays and retry delays (tests pass a fast one); default: real time.
        concurrency: the most sync steps that run at once (child processes, and
            threads for ``isolation="thread"``); default 4.
        retry_delay: default seconds between a failed attempt and the next
            (a step's ``retry_delay=`` wins); default: the configured one (10 s).
        kill_grace: seconds between SIGTERM and SIGKILL when a child is killed;
            default: the configured one (1 s).
        tracer_provider: an OpenTelemetry tracer provider; default the global
            one. Ignored when ``opentelemetry`` is not installed.

    Returns:
        A `WorkflowResult`: ``overall_status`` ``"success"`` or ``"failed"``, one
        `StepResult` per step run in declaration order, and ``metadata`` with
        ``timeout_exceeded``, ``timeout_seconds``, ``error`` and ``output``.

    Raises:
        TypeError: an argument does not round-trip through JSON, or an option has
            the wrong type.
        ValueError: a negative or zero timeout, a bad ``concurrency``.
        RuntimeError: called from a running event loop (use `execute_async`).
        DefinitionError: the pipeline is invalid, a sync step lives where a child
            process cannot import it, or the pipeline pauses for a human
            (``.pause(before=)``): nobody could resume it here.
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
        retry_delay=retry_delay, kill_grace=kill_grace, tracer_provider=tracer_provider))

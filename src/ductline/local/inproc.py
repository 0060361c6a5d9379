"""Steps that run inside the parent: ``async def`` steps as tasks of the event
loop, and ``isolation="thread"`` steps in a thread of their own. Both are stopped
cooperatively: a task is cancelled, a thread gets an exception raised between two
of its bytecodes. A task that swallows its cancellation, or a thread that does not
unwind within a second, is left alone (logged, counted as undead); its attempt is
recorded as stopped all the same.

Each step runs in a copy of the caller's `contextvars` context in which its
`ductline.context()` is activated, so concurrent steps each see their own.
"""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import inspect
import logging
import threading
from typing import Any, Callable

from ductline import codec
from ductline import step_context
from ductline.dsl.steps import invoke
from ductline.execution.child import describe
from ductline.local.outcome import Outcome
from ductline.model.outcomes import TIMEOUT_ERROR_TYPE
from ductline.model.states import AttemptResult
from ductline.store import payloads

log = logging.getLogger("ductline.local")

RECANCEL_WAIT = 0.2
THREAD_UNWIND_SECONDS = 1.0

_UNDEAD_TASKS: set[asyncio.Task[Any]] = set()


class StepInterrupted(BaseException):
    """Raised inside a thread step that must stop (a `BaseException`, so a step's
    ``except Exception`` does not swallow it)."""


def _step_context(ctx: step_context.StepContext, enter: Callable[[], Any] | None) -> contextvars.Context:
    copy = contextvars.copy_context()
    copy.run(step_context.activate, ctx)
    if enter is not None:
        copy.run(enter)
    return copy


def _encode(result: Any, step: str, max_bytes: int) -> Outcome:
    """The output as JSON text, under the same rules as in a child: it must
    round-trip and stay within ``max_bytes`` (else `ductline.PayloadTooLarge`)."""
    what = f"output of step {step!r}"
    try:
        output = codec.dumps(result, what=what)
        payloads.check_size(output, what, max_bytes)
    except BaseException as exc:
        return Outcome(AttemptResult.ERRORED, None, *describe(exc))
    return Outcome(AttemptResult.SUCCEEDED, output)


async def _call(func: Callable[..., Any], args: tuple[Any, ...], step: str) -> Any:
    result = invoke(func, args, step)
    if inspect.isawaitable(result):
        result = await result
    return result


async def run_async(func: Callable[..., Any], args: tuple[Any, ...], ctx: step_context.StepContext,
                    timeout: float | None, grace: float, max_bytes: int,
                    enter: Callable[[], Any] | None = None) -> Outcome:
    """Run an async step as its own task; cancel it at ``timeout``."""
    loop = asyncio.get_running_loop()
    task = loop.create_task(_call(func, args, ctx.step), name=f"ductline step {ctx.step}",
                            context=_step_context(ctx, enter))
    try:
        await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        await stop_task(task, grace)
        raise
    if not task.done():
        await stop_task(task, grace)
        return Outcome(AttemptResult.TIMED_OUT, None, TIMEOUT_ERROR_TYPE,
                       f"attempt {ctx.attempt} of step {ctx.step!r} exceeded the step timeout "
                       f"of {timeout:g} s and was cancelled")
    if task.cancelled():
        return Outcome(AttemptResult.ERRORED, None, "asyncio.exceptions.CancelledError", "the step was cancelled")
    exc = task.exception()
    if exc is not None:
        return Outcome(AttemptResult.ERRORED, None, *describe(exc))
    return _encode(task.result(), ctx.step, max_bytes)


async def stop_task(task: asyncio.Task[Any], grace: float) -> None:
    """Cancel ``task`` and wait up to ``grace`` seconds; cancel once more if it
    swallowed the first cancellation; after that it is left alone (undead)."""
    for wait in (grace, RECANCEL_WAIT):
        if task.done():
            break
        task.cancel()
        await asyncio.wait({task}, timeout=wait)
    if task.done():
        _retrieve(task)
        return
    log.error("Async step %r ignored cancellation; left running (task.undead)", task.get_name())
    _UNDEAD_TASKS.add(task)  # a strong reference: never destroyed while pending
    task.add_done_callback(_undead_done)


def _undead_done(task: asyncio.Task[Any]) -> None:
    _UNDEAD_TASKS.discard(task)
    _retrieve(task)


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: no "exception was never retrieved"


async def run_thread(func: Callable[..., Any], args: tuple[Any, ...], ctx: step_context.StepContext,
                     timeout: float | None, max_bytes: int, enter: Callable[[], Any] | None = None) -> Outcome:
    """Run a sync step in a thread of its own; interrupt it at ``timeout``."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Outcome] = loop.create_future()

    def deliver(outcome: Outcome) -> None:
        if not done.done():
            done.set_result(outcome)

    def body() -> None:
        try:
            try:
                result = invoke(func, args, ctx.step)
                if inspect.isawaitable(result):
                    result = asyncio.run(_awaited(result))
                outcome = _encode(result, ctx.step, max_bytes)
            except BaseException as exc:
                outcome = Outcome(AttemptResult.ERRORED, None, *describe(exc))
            loop.call_soon_threadsafe(deliver, outcome)
        except BaseException:  # the loop closed, or a late interruption: nobody waits
            pass

    thread = threading.Thread(target=_step_context(ctx, enter).run, args=(body,), daemon=True,
                              name=f"ductline step {ctx.step}")
    thread.start()
    try:
        await asyncio.wait({done}, timeout=timeout)
    except asyncio.CancelledError:
        await _interrupt(thread, done, ctx.step)
        raise
    if done.done():
        return done.result()
    await _interrupt(thread, done, ctx.step)
    return Outcome(AttemptResult.TIMED_OUT, None, TIMEOUT_ERROR_TYPE,
                   f"attempt {ctx.attempt} of step {ctx.step!r} exceeded the step timeout "
                   f"of {timeout:g} s and was interrupted")


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


async def _interrupt(thread: threading.Thread, done: asyncio.Future[Outcome], step: str) -> None:
    if not done.done() and thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                   ctypes.py_object(StepInterrupted))
    await asyncio.wait({done}, timeout=THREAD_UNWIND_SECONDS)
    if not done.done():
        log.error("Thread of step %r did not unwind; left running (thread.undead)", step)

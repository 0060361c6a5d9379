"""Testing pipelines: run one in the test's process on a fake clock, and look at
what it did.

Built on the in-process executor (`ductline.execute`, `ductline.local`): the same
rulebook decides outcomes, retries, halts, fan-outs and deadlines as on a worker.
What the harness changes:

- **Steps inline** (``inline=True``, the default): sync steps run in threads of
  the test process instead of child processes, so ``monkeypatch``, mocks and
  fixtures reach them. ``inline=False`` runs them in killable children, as
  ``ductline.execute`` does.
- **A fake clock** (`FakeClock`, one per run unless given): step delays, retry
  delays, rate limits, pause timeouts and the run deadline pass in virtual time.
  Time jumps only when every step run waits on the clock, so events keep their
  order. Step timeouts stay real.

Example::

    from ductline.testing import run_pipeline

    def test_orders(monkeypatch):
        monkeypatch.setattr(shop, "charge", lambda order: {"paid": True})
        result = run_pipeline(shop.orders, {"id": 7})
        assert result.status == "completed"
        assert [a.result for a in result.step("charge").history] == ["succeeded"]

`start_pipeline` gives a `PipelineTest` handle for runs a test acts on while
they run (resume a paused step, send an event to a step that waits for one,
advance the clock, cancel).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Coroutine, Mapping, TypeVar

from ductline.engine.events import Sent

from ductline.errors import DuctlineError
from ductline.model.inputs import NO_INPUT
from ductline.local import LocalRun, WorkflowResult, start
from ductline.local.clock import FakeClock
from ductline.local.options import Resume, check_sendable, definition_of

__all__ = ["FakeClock", "PipelineTest", "run_pipeline", "start_pipeline"]

DEFAULT_WAIT_SECONDS = 60.0
T = TypeVar("T")


def run_pipeline(pipeline: Any, *args: Any, inline: bool = True, clock: FakeClock | None = None,
                 timeout: Any = None, resume: Resume | None = None, concurrency: int | None = None,
                 retry_delay: Any = None, log_level: str | None = None,
                 events: Mapping[str, Any] | None = None) -> WorkflowResult:
    """Run ``pipeline`` to its end in this process, on a fake clock, and return its
    `ductline.WorkflowResult` (``status``, ``output``, ``step(name)``, each step's
    ``history`` of attempts with their ``logs``).

    Args:
        pipeline: a `ductline.Pipeline`.
        *args: the first step's arguments (each must obey the JSON rule).
        inline: run sync steps in threads of this process (default) rather than
            in child processes.
        clock: the `FakeClock` to use (read ``clock.now()`` afterwards to see how
            much virtual time passed); default a new one starting at 0.
        timeout: the run deadline, as for `ductline.execute`; it passes in real
            time and in the clock's time, whichever comes first.
        resume: ``{step: new_input}`` or a callable, as for `ductline.execute`:
            resumes paused steps as soon as they pause.
        concurrency: the run's slots, as for `ductline.execute` (default 4).
        retry_delay: the default seconds between attempts (a step's own wins).
        log_level: the lowest step log level kept, as for `ductline.execute`.
        events: ``{event: data}`` sent as the run begins, as for `ductline.execute`:
            each is kept until its wait (``.wait_for``); a wait with a timeout whose
            event is not given times out in the clock's time.

    Raises:
        RuntimeError: called inside a running event loop (use `start_pipeline`).
        TypeError, ValueError, DefinitionError: as `ductline.execute` (also a wait
            without a timeout whose event ``events`` does not give).
    """
    check_sendable(definition_of(pipeline), events)
    _check_no_loop()
    # Nobody sends while it runs: a wait's timeout passes in the clock's time.
    with PipelineTest(pipeline, args, clock=clock or FakeClock(), inline=inline, timeout=timeout, resume=resume,
                      concurrency=concurrency, retry_delay=retry_delay, log_level=log_level, events=events,
                      hold_waits=False) as test:
        return test.result()


def start_pipeline(pipeline: Any, *args: Any, inline: bool = True, clock: FakeClock | None = None,
                   timeout: Any = None, resume: Resume | None = None, concurrency: int | None = None,
                   retry_delay: Any = None, log_level: str | None = None,
                   events: Mapping[str, Any] | None = None) -> "PipelineTest":
    """Start ``pipeline`` in an event loop of its own (a background thread) and
    return a `PipelineTest` at once; use it as a context manager so the run is
    cancelled and its loop closed when the test ends. The arguments are those of
    `run_pipeline`.

    When a step pauses, or waits for an event, the clock stops jumping (its
    timeout does not run out behind the test's back) until `PipelineTest.resume`,
    `PipelineTest.send` or `PipelineTest.advance`.

    Raises:
        TypeError, ValueError, DefinitionError: as `ductline.execute`, before
            anything runs.
    """
    _check_no_loop()
    return PipelineTest(pipeline, args, clock=clock or FakeClock(), inline=inline, timeout=timeout, resume=resume,
                        concurrency=concurrency, retry_delay=retry_delay, log_level=log_level, events=events)


def _check_no_loop() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError("ductline.testing runs its own event loop; call it from a plain (sync) test")


class PipelineTest:
    """A run started by `start_pipeline`.

    Attributes:
        clock: its `FakeClock`.
        events: the executor's progress events so far (dicts with ``type``:
            ``workflow_start``, ``step_start``, ``step_end``, ``step_paused``, ...;
            see `ductline.execute`'s ``on_update``).
    """

    def __init__(self, pipeline: Any, args: tuple[Any, ...], *, clock: FakeClock, inline: bool,
                 timeout: Any, resume: Resume | None, concurrency: int | None, retry_delay: Any,
                 log_level: str | None, events: Mapping[str, Any] | None = None, hold_waits: bool = True) -> None:
        self.clock = clock
        self.events: list[dict[str, Any]] = []
        self._paused = threading.Event()
        self._waiting = threading.Event()
        self._hold_waits = hold_waits  # a step waiting for an event stops the clock (the test sends)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="ductline test loop", daemon=True)
        self._thread.start()

        async def begin() -> LocalRun:
            return start(pipeline, *args, timeout=timeout, on_update=self._on_update, clock=clock,
                         concurrency=concurrency, retry_delay=retry_delay, resume=resume, log_level=log_level,
                         inline=inline, events=events)

        try:
            self._run: LocalRun = self._call(begin())
            self._result: concurrent.futures.Future[WorkflowResult] = asyncio.run_coroutine_threadsafe(
                self._run.result(), self._loop)
        except BaseException:
            self._close_loop()
            raise

    # -- what a test does ------------------------------------------------------------------
    def result(self, timeout: float = DEFAULT_WAIT_SECONDS) -> WorkflowResult:
        """Wait for the run's end (real seconds, at most ``timeout``) and return it.

        Raises:
            TimeoutError: it had not ended within ``timeout`` seconds (a paused
                run waits for `resume`).
        """
        try:
            return self._result.result(timeout)
        except TimeoutError:
            raise TimeoutError(f"the run had not ended after {timeout} s (status {self._run.status}); "
                               "a paused run waits for resume()") from None

    def wait_paused(self, timeout: float = DEFAULT_WAIT_SECONDS) -> list[str]:
        """Wait until a step run is paused; returns the paused steps' names.

        Raises:
            TimeoutError: nothing paused within ``timeout`` real seconds.
        """
        if not self._paused.wait(timeout):
            raise TimeoutError(f"no step paused within {timeout} s (run status {self._run.status})")
        return [e["step"] for e in self.events if e["type"] == "step_paused"]

    def resume(self, input: Any = NO_INPUT) -> list[str]:
        """Resume the paused step runs (`ductline.local.LocalRun.resume`: ``input``
        replaces the paused step's input; omit it to keep it), and let the clock
        jump again. Returns the resumed steps' names.

        Raises:
            InvalidStateError: the run is not paused.
            TypeError: ``input`` does not round-trip through JSON.
        """
        async def go() -> list[str]:
            done = self._run.resume(input)
            self._paused.clear()
            self.clock.thaw()
            return done

        return self._call(go())

    def wait_waiting(self, timeout: float = DEFAULT_WAIT_SECONDS) -> list[str]:
        """Wait until a step run waits for an event; returns the events waited for.

        Raises:
            TimeoutError: no step waited within ``timeout`` real seconds.
        """
        if not self._waiting.wait(timeout):
            raise TimeoutError(f"no step waited for an event within {timeout} s (run status {self._run.status})")
        return [str(e["event"]) for e in self.events if e["type"] == "step_waiting"]

    def send(self, event: str, data: Any = None, key: str | None = None) -> Sent:
        """Send an event to the run (`ductline.local.LocalRun.send`), and let the
        clock jump again.

        Raises:
            InvalidStateError: the run has ended.
            TypeError, ValueError: a bad name or key, or data that does not round-trip.
        """
        async def go() -> Sent:
            sent = self._run.send(event, data, key)
            self._waiting.clear()
            self.clock.thaw()
            return sent

        return self._call(go())

    def advance(self, seconds: float) -> None:
        """Move the clock on by ``seconds`` by hand (e.g. past a pause timeout), then
        let it jump again."""
        async def go() -> None:
            self.clock.advance(seconds)
            self.clock.thaw()

        self._call(go())

    def cancel(self) -> None:
        """Cancel the run (`ductline.local.LocalRun.cancel`)."""
        async def go() -> None:
            self._run.cancel()

        self._call(go())

    @property
    def status(self) -> str:
        """The run's status now (``pending``, ``running``, ``paused``, ...)."""
        return str(self._run.status)

    # -- plumbing ---------------------------------------------------------------------------
    def _on_update(self, event: Mapping[str, Any]) -> None:
        self.events.append(dict(event))
        if event.get("type") == "step_paused":
            self.clock.frozen = True  # before the loop turns: the pause timeout waits for the test
            self._paused.set()
        if event.get("type") == "step_waiting":
            if self._hold_waits:
                self.clock.frozen = True  # the wait's timeout waits for the test, as a pause's does
            self._waiting.set()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(DEFAULT_WAIT_SECONDS)

    def _close_loop(self) -> None:
        async def cancel_the_rest() -> None:  # as asyncio.run does: e.g. the clock's driver
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        try:
            self._call(cancel_the_rest())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(DEFAULT_WAIT_SECONDS)
        self._loop.close()

    def __enter__(self) -> "PipelineTest":
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._result.done():
            try:
                self.cancel()
            except DuctlineError:
                pass  # it ended meanwhile
            try:
                self._result.result(DEFAULT_WAIT_SECONDS)
            except BaseException:  # noqa: BLE001 - the test's own outcome matters, not this
                pass
        self._close_loop()



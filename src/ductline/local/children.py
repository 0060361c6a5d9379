"""Killable children for the in-process executor: the worker's `Child` processes,
message protocol and kill path (`ductline.execution`), driven from an asyncio
event loop.

A child is a fresh interpreter leading its own process group; it imports the
modules that define the pipeline's steps (and `ductline.local.childboot`, which lets
it find a step by ``module:qualname`` without the pipeline being registered in the
child). The loop watches the child's socket and its pidfd with ``add_reader``, so
a result or a death is seen at once. Killing is the `Enforcer`'s: it sends SIGTERM
to the group at the step timeout (or when the executor cancels the attempt),
SIGKILL after the grace, and declares the child undead a second later, waking the
loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from ductline.execution.enforcer import Enforcer, Reason, Watch
from ductline.execution.process import Child
from ductline.execution.protocol import Task
from ductline.local.childapps import READY_REF, task_pipeline
from ductline.local.childattempt import PROBE_STEP, ChildAttempt
from ductline.local.outcome import Limit, Outcome
from ductline.model.endings import Ending, Facts, Reported, ending
from ductline.model.resources import ResourceLimits
from ductline.model.states import AttemptResult

log = logging.getLogger("ductline.local")

STARTUP_TIMEOUT = 60.0
STOP_WAIT_SECONDS = 2.0  # an idle child asked to stop gets this long before SIGKILL

# Children that survived SIGKILL (kernel D state): never waited on again, and kept
# referenced (a Popen of a live process warns when it is garbage-collected).
_UNDEAD: list[Child] = []


class ChildStartError(Exception):
    """A child could not import the pipeline's modules or did not start."""

    def __init__(self, error_type: str, message: str, traceback: str | None = None) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message
        self.traceback = traceback


@dataclass(eq=False, slots=True)
class _Tracked:
    """A started child as the pool follows it until it is collected."""

    key: int                        # its key in the enforcer
    gone: asyncio.Future[None]      # done once it exited or was declared undead
    undead: Watch | None = None     # its watch, if it survived SIGKILL
    reading: bool = True            # the loop still watches its pidfd


class Pool:
    """At most ``size`` children, started on demand and reused between attempts.

    Args:
        apps, sys_path: what children import (`ductline.local.childapps`).
        size: the most children at once.
        kill_grace: seconds between SIGTERM and SIGKILL.
        message_cap: the longest message read from a child, in bytes; a child that
            sends more is killed and its attempt fails with `ductline.PayloadTooLarge`.
        max_output_bytes: the run's largest output, in bytes (sent with each task).
    """

    def __init__(self, apps: list[str], sys_path: list[str], size: int, kill_grace: float, *,
                 message_cap: int, max_output_bytes: int) -> None:
        self.apps = apps
        self.sys_path = sys_path
        self.kill_grace = kill_grace
        self.message_cap = message_cap
        self.max_output_bytes = max_output_bytes
        self._slots = asyncio.Semaphore(size)
        self._idle: list[Child] = []
        self._retiring: set[Child] = set()  # killed after an attempt, not yet gone
        self._live: dict[Child, _Tracked] = {}   # started and not yet collected
        self._keys = itertools.count()
        self._enforcer: Enforcer | None = None

    async def acquire(self, fresh: bool = False) -> Child:
        """A ready child (waits for a free slot); with ``fresh``, one that never ran
        an attempt (``isolation="fresh"``: an idle child that did is retired).

        Raises:
            ChildStartError: a new child failed to import the apps or to start.
        """
        await self._slots.acquire()
        try:
            while self._idle:
                child = self._idle.pop()
                if not child.exited() and not (fresh and child.used):
                    return child
                if child.exited():
                    self._collect(child)
                else:
                    await self._kill(child, Reason.SHUTDOWN, grace=0.0)
            return await self._start()
        except BaseException:
            self._slots.release()
            raise

    def release(self, child: Child, reusable: bool) -> None:
        """Give ``child`` back after an attempt; one that may not run another (it could
        not restore its process state, or its step is ``isolation="fresh"``) is
        killed with its whole process group and collected at `close`."""
        if reusable and not child.exited():
            self._idle.append(child)
        elif not child.exited():
            self._retiring.add(child)  # collected as soon as it is gone (`_track`)
            self._begin_kill(child, Reason.SHUTDOWN, grace=0.0)
        self._slots.release()

    # -- children and the enforcer --------------------------------------------------------
    def _kill_path(self) -> Enforcer:
        """The pool's enforcer, started with the first child. The event loop's time
        is the monotonic clock the enforcer uses, so a `Limit` is its deadline."""
        if self._enforcer is None:
            loop = asyncio.get_running_loop()

            def wake() -> None:  # from the enforcer's thread
                try:
                    loop.call_soon_threadsafe(self._collect_undead)
                except RuntimeError:  # the loop closed: nobody waits any more
                    pass

            self._enforcer = Enforcer(self.kill_grace, wake)
            self._enforcer.start()
        return self._enforcer

    def _track(self, child: Child) -> _Tracked:
        loop = asyncio.get_running_loop()
        tracked = _Tracked(next(self._keys), loop.create_future())
        self._live[child] = tracked

        def exited() -> None:
            self._unread(child, tracked)
            if not tracked.gone.done():
                tracked.gone.set_result(None)
            if child in self._retiring:  # nobody waits on a retired child: settle its kill now
                self._retiring.discard(child)
                self._collect(child)

        loop.add_reader(child.sentinel, exited)
        return tracked

    def _unread(self, child: Child, tracked: _Tracked) -> None:
        if tracked.reading:  # before any close: a closed fd's number may be reused
            tracked.reading = False
            asyncio.get_running_loop().remove_reader(child.sentinel)

    def _collect_undead(self) -> None:
        """Children the enforcer gave up on: abandon them, and wake who waits."""
        if self._enforcer is None:
            return  # closed meanwhile
        for key, watch in self._enforcer.take_undead():
            for child, tracked in list(self._live.items()):
                if tracked.key == key:
                    tracked.undead = watch
                    self._abandon(child)
                    if not tracked.gone.done():
                        tracked.gone.set_result(None)

    def _abandon(self, child: Child) -> None:
        log.error("Child process %d survived SIGKILL; abandoned (process.undead)", child.pid)
        tracked = self._live.pop(child, None)
        if tracked is not None:
            self._unread(child, tracked)
            _UNDEAD.append(child)

    def _collect(self, child: Child) -> None:
        tracked = self._live.get(child)
        if tracked is not None and child.exited():
            self._unread(child, tracked)
            child.reap()
            del self._live[child]
            if self._enforcer is not None:
                self._enforcer.settle(tracked.key)

    def _begin_kill(self, child: Child, reason: Reason, grace: float | None = None) -> _Tracked | None:
        """Have the enforcer kill ``child``, unless a kill is under way."""
        tracked = self._live.get(child)
        if tracked is not None:
            enforcer = self._kill_path()
            if enforcer.state(tracked.key) is None and not tracked.gone.done():
                enforcer.watch(tracked.key, child, None)
            enforcer.kill(tracked.key, reason, grace)
        return tracked

    async def _kill(self, child: Child, reason: Reason, grace: float | None = None) -> None:
        """Kill ``child`` and wait until it is gone or abandoned; then collect it."""
        tracked = self._begin_kill(child, reason, grace)
        if tracked is not None:
            await asyncio.wait({tracked.gone})
            self._collect(child)

    async def _start(self) -> Child:
        self._kill_path()
        try:
            child = Child(self.apps, self.sys_path)
        except OSError as exc:  # e.g. no more processes or file descriptors
            raise ChildStartError(type(exc).__name__, f"cannot start a child process: {exc}") from exc
        self._track(child)
        probe = Task(uuid.uuid4().hex, "", task_pipeline(READY_REF, None), PROBE_STEP, 0, "[]", None,
                     uuid.uuid4().hex, self.max_output_bytes)
        limit = Limit(asyncio.get_running_loop().time(), STARTUP_TIMEOUT)
        try:
            outcome = await self.run(child, probe, limit, _no_requests)
        except BaseException:
            self._begin_kill(child, Reason.SHUTDOWN, grace=0.0)  # collected by close()
            raise
        if outcome.result is not AttemptResult.SUCCEEDED:
            await self._kill(child, Reason.SHUTDOWN)
            raise ChildStartError(outcome.error_type or "ChildStartError",
                                  outcome.error or "the child process did not start",
                                  outcome.traceback)
        return child

    # -- one attempt ----------------------------------------------------------------------
    async def run(self, child: Child, task: Task, limit: Limit,
                  answer: Callable[[str, tuple[Any, ...]], Any],
                  on_log: Callable[[list[tuple[int, str, str, str]]], None] | None = None) -> Outcome:
        """Send one attempt to ``child`` and wait for its result, its death or its
        step timeout (``limit``, which a request may move while the attempt runs;
        then the enforcer kills the child's process group and the outcome is
        ``timed_out``). If the waiting task is cancelled, the enforcer kills the
        child the same way before the cancellation goes on."""
        enforcer = self._kill_path()
        tracked = self._live[child]
        child.used = child.used or task.step != PROBE_STEP
        attempt = ChildAttempt(child, tracked.key, tracked.gone, enforcer, self.message_cap)
        try:
            report = await attempt.run(task, limit, answer, on_log)
        except asyncio.CancelledError:
            await self._kill(child, Reason.CANCEL)
            raise
        facts = Facts(task.step, task.attempt, ResourceLimits(task.memory_limit, task.cpu_limit), report,
                      self.max_output_bytes, timeout_seconds=limit.seconds, message_cap=self.message_cap,
                      parent="the executor")
        if report is not None:
            return _outcome(ending(facts), attempt.reusable and report.kind is not Reported.FATAL)
        # It exited (or was abandoned) before it sent a result: why the enforcer killed it, if it did.
        watch = enforcer.settle(tracked.key) or tracked.undead
        code = None if tracked.undead is not None else child.process.poll()
        self._collect(child)
        return _outcome(ending(dataclasses.replace(facts, kill=None if watch is None else watch.reason,
                                                   exit_code=code, broken=attempt.broken)), False)

    async def close(self) -> None:
        """Stop idle children, kill any other, collect them all, stop the enforcer."""
        idle = list(self._idle)
        self._idle.clear()
        for child in idle:
            child.stop()

        async def finish(child: Child) -> None:
            tracked = self._live.get(child)
            if tracked is None:
                return
            if child in idle:
                await asyncio.wait({tracked.gone}, timeout=STOP_WAIT_SECONDS)
            if tracked.gone.done():
                self._collect(child)
            else:  # left over from an interrupted kill or start, or slow to stop: no grace
                await self._kill(child, Reason.SHUTDOWN, grace=0.0)

        await asyncio.gather(*(finish(c) for c in list(self._live)))
        if self._enforcer is not None:
            self._enforcer.stop()
            self._enforcer = None


def _outcome(ended: Ending | None, reusable: bool) -> Outcome:
    """The executor's record of an attempt's end (`ductline.model.endings`); no lease
    is lost in the executor, so there is always one."""
    if ended is None:
        ended = Ending(AttemptResult.CANCELLED)
    return Outcome(ended.result, ended.output, ended.error_type, ended.error, ended.traceback,
                   reusable=reusable, route_key=ended.route_key)


def _no_requests(kind: str, args: tuple[Any, ...]) -> Any:
    raise RuntimeError(f"unexpected request {kind!r} while starting")

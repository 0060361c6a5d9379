"""Killable children for the in-process executor: the same `Child` processes and
message protocol as a worker, driven from an asyncio event loop.

A child is a fresh interpreter leading its own process group; it imports the
modules that define the pipeline's steps (and `ductline.local.childboot`, which lets
it find a step by ``module:qualname`` without the pipeline being registered in the
child). The loop watches the child's socket and its pidfd with ``add_reader``, so
a result or a death is seen at once; a step timeout kills the whole process group
(SIGTERM, then SIGKILL after a grace).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import uuid
from typing import Any, Callable

from ductline.local.childapps import READY_REF, task_pipeline
from ductline.local.state import Limit, Outcome
from ductline.runtime.child import Task
from ductline.runtime.slots import UNDEAD_AFTER_SECONDS, Child

log = logging.getLogger("ductline.local")

STARTUP_TIMEOUT = 60.0

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


class Pool:
    """At most ``size`` children, started on demand and reused between attempts."""

    def __init__(self, apps: list[str], sys_path: list[str], size: int, kill_grace: float) -> None:
        self.apps = apps
        self.sys_path = sys_path
        self.kill_grace = kill_grace
        self._slots = asyncio.Semaphore(size)
        self._idle: list[Child] = []
        self._live: list[Child] = []   # started and not yet collected

    async def acquire(self) -> Child:
        """A ready child (waits for a free slot).

        Raises:
            ChildStartError: a new child failed to import the apps or to start.
        """
        await self._slots.acquire()
        try:
            while self._idle:
                child = self._idle.pop()
                if child.process.poll() is None:
                    return child
                self._collect(child)
            return await self._start()
        except BaseException:
            self._slots.release()
            raise

    def release(self, child: Child, reusable: bool) -> None:
        if reusable and child.process.poll() is None:
            self._idle.append(child)
        self._slots.release()

    async def _start(self) -> Child:
        try:
            child = Child(self.apps, self.sys_path)
        except OSError as exc:  # e.g. no more processes or file descriptors
            raise ChildStartError(type(exc).__name__, f"cannot start a child process: {exc}") from exc
        self._live.append(child)
        probe = Task(uuid.uuid4().hex, "", task_pipeline(READY_REF, None), "__ready__", 0, "[]", None,
                     uuid.uuid4().hex)
        limit = Limit(asyncio.get_running_loop().time(), STARTUP_TIMEOUT)
        try:
            outcome = await self.run(child, probe, limit, _no_requests)
        except BaseException:
            if child in self._live:
                child.signal_group(signal.SIGKILL)  # collected by close()
            raise
        if outcome.result != "succeeded":
            if child.process.poll() is None:
                await self.kill(child)
            raise ChildStartError(outcome.error_type or "ChildStartError",
                                  outcome.error or "the child process did not start",
                                  outcome.traceback)
        return child

    async def run(self, child: Child, task: Task, limit: Limit,
                  answer: Callable[[str, tuple[Any, ...]], Any]) -> Outcome:
        """Send one attempt to ``child`` and wait for its result, its death or its
        step timeout (``limit``, which a request may move while the attempt runs;
        then the child's process group is killed and the outcome is ``timed_out``).
        If the waiting task is cancelled, the child is killed the same way before
        the cancellation goes on."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Outcome] = loop.create_future()
        conn_fd, pid_fd = child.conn.fileno(), child.sentinel
        watching = True

        def settle(outcome: Outcome) -> None:
            if not done.done():
                done.set_result(outcome)

        def readable() -> bool:
            try:
                message = child.conn.recv()
            except (EOFError, OSError):
                loop.remove_reader(conn_fd)  # the pidfd reports the death
                return False
            kind = message[0]
            if kind == "request":
                try:
                    reply: tuple[Any, ...] = ("reply", answer(message[1], tuple(message[2])))
                except Exception as exc:
                    reply = ("reply_error", f"{type(exc).__name__}: {exc}")
                try:
                    child.send(reply)
                except (OSError, ValueError):
                    pass
            elif kind == "ready":
                pass  # the child finished starting; the probe below tells us the same
            elif kind == "fatal":
                settle(Outcome("errored", None, message[2], message[3], message[4]))
            elif message[1] != task.lease_token:
                log.warning("Result of an attempt that is no longer current dropped")
            elif kind == "done":
                settle(Outcome("succeeded", message[2], reusable=True))
            elif kind == "error":
                settle(Outcome("errored", None, message[2], message[3], message[4], reusable=True))
            return True

        def exited() -> None:
            loop.remove_reader(pid_fd)
            while not done.done() and _has_data(child) and readable():
                pass  # a result sent just before the exit still counts
            settle(Outcome("crashed", None, "ChildDied",
                           f"the child process running the step exited with code {child.process.poll()}"))

        def unwatch() -> None:
            nonlocal watching
            if watching:  # before any close: a closed fd's number may be reused
                watching = False
                loop.remove_reader(conn_fd)
                loop.remove_reader(pid_fd)

        loop.add_reader(conn_fd, readable)
        loop.add_reader(pid_fd, exited)
        try:
            try:
                child.send(("run", task))
            except (OSError, ValueError):
                pass  # the pidfd reports the death
            while not done.done():
                at = limit.at
                remaining = None if at is None else at - loop.time()
                if remaining is not None and remaining <= 0:
                    break
                await asyncio.wait({done}, timeout=remaining)  # a moved limit is seen here
            unwatch()
            if done.done():
                outcome = done.result()
                if outcome.result == "crashed":
                    self._collect(child)
                return outcome
            await self.kill(child)
            return Outcome("timed_out", None, "TimeoutError",
                           f"attempt {task.attempt} of step {task.step!r} exceeded the step timeout "
                           f"of {limit.seconds:g} s and was killed")
        except asyncio.CancelledError:
            unwatch()
            await self.kill(child)
            raise
        finally:
            unwatch()

    async def kill(self, child: Child) -> None:
        """SIGTERM the child's process group, SIGKILL after the grace, collect it.
        A child still there a second after SIGKILL is abandoned (undead)."""
        child.signal_group(signal.SIGTERM)
        if not await self._exited(child, self.kill_grace):
            child.signal_group(signal.SIGKILL)
            if not await self._exited(child, UNDEAD_AFTER_SECONDS):
                self._abandon(child)
                return
        self._collect(child)

    def _abandon(self, child: Child) -> None:
        log.error("Child process %d survived SIGKILL; abandoned (process.undead)", child.pid)
        if child in self._live:
            self._live.remove(child)
            _UNDEAD.append(child)

    async def _exited(self, child: Child, timeout: float) -> bool:
        if child.process.poll() is not None:
            return True
        loop = asyncio.get_running_loop()
        gone: asyncio.Future[None] = loop.create_future()

        def exited() -> None:
            if not gone.done():
                gone.set_result(None)

        loop.add_reader(child.sentinel, exited)
        try:
            await asyncio.wait({gone}, timeout=timeout)
        finally:
            loop.remove_reader(child.sentinel)
        return child.process.poll() is not None

    def _collect(self, child: Child) -> None:
        if child in self._live and child.reap() is not None:
            self._live.remove(child)

    async def close(self) -> None:
        """Stop idle children, kill any other, and collect them all."""
        idle = list(self._idle)
        self._idle.clear()
        for child in idle:
            child.stop()
        live = list(self._live)

        async def finish(child: Child) -> None:
            if not await self._exited(child, 2.0):
                child.signal_group(signal.SIGKILL)
                if not await self._exited(child, UNDEAD_AFTER_SECONDS):
                    self._abandon(child)
                    return
            self._collect(child)

        for child in live:  # left over from an interrupted kill or start: no grace
            if child not in idle and child.process.poll() is None:
                child.signal_group(signal.SIGKILL)
        await asyncio.gather(*(finish(c) for c in live))


def _has_data(child: Child) -> bool:
    try:
        return bool(child.conn.poll(0))
    except (OSError, EOFError, ValueError):
        return False


def _no_requests(kind: str, args: tuple[Any, ...]) -> Any:
    raise RuntimeError(f"unexpected request {kind!r} while starting")

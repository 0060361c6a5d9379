"""One attempt in a child of the in-process executor: its adapter of the
conversation with a child (`ductline.execution.conversation`), driven from the
event loop.

The loop watches the child's socket with ``add_reader``, so a result or a request
is handled as it arrives; requests are answered at once (context values, boundary
crossings, a scaled timeout, which moves the enforcer's deadline). A result is
taken only if the enforcer has not begun to kill the attempt.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from ductline.execution import conversation, protocol, steplog
from ductline.execution.enforcer import Enforcer, Reason, Stage
from ductline.execution.process import Child
from ductline.execution.protocol import Done, Failed, Fatal, Log, Message, Request, Task
from ductline.local.outcome import Limit
from ductline.model.endings import Report

log = logging.getLogger("ductline.local")

# The step of the probe a new child runs first: a FATAL (its apps did not import) is
# its answer; in any later attempt a FATAL is not the protocol.
PROBE_STEP = "__ready__"


class ChildAttempt:
    """Runs one attempt on a child the enforcer knows under ``key``.

    Args:
        child: a ready child.
        key: its key in ``enforcer``.
        gone: done once the child exited or was declared undead.
        enforcer: the pool's kill path.
        message_cap: the longest message read from the child, in bytes.
    """

    def __init__(self, child: Child, key: int, gone: asyncio.Future[None], enforcer: Enforcer,
                 message_cap: int) -> None:
        self._child = child
        self._key = key
        self._gone = gone
        self._enforcer = enforcer
        self._cap = message_cap
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[Report] = self._loop.create_future()
        self._fd = child.conn.fileno()
        self._reading = False
        self._on_log: Callable[[list[tuple[int, str, str, str]]], None] | None = None
        self._guard = steplog.ParentGuard(0)
        self.broken: str | None = None  # why the child was killed for breaking the protocol
        self.retire = ""  # why the child may run no other attempt, as it said with its result
        # It broke the protocol after its result: the result stands, the child is not reused.
        self._spoiled = False

    @property
    def reusable(self) -> bool:
        """The child may run another attempt."""
        return not self.retire and not self._spoiled

    async def run(self, task: Task, limit: Limit, answer: Callable[[str, tuple[Any, ...]], Any],
                  on_log: Callable[[list[tuple[int, str, str, str]]], None] | None = None) -> Report | None:
        """Send ``task`` and wait for its result frame; ``None`` if the child ended (or
        was abandoned) first -- what that means is the enforcer's watch's to say.
        ``on_log`` receives the attempt's log batches (within its cap)."""
        self._on_log = on_log
        self._guard = steplog.ParentGuard(task.log_max_bytes)
        self._enforcer.watch(self._key, self._child, limit.at)
        self._reading = True
        self._loop.add_reader(self._fd, self._readable, task, limit, answer)
        try:
            try:
                self._child.send(protocol.run(task))
            except (OSError, ValueError):
                pass  # the pidfd reports the death
            either: set[asyncio.Future[Any]] = {self._done, self._gone}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            while not self._done.done() and self._reading and _has_data(self._child) \
                    and self._readable(task, limit, answer):
                pass  # a result sent just before the exit still counts
            return self._done.result() if self._done.done() else None
        finally:
            self._unread()
            watch = self._enforcer.state(self._key)
            if watch is not None and watch.stage is Stage.RUNNING and not self._gone.done():
                self._enforcer.settle(self._key)  # it ended without a kill (e.g. FATAL): stop watching

    def _unread(self) -> None:
        if self._reading:  # before any close: a closed fd's number may be reused
            self._reading = False
            self._loop.remove_reader(self._fd)

    def _settle(self, report: Report) -> None:
        if not self._done.done():
            self._done.set_result(report)

    def _readable(self, task: Task, limit: Limit, answer: Callable[[str, tuple[Any, ...]], Any]) -> bool:
        """Hear what arrived (`ductline.execution.conversation.hear`); ``False`` once
        nothing more will be read."""
        heard = conversation.hear(self._child.reader, self._cap, lambda m: self._handle(m, task, limit, answer),
                                  ready=task.step != PROBE_STEP)
        if heard.ended:
            self._unread()  # the pidfd reports the death
            return False
        if heard.broken is not None:
            return self._broken(heard.broken)
        if heard.oversized:
            self._unread()  # the rest of that message is never read
            log.error("Child %d sent a message over %d bytes; killing it", self._child.pid, self._cap)
            self._spoiled = True
            self._enforcer.kill(self._key, Reason.OVERSIZED, grace=0.0)
            return False
        if not self._done.done():
            conversation.watch_frames(self._enforcer, self._key, self._child.reader, self._fd)
        elif self._child.reader.pending_since() is not None:
            self._spoiled = True  # bytes out of step followed its result: the child is not reused
        return True

    def _broken(self, why: str) -> bool:
        self._unread()
        self._spoiled = True
        log.error("Child %d broke the protocol (%s); killing it", self._child.pid, why)
        self.broken = why
        self._enforcer.kill(self._key, Reason.GARBLED, grace=0.0)
        return False

    def _handle(self, message: Message, task: Task, limit: Limit,
                answer: Callable[[str, tuple[Any, ...]], Any]) -> None:
        if isinstance(message, Request):
            try:
                reply = protocol.reply(answer(message.kind, message.args), message.seq)
            except Exception as exc:
                reply = protocol.reply_error(f"{type(exc).__name__}: {exc}", message.seq)
            try:
                self._child.send(reply)
            except (OSError, ValueError):
                pass
            self._enforcer.move_deadline(self._key, limit.at)  # a scaled timeout may have moved it
        elif isinstance(message, Log):
            if message.lease_token == task.lease_token and self._on_log is not None:
                records = self._guard.take(message.records)
                for record in records:
                    steplog.forward(record, {"run_id": task.run_id, "job_id": task.job_id, "step": task.step,
                                             "attempt": task.attempt})
                self._on_log(records)
        elif isinstance(message, Fatal):
            self._settle(conversation.report(message))
        elif isinstance(message, (Done, Failed)):
            if message.lease_token != task.lease_token:
                log.warning("Result of an attempt that is no longer current dropped")
            elif not self._enforcer.finish(self._key):
                pass  # its kill began: the result is never taken
            else:
                self.retire = message.retire  # a child that could not restore its process state is not reused
                self._settle(conversation.report(message))
        # READY: the probe's result tells the same


def _has_data(child: Child) -> bool:
    try:
        return bool(child.conn.poll(0))
    except (OSError, EOFError, ValueError):
        return False

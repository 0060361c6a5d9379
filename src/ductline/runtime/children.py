"""How a worker reacts to its children: messages (results, requests), deaths,
kills that did not work (undead), and replacing children from a warm spare.

A mixin of `ductline.runtime.worker.Worker`, kept apart so each file reads on its own.
"""

from __future__ import annotations

import logging
import pickle
import time
from typing import TYPE_CHECKING, Any

from ductline.errors import PayloadTooLarge, StoreError
from ductline.model.states import AttemptResult
from ductline.observability.events import EventName, emit
from ductline.runtime.outcomes import Outcome, job_extra
from ductline.runtime.record import PAYLOAD_TOO_LARGE, Attempt
from ductline.runtime.requests import answer
from ductline.runtime.slots import Child, Slot
from ductline.store import payloads
from ductline.store.records import ClaimedJob

if TYPE_CHECKING:
    from ductline.runtime.worker import Worker

log = logging.getLogger("ductline.worker")


# Warm spares kept per worker, at most one per slot: slots that time out together
# (claimed together, same timeout) each get a ready child at once.
SPARES = 4


def _note_ready(child: Child) -> None:
    """Read a spare's "ready" message if it has arrived (spares are not waited on)."""
    try:
        while not child.ready and child.conn.poll(0):
            message = child.conn.recv()
            if isinstance(message, tuple) and message[:1] == ("ready",):
                child.ready = True
    except (EOFError, OSError):
        child.eof = True


_KINDS = {"request": 3, "fatal": 5, "done": 3, "error": 5, "reply": 2, "ready": 2}


class _Oversized(Exception):
    """A child's message is longer than the worker reads."""


def _receive(conn: Any, cap: int) -> Any:
    """One message from a child, read only if its length header says at most ``cap``
    bytes: a child writing hundreds of MiB cannot make the parent allocate them.

    Raises:
        _Oversized: the message is longer (it is left unread; kill the child).
        EOFError, OSError: the pipe ended.
    """
    try:
        data = conn.recv_bytes(cap)
    except OSError as exc:
        if str(exc) == "bad message length":  # multiprocessing's "longer than maxlength"
            raise _Oversized from None
        raise
    return pickle.loads(data)


def _well_formed(message: Any) -> bool:
    return (isinstance(message, tuple) and len(message) >= 2 and isinstance(message[0], str)
            and len(message) >= _KINDS.get(message[0], 99))


class ChildEvents:
    def _handle(self: "Worker", ready: Any) -> None:
        if ready == self.wakeup.fileno():
            self.wakeup.drain()
            return
        for slot in self.slots:
            for runner in (slot.runner, slot.child):
                if runner is None:
                    continue
                if ready == runner.sentinel:
                    self._runner_gone(slot, runner)
                    return
                if ready is runner.conn:
                    try:
                        message = _receive(runner.conn, self.payload_limits.message_cap)
                    except _Oversized:
                        runner.eof = True  # the rest of that message is never read
                        self._oversized(slot, runner)
                        return
                    except (EOFError, OSError):
                        # The sentinel reports the end; stop waiting on this pipe, or
                        # the loop would spin on its EOF until the process is gone.
                        runner.eof = True
                        return
                    except Exception as exc:  # noqa: BLE001 - the step wrote into the pipe
                        self._garbled(slot, runner, f"{type(exc).__name__}: {exc}")
                        return
                    if not _well_formed(message):
                        self._garbled(slot, runner, f"unexpected message {message!r:.100}")
                        return
                    self._message(slot, message)
                    return

    def _garbled(self: "Worker", slot: Slot, runner: Any, why: str) -> None:
        """The child's end of the pipe carried something that is not our protocol (a
        step wrote into an inherited descriptor). The child cannot be trusted any
        more: kill it; its death is recorded as a crash of this attempt alone."""
        log.error("Child %d broke the worker protocol (%s); killing it", runner.pid, why,
                  extra=job_extra(self._attempt(slot)) if slot.busy else None)
        if slot.busy:
            self.enforcer.kill(slot.index, "garbled", grace=0.0)
        else:
            runner.signal_group(9)

    def _oversized(self: "Worker", slot: Slot, runner: Any) -> None:
        """A child began a message larger than the worker reads (``payload_max_bytes``
        plus `payloads.MESSAGE_SLACK_BYTES`): it is killed unread, and its attempt is
        recorded as errored with `ductline.PayloadTooLarge` (not a crash)."""
        log.error("Child %d sent a message over %d bytes; killing it", runner.pid,
                  self.payload_limits.message_cap, extra=job_extra(self._attempt(slot)) if slot.busy else None)
        if slot.busy and runner is slot.runner:
            self.enforcer.kill(slot.index, "oversized", grace=0.0)
            if getattr(runner, "is_thread", False):
                runner.conn.close()  # the thread's blocked write fails, and it ends
        else:
            runner.signal_group(9)

    def _message(self: "Worker", slot: Slot, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "ready":
            if slot.child is not None:
                slot.child.ready = True
                self._next_claim = 0.0  # a slot just became usable
            return
        job = slot.job
        if kind == "request":
            if job is None:
                return
            if message[1] == "timeout":
                self._scaled_timeout(slot, job, int(message[2][0]))
            else:
                answer(self.store, slot.runner, job, message[1], message[2])
            return
        if kind == "fatal":
            log.error("Child could not import the apps: %s: %s", message[2], message[3])
            if job is not None:
                self._queue(slot, AttemptResult.ERRORED, error_type=message[2], error=message[3],
                            traceback=message[4])
            return
        if job is None or message[1] != job.lease_token or not self.enforcer.finish(slot.index):
            return  # a result of an attempt being killed, or no longer current, is never taken
        if kind == "done":
            size = payloads.size_of(message[2]) if isinstance(message[2], str) else 0
            if size > self.payload_limits.max_bytes:  # the child checks too; this is the parent's guard
                self._queue(slot, AttemptResult.ERRORED, error_type=PAYLOAD_TOO_LARGE, error=str(
                    PayloadTooLarge(f"output of step {job.step!r}", size, self.payload_limits.max_bytes)))
                return
            self._queue(slot, AttemptResult.SUCCEEDED, output=message[2])
        elif kind == "error":
            self._queue(slot, AttemptResult.ERRORED, error_type=message[2], error=message[3],
                        traceback=message[4])

    def _queue(self: "Worker", slot: Slot, result: AttemptResult, **fields: Any) -> None:
        job = slot.job
        assert job is not None
        self.pending.append(Outcome(self._attempt(slot), job.pipeline, result, **fields))
        if slot.runner is not None and slot.runner is not slot.child:
            self._retired.append(slot.runner)  # a finished thread: close its pipes once it ends
        slot.release()

    def _attempt(self: "Worker", slot: Slot) -> Attempt:
        job = slot.job
        assert job is not None
        return Attempt(job.job_id, job.run_id, job.step, job.scope, job.attempt, job.lease_token,
                       job.started_ms, job.limit_key)

    def _runner_gone(self: "Worker", slot: Slot, runner: Any) -> None:
        """A child process exited, or a thread-isolated step's thread ended."""
        code = runner.reap()
        if code is None:
            return
        if runner is not slot.runner:  # an idle child died: replace it
            if runner is slot.child:
                slot.child = None if self.stopping else self._fresh_child()
            return
        watch = self.enforcer.settle(slot.index)
        if slot.job is not None:
            reason = None if watch is None else watch.reason
            if reason == "timeout":
                assert watch is not None and slot.job is not None
                if watch.deadline is not None:
                    emit(EventName.TIMEOUT_OVERRUN, pipeline=slot.job.pipeline,
                         overrun_seconds=max(0.0, time.monotonic() - watch.deadline),
                         **job_extra(self._attempt(slot)))
                self._queue_timeout(slot)
            elif reason == "shutdown":
                self._queue(slot, AttemptResult.CANCELLED, release=True,
                            error="worker shut down before the attempt finished")
            elif reason == "lease":
                slot.release()  # the lease is gone; whoever holds the job records it
            elif reason == "oversized":
                self._queue(slot, AttemptResult.ERRORED, error_type=PAYLOAD_TOO_LARGE,
                            error=f"step {slot.job.step!r} sent the worker a message of more than "
                                  f"{self.payload_limits.message_cap} bytes (payload_max_bytes "
                                  f"{self.payload_limits.max_bytes} plus {payloads.MESSAGE_SLACK_BYTES} for the "
                                  "envelope); the child was killed")
            else:
                self._queue(slot, AttemptResult.CRASHED, error_type="ChildDied",
                            error=f"the child process running the step exited with code {code}")
        slot.release()
        if runner is slot.child:
            slot.child = None if self.stopping else self._fresh_child()

    def _fresh_child(self: "Worker") -> Child:
        """A warm spare (it imported the apps already) -- one that said it is ready if
        any did -- replaced at once in the background, so a killed slot serves its
        next job without waiting for an interpreter to start."""
        alive = [c for c in self._spares if c.reap() is None]
        for child in alive:
            _note_ready(child)
        ready = [c for c in alive if c.ready]
        chosen = ready[0] if ready else (alive[0] if alive else Child(self.apps, self.sys_path))
        self._spares = [c for c in alive if c is not chosen]
        while len(self._spares) < self.spare_count:
            self._spares.append(Child(self.apps, self.sys_path))
        return chosen

    def _queue_timeout(self: "Worker", slot: Slot) -> None:
        job = slot.job
        assert job is not None
        if job.run_deadline_ms is not None and job.deadline_ms == job.run_deadline_ms:
            self._queue(slot, AttemptResult.TIMED_OUT, run_deadline=True)
            return
        self._queue(slot, AttemptResult.TIMED_OUT, error_type="TimeoutError",
                    error=f"attempt {job.attempt} of step {job.step!r} exceeded the step timeout of "
                          f"{slot.timeout_seconds} s and was killed")

    def _scaled_timeout(self: "Worker", slot: Slot, job: ClaimedJob, seconds: int) -> None:
        """The attempt sized its input: its deadline becomes start + the scaled
        timeout (never past the run deadline), on the database clock."""
        deadline_ms = job.started_ms + seconds * 1000
        if job.run_deadline_ms is not None:
            deadline_ms = min(deadline_ms, job.run_deadline_ms)
        slot.timeout_seconds = seconds
        self.enforcer.move_deadline(slot.index, self.to_monotonic(deadline_ms))
        try:
            self.store.set_attempt_deadline(job.job_id, job.attempt, job.lease_token, deadline_ms)
        except StoreError as exc:
            self._store_failed("recording a deadline", exc)
        slot.runner.send(("reply", True))

    def _collect_undead(self: "Worker") -> None:
        """Children that survived SIGKILL (kernel D state) are left alone for good:
        their slot is gone until the worker restarts (``process.undead``)."""
        for index, watch in self.enforcer.take_undead():
            slot = self.slots[index]
            what = "Thread" if getattr(watch.child, "is_thread", False) else "Child process"
            log.error("%s %d did not stop after the kill; slot %d abandoned (undead)",
                      what, watch.child.pid, index, extra=job_extra(self._attempt(slot)) if slot.busy else None)
            slot.undead = True
            if watch.child is slot.child:
                slot.child = None  # abandoned: never signalled or waited on again
            kind = EventName.THREAD_UNDEAD if getattr(watch.child, "is_thread", False) else EventName.PROCESS_UNDEAD
            emit(kind, pipeline=slot.job.pipeline if slot.job else None, pid=watch.child.pid,
                 **(job_extra(self._attempt(slot)) if slot.busy else {}))
            if slot.busy:
                if watch.reason == "timeout":
                    self._queue_timeout(slot)
                else:
                    slot.release()


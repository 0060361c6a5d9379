"""How a worker reacts to its children: their messages (results, requests), their
deaths, kills that did not work (undead), and replacing a dead child from a warm
spare. The worker loop hands every descriptor that became ready to `ChildEvents.handle`.

Results become `Outcome`s in the outbox; what they mean is decided when they are
recorded (`ductline.engine.batch`, by the rulebook in `ductline.model`).
"""

from __future__ import annotations

import dataclasses
import logging
import signal
from typing import Any, Callable

from ductline.clock import DatabaseClock
from ductline.errors import StoreError
from ductline.execution import conversation, protocol, steplog
from ductline.execution.enforcer import Enforcer, Reason, Watch
from ductline.execution.process import Child
from ductline.execution.protocol import Fatal, Log, Message, Ready, Request, Retire, Started
from ductline.model.endings import Facts, Report, ending
from ductline.model.states import AttemptResult
from ductline.observability.events import EventName, emit
from ductline.runtime.outbox import Outage, Outbox
from ductline.engine.batch import Outcome, job_extra
from ductline.runtime.prefetch import Prefetcher
from ductline.runtime.requests import answer
from ductline.runtime.slots import Runner, Slot
from ductline.runtime.spares import Spares
from ductline.runtime.starts import Starts
from ductline.runtime.threads import ThreadAttempt
from ductline.runtime.wakeup import Wakeup
from ductline.store import Store, payloads, steplogs
from ductline.store.records import ClaimedJob

log = logging.getLogger("ductline.worker")


class ChildEvents:
    """Turns what the worker's children do into outcomes and replacements.

    Args:
        slots: the worker's slots.
        limits: the worker's payload limits (the message cap, the output limit).
        stopping: whether the worker stops (dead children are then not replaced).
        slot_ready: called when a slot's child said it is ready (claim now).
        attempt_ended: told how long each attempt ran (seconds, handed over to ended).
        prefetcher: told when a child started a task sent ahead to it.
        (the others are the worker's collaborators of the same names)
    """

    def __init__(self, store: Store, slots: list[Slot], limits: payloads.Limits, *, clock: DatabaseClock,
                 enforcer: Enforcer, outbox: Outbox, outage: Outage, spares: Spares, wakeup: Wakeup,
                 stopping: Callable[[], bool], slot_ready: Callable[[], None],
                 attempt_ended: Callable[[float], None] = lambda seconds: None,
                 prefetcher: Prefetcher | None = None) -> None:
        self._store = store
        self._slots = slots
        # When a runner was seen dying (`ductline.runtime.deaths`); None: not known.
        self.died_at: Callable[[Any], float | None] = lambda runner: None
        self._limits = limits
        self._clock = clock
        self._enforcer = enforcer
        self._outbox = outbox
        self._outage = outage
        self._spares = spares
        self._wakeup = wakeup
        self._stopping = stopping
        self._slot_ready = slot_ready
        self._attempt_ended = attempt_ended
        self._prefetcher = prefetcher
        self._retired: list[ThreadAttempt] = []  # finished threads whose pipes close once they end
        # Takes back a claimed job whose task reached a child that retired before it
        # began (the job, when its lease was last known held, monotonic seconds).
        self.unstarted: Callable[[ClaimedJob, float], None] = lambda job, confirmed: None

    def handle(self, ready: Any) -> None:
        """React to one descriptor the loop found ready (a pipe, a sentinel, the wake-up)."""
        if ready == self._wakeup.fileno():
            self._wakeup.drain()
            return
        for slot in self._slots:
            for runner in (slot.runner, slot.child):
                if runner is None:
                    continue
                if ready == runner.sentinel:
                    self._runner_gone(slot, runner)
                    return
                if ready is runner.conn:
                    self._read(slot, runner)
                    return

    def _read(self, slot: Slot, runner: Runner) -> None:
        """Hear what the runner sent (`ductline.execution.conversation.hear`): whatever
        a child sends, the loop goes on and the attempt ends recorded."""
        heard = conversation.hear(runner.reader, self._limits.message_cap, lambda m: self._message(slot, m, runner),
                                  ready=getattr(runner, "ready", True))
        if heard.ended:
            # The sentinel reports the end; stop waiting on this pipe, or the loop
            # would spin on its EOF until the process is gone.
            runner.eof = True
        elif heard.broken is not None:
            self._garbled(slot, runner, heard.broken)
        elif heard.oversized:
            runner.eof = True  # the rest of that message is never read
            self._oversized(slot, runner)
        elif slot.busy and runner is slot.runner:
            conversation.watch_frames(self._enforcer, slot.index, runner.reader, runner.conn.fileno())

    def _extra(self, slot: Slot) -> dict[str, object] | None:
        return job_extra(slot.attempt()) if slot.busy else None

    def _garbled(self, slot: Slot, runner: Runner, why: str) -> None:
        """The child's end of the pipe carried something that is not our protocol (a
        step wrote into an inherited descriptor, or sent what the parent cannot
        handle). The child cannot be trusted any more: it is not read again and is
        killed; its attempt is recorded as crashed with ``ductline.ProtocolError``."""
        log.error("Child %d broke the worker protocol (%s); killing it", runner.pid, why, extra=self._extra(slot))
        runner.eof = True
        if slot.busy and runner is slot.runner:
            slot.broken = why
            self._enforcer.kill(slot.index, Reason.GARBLED, grace=0.0)
        else:
            runner.signal_group(signal.SIGKILL)

    def _oversized(self, slot: Slot, runner: Runner) -> None:
        """A child began a message larger than the worker reads (``payload_max_bytes``
        plus `payloads.MESSAGE_SLACK_BYTES`): it is killed unread, and its attempt is
        recorded as errored with `ductline.PayloadTooLarge` (not a crash)."""
        log.error("Child %d sent a message over %d bytes; killing it", runner.pid, self._limits.message_cap,
                  extra=self._extra(slot))
        if slot.busy and runner is slot.runner:
            self._enforcer.kill(slot.index, Reason.OVERSIZED, grace=0.0)
            if runner.is_thread:
                runner.conn.close()  # the thread's blocked write fails, and it ends
        else:
            runner.signal_group(signal.SIGKILL)

    def _message(self, slot: Slot, message: Message, runner: Runner) -> None:
        if isinstance(message, Retire):
            self._retire_late(slot, runner, message.reason)
            return
        if isinstance(message, Ready):
            if slot.child is not None:
                slot.child.ready = True
                self._starts().ready(slot.child)
                self._slot_ready()
            return
        if isinstance(message, Started):
            if self._prefetcher is not None:  # one with another token than those sent ahead is ignored
                self._prefetcher.started(slot, message.lease_token, message.at)
            return
        job = slot.job
        if isinstance(message, Request):
            if job is None or slot.runner is None:
                return
            if message.kind == "timeout":
                self._scaled_timeout(slot, job, slot.runner, int(message.args[0]), message.seq)
            else:
                answer(self._store, slot.runner, job, message.kind, message.args, message.seq)
            return
        if isinstance(message, Log):
            if job is not None and message.lease_token == job.lease_token:
                self._step_log(slot, job, message.records)
            return
        if isinstance(message, Fatal):
            log.error("Child could not import the apps: %s: %s", message.error_type, message.error)
            if isinstance(runner, Child) and not runner.ready:
                self._starts().fatal(runner, message.error_type, message.error)
            if job is not None:
                self._end(slot, job, conversation.report(message))
            return
        if job is None or message.lease_token != job.lease_token or not self._enforcer.finish(slot.index):
            return  # a result of an attempt being killed, or no longer current, is never taken
        ran = slot.runner
        self._end(slot, job, conversation.report(message))
        if message.retire and ran is slot.child and slot.child is not None:
            # It could not put its process state back (or its step wants a fresh
            # process each time): it never runs another attempt.
            slot.retire_child(message.retire)

    def _retire_late(self, slot: Slot, runner: Runner, reason: str) -> None:
        """A child that sent its result first (`ductline.execution.protocol.Task.result_first`)
        could not restore its process state. A task sent to it after that result never
        began: its job is queued again, unstarted, for the next free slot (unless its
        kill is under way, which then ends it), and the child is retired."""
        if runner is not slot.child:
            return  # already replaced
        if slot.busy and slot.runner is runner:
            job = slot.job
            assert job is not None
            if not self._enforcer.finish(slot.index):
                return  # being killed: the kill ends the attempt and the child
            slot.release()
            self.unstarted(job, slot.started_at)
        slot.retire_child(reason)

    def _step_log(self, slot: Slot, job: ClaimedJob, records: list[tuple[int, str, str, str]]) -> None:
        """A batch of what the step logged: into the worker's log, and stored with
        the attempt (before its result, which comes after it on the same pipe)."""
        if slot.log_guard is not None:
            records = slot.log_guard.take(records)
        fields = job_extra(slot.attempt())
        for record in records:
            steplog.forward(record, fields)
        try:
            steplogs.append(self._store.dialect, job.job_id, job.attempt, job.lease_token, slot.log_seq, records)
        except StoreError as exc:
            self._outage.failed("recording step logs", exc)
        slot.log_seq += len(records)

    def _queue(self, slot: Slot, result: AttemptResult, **fields: Any) -> None:
        job = slot.job
        assert job is not None
        self._outbox.add(Outcome(slot.attempt(), job.pipeline, result, **fields))
        self._attempt_ended(self._clock.now() - slot.started_at)
        if isinstance(slot.runner, ThreadAttempt):
            self._retired.append(slot.runner)
        slot.release()

    def _runner_gone(self, slot: Slot, runner: Runner) -> None:
        """A child process exited, or a thread-isolated step's thread ended."""
        # What it sent just before it ended still counts: a thread step's log batch
        # and result arrive together with its end, and may be read after it; a
        # child's result, with whether it started the task sent ahead to it.
        # And an idle child's that never said it was ready: why it could not start.
        unready = runner is slot.child and not getattr(runner, "ready", True)
        while (runner is slot.runner or (runner is slot.child and slot.sent) or unready) \
                and not runner.eof and _has_data(runner):
            self._read(slot, runner)
        code = runner.reap()
        if code is None:
            return
        if runner is not slot.runner:  # an idle child died: replace it
            if runner is slot.child:
                if isinstance(runner, Child):
                    self._starts().gone(runner)
                slot.child = self._replacement()
            return
        watch = self._enforcer.settle(slot.index)
        if slot.job is not None:
            self._ended(slot, slot.job, watch, code)
        slot.release()
        if runner is slot.child:
            slot.child = self._replacement()

    def _ended(self, slot: Slot, job: ClaimedJob, watch: Watch | None, code: int | None) -> None:
        """The outcome of an attempt whose runner ended before its result, by why
        the enforcer killed it, if it did."""
        reason = None if watch is None else watch.reason
        if reason is Reason.TIMEOUT and watch is not None and watch.deadline is not None:
            # From the deadline to the child's death, not to this reap (the loop may
            # have been busy when it died).
            gone = self.died_at(slot.runner)
            emit(EventName.TIMEOUT_OVERRUN, pipeline=job.pipeline,
                 overrun_seconds=max(0.0, (self._clock.now() if gone is None else gone) - watch.deadline),
                 **job_extra(slot.attempt()))
        self._end(slot, job, kill=reason, exit_code=code)

    def _end(self, slot: Slot, job: ClaimedJob, report: Report | None = None, *, kill: Reason | None = None,
             exit_code: int | None = None) -> None:
        """Queue what the rulebook says the attempt's end is (`ductline.model.endings`)."""
        ended = ending(Facts(job.step, job.attempt, slot.limits, report, self._limits.max_bytes, kill, exit_code,
                             slot.timeout_seconds, _run_deadline(job), slot.broken, self._limits.message_cap))
        if ended is None:
            slot.release()  # the lease is gone; whoever holds the job records it
            return
        self._queue(slot, ended.result, output=ended.output, error_type=ended.error_type, error=ended.error,
                    traceback=ended.traceback, route_key=ended.route_key, release=ended.release,
                    interrupted=ended.interrupted, run_deadline=ended.run_deadline)

    def _starts(self) -> Starts:
        return self._spares.starts

    def _replacement(self) -> Child | None:
        """A child in place of one that ended; ``None`` while the worker stops, or while
        children that keep failing to start wait for their next start (the worker's
        loop starts it then: `ductline.runtime.starts.Starts.due_at`)."""
        return None if self._stopping() or self._starts().due_at() is not None else self._spares.fresh()

    def _scaled_timeout(self, slot: Slot, job: ClaimedJob, runner: Runner, seconds: int, seq: int) -> None:
        """The attempt sized its input: its deadline becomes start + the scaled
        timeout (never past the run deadline), on the database clock; the child is
        told it (epoch ms) for the step's context."""
        deadline_ms = job.started_ms + seconds * 1000
        if job.run_deadline_ms is not None:
            deadline_ms = min(deadline_ms, job.run_deadline_ms)
        slot.timeout_seconds = seconds
        slot.job = dataclasses.replace(job, deadline_ms=deadline_ms)  # recorded with the attempt's end
        self._enforcer.move_deadline(slot.index, self._clock.to_monotonic(deadline_ms))
        try:
            self._store.set_attempt_deadline(job.job_id, job.attempt, job.lease_token, deadline_ms)
        except StoreError as exc:
            self._outage.failed("recording a deadline", exc)
        runner.send(protocol.reply(deadline_ms, seq))  # the step's context().deadline

    def collect_undead(self) -> None:
        """Children that survived SIGKILL (kernel D state) are left alone for good:
        their slot is gone until the worker restarts (``process.undead``)."""
        for index, watch in self._enforcer.take_undead():
            slot = self._slots[index]
            thread = bool(getattr(watch.child, "is_thread", False))
            log.error("%s %d did not stop after the kill; slot %d abandoned (undead)",
                      "Thread" if thread else "Child process", watch.child.pid, index, extra=self._extra(slot))
            slot.undead = True
            if watch.child is slot.child:
                slot.child = None  # abandoned: never signalled or waited on again
            emit(EventName.THREAD_UNDEAD if thread else EventName.PROCESS_UNDEAD,
                 pipeline=slot.job.pipeline if slot.job else None, pid=watch.child.pid,
                 **(job_extra(slot.attempt()) if slot.busy else {}))
            if slot.job is not None:
                if watch.reason is Reason.TIMEOUT:
                    self._end(slot, slot.job, kill=Reason.TIMEOUT)
                else:
                    slot.release()

    def reap_retired(self) -> None:
        """Close the pipes of finished threads that have ended since."""
        self._retired = [t for t in self._retired if t.reap() is None]


def _run_deadline(job: ClaimedJob) -> bool:
    """The attempt's deadline is its run's."""
    return job.run_deadline_ms is not None and job.deadline_ms == job.run_deadline_ms


def _has_data(runner: Runner) -> bool:
    try:
        return bool(runner.conn.poll(0))
    except (OSError, EOFError, ValueError):
        return False

"""The in-process executor's driver: a worker's loop in one asyncio task, over the
engine (`ductline.engine`) and an in-memory store (`ductline.store.memory`).

It keeps only what is about driving -- claiming ready jobs for free slots,
starting their attempts (`ductline.local.attempts`), waiting on a clock, and
telling the caller (`ductline.local.report`). Everything an outcome means, what a
completion creates, what a halt, a cancel, a deadline or a pause does, is applied
by the same engine code a worker runs, with the same statements, so the two cannot
disagree.

One turn of the loop: attempts a stop took away are killed (their leases were
revoked, as a worker learns from its heartbeat), finished attempts are recorded
in one batch, what is due (the run deadline, expired pauses) is ended, free slots
are filled by a claim; then the loop sleeps until an attempt ends, the caller acts
(cancel, resume), or the clock reaches the next not-before time, pause expiry or
deadline. With a `ductline.testing.FakeClock` the store's clock is the fake one,
so delays, retry delays, rate limits and pause expiries pass in virtual time; the
run deadline passes in real time too, and step timeouts only in real time.
"""

from __future__ import annotations

import asyncio
import builtins
import time
import uuid
from typing import Any

from ductline import codec
from ductline.dsl.graph import Definition, check_event_name
from ductline.dsl.pipeline import registered_definition
from ductline.engine import childruns, events as event_engine, pause, stop
from ductline.engine.batch import Outcome as Recording, record_batch
from ductline.engine.lost import Lost, report_lost
from ductline.engine.record import Outcome as Recorded
from ductline.engine.start import new_run, write
from ductline.errors import DefinitionError, InvalidStateError
from ductline.execution.enforcer import UNDEAD_AFTER_SECONDS
from ductline.local.attempts import AttemptRunner, Started
from ductline.local.childapps import child_setup
from ductline.local.children import ChildStartError, Pool
from ductline.local.clock import RealClock, activity, is_virtual
from ductline.local.deadline import RunDeadline
from ductline.local.marker import apply_marks
from ductline.local.options import RunOptions
from ductline.local.report import EndStatus, Reporter
from ductline.local.resumer import Resumer
from ductline.local.running import Running
from ductline.local.results import WorkflowResult
from ductline.local.summary import workflow_result
from ductline.local.tracker import Tracker
from ductline.model.inputs import NO_INPUT
from ductline.model.limits import step_limits
from ductline.model.states import TERMINAL_RUN, JobStatus, RunStatus
from ductline.observability import events
from ductline.observability.events import EventName, emit
from ductline.observability.tracing import TracingSubscriber, available as tracing_available
from ductline.store import payloads, steplogs
from ductline.store.memory import open_memory_store
from ductline.store import children as child_rows
from ductline.store.records import ClaimedJob

# Leases are the worker's defence against a dead worker; nothing here can die
# without the run, so a lease never runs out within one.
LEASE_MS = 100 * 365 * 86_400_000
STOP_MARGIN = 0.5


class Driver:
    """One in-process run of ``definition``; `run` may be awaited once."""

    def __init__(self, definition: Definition, args_json: str, options: RunOptions) -> None:
        self.definition = definition
        self.options = options
        self.clock = options.clock
        self.virtual = is_virtual(self.clock)
        # A clock given by the caller (a test's) is the store's clock too: delays,
        # retry delays, rate limits and pause expiries pass in its time.
        self.own_clock = not isinstance(self.clock, RealClock)
        self.run_id = uuid.uuid4().hex
        self.worker_id = f"execute-{self.run_id[:12]}"
        self._epoch_ms = time.time() * 1000
        self._clock_origin: float | None = None
        self.store = open_memory_store(self._db_now_ms if self.own_clock else None)
        self.definitions = {definition.name: definition}
        self.step_limits = step_limits(self.definitions)
        self.queues = _queues_of(self.definitions)
        self.limits = payloads.Limits(max_bytes=options.max_payload_bytes)
        self.report = Reporter(definition.name, self.run_id, options.on_update)
        self.tracing = TracingSubscriber(self.store, options.tracer_provider) if tracing_available() else None
        self.children = child_setup(definition, inline=options.inline)
        self.pool = Pool(self.children.apps, self.children.sys_path, options.concurrency, options.kill_grace,
                         message_cap=self.limits.message_cap, max_output_bytes=options.max_payload_bytes)
        self.runner = self._runner_for(definition, self.children)
        # Child runs (`ductline.children`) run in this loop too: their pipelines' runners, by name.
        self.runners = {definition.name: self.runner}
        self.resumer = Resumer(options.resume, self.clock, current_input=self._paused_input,
                               resume=lambda value, job_ids: self.resume(value, job_ids),
                               failed=self._failed, changed=self.wake)
        self.tracker = Tracker(self.store, definition, self.run_id, self.report, self.resumer.paused)
        self.running: dict[str, Running] = {}
        self._log_seq: dict[tuple[str, int], int] = {}
        self._wake = asyncio.Event()
        self.deadline = RunDeadline(options.timeout, virtual=self.virtual,
                                    loop_time=lambda: asyncio.get_running_loop().time(),
                                    seconds_until=self._seconds_until)
        self.bug: BaseException | None = None
        self.finished = False
        self._final: RunStatus | None = None
        self._stopped_from_outside = False
        self._begun = False  # an attempt of the run has begun
        rows = new_run(definition, self.run_id, args_json, timeout_seconds=_whole(options.timeout),
                       delay_ms=definition.node(definition.start).options.delay * 1000, not_before_ms=None,
                       retry_delay=options.retry_delay, limits=self.limits)
        with self.store.transaction() as tx:
            write(tx, rows)
            for name, data in options.events:  # kept until the run reaches their waits
                event_engine.send(tx, self.run_id, name, data, None, self.limits,
                                  max_kept=options.max_kept_events)
        self.first_step = rows.job.step
        self._marks = dict(options.marks)  # the mark_succeeded option, consumed step by step

    def _runner_for(self, definition: Definition, children: Any) -> AttemptRunner:
        options = self.options
        return AttemptRunner(definition, self.store, self.pool, children,
                             kill_grace=options.kill_grace, max_output_bytes=options.max_payload_bytes,
                             log_level=options.log_level, log_max_bytes=options.log_max_bytes,
                             inline=options.inline, on_log=self._logged)

    def _runner(self, job: ClaimedJob) -> AttemptRunner:
        return self.runners.get(job.pipeline, self.runner)

    def _know_children(self, run_id: str) -> None:
        """A step run of ``run_id`` started child runs: their pipelines are claimed and
        run here too (found by name among the pipelines this process defined)."""
        with self.store.dialect.reader() as s:
            found = child_rows.child_runs(s, run_id)
        for row in found:
            name = str(row["pipeline"])
            if name in self.definitions:
                continue
            definition = registered_definition(name)
            if definition is None:
                continue  # the parent's attempt recorded that error already
            self.definitions[name] = definition
            self.runners[name] = self._runner_for(definition, child_setup(definition, inline=self.options.inline))
        self.step_limits = step_limits(self.definitions)
        self.queues = _queues_of(self.definitions)

    # -- the store's clock ------------------------------------------------------------------------
    def _db_now_ms(self) -> int:
        """The caller's clock as epoch milliseconds: the wall clock at the start plus
        that clock's seconds since."""
        now = self.clock.now()
        if self._clock_origin is None:
            self._clock_origin = now
        return int(self._epoch_ms + (now - self._clock_origin) * 1000)

    def _seconds_until(self, at_ms: float) -> float:
        return max(0.0, (at_ms - self.store.now_ms()) / 1000)

    def status(self) -> RunStatus:
        """The run's status (its last one once the run is over and its store closed)."""
        if self._final is not None:
            return self._final
        row = self.store.get_run(self.run_id)
        assert row is not None
        return RunStatus(row["status"])

    # -- what a handle may do ----------------------------------------------------------------------
    def cancel(self) -> None:
        """Cancel the run (`ductline.engine.stop.cancel`).

        Raises:
            InvalidStateError: the run already finished.
        """
        if self.finished:
            raise InvalidStateError(f"run {self.run_id} is {self.status().value}; "
                                    "only an unfinished run can be cancelled")
        with self.store.transaction() as tx:
            stop.cancel(tx, self.definition, self.run_id)
        emit(EventName.PIPELINE_CANCELLED, pipeline=self.definition.name, run_id=self.run_id)
        self._stopped_from_outside = True
        self.wake()

    def resume(self, input: Any = NO_INPUT, job_ids: list[str] | None = None) -> list[str]:
        """Resume paused step runs (all, or ``job_ids``); returns the steps resumed.

        Raises:
            TypeError, PayloadTooLarge, InvalidStateError: as `ductline.local.LocalRun.resume`.
        """
        if self.finished:
            raise InvalidStateError(f"run {self.run_id} is {self.status().value}; "
                                    "only a paused run can be resumed")
        encoded = None
        if input is not NO_INPUT:
            encoded = pause.encode_input(input)
            payloads.check_size(encoded, "resume input", self.limits.max_bytes)
        with self.store.transaction() as tx:
            resumed = pause.resume(tx, self.run_id, encoded, self.limits, job_ids=job_ids)
        self.tracker.resumed(resumed, encoded is not None)
        self.wake()
        return sorted({row["step"] for row in resumed})

    def send(self, event: str, data: Any = None, key: str | None = None) -> event_engine.Sent:
        """Send an event to the run (`ductline.engine.events.send`).

        Raises:
            TypeError, ValueError, PayloadTooLarge, InvalidStateError: as
                `ductline.local.LocalRun.send`.
        """
        check_event_name(event)
        if key is not None:
            check_event_name(key, "a send's key")
        if self.finished:
            raise InvalidStateError(f"run {self.run_id} is {self.status().value}; an event can be sent only "
                                    "to an unfinished run")
        encoded = event_engine.encode_data(data)
        payloads.check_size(encoded, "event data", self.limits.max_bytes)
        with self.store.transaction() as tx:
            sent = event_engine.send(tx, self.run_id, event, encoded, key, self.limits,
                                     max_kept=self.options.max_kept_events)
        if not sent.duplicate:
            emit(EventName.EVENT_RECEIVED, pipeline=self.definition.name, run_id=self.run_id, event=event,
                 step=sent.step)
        self.wake()
        return sent

    def wake(self) -> None:
        self._wake.set()

    def _failed(self, exc: BaseException) -> None:
        """A part of the run (a ``resume`` callable) raised: the run ends with it."""
        if self.bug is None:
            self.bug = exc

    def _paused_input(self, job_id: str) -> Any:
        """The one argument a paused job waits with (this process is the caller's: a
        user type may be built here)."""
        with self.store.dialect.reader() as s:
            rows = s.fetch("paused_job_input", {"job_id": job_id})
        stored = rows[0]["input"] if rows else None
        return codec.loads(payloads.load(self.store, self.run_id, stored) or "[null]")[0]

    # -- the run -------------------------------------------------------------------------------------
    async def run(self) -> WorkflowResult:
        """Run to the end; a cancellation of the awaiting task cancels the run (its
        children are killed, its tasks awaited) and is raised again."""
        began = self.clock.now()
        self.report.run_started(self.options.timeout)
        unsubscribe = events.subscribe(self._event) if self.tracing is not None else None
        try:
            try:
                await self._execute()
            except BaseException as exc:
                await self._abandon(exc)
                raise
            result = workflow_result(self.store, self.definition, self.run_id, self.clock.now() - began)
            self.report.run_ended(_end_status(result), result.status, result.metadata["error"])
            return result
        finally:
            self.finished = True
            self.resumer.close()
            await self.pool.close()
            if unsubscribe is not None:
                unsubscribe()
            self._final = self.status()
            self.store.close()

    def _event(self, name: EventName, attributes: dict[str, Any]) -> None:
        """This run's engine events feed its spans (the worker's tracing subscriber)."""
        if attributes.get("run_id") == self.run_id and self.tracing is not None:
            self.tracing(name, attributes)

    async def _execute(self) -> None:
        if self.status() in TERMINAL_RUN:
            return  # cancelled before it began
        if self.children.refs:
            await self._warm()  # interpreter start-up is not the run's time
        while True:
            async with activity(self.clock):
                if self._stopped_from_outside:  # a cancel by the caller revoked leases
                    self._stopped_from_outside = False
                    self._reap_lost()
                self._record()
                self._end_due()
                if self.bug is not None:
                    raise self.bug
                status = self.status()
                if status is RunStatus.HALTED and self._marks and not self.running \
                        and apply_marks(self.store, self.definition, self.run_id, self._marks,
                                        self.options.retry_delay, self.limits):
                    status = self.status()  # the mark_succeeded option revived the run
                if status not in TERMINAL_RUN:
                    self._claim()
                if self._over(status):
                    break
            await self._wait()
        await self._drain()

    async def _warm(self) -> None:
        """Start a child before the run does: one that cannot import the steps' modules
        fails the call at once (every attempt would fail the same way).

        Raises:
            DefinitionError: a child could not import the modules of the steps.
        """
        try:
            child = await self.pool.acquire()
        except ChildStartError as exc:
            if _resources(exc.error_type):
                return  # the machine, not the pipeline: the first attempt records it
            raise DefinitionError(
                f"the steps of pipeline {self.definition.name!r} run in child processes, and a child could not "
                f"import them: {exc.error_type}: {exc.message}. Define the steps in a module a new Python "
                "process can import (a file of their own, not `python -` or `python -c`), make them async, "
                "or use isolation='thread'") from None
        self.pool.release(child, True)

    def _over(self, status: RunStatus) -> bool:
        """Nothing more will happen: the run ended, or it halted (or its pauses wait
        in a halted run) with nothing left to run."""
        if self.running or self.resumer.busy:
            return False
        if status in TERMINAL_RUN:
            return True
        if status is RunStatus.PAUSED:
            return False  # a resume, a cancel, its expiry or the deadline moves it on
        if self.definition.waits and status is not RunStatus.HALTED \
                and self.store.run_progress(self.run_id).get(JobStatus.DEFERRED.value):
            return False  # an event, a cancel, its timeout or the deadline moves it on
        if self.store.next_wakeups(list(self.definitions), self.queues)[0] is not None:
            return False  # a job waits for its not-before time
        return not self.store.unthrottle_idle_keys()

    # -- claiming and starting attempts ---------------------------------------------------------------
    def _claim(self) -> None:
        free = self.options.concurrency - len(self.running)
        if free <= 0:
            return
        # Every queue: execute is the whole fleet in one process.
        jobs = self.store.claim(self.worker_id, list(self.definitions), free, LEASE_MS, limits=self.step_limits,
                                queues=self.queues)
        for job in jobs:
            if job.run_id == self.run_id:
                self.deadline.started(job.run_deadline_ms)
            running = Running(job)
            self.running[job.job_id] = running
            running.task = asyncio.get_running_loop().create_task(
                self._attempt(running), name=f"ductline {job.step}[{job.scope}] attempt {job.attempt}")

    async def _attempt(self, running: Running) -> None:
        async with activity(self.clock):  # a fake clock waits while the attempt works
            try:
                running.outcome = await self._runner(running.job).run(running.job, lambda: self._begin(running))
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - a bug of the executor: end the run with it
                self.bug = self.bug or exc
            finally:
                self.wake()

    def _begin(self, running: Running) -> Started:
        """The attempt begins now: it is bound by its step timeout and the run deadline."""
        job = running.job
        now_ms = self.store.now_ms()
        mine = job.run_id == self.run_id  # else a child run's: its deadline is the store's (_end_children_due)
        if mine and not self._begun:  # the run's clock starts with its first attempt, not its claim
            self._begun = True
            self.deadline.began(self.store.restart_run_deadline(job.run_id, job.job_id, job.attempt, now_ms))
        started = running.begin(self._runner(job).node(job.step), self.deadline.bound() if mine else None, now_ms,
                                self.clock.now())
        begun_ms = running.begun_ms or 0
        emit(EventName.ATTEMPT_STARTED, pipeline=job.pipeline, step=job.step, run_id=job.run_id,
             job_id=job.job_id, attempt=job.attempt, started_ms=begun_ms,
             pickup_latency_seconds=max(0.0, (begun_ms - job.not_before_ms) / 1000), deadline_ms=job.deadline_ms)
        if mine:
            self.tracker.started(job)
        return started

    def _logged(self, job: ClaimedJob, records: list[tuple[int, str, str, str]]) -> None:
        """An attempt's log batch, stored with it as a worker stores it."""
        key = (job.job_id, job.attempt)
        first = self._log_seq.get(key, 0)
        steplogs.append(self.store.dialect, job.job_id, job.attempt, job.lease_token, first, records)
        self._log_seq[key] = first + len(records)

    # -- recording ------------------------------------------------------------------------------------
    def _record(self) -> None:
        """Hand the finished attempts to the engine, in one batch."""
        done = [r for r in self.running.values() if r.task is not None and r.task.done()]
        if not done:
            return
        for r in done:
            del self.running[r.job.job_id]
        done = [r for r in done if r.outcome is not None and not r.lost]
        if not done:
            return
        recordings = [self._recording(r) for r in done]
        results = record_batch(self.store, recordings, self.definitions, self.options.retry_delay,  # type: ignore[arg-type]
                               self.limits, now_ms=self.store.now_ms)
        waiting = None
        moved = False
        for r, recorded in zip(done, results):
            if recorded.outcome is Recorded.AWAITING:
                self._know_children(r.job.run_id)
            if r.job.run_id != self.run_id:  # a child run's attempt: the caller follows this run's steps
                moved = True  # its end may have woken a step run of this run
                continue
            if recorded.outcome is Recorded.RETRY and waiting is None:
                waiting = JobStatus.HELD if self.status() is RunStatus.HALTED else JobStatus.PENDING
            status = {Recorded.COMPLETED: JobStatus.COMPLETED, Recorded.RELEASED: JobStatus.PENDING,
                      Recorded.FAILED: JobStatus.FAILED, Recorded.AWAITING: JobStatus.AWAITING}.get(
                recorded.outcome, waiting)
            if recorded.outcome is Recorded.LOST:
                moved = True  # a stop recorded it (its run deadline): reported with the stop's result
                self.tracker.ended_by_others([(r.job, self._seconds(r))])
                continue
            assert r.outcome is not None and status is not None
            self.tracker.ended(r.job, self._seconds(r), status.value, r.outcome.result.value, r.outcome.error_type,
                               r.outcome.error)
            moved = moved or recorded.halted or recorded.run_failed or bool(recorded.paused or recorded.skipped
                                                                             or recorded.deferred)
        if moved:
            self._reap_lost()  # a fail-fast halt or the run deadline took the siblings' leases
            self.tracker.sync()

    def _recording(self, r: Running) -> Recording:
        """The engine's record of a finished attempt; one the run deadline killed ends
        the whole run (`ductline.engine.stop.expire`), as on a worker."""
        return r.recording(self._runner(r.job).node(r.job.step))

    def _seconds(self, r: Running) -> float:
        """How long the attempt ran, on the driver's clock."""
        return self.clock.now() - r.clock_began

    # -- stops ---------------------------------------------------------------------------------------
    def _reap_lost(self) -> None:
        """Attempts whose leases a stop revoked (a cancel, the run deadline, an expired
        pause, a fail-fast halt) are killed; the stop recorded them already."""
        live = [r for r in self.running.values() if not r.lost]
        if not live:
            return
        held = self.store.leases_held([r.job.lease_token for r in live])
        lost = [r for r in live if r.job.lease_token not in held]
        if not lost:
            return
        self.tracker.ended_by_others([(r.job, self._seconds(r)) for r in lost])
        for r in lost:
            r.lost = True
            if r.task is not None and not r.task.done():
                r.task.cancel()  # it kills the child as it unwinds
        # Reported as the stop recorded them, as a worker reports them (`ductline.engine.lost`).
        report_lost(self.store, [Lost(r.job.pipeline, r.job.step, r.job.run_id, r.job.job_id, r.job.attempt)
                                 for r in lost])
        self.tracker.sync()

    def _end_due(self) -> None:
        """End what is due: the run deadline (on the store's clock, or in real time),
        expired pauses."""
        changed = False
        if self.deadline.due(self.store.now_ms):
            try:
                with self.store.transaction() as tx:
                    ended = stop.expire(tx, self.definition, self.run_id)
            except stop.Unchanged:
                ended = False
            if ended:
                changed = True
                emit(EventName.PIPELINE_FAILED, pipeline=self.definition.name, run_id=self.run_id)
        if stop.expire_pauses(self.store, self.definitions):
            changed = True
        if self.definition.waits and stop.expire_waits(self.store, self.definitions):
            changed = True
        if len(self.definitions) > 1 and self._end_children_due():
            changed = True
        if changed:
            self._reap_lost()
            self.tracker.sync()

    def _end_children_due(self) -> bool:
        """Child runs past their own deadlines are ended, stops of their parents carried
        to them, parents whose children ended woken (`childruns.sweep`)."""
        ended = 0
        for row in self.store.due_deadlines():
            if row["id"] == self.run_id:
                continue  # this run's deadline is the driver's (above)
            try:
                with self.store.transaction() as tx:
                    ended += stop.expire(tx, self.definitions.get(row["pipeline"]), row["id"])
            except stop.Unchanged:
                continue
            childruns.committed(tx)
        return bool(ended + childruns.sweep(self.store, self.definitions))

    # -- waiting --------------------------------------------------------------------------------------
    async def _wait(self) -> None:
        """Sleep until an attempt ends, the caller acts, or the next timer is due."""
        if any(r.task is not None and r.task.done() for r in self.running.values()):
            return
        if self._wake.is_set():
            self._wake.clear()
            return
        not_before_ms, due_ms = self.store.next_wakeups(list(self.definitions), self.queues)
        timers: list[tuple[float, bool]] = []  # (seconds, passive) on the driver's clock
        if not_before_ms is not None and len(self.running) < self.options.concurrency:
            timers.append((self._seconds_until(not_before_ms), False))
        if due_ms is not None:
            if not self.deadline.is_deadline(due_ms):
                timers.append((self._seconds_until(due_ms), False))  # a pause expires
            elif self.virtual:  # the run deadline passes in virtual time too
                timers.append((self._seconds_until(due_ms), True))
        await self._sleep_or_wake(timers, self.deadline.real_seconds_left())

    async def _sleep_or_wake(self, timers: list[tuple[float, bool]], real: float | None) -> None:
        """Wait for a wake-up, the earliest timer on the driver's clock, or ``real``
        seconds of real time, whichever comes first."""
        waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._wake.wait())}
        # Every timer sleeps (not only the earliest): a virtual clock jumps for the
        # timers a step run waits on, and wakes a passive one (the run deadline) on
        # the way if it comes first.
        for seconds, passive in timers:
            if self.virtual:
                sleep = self.clock.sleep(seconds, passive=passive)  # type: ignore[call-arg]
            else:
                sleep = self.clock.sleep(seconds)
            waits.add(asyncio.ensure_future(sleep))
        try:
            await asyncio.wait(waits, timeout=real, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            self._wake.clear()

    # -- ending ---------------------------------------------------------------------------------------
    async def _drain(self) -> None:
        """Cancel what still runs (a run that ended with attempts in flight) and wait
        for it: a task running a child needs the kill grace and a second for SIGKILL."""
        tasks = [r.task for r in self.running.values() if r.task is not None and not r.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=self.options.kill_grace + UNDEAD_AFTER_SECONDS + STOP_MARGIN)
        self.running.clear()

    async def _abandon(self, exc: BaseException) -> None:
        """The awaiting task was cancelled, or the executor failed: cancel the run
        (its in-flight attempts are recorded cancelled), await its tasks, report."""
        try:
            with self.store.transaction() as tx:
                stop.cancel(tx, self.definition, self.run_id)
        except InvalidStateError:
            pass  # it ended already
        self._reap_lost()
        await self._drain()
        cancelled = isinstance(exc, asyncio.CancelledError)
        self.report.run_ended(EndStatus.CANCELLED if cancelled else EndStatus.FAILED, self.status().value,
                              f"{type(exc).__name__}: {exc}")


def _resources(error_type: str) -> bool:
    """A child that did not start for want of the machine's resources (an
    ``OSError`` such as no more processes, or memory), not for its imports."""
    found = getattr(builtins, error_type, None)
    return error_type == "ChildStartError" or (isinstance(found, type) and issubclass(found, (OSError, MemoryError)))


def _end_status(result: WorkflowResult) -> EndStatus:
    if result.status == "completed":
        return EndStatus.SUCCESS
    if result.timeout_exceeded:
        return EndStatus.TIMEOUT
    if result.status == "cancelled":
        return EndStatus.CANCELLED
    return EndStatus.FAILED


def _whole(seconds: float | None) -> float | None:
    """A timeout as stored: whole seconds as an ``int``, as a worker stores them."""
    if seconds is None:
        return None
    return int(seconds) if float(seconds).is_integer() else seconds


def _queues_of(definitions: dict[str, Definition]) -> list[str]:
    """Every queue of every pipeline a run (and its child runs) may use. Kept, not
    computed per claim: a definition's queues are a scan of all its steps, and a
    claim per step made a long chain quadratic."""
    return sorted({q for d in definitions.values() for q in d.queues})

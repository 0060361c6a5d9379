"""The in-process driver's state (`ductline.local.driver.Driver`): what one run
keeps, the runners of its pipelines, the clocks it reads, and what a handle may do."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from ductline import codec
from ductline.dsl.graph import Definition, check_event_name
from ductline.dsl.pipeline import registered_definition
from ductline.engine import events as event_engine, pause, stop
from ductline.engine.start import new_run, write
from ductline.errors import InvalidStateError
from ductline.local.attempts import AttemptRunner
from ductline.local.childapps import child_setup
from ductline.local.children import Pool
from ductline.local.clock import RealClock, is_virtual
from ductline.local.deadline import RunDeadline
from ductline.local.options import RunOptions
from ductline.local.report import Reporter
from ductline.local.resumer import Resumer
from ductline.local.running import Running
from ductline.local.tracker import Tracker
from ductline.model.inputs import NO_INPUT
from ductline.model.limits import step_limits
from ductline.model.states import RunStatus
from ductline.observability.events import EventName, emit
from ductline.observability.tracing import TracingSubscriber, available as tracing_available
from ductline.store import payloads, steplogs
from ductline.store.memory import open_memory_store
from ductline.store import children as child_rows
from ductline.store.records import ClaimedJob


class DriverBase:
    """One in-process run's state, runners and clocks, and the verbs of its handle."""

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

    def _logged(self, job: ClaimedJob, records: list[tuple[int, str, str, str]]) -> None:
        """An attempt's log batch, stored with it as a worker stores it."""
        key = (job.job_id, job.attempt)
        first = self._log_seq.get(key, 0)
        steplogs.append(self.store.dialect, job.job_id, job.attempt, job.lease_token, first, records)
        self._log_seq[key] = first + len(records)

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

    def _seconds(self, r: Running) -> float:
        """How long the attempt ran, on the driver's clock."""
        return self.clock.now() - r.clock_began

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

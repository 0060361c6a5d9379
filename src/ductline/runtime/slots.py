"""A worker slot: one pre-started child process and the attempt it runs.

The child process and its kill path live in `ductline.execution`.
"""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Protocol

from ductline.dsl.options import StepOptions
from ductline.execution import protocol, steplog
from ductline.execution.process import Child
from ductline.execution.protocol import Task
from ductline.loglevels import DEFAULT_LEVEL, DEFAULT_MAX_BYTES
from ductline.model.resources import ResourceLimits
from ductline.engine.record import Attempt
from ductline.runtime.spares import Spares
from ductline.store.records import ClaimedJob

if TYPE_CHECKING:
    from ductline.runtime.prefetch import Prefetched

log = logging.getLogger("ductline.worker")


class Runner(Protocol):
    """What runs a job: the slot's `Child`, or a `ductline.runtime.threads.ThreadAttempt`.
    Both speak `ductline.execution.protocol` over ``conn``; ``sentinel`` becomes
    readable when the runner ends."""

    conn: Connection
    reader: protocol.Reader
    sentinel: int
    eof: bool
    is_thread: bool

    @property
    def pid(self) -> int: ...

    def send(self, message: Any) -> None: ...

    def signal_group(self, sig: int) -> None: ...

    def reap(self) -> int | None: ...


@dataclass(slots=True)
class Slot:
    """One unit of concurrency of a worker: a child and the attempt it runs.

    Attributes:
        index: its place among the worker's slots (its key in the enforcer).
        max_output_bytes: the worker's ``payload_max_bytes``, sent with each task.
        child: its warm child (``None`` while none is alive, or after it became undead).
        job: the job it runs, if any.
        runner: what runs that job: the child, or a thread.
        undead: its runner survived the kill; the slot is gone until the worker restarts.
        timeout_seconds: the attempt's step timeout (a scaled one once reported).
        log_level, log_max_bytes: the worker's step log settings, sent with each task.
        log_seq: how many log records of the running attempt were taken so far.
        log_guard: the parent's own guard of the running attempt's log cap.
        limits: the attempt's resource limits (`ductline.model.resources`).
        spares: where a retired child's replacement comes from.
        retired: children retired (killed) and not yet reaped.
        sent: the jobs sent ahead to its child while it runs an attempt, in order
            (`ductline.runtime.prefetch`); the slot is not free until they started
            or came back.
        retiring: its attempt's child is retired once the attempt ends (``fresh``).
    """

    index: int
    max_output_bytes: int
    child: Child | None = None
    job: ClaimedJob | None = None
    runner: Runner | None = None
    undead: bool = False
    timeout_seconds: int | None = None
    log_level: str = DEFAULT_LEVEL
    log_max_bytes: int = DEFAULT_MAX_BYTES
    log_seq: int = 0
    log_guard: steplog.ParentGuard | None = None
    limits: ResourceLimits = ResourceLimits()
    spares: Spares | None = None
    retired: list[Child] = field(default_factory=list)
    broken: str | None = None  # why its attempt's child was killed for breaking the protocol
    started_at: float = 0.0  # monotonic seconds: when its attempt was handed to its runner
    sent: list[Prefetched] = field(default_factory=list)
    retiring: bool = False

    @property
    def busy(self) -> bool:
        return self.job is not None

    @property
    def free(self) -> bool:
        """It can take a job now: idle, with a child that said it is ready."""
        return not self.busy and not self.sent and not self.undead and self.child is not None \
            and self.child.ready

    def task(self, job: ClaimedJob, options: StepOptions | None = None) -> Task:
        """The task of ``job``'s attempt; ``options`` (the step's, if this worker
        knows the step) add its resource limits and isolation."""
        # The result comes before the child restores its state: the recording need not
        # wait for the restore, and a task sent meanwhile waits for it in the channel
        # (a child that cannot restore says so: `ductline.runtime.children`).
        if options is None:
            return Task(job.job_id, job.run_id, job.pipeline, job.step, job.attempt, job.input,
                        job.deadline_ms, job.lease_token, self.max_output_bytes, self.log_level, self.log_max_bytes,
                        result_first=True)
        return Task(job.job_id, job.run_id, job.pipeline, job.step, job.attempt, job.input,
                    job.deadline_ms, job.lease_token, self.max_output_bytes, self.log_level, self.log_max_bytes,
                    memory_limit=options.memory_limit, cpu_limit=options.cpu_limit,
                    fresh=options.isolation == "fresh", result_first=True)

    def needs_fresh_child(self, options: StepOptions | None) -> bool:
        """An ``isolation="fresh"`` step is about to run on a child that already ran
        an attempt: it must get an unused one (`retire_child`)."""
        return options is not None and options.isolation == "fresh" and self.child is not None \
            and self.child.used

    def retire_child(self, why: str) -> None:
        """Kill the slot's idle child with its whole process group (what an attempt
        left behind goes with it) and take a spare in its place."""
        old = self.child
        if old is not None:
            log.debug("Retiring child %d of slot %d: %s", old.pid, self.index, why)
            old.signal_group(signal.SIGKILL)
            self.retired.append(old)
        self.child = self.spares.fresh() if self.spares is not None else None

    def reap_retired(self) -> list[Child]:
        """Collect retired children that have exited; returns those still alive."""
        self.retired = [c for c in self.retired if c.reap() is None]
        return self.retired

    def assign(self, job: ClaimedJob, runner: Runner, options: StepOptions | None = None, *,
               sent: bool = False) -> None:
        """Run ``job`` on ``runner`` (a thread already has its task; ``sent``: the
        child has it too, and started it).

        Raises:
            OSError, ValueError: the child died before it got the task.
        """
        self.job, self.runner, self.timeout_seconds, self.broken = job, runner, job.timeout_seconds, None
        self.log_seq, self.log_guard = 0, steplog.ParentGuard(self.log_max_bytes)
        self.limits = ResourceLimits() if options is None else \
            ResourceLimits(options.memory_limit, options.cpu_limit)
        self.retiring = options is not None and options.isolation == "fresh"
        if runner is self.child and self.child is not None:
            self.child.used = True
            if not sent:
                runner.send(protocol.run(self.task(job, options)))

    def attempt(self) -> Attempt:
        """The running attempt, as recording knows it."""
        job = self.job
        assert job is not None
        return Attempt(job.job_id, job.run_id, job.step, job.scope, job.attempt, job.lease_token,
                       job.started_ms, job.limit_key, job.deadline_ms)

    def release(self) -> None:
        self.job = None
        self.runner = None

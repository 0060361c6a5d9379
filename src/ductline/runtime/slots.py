"""A worker slot: one pre-started child process and the attempt it runs.

The child process and its kill path live in `ductline.execution`.
"""

from __future__ import annotations

from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Protocol

from ductline.execution import protocol, steplog
from ductline.execution.process import Child
from ductline.execution.protocol import Task
from ductline.loglevels import DEFAULT_LEVEL, DEFAULT_MAX_BYTES
from ductline.runtime.record import Attempt
from ductline.store.records import ClaimedJob


class Runner(Protocol):
    """What runs a job: the slot's `Child`, or a `ductline.runtime.threads.ThreadAttempt`.
    Both speak `ductline.execution.protocol` over ``conn``; ``sentinel`` becomes
    readable when the runner ends."""

    conn: Connection
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

    @property
    def busy(self) -> bool:
        return self.job is not None

    @property
    def free(self) -> bool:
        """It can take a job now: idle, with a child that said it is ready."""
        return not self.busy and not self.undead and self.child is not None and self.child.ready

    def task(self, job: ClaimedJob) -> Task:
        return Task(job.job_id, job.run_id, job.pipeline, job.step, job.attempt, job.input,
                    job.deadline_ms, job.lease_token, self.max_output_bytes, self.log_level, self.log_max_bytes)

    def assign(self, job: ClaimedJob, runner: Runner) -> None:
        """Run ``job`` on ``runner`` (a thread already has its task).

        Raises:
            OSError, ValueError: the child died before it got the task.
        """
        self.job, self.runner, self.timeout_seconds = job, runner, job.timeout_seconds
        self.log_seq, self.log_guard = 0, steplog.ParentGuard(self.log_max_bytes)
        if runner is self.child:
            runner.send(protocol.run(self.task(job)))

    def attempt(self) -> Attempt:
        """The running attempt, as recording knows it."""
        job = self.job
        assert job is not None
        return Attempt(job.job_id, job.run_id, job.step, job.scope, job.attempt, job.lease_token,
                       job.started_ms, job.limit_key)

    def release(self) -> None:
        self.job = None
        self.runner = None

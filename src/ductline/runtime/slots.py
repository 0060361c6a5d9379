"""A worker slot: one pre-started child process and the attempt it runs.

The kill path itself lives in `ductline.runtime.enforcer`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from ductline.runtime.child import Task
from ductline.store import payloads
from ductline.store.records import ClaimedJob

UNDEAD_AFTER_SECONDS = 1.0


class Child:
    """A child process and the parent's end of its socket.

    Children are fresh interpreters (``subprocess`` with ``start_new_session``, so
    each leads its own process group from its first instruction). Nothing of the
    parent -- threads, database connections, the user's ``__main__`` -- is copied
    into them; they import the apps themselves.
    """

    def __init__(self, apps: list[str], sys_path: list[str]) -> None:
        parent_end, child_end = socket.socketpair()
        fd = child_end.fileno()
        env = dict(os.environ)
        env["DUCTLINE_CHILD_FD"] = str(fd)
        env["DUCTLINE_CHILD_PARENT"] = str(os.getpid())
        env["DUCTLINE_CHILD_APPS"] = json.dumps(apps)
        env["DUCTLINE_CHILD_PATH"] = json.dumps(sys_path)
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from ductline.runtime.child import main; main()"],
            pass_fds=(fd,), start_new_session=True, env=env, stdin=subprocess.DEVNULL,
        )
        child_end.close()
        self.conn = Connection(parent_end.detach())
        self.eof = False  # the pipe reached its end: the process is exiting
        self.ready = False  # it imported the apps and said so
        self.pid: int = self.process.pid
        # A pidfd becomes readable when the process exits: the loop waits on it
        # together with the pipes, so a death is seen at once, never polled for.
        self.sentinel: int = os.pidfd_open(self.pid)

    def send(self, message: Any) -> None:
        self.conn.send(message)

    def signal_group(self, sig: int) -> None:
        """Signal the child's process group (the child and everything it started)."""
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def reap(self) -> int | None:
        """Collect the exit status if the process is gone; kill leftovers of its group."""
        code = self.process.poll()
        if code is not None:
            try:  # grandchildren that outlived the child (e.g. ignoring SIGTERM)
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.close()
        return code

    def close(self) -> None:
        for close in (self.conn.close, lambda: os.close(self.sentinel)):
            try:
                close()
            except OSError:
                pass

    def stop(self) -> None:
        try:
            self.conn.send(("stop",))
        except (OSError, ValueError):
            pass

    def join(self, timeout: float) -> None:
        """Wait for a stopped child to exit; kill its group if it does not."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal_group(signal.SIGKILL)
            self.process.wait()
        self.close()


@dataclass(slots=True)
class Slot:
    """One unit of concurrency of a worker: a child and the attempt it runs."""

    index: int
    child: Child | None = None
    job: ClaimedJob | None = None
    runner: Any = None                 # what runs the job: the child, or a ThreadAttempt
    undead: bool = False
    timeout_seconds: int | None = None  # a scaled timeout reported by the attempt
    max_output_bytes: int = payloads.DEFAULT_MAX_BYTES  # the worker's payload_max_bytes

    @property
    def busy(self) -> bool:
        return self.job is not None

    def task(self, job: ClaimedJob) -> Task:
        return Task(job.job_id, job.run_id, job.pipeline, job.step, job.attempt, job.input,
                    job.deadline_ms, job.lease_token, self.max_output_bytes)

    def assign(self, job: ClaimedJob, runner: Any) -> None:
        self.job, self.runner, self.timeout_seconds = job, runner, job.timeout_seconds
        if runner is self.child:
            runner.send(("run", self.task(job)))

    def release(self) -> None:
        self.job = None
        self.runner = None

"""`ductline.runtime.deaths.DeathClock` notes when a child died, not when someone
asked: the ``timeout.overrun`` of a kill is measured to the death, whatever the loop
was doing then."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from ductline.clock import SystemClock
from ductline.runtime.deaths import DeathClock
from helpers import process_running, wait_for


class Runner:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.pid = proc.pid
        self.sentinel = os.pidfd_open(proc.pid)


def test_the_death_is_noted_when_it_happens_not_when_asked() -> None:
    clock = SystemClock()
    deaths = DeathClock(clock)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    runner = Runner(proc)
    try:
        deaths.watch(runner)
        deaths.watch(type("ThreadAttempt", (), {"pid": os.getpid(), "sentinel": 0, "is_thread": True})())
        killed = clock.now()
        os.kill(proc.pid, signal.SIGKILL)
        wait_for(lambda: not process_running(proc.pid))
        time.sleep(1.0)  # the worker's loop is busy elsewhere meanwhile
        asked = clock.now()
        died = deaths.died_at(runner)
        assert died is not None and killed <= died < asked - 0.5
        assert deaths.died_at(runner) is None  # forgotten once asked
    finally:
        proc.kill()
        proc.wait()
        os.close(runner.sentinel)
        deaths.close()


def test_a_child_watched_again_for_its_next_attempt_does_not_wake_the_thread() -> None:
    """A reused child is watched at every attempt's start, on the path from the claim
    to the task sent to it: only a pidfd the thread does not poll yet wakes it."""
    clock = SystemClock()
    deaths = DeathClock(clock)
    nudges: list[float] = []
    nudge = deaths._nudge

    def counted() -> None:
        nudges.append(clock.now())
        nudge()

    deaths._nudge = counted  # type: ignore[method-assign]
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    runner = Runner(proc)
    try:
        deaths.watch(runner)
        assert len(nudges) == 1  # a new pidfd: the thread must poll it
        for _ in range(3):
            deaths.watch(runner)  # its next attempts
        assert len(nudges) == 1
        killed = clock.now()
        os.kill(proc.pid, signal.SIGKILL)
        wait_for(lambda: not process_running(proc.pid))
        wait_for(lambda: deaths._died.get(proc.pid) is not None)
        died = deaths.died_at(runner)
        assert died is not None and died >= killed  # still seen when it happened
    finally:
        proc.kill()
        proc.wait()
        os.close(runner.sentinel)
        deaths.close()

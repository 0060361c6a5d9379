"""Steps of the prefetch tests (tests/isolation/test_prefetch.py), run by a child the
test drives as its parent. Each call is noted in the file named by PREFETCH_MARKS;
``held`` returns once the test creates the release file (PREFETCH_MARKS + "." + x)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import ductline
from ductline import Pipeline


def _note(text):
    with open(os.environ["PREFETCH_MARKS"], "a", encoding="utf-8") as fh:
        fh.write(f"{text}\n")


def held(x):
    _note(x)
    release = Path(f"{os.environ['PREFETCH_MARKS']}.{x}")
    end = time.monotonic() + 300  # a bound, so a failing test cannot leave it forever
    while not release.exists() and time.monotonic() < end:
        time.sleep(0.005)
    return x


def deadline(x):
    """Its name and the deadline it was given (epoch ms), if any."""
    _note(x)
    given = ductline.context().deadline
    return [x, None if given is None else round(given.timestamp() * 1000)]


def asks(x):
    """Waits on a request to its parent for a context value, and returns it."""
    _note(x)
    return ductline.context().get("answer")


pipeline = Pipeline("prefetch_steps").start(held).chain(to=deadline).chain(to=asks)


class _GaveUp(Exception):
    pass


def _give_up(signum, frame):
    raise _GaveUp


def asks_impatiently(x):
    """Asks for "answer" and gives up after 0.2 s (a SIGALRM ends the wait), then asks
    for "absent" and returns what that request got."""
    _note(x)
    previous = signal.signal(signal.SIGALRM, _give_up)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        try:
            ductline.context().get("answer")
            return "answered in time"
        except _GaveUp:
            pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return ductline.context().get("absent")


impatient = Pipeline("prefetch_impatient").start(asks_impatiently)


def closes_ledger(x):
    """Closes the descriptor of its child's ledger (found by the memfd's name)."""
    _note(x)
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "ductline-prefetch" in os.readlink(f"/proc/self/fd/{fd}"):
                os.close(int(fd))
        except OSError:
            pass
    return x


closing = Pipeline("prefetch_closing").start(closes_ledger)


def graceful(x):
    """Ends by itself when SIGTERM comes (a step that cleans up on it)."""
    import signal

    def stop(signum, frame):
        raise RuntimeError("cleaned up on SIGTERM")

    signal.signal(signal.SIGTERM, stop)
    _note(x)
    end = time.monotonic() + 300
    while time.monotonic() < end:
        time.sleep(0.005)
    return x


cleaning = Pipeline("prefetch_cleaning").start(graceful)


def leaves_thread(x):
    """Returns while a thread it started still runs (until the test creates the
    release file PREFETCH_MARKS + "." + x): its child cannot restore its state."""
    import threading

    _note(x)
    release = Path(f"{os.environ['PREFETCH_MARKS']}.{x}")

    def linger():
        end = time.monotonic() + 300
        while not release.exists() and time.monotonic() < end:
            time.sleep(0.005)

    threading.Thread(target=linger, daemon=True).start()
    return x


leaving = Pipeline("prefetch_leaving").start(leaves_thread).chain(to=held)

"""The child's own stop at its lease horizon, for a parent that cannot heartbeat.

The parent kills its children before their leases can expire
(`ductline.execution.enforcer`), but a parent that is frozen (SIGSTOP, a stalled
host, starved of CPU) cannot kill anything, and another worker will rescue the
job once the lease expires. So the parent also tells each child its *horizon*:
the monotonic time (``CLOCK_MONOTONIC``, shared by every process of the host) by
which the current lease must have been renewed again. The horizon lives in a
small shared memory file (``memfd``) the parent writes at each claim and each
renewal, without a message and without waiting on the child. A thread in the
child reads it; once the horizon passes while an attempt runs, the child kills
its own process group with SIGKILL -- before the lease expires, so the job's
rescue never overlaps this execution.

A horizon of 0 means none (the in-process executor has no leases). The thread
needs the GIL: a step that holds the GIL in C code for longer than the lease's
margin is stopped only by its parent.
"""

from __future__ import annotations

import mmap
import os
import signal
import struct
import threading
import time

from ductline.execution.descendants import Below

# Share of the lease after the last renewal at which a child stops itself: after
# the parent's own kill (three quarters, `LEASE_SAFETY_SHARE`), before expiry.
CHILD_HORIZON_SHARE = 0.9
_FORMAT = "d"
_SIZE = struct.calcsize(_FORMAT)
_IDLE_CHECK_SECONDS = 0.25  # how often an idle watchdog looks again


class Horizon:
    """The shared horizon: the parent writes it, the child reads it.

    Args:
        fd: a memfd holding it (``None``: create one; the parent does).
    """

    def __init__(self, fd: int | None = None) -> None:
        if fd is None:
            fd = os.memfd_create("ductline-horizon", os.MFD_CLOEXEC)
            os.ftruncate(fd, _SIZE)
        self.fd = fd
        self._map = mmap.mmap(fd, _SIZE)

    def set(self, monotonic_seconds: float) -> None:
        """The time (``time.monotonic()``) past which the child must stop; 0: none."""
        struct.pack_into(_FORMAT, self._map, 0, monotonic_seconds)

    def get(self) -> float:
        # Read until two reads agree: a write may be under way in the parent.
        while True:
            first = struct.unpack_from(_FORMAT, self._map, 0)[0]
            second = struct.unpack_from(_FORMAT, self._map, 0)[0]
            if first == second:
                return float(first)

    def close(self) -> None:
        try:
            self._map.close()
        finally:
            os.close(self.fd)


class Watchdog:
    """The child's thread that ends its process group past the horizon while an
    attempt runs (``running``, set by the child around each attempt)."""

    def __init__(self, horizon: Horizon) -> None:
        self._horizon = horizon
        self.running = False
        self._thread = threading.Thread(target=self._watch, daemon=True, name="ductline-watchdog")

    def start(self) -> None:
        self._thread.start()

    def _watch(self) -> None:
        while True:
            horizon = self._horizon.get()
            now = time.monotonic()
            if self.running and horizon > 0 and now >= horizon:
                # The parent has not renewed the lease in time: stop before the job
                # can be rescued elsewhere. Everything the attempt started goes too,
                # also what left the group.
                Below().signal(os.getpid(), signal.SIGKILL)  # the process ends here: nothing to close
                os.killpg(os.getpgrp(), signal.SIGKILL)
            wait = _IDLE_CHECK_SECONDS if horizon <= 0 else min(_IDLE_CHECK_SECONDS, max(0.005, horizon - now))
            time.sleep(wait)

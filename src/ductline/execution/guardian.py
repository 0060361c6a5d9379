"""A child's guardian: the process that ends what an attempt started once the
child itself is gone, when no worker is left to do it.

A child dies with its worker (``PR_SET_PDEATHSIG``), but the processes its step
started do not: after a worker's SIGKILL they would run on beside the attempt that
retries the job elsewhere. While the worker lives it kills them itself
(`ductline.execution.process.Child.signal_group`). For the case where it cannot,
each child forks a guardian when it starts, before it imports anything else or
starts a thread. The guardian waits for the child's end (a pidfd, so any death is
seen, SIGKILL included) and then kills the child's process group with SIGKILL --
every process the step started that stayed in it, and the guardian itself.

Processes that left the child's group (``setsid``, ``start_new_session=True``)
are not reached this way once the child is dead (they are reparented to PID 1);
while the worker lives it reaches them (`ductline.execution.descendants`).
"""

from __future__ import annotations

import os
import select
import signal


def start() -> int:
    """Fork the guardian of the calling process (which must lead its process group
    and have no other thread yet); returns the guardian's pid."""
    child = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:  # the guardian: no Python-level cleanup of the forked interpreter, ever
        _guard(child)
    finally:
        os._exit(0)


def _guard(child: int) -> None:
    # The worker's SIGTERM to the group (the start of a kill) is not for the guardian:
    # the SIGKILL that follows it, or the child's end, is.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # hold none of the child's descriptors
    try:
        watched = os.pidfd_open(child)
    except OSError:  # gone already
        watched = None
    if watched is not None and os.getppid() == child:
        while not select.select([watched], [], [])[0]:
            pass
    try:
        os.killpg(child, signal.SIGKILL)  # the child led the group: its pid is the group's id
    except (ProcessLookupError, PermissionError):
        pass

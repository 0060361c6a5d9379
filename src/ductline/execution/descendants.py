"""The processes below a child, whatever their process group or session.

Killing a child's process group reaches what its step started, except a process
that left the group (``setsid``, ``start_new_session=True``, a daemonizing tool).
Such a process is still a descendant of the child -- the child is a subreaper, so
even one whose own parent exited is reparented to it -- and Linux lists every
process's children in ``/proc/<pid>/task/<tid>/children``. Walking that tree
before the group is signalled finds them all; where ``/proc`` has no such file
(not Linux) the walk finds nothing and the group signal alone applies.
"""

from __future__ import annotations

import os
import signal

# A process may fork while it is being signalled: each pass signals what the
# previous ones had not found yet; three passes end a fork loop's race in practice.
PASSES = 3


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (its children, theirs, ...), zombies included,
    parents before their children; empty if ``pid`` is gone or ``/proc`` lacks the
    children lists."""
    found: list[int] = []
    seen = {pid}
    pending = [pid]
    while pending:
        parent = pending.pop()
        try:
            threads = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in threads:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", "rb") as listing:
                    children = listing.read().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in seen:
                    seen.add(child)
                    found.append(child)
                    pending.append(child)
    return found


class Below:
    """The processes below one child, held by pidfd from the first time they are
    signalled: a SIGTERM ends the child at once (its default action), and its
    orphans are then reparented out of reach of a walk; the SIGKILL after the grace
    still reaches every process found before, and a pidfd never names a process
    that reused a dead one's pid."""

    CAP = 1024  # descendants held by pidfd; past it (a fork bomb) they are signalled by pid only

    def __init__(self) -> None:
        self._held: dict[int, int] = {}  # pid -> pidfd

    def signal(self, pid: int | None, sig: int) -> None:
        """Send ``sig`` to every process below ``pid`` (walked now, while ``pid`` lives)
        and to every one found by an earlier call; ``pid=None``: to those only (a pid
        whose process was reaped may already name another process)."""
        if pid is not None:
            self._walk(pid, sig)
        for target, fd in list(self._held.items()):
            try:
                signal.pidfd_send_signal(fd, sig)
            except ProcessLookupError:
                self._release(target)
            except OSError:
                pass

    def _walk(self, pid: int, sig: int) -> None:
        for _ in range(PASSES):
            new = [p for p in descendants(pid) if p not in self._held]
            if not new:
                return
            for target in new:
                self._hold(target, sig)

    def _hold(self, pid: int, sig: int) -> None:
        fd = -1
        if len(self._held) < self.CAP:
            try:
                fd = os.pidfd_open(pid)
            except OSError:  # gone already, or no pidfds: signalled by pid below
                fd = -1
        if fd >= 0:
            self._held[pid] = fd
            return
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _release(self, pid: int) -> None:
        fd = self._held.pop(pid, -1)
        if fd >= 0:
            os.close(fd)

    def close(self) -> None:
        for pid in list(self._held):
            self._release(pid)


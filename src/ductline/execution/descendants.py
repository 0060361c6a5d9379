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


def signal_descendants(pid: int, sig: int) -> None:
    """Send ``sig`` to every process below ``pid``. Call it before signalling ``pid``
    itself: once ``pid`` is gone its orphans are reparented out of reach."""
    signalled: set[int] = set()
    for _ in range(PASSES):
        new = [p for p in descendants(pid) if p not in signalled]
        if not new:
            return
        for target in new:
            try:
                os.kill(target, sig)
            except (ProcessLookupError, PermissionError):
                pass
        signalled.update(new)

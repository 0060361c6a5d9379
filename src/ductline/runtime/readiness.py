"""Waiting for the first of several descriptors: child pipes, pidfds, the wake-up pipe.

The worker loop waits once per turn, and a busy worker turns once or more per
attempt. `multiprocessing.connection.wait` builds and fills a new selector object
on every call; one ``poll`` over plain descriptors does the same wait for a
fraction of the parent's CPU.
"""

from __future__ import annotations

import select
from typing import Any


def ready(waitables: list[Any], timeout: float | None) -> list[Any]:
    """The items of ``waitables`` (descriptors, or objects with ``fileno()``) that are
    readable, hung up or in error, after waiting at most ``timeout`` seconds for one
    (``None``: no limit). An item whose descriptor was closed counts as ready too
    (its reader then finds the end), as with `multiprocessing.connection.wait`."""
    poller = select.poll()
    by_fd: dict[int, list[Any]] = {}
    for item in waitables:
        fd = item if isinstance(item, int) else item.fileno()
        by_fd.setdefault(fd, []).append(item)
        poller.register(fd, select.POLLIN)
    events = poller.poll(None if timeout is None else max(0, int(timeout * 1000 + 0.999)))
    return [item for fd, _ in events for item in by_fd.get(fd, ())]

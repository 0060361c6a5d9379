"""The connection pools this process opened, closed when the interpreter exits.

psycopg_pool runs each pool's workers and scheduler on daemon threads. A pool
still open when the interpreter finalizes is closed by its ``__del__``, which
waits up to 5 s for each of those threads. From Python 3.13 on, daemon threads no
longer run once finalization has begun, so every one of those waits runs out: a
process that had used PostgreSQL took about 20 s more to exit (three workers and a
scheduler) and logged that the pool "couldn't stop thread 'ductline-worker-0'".

`atexit` handlers run after the interpreter has joined the non-daemon threads
(which may still use a pool) and before finalization stops the daemon ones, so a
pool closed there stops its threads at once, on every version.

A forked child forgets its parent's pools: closing one there would send the
server a goodbye on connections the parent still uses.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from typing import Any

from psycopg_pool import ConnectionPool

log = logging.getLogger("ductline.store")

_lock = threading.Lock()
_open: "weakref.WeakSet[ConnectionPool[Any]]" = weakref.WeakSet()


def track(pool: ConnectionPool[Any]) -> None:
    """Close ``pool`` at interpreter exit if it is still open then."""
    with _lock:
        _open.add(pool)


def close_all() -> None:
    """Close every tracked pool that is still open (closing a closed pool does nothing)."""
    with _lock:
        pools = list(_open)
        _open.clear()
    for pool in pools:
        try:
            pool.close()
        except Exception:  # one pool's trouble must not keep the others open at exit
            log.exception("closing a PostgreSQL connection pool at exit failed")


def _forget_after_fork() -> None:
    global _lock, _open
    _lock = threading.Lock()  # the parent's may have been held by another thread at the fork
    _open = weakref.WeakSet()


os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(close_all)

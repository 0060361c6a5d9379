"""The child's side of prefetching: tasks its parent sent while an attempt ran.

A worker may send a busy child its next tasks ahead (``NEXT``), so that the child
starts one the moment its attempt ends instead of sleeping until the parent has
read the result and answered with a task (`ductline.runtime.prefetch` is the
parent's side). A task's clocks start when the child starts it, never when it
was sent: the child tells the parent when (``STARTED``, with its monotonic time,
sent in the same write as the result before it), and both work out the
attempt's deadline from that instant the same way (`protocol.next_task`).

A parent takes back what it sent (the worker stops, a lease was lost, the attempt
before runs long) without waiting for the child, which may be busy for hours:
the `Ledger`, two counters in shared memory changed only under a lock, decides
for each task sent ahead whether the child started it or the parent took it
back -- never both.

Messages that arrive while the step waits for the answer to one of its requests
are held here and read once the attempt ends, in their order.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import select
import struct
import time
from collections import deque
from multiprocessing.connection import Connection
from typing import Any

from ductline.execution.protocol import Kind, Task, started

_LEDGER = struct.Struct("qq")  # the last task started, the last task taken back (sequence numbers)


class Ledger:
    """Which tasks sent ahead a child started and which its parent took back.

    Tasks sent ahead to one child are numbered from 1 in the order sent. The child
    starts task ``n`` only if ``n`` is past the last one taken back, and notes it as
    started; the parent takes back every task up to ``n`` that is past the last one
    started. Both happen under a POSIX record lock on the shared file, so the one
    that comes second sees what the first did.

    Args:
        fd: the memfd holding it (``None``: create one; the parent does).
    """

    def __init__(self, fd: int | None = None) -> None:
        if fd is None:
            fd = os.memfd_create("ductline-prefetch", os.MFD_CLOEXEC)
            os.ftruncate(fd, _LEDGER.size)
        self.fd = fd
        self._map = mmap.mmap(fd, _LEDGER.size)
        stat = os.fstat(fd)
        self._identity = (stat.st_dev, stat.st_ino)

    def intact(self) -> bool:
        """Its descriptor still refers to it (a step may close or reuse descriptors)."""
        try:
            stat = os.fstat(self.fd)
        except OSError:
            return False
        return (stat.st_dev, stat.st_ino) == self._identity

    def start(self, seq: int) -> bool:
        """The child starts task ``seq``, unless it was taken back (then ``False``)."""
        fcntl.lockf(self.fd, fcntl.LOCK_EX)  # the parent holds it for microseconds, never waiting
        try:
            _, taken_back = _LEDGER.unpack_from(self._map, 0)
            if seq <= taken_back:
                return False
            _LEDGER.pack_into(self._map, 0, seq, taken_back)
            return True
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN)

    def take_back(self, through: int) -> int | None:
        """The parent takes back the tasks up to ``through`` that were not started;
        returns the last one started (those after it are taken back), or ``None``
        if the child holds the lock right now (try again later: never blocks)."""
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None
        try:
            last_started, taken_back = _LEDGER.unpack_from(self._map, 0)
            _LEDGER.pack_into(self._map, 0, last_started, max(taken_back, through))
            return int(last_started)
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN)

    def last_started(self) -> int:
        """The last task the child started, read without the lock: exact once the child
        is gone; while it runs, a task it is starting at this moment may not show yet."""
        return int(_LEDGER.unpack_from(self._map, 0)[0])

    def close(self) -> None:
        try:
            self._map.close()
        finally:
            os.close(self.fd)


class Inbox:
    """The parent's messages to a child, in order, with the ones held back.

    Args:
        conn: the child's end of the connection (the parent only sends it its own
            messages, so they are read with plain ``recv``).
        ledger: the child's `Ledger` (``None``: nothing is ever sent ahead).
    """

    def __init__(self, conn: Connection, ledger: Ledger | None = None) -> None:
        self._conn = conn
        self._ledger = ledger
        self._held: deque[tuple[Any, ...]] = deque()
        # Kept: `Connection.poll` builds a selector on every call, once per attempt here.
        self._poller = select.poll()
        self._poller.register(conn.fileno(), select.POLLIN)

    def recv(self) -> tuple[Any, ...]:
        """The next message: a held one first, else one from the connection (blocks).

        Raises:
            EOFError, OSError: the connection ended.
        """
        return self._held.popleft() if self._held else self._conn.recv()

    def reply(self) -> tuple[Any, ...]:
        """The answer (``REPLY`` / ``REPLY_ERROR``) to the request just sent; what the
        parent sent before it (``NEXT``) is held for later.

        Raises:
            EOFError, OSError: the connection ended.
        """
        while True:
            message: tuple[Any, ...] = self._conn.recv()
            if message[0] in (Kind.REPLY, Kind.REPLY_ERROR):
                return message
            self._held.append(message)

    def take_next(self) -> tuple[Task | None, tuple[Any, ...] | None]:
        """Called as an attempt ends: the first task sent ahead and not taken back,
        started now, and the ``STARTED`` message to send with the attempt's result
        (``None, None`` if there is none). Reads what arrived meanwhile without
        waiting for more."""
        self._gather()
        for message in [m for m in self._held if m[0] == Kind.NEXT]:
            self._held.remove(message)
            task, said = self.start(message)
            if task is not None:
                return task, said
        return None, None

    def holds_next(self) -> bool:
        """Whether a task sent ahead waits (reads what arrived, without waiting for more)."""
        self._gather()
        return any(m[0] == Kind.NEXT for m in self._held)

    def _gather(self) -> None:
        """Hold what arrived on the connection, without waiting for more."""
        try:
            while self._poller.poll(0):
                self._held.append(self._conn.recv())
        except (EOFError, OSError):
            pass  # the parent is gone: the next `recv` says so

    def start(self, message: tuple[Any, ...]) -> tuple[Task, tuple[Any, ...]] | tuple[None, None]:
        """Start the task of a ``NEXT`` message now, unless it was taken back: the task
        with its deadline (database clock, epoch ms) and the ``STARTED`` message."""
        _, task, timeout_ms, offset_ms, seq = message
        try:
            begun = self._ledger is not None and self._ledger.start(seq)
        except OSError:  # a step closed the ledger's descriptor: nothing sent ahead starts here any more
            begun = False
        if not begun:
            return None, None
        at = time.monotonic()
        started_ms = int(at * 1000 + offset_ms)  # the parent works it out the same way
        deadline_ms = None if timeout_ms is None else started_ms + timeout_ms
        return task.with_deadline(deadline_ms), started(task.lease_token, at)

"""Warm spare children: started in the background, so a slot whose child was
killed (or died) serves its next job without waiting for an interpreter to start
and import the apps."""

from __future__ import annotations

import signal

from ductline.execution import protocol
from ductline.execution.process import Child
from ductline.runtime.starts import Starts

class Spares:
    """The worker's warm spares.

    Args:
        apps, sys_path: what children import.
        count: how many to keep.
        message_cap: the longest message read from a child, in bytes.
        starts: told how each spare's start went.
    """

    def __init__(self, apps: list[str], sys_path: list[str], count: int, message_cap: int,
                 starts: Starts | None = None) -> None:
        self._apps = apps
        self.starts = starts if starts is not None else Starts()
        self._sys_path = sys_path
        self.count = count
        self._cap = message_cap
        self._children: list[Child] = []

    def new_child(self) -> Child:
        return Child(self._apps, self._sys_path)

    def fill(self) -> None:
        if self.starts.due_at() is not None:
            return  # children keep failing to start: the next waits its turn
        while len(self._children) < self.count:
            self._children.append(self.new_child())

    def children(self) -> list[Child]:
        return list(self._children)

    def fresh(self) -> Child:
        """A spare -- one that said it is ready if any did -- or a new child if no
        spare is alive. Its replacement is started by the next `fill`: the worker's
        loop calls it after the attempt this child serves has started and its
        predecessor's outcome went to be recorded (starting a process costs the
        loop about a millisecond)."""
        alive = []
        for child in self._children:
            self._note_ready(child)
            if child.reap() is None:
                alive.append(child)
            else:
                self.starts.gone(child)
        ready = [c for c in alive if c.ready]
        chosen = ready[0] if ready else (alive[0] if alive else self.new_child())
        self._children = [c for c in alive if c is not chosen]
        return chosen

    def _note_ready(self, child: Child) -> None:
        """Read a spare's READY message if it has arrived (spares are not waited on:
        the loop waits only on its slots)."""
        try:
            while not child.ready and not child.eof and child.conn.poll(0):
                found = child.reader.read(self._cap)
                if any(isinstance(m, protocol.Garbled) for m in found):
                    raise protocol.Garbled("not a READY message")
                for m in found:
                    if isinstance(m, protocol.Fatal):
                        self.starts.fatal(child, m.error_type, m.error)
                if any(isinstance(m, protocol.Ready) for m in found):
                    child.ready = True
                    self.starts.ready(child)
        except (protocol.Oversized, protocol.Garbled):
            child.eof = True  # not our protocol: never trusted with a job
            child.signal_group(signal.SIGKILL)
        except (EOFError, OSError):
            child.eof = True

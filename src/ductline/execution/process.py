"""The parent's handle on a killable child process.

The kill path itself lives in `ductline.execution.enforcer`; what runs inside the
child in `ductline.execution.child`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from typing import Any

from ductline.execution import protocol
from ductline.execution.child import ENV_APPS, ENV_FD, ENV_HORIZON, ENV_LEDGER, ENV_PARENT, ENV_PATH
from ductline.execution.descendants import Below
from ductline.execution.prefetch import Ledger
from ductline.execution.watchdog import Horizon


# The child holds its ledger's lock for a few microseconds at a time; one stopped
# (SIGSTOP) while holding it must not stop its parent, which goes on with the kill.
_TAKE_BACK_TRIES = 1000


class Child:
    """A child process and the parent's end of its socket.

    Children are fresh interpreters (``subprocess`` with ``start_new_session``, so
    each leads its own process group from its first instruction). Nothing of the
    parent -- threads, database connections, the user's ``__main__`` -- is copied
    into them; they import the apps themselves.

    Args:
        apps: app specs the child imports before it says it is ready
            (``module`` or ``path.py``, see `ductline.apps.import_app`).
        sys_path: folders it puts first on ``sys.path`` before importing them.

    Raises:
        OSError: the process could not be started (no more processes or descriptors).
    """

    is_thread = False

    def __init__(self, apps: list[str], sys_path: list[str]) -> None:
        parent_end, child_end = socket.socketpair()
        fd = child_end.fileno()
        self.horizon = Horizon()
        os.set_inheritable(self.horizon.fd, True)
        self.ledger = Ledger()  # of the tasks sent ahead to it (`ductline.runtime.prefetch`)
        os.set_inheritable(self.ledger.fd, True)
        self.sent_ahead = 0  # tasks sent ahead so far: the sequence number of the last
        self.started_ahead = 0  # the last task sent ahead it started, as its ledger said at close
        env = dict(os.environ)
        env[ENV_FD] = str(fd)
        env[ENV_HORIZON] = str(self.horizon.fd)
        env[ENV_LEDGER] = str(self.ledger.fd)
        env[ENV_PARENT] = str(os.getpid())
        env[ENV_APPS] = json.dumps(apps)
        env[ENV_PATH] = json.dumps(sys_path)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", "from ductline.execution.child import main; main()"],
                pass_fds=(fd, self.horizon.fd, self.ledger.fd), start_new_session=True, env=env,
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            parent_end.close()
            self.horizon.close()
            self.ledger.close()
            raise
        finally:
            child_end.close()
        self.conn = Connection(parent_end.detach())
        self.reader = protocol.Reader(self.conn.fileno())  # never blocks on a partial message
        self.eof = False  # the pipe reached its end: the process is exiting
        self.ready = False  # it imported the apps and said so
        self.ready_at = 0.0  # monotonic seconds: when it said so (`ductline.runtime.starts`)
        self.start_error: str | None = None  # what it reported when the apps did not import
        self.used = False  # it was given an attempt (a "fresh" step needs one that was not)
        self.pid: int = self.process.pid
        # A pidfd becomes readable when the process exits: a parent waits on it
        # together with the pipes, so a death is seen at once, never polled for.
        self.sentinel: int = os.pidfd_open(self.pid)
        self._closed = False
        self._below = Below()  # what signal_group found below the child, held for the SIGKILL after a SIGTERM

    def send(self, message: Any) -> None:
        self.conn.send_bytes(protocol.dumps(message))

    def send_all(self, messages: list[Any]) -> None:
        """Send ``messages`` in one write (the child reads them one by one, in order).

        Raises:
            OSError, ValueError: the channel is closed or broken (the child is dying)
                and none of the messages went out. Once a part went out, a break is
                not raised: the child may have read the first messages (and started
                a task sent ahead) before it died, so they count as sent; its death
                settles them (`ductline.execution.prefetch.Ledger`).
        """
        if len(messages) == 1:
            self.send(messages[0])
            return
        if self.conn.closed:
            raise ValueError("the channel to the child is closed")
        view = memoryview(b"".join(protocol.frame(protocol.dumps(m)) for m in messages))
        fd = self.conn.fileno()
        total = len(view)
        try:
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            if len(view) == total:
                raise

    def take_back_sent_ahead(self) -> None:
        """Make sure the child starts none of the tasks sent ahead to it that it has not
        started yet (its attempt is being killed; `ductline.execution.prefetch.Ledger`).
        Tries a few times if the child holds the ledger's lock, never blocks."""
        if self._closed or not self.sent_ahead:
            return
        for _ in range(_TAKE_BACK_TRIES):
            if self.ledger.take_back(self.sent_ahead) is not None:
                return

    def set_horizon(self, monotonic_seconds: float) -> None:
        """Tell the child when to stop itself if its lease is not renewed by then
        (`ductline.execution.watchdog`); 0 for never."""
        if not self._closed:
            self.horizon.set(monotonic_seconds)

    def exited(self) -> bool:
        """The process has ended (`reap` also closes its descriptors)."""
        return self.process.poll() is not None

    def signal_group(self, sig: int) -> None:
        """Signal everything the child started -- its descendants first, also those
        that left its process group, and those found by an earlier call although the
        child has died since (`ductline.execution.descendants.Below`) -- then its
        process group, the child included."""
        self._below.signal(self.pid, sig)
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def reap(self) -> int | None:
        """Collect the exit status if the process is gone; kill leftovers of its group."""
        code = self.process.poll()
        if code is not None:
            # What was found below it while it lived (a SIGTERM that ended it at once
            # left them to PID 1), then its group: grandchildren that outlived it.
            self._below.signal(None, signal.SIGKILL)
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.close()
        return code

    @property
    def closed(self) -> bool:
        """Its descriptors are closed (`close`): it was reaped."""
        return self._closed

    def close(self) -> None:
        """Close the socket and the pidfd, once: a descriptor number closed twice may
        by then belong to something else."""
        if self._closed:
            return
        self._closed = True
        try:  # kept: which tasks sent ahead it started is still asked after it is gone
            self.started_ahead = self.ledger.last_started()
        except (OSError, ValueError):
            pass
        for close in (self.conn.close, lambda: os.close(self.sentinel), self.horizon.close, self.ledger.close,
                      self._below.close):
            try:
                close()
            except OSError:
                pass

    def stop(self) -> None:
        """Ask an idle child to exit."""
        try:
            self.conn.send(protocol.stop())
        except (OSError, ValueError):
            pass

    def join(self, timeout: float) -> None:
        """Wait for a stopped child to exit; kill its group if it does not."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal_group(signal.SIGKILL)
            self.process.wait()
        self.close()

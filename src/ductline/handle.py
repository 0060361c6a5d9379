"""`RunHandle`: what `trigger` returns, or `RunHandle.attach` finds: the run's
status, output and error, waiting for it (LISTEN/NOTIFY on PostgreSQL, polling on
SQLite), async variants, cancel and resume."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

from ductline import codec
from ductline.config import load_settings
from ductline.errors import DuctlineError, RunFailed, RunNotFound
from ductline.model.states import SETTLED_RUN, RunStatus
from ductline.model.inputs import NO_INPUT
from ductline.operations.resume import resume
from ductline.operations.send import Sent, send
from ductline.operations.cancel import cancel_run
from ductline.store import Store, payloads, sqlite_path
from ductline.store.run_errors import run_error
from ductline.stores import store_for

# The settled statuses (`ductline.model.states.SETTLED_RUN`), kept under this name
# for callers that import it. A paused run is not settled: other branches may
# still run, and a resume or the pause's timeout moves it on.
SETTLED = tuple(sorted(SETTLED_RUN))

__all__ = ["NO_INPUT", "SETTLED", "RunHandle"]

# SQLite cannot notify another process: a waiting client polls, starting fast.
_FIRST_POLL, _LONGEST_POLL = 0.02, 0.5
# On PostgreSQL a notification wakes the wait; it still looks this often, in case
# one was missed (a reconnect).
_NOTIFIED_RECHECK = 1.0


class RunHandle:
    """A triggered run.

    Attributes:
        id: the run id (32 hex characters).
        created: ``False`` when ``trigger(..., key=...)`` found an active run holding
            the key and returned it instead of starting a new one.
    """

    def __init__(self, run_id: str, store: Store, *, created: bool = True) -> None:
        self.id = run_id
        self.created = created
        self._store = store

    def _row(self) -> dict[str, Any]:
        row = self._store.get_run(self.id)
        if row is None:
            raise RunNotFound(f"run {self.id} not found")
        return row

    def status(self) -> str:
        """One of ``pending``, ``running``, ``paused``, ``completed``, ``halted``, ``failed``, ``cancelled``."""
        return str(self._row()["status"])

    def output(self) -> Any:
        """The last step's output once the run completed, else ``None``. An output
        stored out of line (above ``payload_inline_bytes``) is read back in full.

        Raises:
            RunNotFound: no such run.
        """
        return codec.loads(payloads.load(self._store, self.id, self._row()["output"]))

    @classmethod
    def attach(cls, run_id: str, database: Any = None) -> "RunHandle":
        """The handle of an existing run (e.g. one triggered by another process).

        Args:
            run_id: the run's id.
            database: a database URL or a ``Store``; defaults to the configured one.

        Raises:
            RunNotFound: no run has that id in that database (the message names
                the database; a store opened here from a URL is closed again), or
                the SQLite file it names does not exist (none is created).
            TypeError: ``run_id`` is not a ``str``.
        """
        if not isinstance(run_id, str):
            raise TypeError(f"run_id must be a str, not {type(run_id).__name__}")
        _refuse_missing_file(run_id, database)
        store = store_for(database)
        handle = cls(run_id, store, created=False)
        try:
            handle._row()
        except RunNotFound:
            if store is not database:
                store.close()
            raise RunNotFound(f"cannot attach to run {run_id!r}: no run has that id in {_without_password(store.url)} "
                              "(`ductline runs` lists the runs there)") from None
        return handle

    @property
    def halt_reason(self) -> str | None:
        """Why the run halted or failed (e.g. ``job_retries_exhausted``,
        ``pause_expired``), else ``None``."""
        value = self._row()["halt_reason"]
        return None if value is None else str(value)

    @property
    def error(self) -> str | None:
        """What went wrong, for a halted, failed or cancelled run: the failed step
        and its error (``step 'a' failed: ValueError: boom (job_retries_exhausted)``),
        the deadline, or the cancel; ``None`` otherwise. The same text as
        ``ductline.execute``'s ``metadata["error"]`` (`ductline.store.run_errors`)."""
        return run_error(self._store, self._row())[0]

    def wait(self, timeout: float | None = None, *, poll_interval: float | None = None,
             stop: threading.Event | None = None) -> str:
        """Block until the run settles (completed, halted, failed or cancelled).

        On PostgreSQL the wait is woken by a notification when the run settles;
        on SQLite it polls, every 20 ms at first and at most every 0.5 s.

        Args:
            timeout: seconds to wait at most; ``None`` waits forever.
            poll_interval: seconds between looks at the database (fixed; default:
                as above).
            stop: an event that ends the wait early (`TimeoutError`).

        Returns:
            The settled status.

        Raises:
            TimeoutError: the run had not settled within ``timeout`` seconds; its
                message says which pending steps no live worker can run, and why
                (as ``ductline show`` says it).
            RunNotFound: no such run.
        """
        end = None if timeout is None else time.monotonic() + timeout
        delay = _FIRST_POLL if poll_interval is None else poll_interval
        with self._listener() as listen:
            while True:
                status = self.status()
                if status in SETTLED_RUN:
                    return status
                now = time.monotonic()
                if (end is not None and now >= end) or (stop is not None and stop.is_set()):
                    raise TimeoutError(f"run {self.id} is still {status} after {timeout} s{self._why_waiting()}")
                pause = _NOTIFIED_RECHECK if listen is not None else delay
                if end is not None:
                    pause = min(pause, end - now)
                if listen is not None:
                    listen(pause)
                else:
                    time.sleep(pause)
                    delay = delay if poll_interval is not None else min(delay * 1.5, _LONGEST_POLL)

    def _why_waiting(self) -> str:
        """``"; step chatty waits: no live worker has step 'chatty' of ..."``: why
        its pending steps are not being run, as ``ductline show`` says it; empty
        when every pending step has a live worker (or the database cannot tell)."""
        from ductline import views

        try:
            waits = views.unserved_waits(views.run_view(self._store, self.id))
        except DuctlineError:  # the error being raised is the timeout; this is a hint
            return ""
        if not waits:
            return ""
        # Which database it looked in: a relative SQLite URL names a file under the
        # working directory, and another directory's trigger makes a new empty one.
        return "".join(f"; {line}" for line in waits) + f" (looked in {_database_named(self._store)})"

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the run, then its output.

        Raises:
            RunFailed: the run halted, failed or was cancelled (``status``,
                ``halt_reason`` and ``error`` say how).
            TimeoutError: it had not settled within ``timeout`` seconds (with why, as
                `wait` says it).
            RunNotFound: no such run.
        """
        status = self.wait(timeout)
        if status != RunStatus.COMPLETED:
            row = self._row()
            raise RunFailed(self.id, status, row["halt_reason"], run_error(self._store, row)[0])
        return self.output()

    async def wait_async(self, timeout: float | None = None) -> str:
        """`wait` for asyncio code: waits in a worker thread; cancelling the awaiting
        task ends that wait too."""
        import asyncio  # here: a worker and most commands import this module, never these

        stop = threading.Event()
        try:
            return await asyncio.to_thread(self.wait, timeout, stop=stop)
        finally:
            stop.set()

    async def result_async(self, timeout: float | None = None) -> Any:
        """`result` for asyncio code (see `wait_async`)."""
        import asyncio

        await self.wait_async(timeout)
        return await asyncio.to_thread(self.result, 0)

    @contextlib.contextmanager
    def _listener(self) -> Iterator[Callable[[float], list[str]] | None]:
        """A LISTEN for settled runs where the database has one, else ``None``."""
        open_listener = getattr(self._store.dialect, "run_listener", None)
        if open_listener is None:
            yield None
            return
        with open_listener() as wait:
            yield wait

    def cancel(self) -> None:
        """Cancel the run: in-flight attempts are killed and recorded ``cancelled``,
        the rest skipped with reason ``cancelled``, the run status ``cancelled``.

        Raises:
            InvalidStateError: the run already finished.
            RunNotFound: no such run.
        """
        cancel_run(self._store, self.id)

    def resume(self, input: Any = NO_INPUT) -> list[str]:
        """Resume a paused run (``.pause(before=step)``): the paused step becomes
        ready at once (workers are woken) and the run ``running`` again.

        Args:
            input: the paused step's new single argument, any value that
                round-trips through JSON (``None`` passes null); omit it to run
                the step with the input it was paused with.

        Returns:
            The names of the steps resumed.

        Raises:
            TypeError: ``input`` does not round-trip through JSON. Nothing is changed.
            PayloadTooLarge: ``input`` is above ``payload_max_bytes`` as JSON (above
                ``payload_inline_bytes`` it is stored out of line). Nothing is changed.
            InvalidStateError: the run is not paused (of two racing resumes, the
                loser gets this), its pause has expired (``pause_expires_ms`` passed
                on the database clock: it fails closed), or an input was given
                while several step runs are paused. Nothing is changed.
            RunNotFound: no such run.
        """
        resumed = resume(self._store, self.id, input)
        return sorted({r["step"] for r in resumed})

    def send(self, event: str, data: Any = None, key: str | None = None) -> Sent:
        """Send the event ``event`` to the run (``.wait_for(event, before=step)``).

        If a step run waits for ``event`` it becomes ready at once (workers are
        woken) with ``data`` as its single argument; otherwise the event is kept
        until the run reaches the wait. Each event is consumed once.

        Args:
            event: the event's name (1 to 200 characters, no control characters).
            data: the waiting step's single argument: any value that round-trips
                through JSON (docs/howto/payloads.md); default ``None``.
            key: an idempotency key: a second send with the same key to this run
                writes nothing and returns ``Sent(duplicate=True)``.

        Returns:
            `ductline.operations.send.Sent`: ``event_id``, ``duplicate``, and
            ``step``, the step the event released now (``None``: kept for later).

        Raises:
            TypeError, ValueError: a bad ``event`` or ``key``, or ``data`` that does
                not round-trip. Nothing is written.
            PayloadTooLarge: ``data`` is above ``payload_max_bytes`` as JSON.
            InvalidStateError: the run finished (completed, failed, cancelled).
                Nothing is written.
            TooManyKeptEvents: no step waits for ``event`` now and the run keeps
                ``max_kept_events`` events already (an `InvalidStateError`).
                Nothing is written.
            RunNotFound: no such run.
        """
        return send(self._store, self.id, event, data, key)

    def __repr__(self) -> str:
        return f"RunHandle({self.id!r})"


def _database_named(store: Store) -> str:
    """The database a store reads, for a message: a SQLite file by its absolute
    path, any other by its URL with the password masked."""
    path = getattr(store.dialect, "path", None)
    if store.dialect.name == "sqlite" and isinstance(path, str) and path != ":memory:":
        return f"the SQLite database {os.path.abspath(path)}"
    return f"the database {_without_password(store.url)}"


def _without_password(url: str) -> str:
    """A database URL fit for an error message (its password masked)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _refuse_missing_file(run_id: str, database: Any) -> None:
    """Attaching only reads: a SQLite file that does not exist holds no run, and is
    not created (and migrated) just to say so."""
    if isinstance(database, Store):
        return
    url = load_settings().database_url if database is None else database
    path = sqlite_path(url) if isinstance(url, str) and url.strip() else None
    if path is not None and not os.path.exists(path):
        raise RunNotFound(f"cannot attach to run {run_id!r}: no database at {path} (a trigger or "
                          "`ductline migrate` creates it)")

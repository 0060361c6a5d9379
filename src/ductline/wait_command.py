"""``ductline wait RUN_ID [--timeout D] [--json]``: watch a run started elsewhere
(``trigger``, a schedule, the API) until it settles, with the progress display of
``ductline run``, and exit as ``ductline run`` does for the run's end."""

from __future__ import annotations

import threading
import time
from typing import Any

import click

# How often the run's status is read while waiting: a polling loop of a command.
POLL_SECONDS = 0.25
# The exit code when --timeout passes before the run settled (the run goes on).
TIMED_OUT = 124
# The exit code when the wait is interrupted (Ctrl-C, SIGTERM); the run goes on.
INTERRUPTED = 130


@click.command()
@click.argument("run_id")
@click.option("--timeout", metavar="D",
              help=f"Stop waiting after D (30s, 5m, 2h, 1d or seconds) and exit {TIMED_OUT}; the run goes on.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON line describing the run on stdout, as `ductline run --json` does.")
@click.option("--database", "database", metavar="URL", default=None,
              help="Database URL (default: DUCTLINE_DATABASE_URL or sqlite:///ductline.db).")
def wait(run_id: str, timeout: str | None, as_json: bool, database: str | None) -> None:
    """Wait for a run to settle, showing its progress as `ductline run` does.

    RUN_ID is a run id or a unique prefix of one (6 or more characters). The wait
    ends when the run completes, fails, is cancelled or halts (a paused run or one
    waiting for an event is waited for), and the command then reports the run and
    exits as `ductline run` does: 0 if it completed, else 1. A run that has not
    settled when --timeout passes exits 124; Ctrl-C or SIGTERM exits 130. Neither
    touches the run: only the wait stops.
    """
    from ductline.command_support import command_store, console, duration, fail, stop_on_signals
    from ductline.run_command import report_end
    from ductline.progress import RunProgress

    seconds = duration(timeout, "--timeout")
    store = command_store(database, read_only=True)
    stop = stop_on_signals()
    deadline = None if seconds is None else time.monotonic() + seconds
    watch = _Watch(store, run_id)
    if _until(watch.resolved, stop, deadline):
        with RunProgress(store, watch.run_id, console):
            _until(watch.settled, stop, deadline)
    if watch.error is not None:
        raise watch.error
    if watch.settled.is_set():
        report_end(store, watch.run_id, as_json)
    state = (f"is still {watch.status}" if watch.status is not None
             else "has not been seen to settle (the database does not answer)")
    if stop.is_set():
        fail(f"stopped waiting; run {watch.run_id} {state} (the run goes on)", code=INTERRUPTED)
    fail(f"run {watch.run_id} {state} after {timeout} (the run goes on)", code=TIMED_OUT)


class _Watch:
    """The run's status, read in a thread of its own every `POLL_SECONDS`: a read
    that does not return (a database that stops answering, its connection left
    open) holds up neither --timeout nor a signal.

    ``resolved`` is set once ``run_id`` is the full id; ``settled`` once the run has
    settled or the watch failed (``error``: the run is not found, the database
    refused at the first read, a SQLite file was deleted or replaced); ``status`` is the last status read (``None``
    before one came)."""

    def __init__(self, store: Any, text: str) -> None:
        self.run_id = text
        self.status: str | None = None
        self.error: Exception | None = None
        self.resolved = threading.Event()
        self.settled = threading.Event()
        threading.Thread(target=self._watch, args=(store,), daemon=True, name="ductline-wait").start()

    def _watch(self, store: Any) -> None:
        from ductline import views
        from ductline.model.states import SETTLED_RUN, RunStatus

        try:
            self.run_id = views.resolve_run_id(store, self.run_id)
            self.resolved.set()
            while True:
                self.status = _status(store, self.run_id) or self.status
                if self.status is not None and RunStatus(self.status) in SETTLED_RUN:
                    break
                time.sleep(POLL_SECONDS)
        except Exception as exc:  # said by the command, as it would have been at once
            self.error = exc
        self.resolved.set()
        self.settled.set()


def _until(event: threading.Event, stop: threading.Event, deadline: float | None) -> bool:
    """Wait until ``event`` is set (True), ``stop`` is set or ``deadline`` (monotonic)
    passes (False)."""
    while not event.is_set():
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        if stop.wait(POLL_SECONDS / 2 if left is None else min(POLL_SECONDS / 2, left)):
            return False
    return True


def _status(store: Any, run_id: str) -> str | None:
    from ductline.errors import DatabaseReplaced, RunNotFound, StoreError

    try:
        run = store.get_run(run_id)
    except DatabaseReplaced:  # not an outage: the run cannot be followed any more
        raise
    except StoreError:  # the database is away for a moment: not settled yet
        return None
    if run is None:  # pruned or deleted while waited for
        raise RunNotFound(f"run {run_id!r} not found")
    return str(run["status"])

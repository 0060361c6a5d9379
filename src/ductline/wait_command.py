"""``ductline wait RUN_ID [--timeout D] [--json]``: watch a run started elsewhere
(``trigger``, a schedule, the API) until it settles, with the progress display of
``ductline run``, and exit as ``ductline run`` does for the run's end."""

from __future__ import annotations

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
    from ductline import views
    from ductline.cli import _duration, _stop_on_signals, _store, console, fail, report_end
    from ductline.progress import RunProgress

    seconds = _duration(timeout, "--timeout")
    store = _store(database, read_only=True)
    run_id = views.resolve_run_id(store, run_id)
    stop = _stop_on_signals()
    deadline = None if seconds is None else time.monotonic() + seconds
    with RunProgress(store, run_id, console):
        while not _settled(store, run_id):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            if stop.wait(POLL_SECONDS if left is None else min(POLL_SECONDS, left)):
                break
    if _settled(store, run_id):
        report_end(store, run_id, as_json)
    status = _status(store, run_id)
    if stop.is_set():
        fail(f"stopped waiting; run {run_id} is still {status} (the run goes on)", code=INTERRUPTED)
    fail(f"run {run_id} is still {status} after {timeout} (the run goes on)", code=TIMED_OUT)


def _status(store: Any, run_id: str) -> str | None:
    from ductline.errors import RunNotFound, StoreError

    try:
        run = store.get_run(run_id)
    except StoreError:  # the database is away for a moment: not settled yet
        return None
    if run is None:  # pruned or deleted while waited for
        raise RunNotFound(f"run {run_id!r} not found")
    return str(run["status"])


def _settled(store: Any, run_id: str) -> bool:
    from ductline.model.states import SETTLED_RUN, RunStatus

    status = _status(store, run_id)
    return status is not None and RunStatus(status) in SETTLED_RUN


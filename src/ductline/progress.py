"""The progress display of ``ductline run`` and ``ductline wait``: step runs done /
created, what runs now, what waits out a ``delay=`` (or a retry delay) and until
when (a retry says why: `ductline.model.outcomes.retry_reason`), how long the
command has followed the run, and how the run ended. A step run a stop ended
(cancelled, killed in flight at a run deadline, or skipped by a stop) is not counted
done."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any, Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn
from rich.text import Text

from ductline import timestamps, views
from ductline.errors import StoreError
from ductline.model.outcomes import retry_reason
from ductline.model.states import SETTLED_RUN, TERMINAL_JOB, JobStatus, RunStatus
from ductline.model.stops import stopped_before_its_end
from ductline.store import Store


class SinceStart(ProgressColumn):
    """The time since the display began (``0:01:05``), counting on while every step
    run known so far is done: rich's elapsed column stops at ``completed == total``,
    which a run passes between its steps, in a delay, and at its end."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._start = clock()

    def render(self, task: Task) -> Text:
        return Text(str(timedelta(seconds=max(0, int(self._clock() - self._start)))), style="progress.elapsed")


class RunProgress:
    def __init__(self, store: Store, run_id: str, console: Console,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._run_id = run_id
        self._stop = threading.Event()
        self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[current]}"), SinceStart(clock),
                                  console=console, transient=False)
        # What waits out a delay, read again only when the counts change (a big run's
        # step runs are not read four times a second).
        self._waits: tuple[Any, str, int] = (None, "", 0)  # counts read, what it said, until when
        self._task = self._progress.add_task("steps", total=1, current="")
        self._thread = threading.Thread(target=self._loop, daemon=True, name="ductline-progress")

    def __enter__(self) -> "RunProgress":
        self._progress.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        # The last reading is the thread's, not this one's: a database that stops
        # answering holds up that thread, never the command leaving the display.
        self._thread.join(timeout=2)
        self._progress.stop()

    def _refresh(self) -> None:
        try:
            rows = self._store.run_progress_reasons(self._run_id)
            running = self._store.running_steps(self._run_id)
            run = self._store.get_run(self._run_id)
        except StoreError:
            return
        counts: dict[str, int] = {}
        for status, _, n in rows:
            counts[status] = counts.get(status, 0) + n
        total = sum(counts.values())
        # A step run a cancel or a deadline ended is not done: a stopped run's bar
        # stays where the run stood, and its status says why it goes no further.
        done = sum(n for status, reason, n in rows
                   if status in TERMINAL_JOB and not stopped_before_its_end(status, reason))
        current = ", ".join(running[:3]) + (" …" if len(running) > 3 else "")
        text = f"running: {current}" if current else ""
        ended = None if run is None else str(run["status"])
        if ended is not None and RunStatus(ended) in SETTLED_RUN:  # how it ended, first
            text = (text + "; " if text else "") + f"run {ended}"
        if not running and counts.get(JobStatus.PENDING):  # a delay (or a retry delay) is not a hang
            waits = self._waiting(rows)
            if waits:
                text = (text + "; " if text else "") + waits
        if counts.get(JobStatus.PAUSED):  # waits for a person: say how to let it go on
            text = (text + "; " if text else "") + f"paused: `ductline resume {self._run_id}`"
        if counts.get(JobStatus.DEFERRED):  # waits for an event: say how to send it
            text = (text + "; " if text else "") + f"waiting for an event: `ductline send {self._run_id} EVENT`"
        if counts.get(JobStatus.FAILED):  # the bar counts every step that ended: say which did not succeed
            text = (text + "; " if text else "") + f"{counts[JobStatus.FAILED]} failed"
        self._progress.update(self._task, total=max(total, 1), completed=done, current=text)

    def _waiting(self, rows: list[tuple[str, str | None, int]]) -> str:
        """``"g waits until 03:35:24 UTC"``: the pending step run due first of those
        whose not-before time is still ahead; a retry says why (``"g retries at
        03:35:24 UTC after crash 5 of at most 10 (...)"``); ``""`` if none is (or the
        database is away for a moment)."""
        known, said, due_ms = self._waits
        if known != rows or time.time() * 1000 >= due_ms:
            try:
                now_ms = self._store.now_ms()
                ahead = sorted(((j["not_before_ms"], j["step"], j) for j in self._store.run_jobs(self._run_id)
                                if j["status"] == JobStatus.PENDING and j["not_before_ms"] > now_ms),
                               key=lambda due: due[:2])
                why = self._why(ahead[0][2]) if ahead else None
            except StoreError:
                return ""
            said, due_ms = "", 0
            if ahead:
                due_ms, step, _ = ahead[0]
                others = len({s for _, s, _ in ahead} - {step})
                at = views.utc_clock(str(timestamps.iso(due_ms)))
                said = (f"{step} retries at {at} {why}" if why else f"{step} waits until {at}") + \
                    (f" (and {others} more step(s) later)" if others else "")
            self._waits = (rows, said, due_ms)
        return said

    def _why(self, job: dict[str, Any]) -> str | None:
        """Why a job waits for its next attempt (its last one's end, read by key), or
        ``None`` for a job that has not run yet (it waits out a ``delay=``) or whose
        budgets add nothing.

        Raises:
            StoreError: the database could not be read.
        """
        if not job["attempts"]:
            return None
        last = self._store.get_attempt(job["id"], int(job["attempts"]))
        if last is None or last["result"] is None:
            return None
        return retry_reason(str(last["result"]), last["error_type"], failures=int(job["failures"]),
                            crashes=int(job["crashes"]), max_retry=int(job["max_retry"]),
                            max_crash=int(job["max_crash"])) or None

    def _loop(self) -> None:
        while not self._stop.wait(0.25):
            self._refresh()
        self._refresh()  # the state the display ends with

"""The progress display of ``ductline run`` and ``ductline wait``: step runs done /
created, what runs now, and how the run ended. A step run a stop ended (cancelled,
or skipped by a cancel or a run deadline) is not counted done."""

from __future__ import annotations

import threading

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ductline.errors import StoreError
from ductline.model.states import SETTLED_RUN, TERMINAL_JOB, JobStatus, RunStatus
from ductline.model.stops import stopped_before_its_end
from ductline.store import Store


class RunProgress:
    def __init__(self, store: Store, run_id: str, console: Console) -> None:
        self._store = store
        self._run_id = run_id
        self._stop = threading.Event()
        self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[current]}"), TimeElapsedColumn(),
                                  console=console, transient=False)
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
        if counts.get(JobStatus.PAUSED):  # waits for a person: say how to let it go on
            text = (text + "; " if text else "") + f"paused: `ductline resume {self._run_id}`"
        if counts.get(JobStatus.DEFERRED):  # waits for an event: say how to send it
            text = (text + "; " if text else "") + f"waiting for an event: `ductline send {self._run_id} EVENT`"
        if counts.get(JobStatus.FAILED):  # the bar counts every step that ended: say which did not succeed
            text = (text + "; " if text else "") + f"{counts[JobStatus.FAILED]} failed"
        self._progress.update(self._task, total=max(total, 1), completed=done, current=text)

    def _loop(self) -> None:
        while not self._stop.wait(0.25):
            self._refresh()
        self._refresh()  # the state the display ends with

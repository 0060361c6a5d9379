"""One log line per finished run: its pipeline, id, status and duration.

A worker subscribes `RunLog` to the engine's events (`ductline.observability.events`);
when a run it advanced ends (completed, halted, failed; a cancel is reported by the
process that cancels), one record goes to the logger ``ductline.runs`` at the
level of the setting ``run_log_level`` (default ``INFO``)::

    INFO ductline.runs: Run completed: pipeline enrich_users in 2.418 s [run_id=5f0c…]
    INFO ductline.runs: Run halted (job_retries_exhausted): pipeline billing in 31.002 s [run_id=…]

The duration is the run's, from its first attempt's start (its trigger, if nothing
started) to its end, on the database clock. The runs' times are read only when the
logger would keep the record, by a thread of its own, never on the path that
records outcomes (a read there cost a draining worker about a quarter of its runs
per second), and for every run end queued at that moment in one query (up to
`READ_AT_ONCE`): a worker draining thousands of short runs a second reads them in
dozens, not one by one. `uninstall` writes what is still queued before it returns.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from typing import Any, Callable

from ductline.errors import StoreError
from ductline.observability import events
from ductline.observability.events import EventName

log = logging.getLogger("ductline.runs")

# The most run ends whose times one query reads.
READ_AT_ONCE = 500

RUN_ENDS = {EventName.PIPELINE_COMPLETED: "completed", EventName.PIPELINE_HALTED: "halted",
            EventName.PIPELINE_FAILED: "failed", EventName.PIPELINE_CANCELLED: "cancelled"}


def run_seconds(run: dict[str, Any]) -> float | None:
    """A finished run's duration in seconds (``None`` while it has no end)."""
    start = run.get("started_ms") or run.get("created_ms")
    if run.get("finished_ms") is None or start is None:
        return None
    return max(0.0, (int(run["finished_ms"]) - int(start)) / 1000)


class RunLog:
    """The event subscriber that logs each run's end (see the module).

    Args:
        store: where the run's times are read.
        level: the level of the records (a `ductline.loglevels` name).
    """

    def __init__(self, store: Any, level: str = "INFO") -> None:
        self.store = store
        self.level = logging.getLevelName(level)
        self._ends: queue.SimpleQueue[tuple[str, Any, Any, Any] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __call__(self, name: EventName, a: dict[str, Any]) -> None:
        status = RUN_ENDS.get(name)
        if status is None or not log.isEnabledFor(self.level):
            return
        self._ends.put((status, a.get("run_id"), a.get("pipeline"), a.get("reason")))
        self.start()

    def start(self) -> None:
        """Start the thread that writes the lines, if it is not running (`install`
        starts it with the worker, so the process's threads stay as they are once it
        runs; a first run end starts it otherwise)."""
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name="ductline-run-log", daemon=True)
                    self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """Write the run ends still queued (for at most ``timeout`` seconds), then stop."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            self._ends.put(None)
            thread.join(timeout)

    def _loop(self) -> None:
        stopping = False
        while not stopping:
            ends = [self._ends.get()]
            while len(ends) < READ_AT_ONCE and not self._ends.empty():
                ends.append(self._ends.get())
            stopping = None in ends
            self.write_all([end for end in ends if end is not None])

    def write_all(self, ends: list[tuple[str, Any, Any, Any]]) -> None:
        """Log run ends (``(status, run_id, pipeline, reason)``), reading their
        times in one query."""
        ids = sorted({str(end[1]) for end in ends if end[1] is not None})
        try:
            runs = self.store.run_ends(ids)
        except StoreError as exc:
            log.warning("cannot read %d run(s) for their ends' log lines: %s", len(ids), exc)
            runs = {}
        for end in ends:
            try:
                self._line(*end, runs.get(str(end[1])))
            except Exception:  # a broken line must never stop the next ones
                log.exception("could not log the end of run %s", end[1])

    def write(self, status: str, run_id: Any, pipeline: Any, reason: Any) -> None:
        """Log one run's end (reading its times)."""
        self.write_all([(status, run_id, pipeline, reason)])

    def _line(self, status: str, run_id: Any, pipeline: Any, reason: Any, run: dict[str, Any] | None) -> None:
        """The log line of one run's end; ``run``: its times, if they could be read."""
        seconds = None if run is None else run_seconds(run)
        reason = reason or (run or {}).get("halt_reason") or _error(run)
        took = "" if seconds is None else f" in {seconds:.3f} s"
        log.log(self.level, "Run %s%s: pipeline %s%s", status, f" ({reason})" if reason else "", pipeline, took,
                extra={"run_id": run_id, "pipeline": pipeline, "status": status, "duration_seconds": seconds})


def _error(run: dict[str, Any] | None) -> str | None:
    """The error a failed run recorded in its metadata (its deadline, ...), if any."""
    try:
        metadata = json.loads((run or {}).get("metadata") or "{}")
    except (TypeError, ValueError):
        return None
    error = metadata.get("error") if isinstance(metadata, dict) else None
    return error if isinstance(error, str) else None


_installed_lock = threading.Lock()
_installed: tuple[RunLog, Callable[[], None]] | None = None


def install(store: Any, level: str = "INFO") -> None:
    """Log the end of every run this process ends, reading times from ``store``;
    replaces (and closes) what an earlier call installed: one worker per process."""
    global _installed
    subscriber = RunLog(store, level)
    if log.isEnabledFor(subscriber.level):
        subscriber.start()
    with _installed_lock:
        previous, _installed = _installed, (subscriber, events.subscribe(subscriber))
    if previous is not None:
        previous[1]()
        previous[0].close()


def uninstall(timeout: float = 5.0) -> None:
    """Stop logging run ends, after writing those still queued (if `install` was
    called; at most ``timeout`` seconds)."""
    global _installed
    with _installed_lock:
        previous, _installed = _installed, None
    if previous is not None:
        previous[1]()
        previous[0].close(timeout)

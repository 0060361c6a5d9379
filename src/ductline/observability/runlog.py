"""One log line per finished run: its pipeline, id, status and duration.

A worker subscribes `RunLog` to the engine's events (`ductline.observability.events`);
when a run it advanced ends (completed, halted, failed; a cancel is reported by the
process that cancels), one record goes to the logger ``ductline.runs`` at the
level of the setting ``run_log_level`` (default ``INFO``)::

    INFO ductline.runs: Run completed: pipeline enrich_users in 2.418 s [run_id=5f0c…]
    INFO ductline.runs: Run halted (job_retries_exhausted): pipeline billing in 31.002 s [run_id=…]

The duration is the run's, from its first attempt's start (its trigger, if nothing
started) to its end, on the database clock: one read of the run by its id, made only
when the logger would keep the record.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Callable

from ductline.errors import StoreError
from ductline.observability import events
from ductline.observability.events import EventName

log = logging.getLogger("ductline.runs")

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

    def __call__(self, name: EventName, a: dict[str, Any]) -> None:
        status = RUN_ENDS.get(name)
        if status is None or not log.isEnabledFor(self.level):
            return
        run_id, pipeline = a.get("run_id"), a.get("pipeline")
        try:
            run = self.store.get_run(run_id) if run_id is not None else None
        except StoreError as exc:
            log.warning("cannot read run %s for its end's log line: %s", run_id, exc)
            run = None
        seconds = None if run is None else run_seconds(run)
        reason = a.get("reason") or (run or {}).get("halt_reason") or _error(run)
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


_lock = threading.Lock()
_unsubscribe: Callable[[], None] | None = None


def install(store: Any, level: str = "INFO") -> None:
    """Log the end of every run this process ends, reading times from ``store``;
    replaces what an earlier call installed (one worker per process)."""
    global _unsubscribe
    with _lock:
        if _unsubscribe is not None:
            _unsubscribe()
        _unsubscribe = events.subscribe(RunLog(store, level))


def uninstall() -> None:
    """Stop logging run ends (if `install` was called)."""
    global _unsubscribe
    with _lock:
        if _unsubscribe is not None:
            _unsubscribe()
            _unsubscribe = None

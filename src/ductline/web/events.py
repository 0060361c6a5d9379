"""A run's events as a server-sent event stream.

The stream polls the database (every 0.5 s by default) and emits, oldest first:
``workflow_start`` when the run's first attempt started, ``step_start`` and
``step_end`` for every attempt, and ``workflow_end`` once the run settled, with
``status`` ``completed``, ``failed``, ``halted``, ``cancelled`` or ``timeout`` (a
failed run whose deadline fired, ``metadata["timeout_exceeded"]``). Then it closes.
Polling keeps the database the one source of truth: nothing is pushed in memory.
"""

from __future__ import annotations

import json
import time
from typing import Any, AsyncIterator

import anyio

from ductline.errors import RunNotFound, StoreError
from ductline.model.states import SETTLED_RUN, RunStatus
from ductline.safetext import printable_value
from ductline.views import iso
from ductline.web import values
from ductline.web.reader import DashboardReader

# A closed browser tab is only noticed when the stream next writes: keep it short.
KEEPALIVE_SECONDS = 5.0


def end_status(run: dict[str, Any]) -> str:
    """The ``workflow_end`` status of a settled run."""
    status = str(run["status"])
    if status == RunStatus.FAILED:
        metadata = values.decode(run["metadata"] or "{}")
        if isinstance(metadata, dict) and metadata.get("timeout_exceeded") is True:
            return "timeout"
    return status


def frame(event: str, data: dict[str, Any]) -> str:
    """One SSE frame (``event:`` and one ``data:`` line of JSON), its texts safe to
    show (`ductline.safetext.printable`)."""
    return f"event: {event}\ndata: {json.dumps(printable_value(data), separators=(',', ':'))}\n\n"


class EventTracker:
    """Turns successive reads of a run into the events not emitted yet."""

    def __init__(self, run_id: str, since_ms: int | None = None) -> None:
        self.run_id = run_id
        self.since_ms = since_ms
        self._started = False
        self._seen: set[tuple[str, str, int]] = set()

    def _new(self, key: tuple[str, str, int]) -> bool:
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def step(self, run: dict[str, Any], attempts: list[dict[str, Any]]) -> tuple[list[tuple[str, dict[str, Any]]], bool]:
        """``(events, finished)`` for one read of the run and its attempts."""
        found: list[tuple[int, str, dict[str, Any]]] = []
        base = {"run_id": self.run_id, "pipeline": run["pipeline"]}
        if run["started_ms"] is not None and not self._started:
            self._started = True
            at = int(run["started_ms"])
            found.append((at, "workflow_start", {**base, "at": iso(at)}))
        if self._started:
            for a in attempts:
                step = {**base, "step": a["step"], "index": a["elem_index"], "scope": a["scope"],
                        "job_id": a["job_id"], "attempt": int(a["attempt"])}
                if self._new(("start", a["job_id"], int(a["attempt"]))):
                    at = int(a["started_ms"])
                    found.append((at, "step_start", {**step, "at": iso(at)}))
                if a["result"] is not None and self._new(("end", a["job_id"], int(a["attempt"]))):
                    at = int(a["finished_ms"] if a["finished_ms"] is not None else a["started_ms"])
                    found.append((at, "step_end", {**step, "result": a["result"], "error_type": a["error_type"],
                                                   "error": a["error"], "at": iso(at)}))
        found.sort(key=lambda e: e[0])  # stable: an attempt's start stays before its end
        events = [(name, data) for at, name, data in found if self.since_ms is None or at > self.since_ms]
        finished = run["status"] in SETTLED_RUN
        if finished:
            at = run["finished_ms"]
            events.append(("workflow_end", {**base, "status": end_status(run), "halt_reason": run["halt_reason"],
                                            "at": iso(None if at is None else int(at))}))
        return events, finished


async def stream(reader: DashboardReader, run_id: str, *, since_ms: int | None = None,
                 poll_seconds: float = 0.5) -> AsyncIterator[str]:
    """The SSE body for one run; ends after ``workflow_end`` (or if the run disappears)."""
    tracker = EventTracker(run_id, since_ms)
    yield "retry: 3000\n\n"
    quiet_since = time.monotonic()
    while True:
        try:
            run = await anyio.to_thread.run_sync(reader.run, run_id)
            attempts = await anyio.to_thread.run_sync(reader.run_events, run_id)
        except RunNotFound:
            return
        except StoreError:  # the database is away: keep the stream, look again later
            yield ": database unavailable\n\n"
            await anyio.sleep(max(poll_seconds, 1.0))
            continue
        events, finished = tracker.step(run, attempts)
        for name, data in events:
            yield frame(name, data)
        if finished:
            return
        if events:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > KEEPALIVE_SECONDS:
            quiet_since = time.monotonic()
            yield ": keepalive\n\n"
        await anyio.sleep(poll_seconds)

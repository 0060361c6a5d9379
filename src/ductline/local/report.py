"""What an in-process run tells its caller through ``on_update``.

Events (each with ``run_id``, ``pipeline`` and ``time``; step events with
``step``, ``index`` and ``scope``):

- ``workflow_start`` (``timeout_seconds``) and ``workflow_end`` (``status``:
  ``success``, ``failed``, ``timeout`` or ``cancelled``; ``run_status``; ``error``);
- ``step_start`` (``attempt``) and ``step_end`` after each attempt (``status``: the
  step run's status afterwards -- ``pending`` or ``held`` when it will be retried;
  ``result``, ``error_type``, ``error``, ``duration_seconds``) and when a step run
  ends without an attempt (skipped, or failed because its pause expired;
  ``skip_reason``, ``skip_root``);
- ``step_held`` (a waiting step run held by a halt), ``step_paused``
  (``pause_timeout_seconds``), ``step_resumed`` (``input_replaced``) and
  ``step_waiting`` (a step run waits for an event: ``event``, ``wait_timeout_seconds``).

An ``on_update`` that raises is logged and changes nothing. Spans, metrics and the
worker's log lines come from the engine's events (`ductline.observability.events`),
as on a worker.
"""

from __future__ import annotations

import inspect
import logging
from datetime import datetime, timezone
from enum import StrEnum
from typing import Any, Callable

log = logging.getLogger("ductline.local")


class EndStatus(StrEnum):
    """The ``status`` of a ``workflow_end`` event."""

    SUCCESS = "success"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Reporter:
    """The ``on_update`` events of one run (nothing when there is no callback)."""

    def __init__(self, pipeline: str, run_id: str, on_update: Callable[[dict[str, Any]], Any] | None) -> None:
        self.pipeline = pipeline
        self.run_id = run_id
        self.on_update = on_update

    def emit(self, event: dict[str, Any]) -> None:
        if self.on_update is None:
            return
        event = {"run_id": self.run_id, "pipeline": self.pipeline, "time": utcnow(), **event}
        try:
            returned = self.on_update(event)
        except Exception:
            log.exception("on_update raised on a %s event; ignored", event["type"])
            return
        if inspect.isawaitable(returned):
            if inspect.iscoroutine(returned):
                returned.close()
            log.error("on_update must be a plain function; the awaitable it returned was dropped")

    def run_started(self, timeout_seconds: float | None) -> None:
        self.emit({"type": "workflow_start", "timeout_seconds": timeout_seconds})

    def run_ended(self, status: EndStatus, run_status: str, error: str | None) -> None:
        self.emit({"type": "workflow_end", "status": status.value, "run_status": run_status, "error": error})

    def attempt_started(self, step: str, scope: str, index: int | None, attempt: int) -> None:
        self.emit({"type": "step_start", "step": step, "index": index, "scope": scope, "attempt": attempt})

    def attempt_ended(self, step: str, scope: str, index: int | None, attempt: int, status: str, result: str,
                      error_type: str | None, error: str | None, duration_seconds: float) -> None:
        self.emit({"type": "step_end", "step": step, "index": index, "scope": scope, "attempt": attempt,
                   "status": status, "result": result, "error_type": error_type, "error": error,
                   "duration_seconds": duration_seconds})

    def step_ended(self, job: dict[str, Any]) -> None:
        """A step run ended without an attempt (skipped, or its pause expired)."""
        self.emit({"type": "step_end", **_ident(job), "attempt": int(job.get("attempts") or 0),
                   "status": job["status"], "result": None, "skip_reason": job.get("skip_reason"),
                   "skip_root": job.get("skip_root")})

    def step_held(self, job: dict[str, Any]) -> None:
        self.emit({"type": "step_held", **_ident(job)})

    def step_paused(self, job: dict[str, Any], pause_timeout_seconds: int | None) -> None:
        self.emit({"type": "step_paused", **_ident(job), "pause_timeout_seconds": pause_timeout_seconds})

    def step_waiting(self, job: dict[str, Any], event: str | None, timeout_seconds: int | None) -> None:
        self.emit({"type": "step_waiting", **_ident(job), "event": event, "wait_timeout_seconds": timeout_seconds})

    def step_resumed(self, job: dict[str, Any], input_replaced: bool) -> None:
        self.emit({"type": "step_resumed", **_ident(job), "input_replaced": input_replaced})


def _ident(job: dict[str, Any]) -> dict[str, Any]:
    return {"step": job["step"], "index": job.get("elem_index"), "scope": job.get("scope") or ""}

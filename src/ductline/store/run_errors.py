"""A run's error text, decided from its stored rows: one wording for
``ductline.execute``'s ``WorkflowResult.metadata["error"]`` and a worker run's
`RunHandle.error` (and the `RunFailed` it raises)."""

from __future__ import annotations

import json
from typing import Any, Mapping

from ductline.model import scopes
from ductline.model.outcomes import TIMEOUT_ERROR_TYPE
from ductline.model.states import AttemptResult, HaltReason, JobStatus, RunStatus
from ductline.store.store import Store


def run_error(store: Store, run: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(error, error_type)`` saying why the run ``run`` (its row) did not complete;
    ``(None, None)`` for a completed run or one still under way.

    - halted by a step that gave up: ``step 'a' failed: ValueError: boom
      (job_retries_exhausted)``, with the step's scope (``'a[2]'``) for an expanded
      step and the error type of its last failed attempt;
    - ended by its deadline, an expired pause or a timed-out wait: the error its stop
      recorded, word for word;
    - cancelled: ``the run was cancelled``;
    - any other halt or failure: the error it recorded, else that it ended without
      completing its last step.
    """
    status = RunStatus(run["status"])
    meta = run["metadata"]
    if isinstance(meta, str) or meta is None:
        meta = json.loads(meta or "{}")
    halt_reason = run["halt_reason"]
    if status is RunStatus.HALTED and meta.get("halted_step") is not None:
        scope, error_type = _halted_step(store, str(run["id"]), meta["halted_step"])
        if error_type is None and halt_reason == HaltReason.CHILD_RUN_FAILED:
            error_type = "ChildRunFailed"  # its attempt succeeded in starting them; a child did not complete
        label = meta["halted_step"] if not scope else f"{meta['halted_step']}[{scope}]"
        return f"step {label!r} failed: {error_type}: {meta.get('error')} ({halt_reason})", error_type
    if meta.get("timeout_exceeded"):
        return meta.get("error"), TIMEOUT_ERROR_TYPE
    if halt_reason == HaltReason.PAUSE_EXPIRED:
        return meta.get("error"), "PauseExpired"
    if halt_reason == HaltReason.EVENT_TIMED_OUT:
        return meta.get("error"), "EventTimedOut"
    if status is RunStatus.CANCELLED:
        return "the run was cancelled", "Cancelled"
    if status is RunStatus.COMPLETED or status not in (RunStatus.HALTED, RunStatus.FAILED):
        return None, None
    if meta.get("error") is not None:  # what the stop recorded, e.g. how often a shutdown interrupted it
        return str(meta["error"]), None
    return f"the run ended {status.value} without completing its last step", None


def _halted_step(store: Store, run_id: str, step: str) -> tuple[str, str | None]:
    """The scope of the halted step's first failed step run (element order) and the
    error type of its last failed attempt; ``("", None)`` when none failed."""
    failed = sorted((j for j in store.run_jobs(run_id) if j["step"] == step and j["status"] == JobStatus.FAILED),
                    key=lambda j: scopes.sort_key(j["scope"] or ""))
    if not failed:
        return "", None
    job = failed[0]
    tried = sorted((a for a in store.run_attempts(run_id)
                    if a["job_id"] == job["id"] and a["result"] not in (None, AttemptResult.SUCCEEDED)),
                   key=lambda a: int(a["attempt"]))
    return job["scope"] or "", (tried[-1]["error_type"] if tried else None)

"""Child runs, the rules: a child run's id, when a parent's wait is over, and what
its step run becomes then (docs/howto/child-runs.md).

A step that returned ``ductline.children([...])`` waits (job status ``awaiting``)
until every child run has *ended*: completed, or settled without completing --
halted, failed or cancelled. A halted child counts as ended (it may be retried by
an operator, but its parent does not wait for that). Then, by the policy the step
gave:

- ``"fail"``: all completed -> the step completes with the list of their outputs;
  otherwise the step fails for good (no retry: a retry would find the same children)
  and the run halts with reason ``child_run_failed``.
- ``"collect"``: the step completes with the list, each child that did not complete
  standing as a `ductline.ChildRunFailed` in its place.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from ductline.codec import TAG
from ductline.model.states import SETTLED_RUN, RunStatus

CHILDREN_TAG = "children"
# A step's output that starts child runs, as the codec writes it (tag first): the
# parent recognises it by this prefix without decoding outputs that are not.
CHILDREN_PREFIX = '{"%s":"%s"' % (TAG, CHILDREN_TAG)
_NAMESPACE = uuid.UUID("6f1c2b1e-4d0a-4c55-9a51-2f7e0c1d8a01")


def starts_children(output: str | None) -> bool:
    """Whether a step's output (JSON text) is a ``ductline.children(...)`` value."""
    return output is not None and output.startswith(CHILDREN_PREFIX)


def child_run_id(parent_job_id: str, index: int) -> str:
    """The id of the ``index``-th child run of a parent job: the same every time the
    job's step returns its children again (a retry, a rescue), so inserting it twice
    is impossible and the children start once."""
    return uuid.uuid5(_NAMESPACE, f"{parent_job_id}:{index}").hex


@dataclass(frozen=True, slots=True)
class Child:
    """What the wake-up reads of one child run."""

    run_id: str
    pipeline: str
    status: RunStatus
    output: str | None  # JSON text (the child's full output) when completed
    halt_reason: str | None
    metadata: dict[str, object]


@dataclass(frozen=True, slots=True)
class Wake:
    """What an awaiting step run becomes once its children ended: completed with
    ``output`` (a JSON list, children in order), or failed with ``error``."""

    output: str | None = None
    error: str | None = None
    failed: tuple[Child, ...] = ()


def ended(status: RunStatus) -> bool:
    """Whether a child run counts as ended for its parent."""
    return status in SETTLED_RUN


def failure(c: Child) -> dict[str, object]:
    """The ``ChildRunFailed`` fields of a child that did not complete."""
    reason = c.halt_reason or ("timeout_exceeded" if c.metadata.get("timeout_exceeded") else None)
    error = c.metadata.get("error")
    return {TAG: "child_failed", "run_id": c.run_id, "pipeline": c.pipeline, "status": c.status.value,
            "reason": reason, "error": None if error is None else str(error)}


def wake(children: list[Child], on_failure: str) -> Wake | None:
    """The verdict for an awaiting step run whose children are ``children`` (in
    index order); ``None`` while one has not ended."""
    if any(not ended(c.status) for c in children):
        return None
    failed = tuple(c for c in children if c.status is not RunStatus.COMPLETED)
    if failed and on_failure != "collect":
        first = failed[0]
        detail = failure(first)
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        why = detail["error"] or detail["reason"] or first.status.value
        return Wake(error=f"child run {first.run_id} of pipeline {first.pipeline!r} ended {first.status.value}: "
                          f"{why}{more}", failed=failed)
    parts = [(c.output or "null") if c.status is RunStatus.COMPLETED else json.dumps(failure(c), separators=(",", ":"))
             for c in children]
    return Wake(output="[" + ",".join(parts) + "]", failed=failed)

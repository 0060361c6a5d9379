"""The rule of an operator's "mark succeeded": which step runs of which runs may be
recorded as succeeded with an output the operator gives, without running them.

A step run may be marked when it failed for good, is held by its run's halt, or was
cancelled (for instance by a ``fail_fast`` sibling) -- `ductline.model.states.MARKABLE_JOB`
-- and its run is not finished: a completed, failed or cancelled run is over and is
never changed. A running, waiting, paused, completed or skipped step run is refused.
"""

from __future__ import annotations

from ductline.model.states import MARKABLE_JOB, TERMINAL_RUN, JobStatus, RunStatus

ACTION = "mark_succeeded"
MAX_REASON_CHARS = 1000
MAX_ACTOR_CHARS = 200


def refusal(run_status: str, job_status: str, where: str) -> str | None:
    """Why step run ``where`` (``step`` or ``step[index]``) cannot be marked succeeded,
    or ``None`` when it can."""
    run = RunStatus(run_status)
    job = JobStatus(job_status)
    if run in TERMINAL_RUN:
        return f"the run is {run.value}: a finished run is never changed (trigger a new run)"
    if job in MARKABLE_JOB:
        return None
    if job is JobStatus.COMPLETED:
        return f"step {where} has completed already"
    if job is JobStatus.RUNNING:
        return f"step {where} is running: wait for its attempt to end (or cancel the run)"
    return f"step {where} is {job.value}: only a failed, held or cancelled step run can be marked succeeded"


# How a caller names one step run of an expanded step, in each of its interfaces.
CHOOSE_INDEX = "name one by its index (--index N on the command line, index= in Python, \"index\" in the API)"


def index_ranges(indexes: list[int | None]) -> str:
    """Element indexes for a message, runs of consecutive ones as ranges:
    ``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"`` (``None``, a step run outside an
    expand, is left out)."""
    parts: list[str] = []
    ordered = sorted({i for i in indexes if i is not None})
    start = 0
    for i in range(1, len(ordered) + 1):
        if i == len(ordered) or ordered[i] != ordered[i - 1] + 1:
            first, last = ordered[start], ordered[i - 1]
            parts.append(str(first) if first == last else f"{first}-{last}")
            start = i
    return ", ".join(parts)


def ambiguous(step: str, runs: list[tuple[int | None, str]]) -> str:
    """Why ``step``, named without an index, cannot be marked: its step runs
    (``(element index, status)`` pairs) are several and not exactly one may be
    marked. Says which indexes may be and how to name one."""
    markable = [i for i, s in runs if JobStatus(s) in MARKABLE_JOB]
    several = f"step {step} has {len(runs)} step runs (indexes {index_ranges([i for i, _ in runs])})"
    if markable:
        return f"{several}; those that may be marked succeeded are {index_ranges(markable)}: {CHOOSE_INDEX}"
    by_status: dict[str, list[int | None]] = {}
    for i, s in runs:
        by_status.setdefault(s, []).append(i)
    held = "; ".join(f"{s}: {index_ranges(i)}" for s, i in sorted(by_status.items()))
    return f"{several} and none may be marked succeeded (only a failed, held or cancelled one may; {held})"


def check_text(value: object, field: str, limit: int) -> str | None:
    """``None`` or a ``str`` of at most ``limit`` characters without NUL.

    Raises:
        TypeError: not a ``str``.
        ValueError: too long (the message names the limit) or holding NUL.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, not {type(value).__name__}")
    if len(value) > limit:
        raise ValueError(f"{field} may have at most {limit} characters (the limit), got {len(value)}")
    if "\x00" in value:
        raise ValueError(f"{field} cannot contain NUL")
    return value

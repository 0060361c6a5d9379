"""Events: the rules of a run waiting for a named event and of sending one (pure).

- A step declared with ``.wait_for(event, before=step)`` is created ``deferred``:
  not claimable, no slot (`ductline.model.states.JobStatus.DEFERRED`).
- An event can be sent to an unfinished run only (pending, running, paused,
  halted); a finished run refuses it and nothing is written.
- An event is kept until a wait of its run consumes it; each event is consumed
  once, the oldest first, and a wait consumes one event.
- The released step receives the event's data as its single argument
  (`step_input`), in place of the previous step's output.
- A released job is pending, or held in a halted run (a retry lets it run).
- A wait with a timeout that passes without its event fails the run
  (`ductline.model.stops.event_timed_out`).
- A run keeps at most ``max_kept_events`` events no wait has consumed; a send that
  would keep one more is refused (`keeps_another`), one a wait consumes at once is not.
"""

from __future__ import annotations

from ductline.model.states import UNFINISHED_RUN, JobStatus, RunStatus, waiting_status


# The default of the ``max_kept_events`` setting (`ductline.config.Settings`).
MAX_KEPT_EVENTS = 1_000


def keeps_another(kept: int, limit: int) -> bool:
    """Whether a run that keeps ``kept`` unconsumed events may keep one more
    under the ``max_kept_events`` setting ``limit`` (>= 1)."""
    return kept < limit


def accepts_events(run: RunStatus) -> bool:
    """Whether a run in status ``run`` may be sent an event."""
    return run in UNFINISHED_RUN


def step_input(data_json: str) -> str:
    """The input (a JSON list of arguments) of a step released by an event whose
    data is ``data_json``: the data as its one argument."""
    return "[" + data_json + "]"


def released_status(run: RunStatus) -> JobStatus:
    """What a deferred job becomes when its event arrives in a run of status ``run``."""
    return waiting_status(run)


def expires_ms(now_ms: int, timeout_seconds: int | None) -> int | None:
    """When a wait created at ``now_ms`` times out (``None``: never)."""
    return None if timeout_seconds is None else now_ms + timeout_seconds * 1000

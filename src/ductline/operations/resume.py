"""Resuming a run paused for a person (``Pipeline.pause(before=step)``): the
operation the Python API, the CLI and the dashboard call. The engine applies it
(`ductline.engine.pause.resume`) in one transaction; of racing resumes exactly
one succeeds.
"""

from __future__ import annotations

import logging
from typing import Any

from ductline.config import load_settings
from ductline.engine import pause
from ductline.model.inputs import NO_INPUT
from ductline.observability.events import EventName, emit
from ductline.store import Store, payloads

log = logging.getLogger("ductline.operations")

__all__ = ["NO_INPUT", "resume"]


def resume(store: Store, run_id: str, input: Any = NO_INPUT) -> list[dict[str, Any]]:
    """Resume a paused run.

    Args:
        input: the paused step's new single argument (any value the codec accepts);
            `NO_INPUT` keeps the input it was paused with.

    Returns:
        The resumed step runs (``id``, ``step``, ``scope``, ``elem_index``, ``pause_expires_ms``).

    Raises:
        TypeError: ``input`` does not round-trip; nothing is changed.
        PayloadTooLarge: ``[input]`` as JSON is above ``payload_max_bytes`` (this
            process's settings); above ``payload_inline_bytes`` it is stored out of
            line with the run. Nothing is changed.
        RunNotFound: no such run.
        InvalidStateError: the run is not paused (of two racing resumes, the loser
            gets this), its pause has expired, or an input was given while several
            step runs are paused. Nothing is changed.
    """
    limits = payloads.Limits.from_settings(load_settings())
    encoded = None
    if input is not NO_INPUT:
        encoded = pause.encode_input(input)
        payloads.check_size(encoded, "resume input", limits.max_bytes)
    with store.transaction() as tx:
        paused = pause.resume(tx, run_id, encoded, limits)
        pipeline = tx.run_pipeline(run_id)
    steps = sorted({p["step"] for p in paused})
    emit(EventName.PIPELINE_RESUMED, pipeline=pipeline, run_id=run_id, steps=steps,
         input_replaced=encoded is not None)
    # Debug, not info: the caller reports the resume (the CLI prints only its result).
    log.debug("Run resumed: %s", ", ".join(steps) or "no paused step", extra={"run_id": run_id})
    return paused

"""Who can run a waiting job: the rule that tells why a pending job is not claimed.

A job waits in a queue and belongs to one definition of its pipeline (its run's
fingerprint, `ductline.dsl.fingerprint`). A worker claims it only if it serves that
queue and loaded that definition (runs started before versions were recorded, with
no fingerprint, are served by any worker of their pipeline). A job no live worker
can claim stays pending -- no attempt is made, none is charged -- and `unserved`
says why, for ``ductline show``, the dashboard and the metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

from ductline.dsl.fingerprint import short
from ductline.dsl.options import DEFAULT_QUEUE


# A worker heartbeats every third of its lease; without one for a whole lease (the
# default's 30 s) it is lost and serves nothing (`ductline.model.workers`).
LIVE_WITHIN_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class Offer:
    """What one live worker claims: its queues and the fingerprints it loaded."""

    queues: frozenset[str]
    definitions: frozenset[str]


def unserved(step: str, queue: str, definition: str, offers: list[Offer]) -> str | None:
    """Why no live worker can claim a pending job of ``step`` waiting in ``queue``
    for ``definition`` (``""``: a run from before versions), or ``None`` when one can.

    Args:
        offers: what each live worker claims.
    """
    in_queue = [o for o in offers if queue in o.queues]
    if not in_queue:
        return f"no live worker serves queue {queue!r}"
    if definition and not any(definition in o.definitions for o in in_queue):
        where = "" if queue == DEFAULT_QUEUE else f" in queue {queue!r}"
        return f"no live worker has step {step!r} of definition {short(definition)}{where}"
    return None


def able_to_claim(queues: frozenset[str], definition: str, offers: list[Offer]) -> int:
    """How many of the workers ``offers`` describe could claim jobs of ``definition``
    waiting in any of ``queues`` (by the rule `unserved` explains)."""
    return sum(1 for o in offers if o.queues & queues and (not definition or definition in o.definitions))


def workers_per_queue(offers: list[Offer]) -> dict[str, int]:
    """How many live workers serve each queue that any serves."""
    counts: dict[str, int] = {}
    for offer in offers:
        for queue in offer.queues:
            counts[queue] = counts.get(queue, 0) + 1
    return counts

"""`Tx`: the verbs available inside one write transaction of the `Store`.

Every verb that ends or moves an attempt is conditional on the attempt's lease
token (fencing): zero rows changed means the lease was lost.

The verbs are grouped by concern, a module each, over the state of `TxBase`:
claiming (`ClaimVerbs`), creating work (`WorkVerbs`), recording attempts
(`RecordVerbs`), ending runs (`RunVerbs`), pauses and events (`WaitVerbs`) and
fan-ins (`FaninVerbs`).
"""

from __future__ import annotations

from ductline.store.tx.claiming import ClaimVerbs, handed_over, next_wakeups, served
from ductline.store.tx.creating import INSERT_CHUNK, shared_fields
from ductline.store.tx.fanins import FaninVerbs
from ductline.store.tx.recording import RecordVerbs
from ductline.store.tx.runs import RunVerbs
from ductline.store.tx.waits import WaitVerbs

__all__ = ["INSERT_CHUNK", "Tx", "handed_over", "next_wakeups", "served", "shared_fields"]


class Tx(ClaimVerbs, RecordVerbs, RunVerbs, WaitVerbs, FaninVerbs):
    """The verbs available inside one write transaction."""

"""A human-approval pause: every refund waits for a person's sign-off.

``assess`` adds a recommendation; the run then pauses before ``pay_out`` (one row with status ``paused``: no thread, no lease) until someone
resumes it. Resuming with an input that names the approver pays the refund;
resuming without one keeps the assessed input, which nobody approved, so the refund
is rejected. A pause that nobody answers within a day
fails closed: the run ends ``failed`` with ``halt_reason`` ``pause_expired`` and no
money moves.

::

    ductline worker --app examples/approval.py &
    ductline trigger examples/approval.py:refunds --args '[{"order": "A-1001", "amount": 750}]'
    ductline runs --status paused
    ductline show RUN_ID                                   # the assessment, and until when it waits
    ductline resume RUN_ID --input '{"order": "A-1001", "amount": 750, "approved_by": "maria"}'

From Python: ``ductline.RunHandle.attach(run_id).resume(input={...})``. The dashboard
shows paused runs with a Resume button, and ``POST /api/runs/RUN_ID/resume`` does the
same for scripts.
"""

from __future__ import annotations

from datetime import timedelta

import ductline
from ductline import Pipeline

REVIEW_ABOVE = 500


def assess(refund):
    """What the person sees while the run waits: the refund and a recommendation."""
    if not isinstance(refund.get("amount"), int) or refund["amount"] <= 0:
        raise ValueError(f"a refund needs a positive whole amount, got {refund.get('amount')!r}")
    advice = "approve" if refund["amount"] <= REVIEW_ABOVE else "check the order first"
    return {**refund, "recommendation": advice, "approved_by": None}


def pay_out(refund):
    """Pays only what someone approved. Crossing the boundary records, before the
    money moves, that this attempt must never be repeated blindly."""
    if not refund.get("approved_by"):
        return {**refund, "paid": 0, "outcome": "rejected"}
    ductline.cross_boundary(f"paying {refund['amount']} for order {refund['order']}")
    return {**refund, "paid": refund["amount"], "outcome": "paid",
            "payment_reference": ductline.context().idempotency_key}


def notify(refund):
    return f"order {refund['order']}: refund {refund['outcome']} ({refund['paid']} EUR)"


refunds = (
    Pipeline("refunds")
    .start(assess, no_retry_on=[ValueError])
    .chain(to=pay_out, timeout=60)
    .chain(to=notify)
    .pause(before=pay_out, timeout=timedelta(days=1))
)

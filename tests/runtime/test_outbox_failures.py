"""When the outbox records what (`ductline.runtime.outbox`): plain successes may wait
a few milliseconds for company (one commit for many), a failure never does; and
while every slot is busy a failure is recorded without planning a claim first (the
claim would only fill the queue ahead, and follows its commit). A real SQLite store."""

from __future__ import annotations

import pytest

from ductline.clock import SystemClock
from ductline.engine.batch import Outcome
from ductline.engine.record import Attempt
from ductline.model.states import AttemptResult
from ductline.runtime.outbox import Outage, Outbox
from ductline.store import open_store, payloads


@pytest.fixture
def outbox(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/ductline.db")
    store.migrate()
    box = Outbox(store, {}, 0, payloads.DEFAULT_LIMITS, Outage(SystemClock()), now_ms=store.now_ms,
                 recorded=lambda: None)
    box.planned = []  # type: ignore[attr-defined]
    box.claim_in = lambda: box.planned.append("claim")  # type: ignore[attr-defined]
    box.urgent = lambda: False  # no child would idle: a batch may wait for company
    yield box
    box.close()
    store.close()


def outcome(result: AttemptResult) -> Outcome:
    # A job that does not exist: recording finds its lease gone, and writes nothing.
    return Outcome(Attempt("job-1", "run-1", "step", "", 1, "token"), "pipeline", result)


def test_a_success_waits_for_company_while_no_child_would_idle(outbox):
    outbox.slot_free = lambda: False
    outbox.add(outcome(AttemptResult.SUCCEEDED))
    outbox.flush()
    assert not outbox.recording and len(outbox) == 1


def test_a_failure_is_recorded_at_once_without_a_claim_while_every_slot_is_busy(outbox):
    outbox.slot_free = lambda: False
    outbox.add(outcome(AttemptResult.TIMED_OUT))
    outbox.flush()
    assert outbox.recording and outbox.planned == []


def test_with_a_slot_free_a_failure_plans_the_claim_that_fills_it(outbox):
    outbox.slot_free = lambda: True
    outbox.add(outcome(AttemptResult.TIMED_OUT))
    outbox.flush()
    assert outbox.recording and outbox.planned == ["claim"]

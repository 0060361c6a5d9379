"""The in-process executor's children speak the worker's protocol and die by the
worker's kill path (`ductline.execution`): a message over the cap is never read and
fails the attempt with `ductline.PayloadTooLarge`; bytes that are not the protocol get
the child killed and the attempt recorded as a crash."""

from __future__ import annotations

import uuid

import pytest

import ductline
import local_steps as s
from ductline import Pipeline
from ductline.store import payloads
from local_helpers import FakeClock


def name() -> str:
    return f"children_{uuid.uuid4().hex[:10]}"


def test_an_oversized_message_is_not_read_and_fails_the_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 100_000
    monkeypatch.setenv("DUCTLINE_PAYLOAD_MAX_BYTES", str(limit))
    pipeline = Pipeline(name()).start(s.loud_failure, max_retry=3)
    result = ductline.execute(pipeline, 2 * payloads.MESSAGE_SLACK_BYTES, kill_grace=0.2)
    step = result.step("loud_failure")
    assert result.overall_status == "failed"
    assert step.status == "failed" and step.attempts == 1  # PayloadTooLarge is not retried
    assert step.error_type == "ductline.PayloadTooLarge"
    cap = limit + payloads.MESSAGE_SLACK_BYTES
    assert step.error == (f"step 'loud_failure' sent the executor a message of more than {cap} bytes "
                          f"(payload_max_bytes {limit} plus {payloads.MESSAGE_SLACK_BYTES} for the "
                          "envelope); the child was killed")


@pytest.mark.parametrize("step", [s.garbles_once, s.garbles_out_of_step_once, s.forges_fatal_once])
def test_a_child_that_breaks_the_protocol_is_killed_and_its_attempt_crashes(clock: FakeClock, step) -> None:
    # out of step: the junk is followed by bytes that read as a size past the cap; the
    # junk before them is what the child did (never recorded as PayloadTooLarge)
    pipeline = Pipeline(name()).start(step, max_retry=0)
    result = ductline.execute(pipeline, 7, clock=clock, kill_grace=0.2)
    assert result.overall_status == "success" and result.output == 7
    [crashed, succeeded] = result.step(step.__name__).history
    assert crashed.result == "crashed" and crashed.error_type == "ductline.ProtocolError"
    assert "sent its parent a message it cannot take" in (crashed.error or "")
    assert succeeded.result == "succeeded"

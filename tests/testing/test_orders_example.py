"""Testing a pipeline with `ductline.testing`, as an application's test suite
would: steps run inline (so ``monkeypatch`` reaches them), and a fake clock takes
the run through its one-day delay, retry delays, pause timeout and deadline at once."""

from __future__ import annotations

import time

import orders
import pytest

from ductline.testing import FakeClock, run_pipeline, start_pipeline

DAY = 86400


def flaky_gateway(failures):
    """A stand-in payment service that fails ``failures`` times, then succeeds."""
    calls = []

    def charge_card(order_id, cents):
        calls.append(order_id)
        if len(calls) <= failures:
            raise ConnectionError("gateway timeout")
        return f"receipt-{order_id}"

    return charge_card, calls


def test_five_steps_a_one_day_delay_and_two_retries_in_virtual_time(monkeypatch):
    charge_card, calls = flaky_gateway(failures=2)
    monkeypatch.setattr(orders.PaymentGateway, "charge_card", charge_card)
    clock = FakeClock()

    began = time.perf_counter()
    result = run_pipeline(orders.orders, {"id": 7, "cents": 1200}, clock=clock)
    took = time.perf_counter() - began

    assert result.status == "completed"
    assert result.output == {"id": 7, "receipt": "receipt-7"}
    assert list(result.statuses().values()) == ["completed"] * 5
    charge = result.step("charge")
    assert [a.result for a in charge.history] == ["errored", "errored", "succeeded"]
    assert charge.history[0].error == "gateway timeout"
    assert calls == [7, 7, 7]
    assert clock.now() == DAY + 2 * 60  # the delay and two retry delays, in virtual seconds
    assert [e.message for e in result.step("notify").logs] == ["order 7 shipped"]
    print(f"\n5 steps, a one-day delay and two retries: {took * 1000:.0f} ms of real time")


def test_retries_run_out_and_the_run_halts(monkeypatch):
    charge_card, calls = flaky_gateway(failures=10)
    monkeypatch.setattr(orders.PaymentGateway, "charge_card", charge_card)
    clock = FakeClock()
    result = run_pipeline(orders.orders, {"id": 8, "cents": 500}, clock=clock)
    assert result.status == "halted", result.metadata
    # Nothing waits after the halt: virtual time never reaches the 3-day deadline.
    assert clock.now() == DAY + 2 * 60
    assert result.metadata["halt_reason"] == "job_retries_exhausted"
    assert result.statuses() == {"validate": "completed", "reserve": "completed", "charge": "failed"}
    assert len(calls) == 3


def test_bad_input_fails_the_first_step():
    result = run_pipeline(orders.orders, {"id": 9, "cents": 0}, retry_delay=0)
    assert result.status == "halted"
    assert result.step("validate").error == "order 9 has no amount"


def test_the_run_deadline_passes_in_virtual_time():
    clock = FakeClock()
    result = run_pipeline(orders.slow_orders, {"id": 3, "cents": 100}, clock=clock)
    assert result.status == "failed" and result.timeout_exceeded
    assert result.step("ship").status == "skipped"
    assert clock.now() == 2 * 3600  # the deadline came first, not the day-long delay


def test_a_paused_run_is_resumed_by_the_test():
    with start_pipeline(orders.large_orders, {"id": 4, "cents": 900_000}) as run:
        assert run.wait_paused() == ["approve"]
        assert run.status == "paused"
        assert run.resume({"id": 4, "cents": 800_000}) == ["approve"]
        result = run.result()
    assert result.status == "completed"
    assert result.output == {"id": 4, "cents": 800_000, "approved": True, "shipped": True}
    assert run.clock.now() == 0  # resumed before any time passed


def test_a_pause_nobody_resumes_expires():
    with start_pipeline(orders.large_orders, {"id": 5, "cents": 900_000}) as run:
        run.wait_paused()
        run.advance(DAY)
        result = run.result()
    assert result.status == "failed"
    assert result.metadata["halt_reason"] == "pause_expired"


def test_steps_can_also_run_in_child_processes():
    # Children import the steps afresh: a monkeypatch would not reach them.
    result = run_pipeline(orders.orders, {"id": 6, "cents": 100}, inline=False, retry_delay=0)
    assert result.status == "halted"
    assert result.step("charge").error == "no payment service in this example"


def test_inside_an_event_loop_it_says_what_to_do():
    import asyncio

    async def inside():
        run_pipeline(orders.orders, {"id": 1, "cents": 1})

    with pytest.raises(RuntimeError, match="plain \\(sync\\) test"):
        asyncio.run(inside())



def test_the_test_cancels_a_paused_run_and_waiting_on_it_says_why_it_is_not_done():
    with start_pipeline(orders.large_orders, {"id": 10, "cents": 900_000}) as run:
        run.wait_paused()
        with pytest.raises(TimeoutError, match=r"had not ended after 0 s \(status paused\); a paused run waits"):
            run.result(timeout=0)
        run.cancel()
        result = run.result()
    assert result.status == "cancelled"
    assert result.step("approve").status == "skipped" and result.step("ship").status == "skipped"


def test_leaving_the_block_cancels_a_run_still_going():
    with start_pipeline(orders.large_orders, {"id": 11, "cents": 900_000}) as run:
        run.wait_paused()
    assert run.status == "cancelled"


def test_waiting_for_a_pause_that_never_comes_is_a_timeout():
    with start_pipeline(orders.orders, {"id": 12, "cents": 0}, retry_delay=0) as run:
        assert run.result().status == "halted"
        with pytest.raises(TimeoutError, match=r"no step paused within 0 s \(run status halted\)"):
            run.wait_paused(timeout=0)


def test_arguments_that_cannot_start_a_run_raise_and_leave_no_loop_behind():
    import threading

    with pytest.raises(TypeError):
        start_pipeline(orders.orders, {"id": 13, "when": object()})
    assert not [t for t in threading.enumerate() if t.name == "ductline test loop"]

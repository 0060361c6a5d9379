"""The fake clock under limits: a rate-limited, concurrency-limited fan-out with
delays passes in virtual time, without a deadlock between the limit's waiters and
the clock."""

from __future__ import annotations

import orders

from ductline.testing import FakeClock, run_pipeline


def test_rate_and_concurrency_limits_pass_in_virtual_time():
    clock = FakeClock(start=100.0)
    result = run_pipeline(orders.packing, {"id": 1, "lines": 4}, clock=clock)
    assert result.status == "completed"
    assert result.output == 4
    assert [r.output for r in result.steps if r.step == "pack"] == [0, 1, 2, 3]
    # One start an hour after the 60 s delay: the fourth line starts three hours later.
    assert clock.now() - 100.0 == 60 + 3 * 3600


def test_advance_wakes_only_what_is_due():
    import asyncio

    clock = FakeClock()
    clock.frozen = True
    woke = []

    async def sleeper(seconds):
        await clock.sleep(seconds)
        woke.append(seconds)

    async def scenario():
        tasks = [asyncio.create_task(sleeper(s)) for s in (30, 10, 20)]
        await asyncio.sleep(0)
        clock.advance(15)
        await asyncio.sleep(0)
        assert woke == [10]
        clock.thaw()
        await asyncio.gather(*tasks)

    asyncio.run(scenario())
    assert woke == [10, 20, 30] and clock.now() == 30

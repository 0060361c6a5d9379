"""Events in the DSL (definition-time checks) and in the in-process executor:
``execute(..., events=)``, `LocalRun.send` while the run waits, a wait that times
out in a fake clock's time, and the options' checks."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import events_app
import pytest

import ductline
from ductline import DefinitionError, InvalidStateError, Pipeline
from ductline.local import start
from ductline.testing import FakeClock


def first(x):
    return x


def second(x):
    return x


def third(x):
    return x


def many(x):
    return [x, x]


def each(x):
    return x


def gather(xs):
    return xs


# -- the DSL -----------------------------------------------------------------------------------------
def test_wait_for_records_the_event_and_its_timeout():
    p = Pipeline("ev_dsl").start(first).chain(to=second).wait_for("ok", before=second, timeout=timedelta(minutes=2))
    wait = p.definition().waits["second"]
    assert (wait.event, wait.timeout) == ("ok", 120)
    assert Pipeline("ev_dsl2").start(first).chain(to=second).wait_for("ok", before="second") \
        .definition().waits["second"].timeout is None


@pytest.mark.parametrize("call, error, match", [
    (lambda p: p.wait_for("ok", before=first), DefinitionError, "is the start step"),
    (lambda p: p.wait_for("ok", before="nope"), DefinitionError, "has no step named 'nope'"),
    (lambda p: p.wait_for("ok", before=3), TypeError, "takes a step's name or its callable"),
    (lambda p: p.wait_for("", before=second), ValueError, "1 to 200 characters"),
    (lambda p: p.wait_for("x" * 201, before=second), ValueError, "1 to 200 characters"),
    (lambda p: p.wait_for("a\tb", before=second), ValueError, "control characters"),
    (lambda p: p.wait_for("ok\udfff", before=second), ValueError, "lone surrogates"),
    (lambda p: p.wait_for(7, before=second), TypeError, "must be a str"),
    (lambda p: p.wait_for("ok", before=second, timeout=0), ValueError, "timeout"),
    (lambda p: p.wait_for("ok", before=second, timeout=1.5), TypeError, "timeout"),
    (lambda p: p.wait_for("ok", before=second).wait_for("other", before=second), DefinitionError,
     "already waits for event 'ok' before step 'second'"),
    (lambda p: p.wait_for("ok", before=second).wait_for("ok", before=third), DefinitionError,
     "already waits for event 'ok'"),
    (lambda p: p.pause(before=second).wait_for("ok", before=second), DefinitionError, "not both"),
    (lambda p: p.wait_for("ok", before=second).pause(before=second), DefinitionError, "not both"),
    (lambda p: p.wait_for("ok", before=second, timout=3), TypeError, "timeout"),
])
def test_bad_waits_are_refused_at_definition_time(call, error, match):
    p = Pipeline("ev_bad").start(first).chain(to=second).chain(to=third)
    with pytest.raises(error, match=match):
        call(p)


def test_a_step_inside_an_expand_cannot_wait_for_an_event():
    p = Pipeline("ev_expand").start(many).expand(to=each).collapse(into=gather)
    with pytest.raises(DefinitionError, match="runs once per element of an expand"):
        p.wait_for("ok", before=each)
    p.wait_for("ok", before=gather)  # after the collapse it runs once


# -- execute -----------------------------------------------------------------------------------------
def test_execute_delivers_the_events_it_is_given_to_their_waits():
    result = ductline.execute(events_app.orders, 7, events={"paid": {"amount": 3}})
    assert result.status == "completed"
    assert result.metadata["output"] == {"shipped": {"amount": 3}}
    ship = next(s for s in result.steps if s.step == "ship")
    assert ship.status == "completed" and len(ship.history) == 1


def test_execute_refuses_a_wait_nothing_would_send_and_unknown_events():
    with pytest.raises(DefinitionError, match="waits for event 'paid' without a timeout"):
        ductline.execute(events_app.orders, 7)
    with pytest.raises(ValueError, match="names event 'payd', but pipeline 'events_orders' waits for 'paid'"):
        ductline.execute(events_app.orders, 7, events={"paid": 1, "payd": 2})
    with pytest.raises(TypeError, match="mapping"):
        ductline.execute(events_app.orders, 7, events=[("paid", 1)])
    with pytest.raises(TypeError, match="data of event 'paid'"):
        ductline.execute(events_app.orders, 7, events={"paid": object()})


def test_a_wait_that_times_out_fails_the_run_and_cancels_the_other_branch():
    result = ductline.execute(events_app.expiring, 4)
    assert (result.status, result.metadata["halt_reason"]) == ("failed", "event_timed_out")
    assert result.metadata["error"] == "event 'paid' awaited before step 'ship' did not come within 1 s"
    assert result.metadata["failed_step"] == "ship"
    steps = {s.step: s.status for s in result.steps}
    assert steps == {"prepare": "completed", "ship": "failed", "slow_side": "cancelled", "collect": "skipped"}


def test_a_wait_times_out_in_a_fake_clock_time():
    result = ductline.execute(events_app.hour_wait, 4, clock=FakeClock())
    assert (result.status, result.metadata["halt_reason"]) == ("failed", "event_timed_out")
    assert result.metadata["error"] == "event 'paid' awaited before step 'ship' did not come within 3600 s"


def test_a_local_run_waits_for_its_event_until_it_is_sent():
    async def main():
        run = start(events_app.orders, 5)
        for _ in range(500):
            if run.status == "running" and run._driver.store.run_progress(run.id).get("deferred"):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the run never reached its wait")
        sent = run.send("paid", "cash", key="k")
        again = run.send("paid", "card", key="k")
        assert (sent.step, again.duplicate) == ("ship", True)
        result = await run.result()
        with pytest.raises(InvalidStateError, match="unfinished run"):
            run.send("paid", 1)
        return result

    result = asyncio.run(main())
    assert (result.status, result.metadata["output"]) == ("completed", {"shipped": "cash"})


# -- ductline.testing --------------------------------------------------------------------------------
def test_run_pipeline_delivers_events_and_lets_an_unsent_wait_time_out_in_the_clock_time():
    from ductline.testing import run_pipeline

    done = run_pipeline(events_app.orders, 1, events={"paid": "cash"})
    assert (done.status, done.metadata["output"]) == ("completed", {"shipped": "cash"})
    clock = FakeClock()
    timed_out = run_pipeline(events_app.hour_wait, 1, clock=clock)
    assert (timed_out.status, timed_out.metadata["halt_reason"]) == ("failed", "event_timed_out")
    assert clock.now() >= 3600
    with pytest.raises(DefinitionError, match="waits for event 'paid' without a timeout"):
        run_pipeline(events_app.orders, 1)


def test_a_pipeline_test_holds_the_clock_while_a_step_waits_and_sends_the_event():
    from ductline.testing import start_pipeline

    with start_pipeline(events_app.hour_wait, 2) as test:
        assert test.wait_waiting() == ["paid"]
        waiting = [{k: e[k] for k in ("step", "index", "scope", "event", "wait_timeout_seconds")}
                   for e in test.events if e["type"] == "step_waiting"]
        assert waiting == [{"step": "ship", "index": None, "scope": "", "event": "paid",
                            "wait_timeout_seconds": 3600}]
        assert test.clock.now() < 3600  # the wait's timeout waits for the test
        sent = test.send("paid", {"amount": 1})
        assert (sent.step, sent.duplicate) == ("ship", False)
        result = test.result()
    assert (result.status, result.metadata["output"]) == ("completed", {"shipped": {"amount": 1}})

"""Per-step ``memory_limit`` and ``cpu_limit``: validated at definition, applied
to the attempt only, recorded with an error naming the limit, charged to the
retry budget, and gone for the next attempt on the same slot."""

from __future__ import annotations

from datetime import timedelta

import iso_app
import pytest

import ductline
from ductline import Pipeline
from ductline.views import run_view

MEMORY_ERROR = "attempt exceeded memory_limit=268435456 bytes"
CPU_ERROR = "attempt exceeded cpu_limit=1 CPU seconds"
CPU_KILLED = CPU_ERROR  # the hard limit's SIGKILL, whatever the step does with SIGXCPU


@pytest.mark.parametrize("options, error", [
    ({"memory_limit": 0}, ValueError),
    ({"memory_limit": -1}, ValueError),
    ({"memory_limit": 1.5}, TypeError),
    ({"memory_limit": "1G"}, TypeError),
    ({"memory_limit": True}, TypeError),
    ({"memory_limit": 2**63}, ValueError),  # setrlimit's C long: every attempt would fail
    ({"memory_limit": 10**30}, ValueError),
    ({"cpu_limit": 1e30}, ValueError),
    ({"cpu_limit": 0}, ValueError),
    ({"cpu_limit": -0.5}, ValueError),
    ({"cpu_limit": float("nan")}, ValueError),
    ({"cpu_limit": float("inf")}, ValueError),
    ({"cpu_limit": "10"}, TypeError),
    ({"cpu_limit": timedelta(seconds=3)}, TypeError),
    ({"cpu_limit": False}, TypeError),
    ({"memory_limit": 10**9, "isolation": "thread"}, ValueError),
    ({"cpu_limit": 1, "isolation": "thread"}, ValueError),
    ({"isolation": "forked"}, ValueError),
])
def test_wrong_limits_are_refused_at_definition(options, error):
    with pytest.raises(error):
        Pipeline("iso_bad").start(iso_app.burn, **options)


def test_valid_limits_are_kept_in_the_options():
    definition = Pipeline("iso_ok").start(iso_app.burn, memory_limit=1 << 30, cpu_limit=2.5,
                                          isolation="fresh").definition()
    options = definition.node("burn").options
    assert (options.memory_limit, options.cpu_limit, options.isolation) == (1 << 30, 2.5, "fresh")


def _attempts(store, handle):
    return run_view(store, handle.id)["steps"][0]["attempts"]


def test_worker_memory_limit(store, inprocess_worker):
    inprocess_worker(concurrency=1)
    before = iso_app.observed.trigger(None, database=store)
    assert before.wait(60) == "completed"
    handle = iso_app.memory_hungry.trigger(1024, database=store)
    assert handle.wait(60) == "halted"
    attempts = _attempts(store, handle)
    assert [(a["result"], a["error_type"], a["error"]) for a in attempts] == \
        [("errored", "MemoryLimitExceeded", MEMORY_ERROR)] * 2
    assert run_view(store, handle.id)["halt_reason"] == "job_retries_exhausted"
    after = iso_app.observed.trigger(None, database=store)  # the same slot, limits gone
    assert after.wait(60) == "completed"
    assert after.output()["state"] == before.output()["state"]


def test_worker_cpu_limit(store, inprocess_worker):
    inprocess_worker(concurrency=1)
    before = iso_app.observed.trigger(None, database=store)
    assert before.wait(60) == "completed"
    handle = iso_app.cpu_hungry.trigger(30, database=store)
    assert handle.wait(120) == "halted"
    attempts = _attempts(store, handle)
    assert [(a["result"], a["error_type"], a["error"]) for a in attempts] == \
        [("errored", "CpuLimitExceeded", CPU_ERROR)] * 2
    after = iso_app.observed.trigger(None, database=store)
    assert after.wait(60) == "completed"
    assert after.output()["state"] == before.output()["state"]


# The CPU limit is set in the child and its ending read by the worker parent from the
# child's exit; the store records it as any errored attempt. Both backends record it in
# test_worker_cpu_limit; the variants of how the step meets its limit burn their CPU
# seconds once, on PostgreSQL.
@pytest.mark.parametrize("backend", ["postgres"])
def test_worker_cpu_limit_of_a_step_ignoring_sigxcpu(store, inprocess_worker):
    inprocess_worker(concurrency=1)
    handle = iso_app.cpu_hungry_ignoring.trigger(30, database=store)
    assert handle.wait(120) == "halted"
    attempts = _attempts(store, handle)
    assert [(a["result"], a["error_type"], a["error"]) for a in attempts] == \
        [("errored", "CpuLimitExceeded", CPU_KILLED)] * 2


def test_execute_cpu_limit_of_a_step_ignoring_sigxcpu():
    result = ductline.execute(iso_app.cpu_hungry_ignoring, 30, concurrency=1)
    step = result.steps[0]
    assert (step.status, step.attempts, step.error_type, step.error) == \
        ("failed", 2, "CpuLimitExceeded", CPU_KILLED)


def test_worker_attempt_within_its_limits_succeeds_and_leaves_none(store, inprocess_worker):
    inprocess_worker(concurrency=1)
    before = iso_app.observed.trigger(None, database=store)
    assert before.wait(60) == "completed"
    handle = iso_app.within_limits.trigger(16, database=store)
    assert handle.wait(60) == "completed"
    found = handle.output()
    # The limits are hard and the child gave up the right to lift them: it is retired.
    assert found["pid"] != found["previous_pid"]
    assert found["state"] == before.output()["state"]


def test_execute_memory_limit():
    result = ductline.execute(iso_app.memory_hungry, 1024, concurrency=1)
    assert result.overall_status == "failed"
    step = result.steps[0]
    assert (step.status, step.attempts, step.error_type, step.error) == \
        ("failed", 2, "MemoryLimitExceeded", MEMORY_ERROR)


def test_execute_cpu_limit():
    result = ductline.execute(iso_app.cpu_hungry, 30, concurrency=1)
    step = result.steps[0]
    assert (step.status, step.attempts, step.error_type, step.error) == \
        ("failed", 2, "CpuLimitExceeded", CPU_ERROR)


def test_execute_within_limits_leaves_no_limit_behind():
    baseline = ductline.execute(iso_app.observed, None, concurrency=1).steps[0].output["state"]
    result = ductline.execute(iso_app.within_limits, 16, concurrency=1)
    assert result.overall_status == "success", result
    assert result.steps[-1].output["state"] == baseline


@pytest.mark.parametrize("backend", ["postgres"])
def test_worker_limits_hold_when_the_step_lifts_them(store, inprocess_worker):
    """A step that tries to lift its limits (``setrlimit`` to unlimited; as root too)
    and then goes past them ends over its limit."""
    inprocess_worker(concurrency=1)
    memory = iso_app.memory_lifting.trigger(512, database=store)
    cpu = iso_app.cpu_lifting.trigger(30, database=store)
    assert memory.wait(60) == "halted"
    assert cpu.wait(120) == "halted"
    assert [(a["result"], a["error_type"]) for a in _attempts(store, memory)] == \
        [("errored", "MemoryLimitExceeded")]
    assert [(a["result"], a["error_type"], a["error"]) for a in _attempts(store, cpu)] == \
        [("errored", "CpuLimitExceeded", CPU_ERROR)]


def test_execute_limits_hold_when_the_step_lifts_them():
    memory = ductline.execute(iso_app.memory_lifting, 512, concurrency=1).steps[0]
    cpu = ductline.execute(iso_app.cpu_lifting, 30, concurrency=1).steps[0]
    assert (memory.status, memory.error_type) == ("failed", "MemoryLimitExceeded")
    assert (cpu.status, cpu.error_type, cpu.error) == ("failed", "CpuLimitExceeded", CPU_ERROR)

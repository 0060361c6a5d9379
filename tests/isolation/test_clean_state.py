"""No process state of one attempt reaches the next on the same slot's child: a
step pollutes its process, the next step on the slot (worker ``--concurrency 1``,
or ``execute(..., concurrency=1)``) finds it as a fresh child would."""

from __future__ import annotations

import iso_app
import pytest

import ductline

RESTORED = ["env", "cwd", "signals", "sigmask", "umask", "rlimit"]
RETIRED = ["rlimit_hard", "thread", "process", "orphan"]  # cannot be undone: the child is replaced


def _baseline_worker(store):
    handle = iso_app.observed.trigger(None, database=store)
    assert handle.wait(60) == "completed"
    return handle.output()["state"]


@pytest.mark.parametrize("kind", RESTORED + RETIRED)
def test_worker_next_attempt_on_the_slot_finds_a_clean_process(store, inprocess_worker, kind):
    inprocess_worker(concurrency=1)
    baseline = _baseline_worker(store)
    handle = iso_app.polluted.trigger(kind, database=store)
    assert handle.wait(60) == "completed"
    found = handle.output()
    assert found["state"] == baseline
    if kind in RESTORED:  # restored in place: the same child ran both attempts
        assert found["pid"] == found["previous_pid"]
    else:
        assert found["pid"] != found["previous_pid"]


@pytest.mark.parametrize("kind", RESTORED + RETIRED)
def test_execute_next_attempt_finds_a_clean_process(kind):
    baseline = ductline.execute(iso_app.observed, None, concurrency=1).steps[0].output["state"]
    result = ductline.execute(iso_app.polluted, kind, concurrency=1)
    assert result.overall_status == "success", result
    found = result.steps[-1].output
    assert found["state"] == baseline
    if kind in RESTORED:
        assert found["pid"] == found["previous_pid"]
    else:
        assert found["pid"] != found["previous_pid"]


def test_fresh_isolation_gives_every_attempt_a_new_process(store, inprocess_worker):
    inprocess_worker(concurrency=1)
    handle = iso_app.fresh.trigger("env", database=store)
    assert handle.wait(60) == "completed"
    found = handle.output()
    assert found["pid"] != found["previous_pid"]
    assert found["state"]["marker"] is None


def test_execute_fresh_isolation_gives_every_attempt_a_new_process():
    result = ductline.execute(iso_app.fresh, "env", concurrency=1)
    assert result.overall_status == "success", result
    found = result.steps[-1].output
    assert found["pid"] != found["previous_pid"]
